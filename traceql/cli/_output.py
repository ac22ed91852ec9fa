"""Write results to stdout or a file: an Arrow result as table/csv/json/parquet (sql, query), and the one
writer of every command's machine-format text (JSON, CSV, markdown).

Machine formats are written to the stream as they are, never through rich: rich would read a source path
`d:fire:d` as an emoji code and `[bold]` as markup. The one change: stdout that is a terminal gets control
characters escaped (dump text could carry ANSI/OSC sequences that retitle the terminal or write its
clipboard); a pipe or a file gets the exact bytes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..errors import TraceQLError
from ..jsonsafe import json_safe
from ._options import TableFormat

FORMATS = tuple(f.value for f in TableFormat)


def _jsonable(v: Any) -> Any:
    return json_safe(v, arrow_maps=True)  # a MAP column's value (a list of pairs) as a JSON object


def write_text(text: str, output: Path | None = None) -> None:
    """Machine-format text to FILE (exact) or stdout (exact to a pipe; control characters escaped on a terminal)."""
    if output is not None and str(output) != "-":
        from ..out_file import write_text as write_file

        write_file(output, text)  # temp + rename; a FIFO/device written through; errors name the path
        return
    if sys.stdout.isatty():
        from ._console import safe

        text = safe(text, newlines=True)
    sys.stdout.write(text)
    sys.stdout.flush()


def write_json(obj: Any, output: Path | None = None) -> None:
    """One JSON document (indent 1, UTF-8 as it is, no NaN) and a newline, through write_text."""
    write_text(json.dumps(obj, indent=1, ensure_ascii=False, allow_nan=False, default=str) + "\n", output)


def emit(table: Any, fmt: str, output: Path | None = None, max_rows: int = 200) -> None:
    """table: pyarrow.Table."""
    if fmt not in FORMATS:
        raise TraceQLError(f"unknown --format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if output is None:
            raise TraceQLError("--format parquet needs --output FILE")
        import pyarrow.parquet as pq

        from ..out_file import open_output

        with open_output(output, binary=True) as fh:
            pq.write_table(table, fh)
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
        if output and str(output) != "-":
            from ..out_file import open_output

            with open_output(output, binary=True) as fh:
                pcsv.write_csv(t, fh)
        else:
            sink = pa.BufferOutputStream()
            pcsv.write_csv(t, sink)
            write_text(sink.getvalue().to_pybytes().decode("utf-8"))
        return
    if fmt == "json":
        write_json([{k: _jsonable(v) for k, v in r.items()} for r in table.to_pylist()], output)
        return
    from . import _console

    rows = [tuple(_fmt_cell(v) for v in r.values()) for r in table.slice(0, max_rows).to_pylist()]
    if output:
        raise TraceQLError("--output needs --format csv, json or parquet")
    _console.print_table(table.column_names, rows)
    if table.num_rows > max_rows:
        _console.info(f"({table.num_rows} rows, first {max_rows} shown; use --format csv for all)")


def _fmt_cell(v: Any) -> Any:
    """A table cell: floats with 6 significant digits and never in scientific notation (4.44821e+10 ->
    44482100000), so a person reads it and a pipe's awk still parses it (no thousands separators)."""
    if isinstance(v, float):
        s = f"{v:.6g}"
        if "e" in s and v == v and abs(v) != float("inf"):
            plain = f"{float(s):.0f}" if abs(v) >= 1 else f"{float(s):.15f}".rstrip("0").rstrip(".")
            s = plain if plain.strip("-0.") else s  # below 1e-15: the exponent is the only honest form
        return s
    return v
