"""Write an Arrow result as table/csv/json/parquet to stdout or a file (shared by sql, query, findings)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..errors import TraceQLError

FORMATS = ("table", "csv", "json", "parquet")


def _jsonable(v: Any) -> Any:
    import datetime
    import decimal

    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, list) and v and isinstance(v[0], tuple) and len(v[0]) == 2:
        return {str(k): _jsonable(x) for k, x in v}  # Arrow map -> JSON object
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and v != v:
        return None
    return v


def emit(table: Any, fmt: str, output: Path | None = None, max_rows: int = 200) -> None:
    """table: pyarrow.Table."""
    if fmt not in FORMATS:
        raise TraceQLError(f"unknown --format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if output is None:
            raise TraceQLError("--format parquet needs --output FILE")
        import pyarrow.parquet as pq

        pq.write_table(table, output)
        return
    if fmt == "csv":
        import pyarrow.csv as pcsv

        # nested columns (maps) are written as JSON text so the CSV stays one value per cell
        cols = []
        for name in table.column_names:
            col = table.column(name)
            if str(col.type).startswith(("map", "list", "struct")):
                import pyarrow as pa

                col = pa.array(
                    [None if v is None else json.dumps(_jsonable(v)) for v in col.to_pylist()],
                    type=pa.string(),
                )
            cols.append(col)
        import pyarrow as pa

        t = pa.Table.from_arrays(cols, names=table.column_names)
        if output:
            pcsv.write_csv(t, output)
        else:
            sink = pa.BufferOutputStream()
            pcsv.write_csv(t, sink)
            text = sink.getvalue().to_pybytes().decode("utf-8")
            if sys.stdout.isatty():
                # dump text (op and file names) could carry ANSI/OSC sequences that retitle the terminal or
                # write its clipboard: a terminal gets them escaped, as the table and JSON output do; a pipe
                # or a file gets the exact bytes
                from ._console import safe

                text = safe(text, newlines=True)
            sys.stdout.write(text)
        return
    if fmt == "json":
        rows = [{k: _jsonable(v) for k, v in r.items()} for r in table.to_pylist()]
        text = json.dumps(rows, indent=1, ensure_ascii=False, allow_nan=False, default=str)
        if output:
            Path(output).write_text(text + "\n", encoding="utf-8")
        else:
            sys.stdout.write(text + "\n")
        return
    from . import _console

    rows = [tuple(_fmt_cell(v) for v in r.values()) for r in table.slice(0, max_rows).to_pylist()]
    if output:
        raise TraceQLError("--output needs --format csv, json or parquet")
    _console.print_table(table.column_names, rows)
    if table.num_rows > max_rows:
        _console.info(f"({table.num_rows} rows, first {max_rows} shown; use --format csv for all)")


def _fmt_cell(v: Any) -> Any:
    if isinstance(v, float):
        return f"{v:.6g}"
    return v
