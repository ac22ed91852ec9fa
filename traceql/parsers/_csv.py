"""Profiler CSVs through DuckDB: read every cell as text, convert units in SQL, stream Arrow batches out.

Why DuckDB and not csv/pandas: a 500k-row x 46-column kernel_details.csv is 23M cells; converting them in
Python is far too slow, while DuckDB's CSV reader is parallel and its DECIMAL casts are exact (start times
like `1736408883704643.212\t` must become int64 ns without passing through a double).

Usage from a parser:
    rel = CsvFile(path)                      # validates encoding/header, one clear error otherwise
    rel.require("Name", "Start Time(us)")    # missing columns -> BadTraceError naming file and column
    for batch in rel.select({"name": rel.txt("Name"), "ts_ns": rel.us_ns("Start Time(us)")}, extra=..., metrics=...):
        out.write("kernels", batch)
"""

from __future__ import annotations

import codecs
import csv
import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import BadTraceError

BATCH_ROWS = 256 * 1024


def q(name: str) -> str:
    """Quote an identifier (column names contain spaces, parentheses, %, quotes)."""
    return '"' + name.replace('"', '""') + '"'


def lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _clean(col: str) -> str:
    # trailing TAB (torch_npu start times), spaces, and N/A-like markers -> NULL
    return f"NULLIF(NULLIF(NULLIF(trim({q(col)}, E' \\t\\r'), 'N/A'), ''), 'NA')"


class CsvFile:
    def __init__(self, path: Path, con: Any = None) -> None:
        import duckdb

        self.path = Path(path)
        self.con = con or duckdb.connect(":memory:")
        self.header = read_header(self.path)
        self._cols = set(self.header)

    # ---- columns ----------------------------------------------------------------------------------
    def has(self, col: str) -> bool:
        return col in self._cols

    def first(self, *cols: str) -> str | None:
        """The first of several alternative names present (e.g. 'Block Num' vs 'Block Dim')."""
        for c in cols:
            if c in self._cols:
                return c
        return None

    def require(self, *cols: str) -> None:
        missing = [c for c in cols if c not in self._cols]
        if missing:
            raise BadTraceError(
                self.path, f"missing required column(s) {', '.join(repr(m) for m in missing)}; header has {len(self.header)} columns"
            )

    # ---- SQL expressions (NULL when the column is absent) -----------------------------------------
    def txt(self, *cols: str) -> str:
        c = self.first(*cols)
        if c is None:
            return "NULL::VARCHAR"
        # shapes are written as `"32,3,224,224"` (literal quotes inside the cell): strip them
        return f"NULLIF(trim({_clean(c)}, '\"'), '')"

    def num(self, *cols: str) -> str:
        c = self.first(*cols)
        if c is None:
            return "NULL::DOUBLE"
        return f"TRY_CAST({_clean(c)} AS DOUBLE)"

    def int_(self, *cols: str) -> str:
        c = self.first(*cols)
        if c is None:
            return "NULL::BIGINT"
        return f"COALESCE(TRY_CAST({_clean(c)} AS BIGINT), TRY_CAST(TRY_CAST({_clean(c)} AS DOUBLE) AS BIGINT))"

    def scaled(self, col: str | None, factor: float) -> str:
        """Number x factor rounded to BIGINT (MB -> bytes, GB/s -> bytes/s...)."""
        if col is None or col not in self._cols:
            return "NULL::BIGINT"
        return f"TRY_CAST(round(TRY_CAST({_clean(col)} AS DOUBLE) * {factor!r}) AS BIGINT)"

    def dec_ns(self, col: str | None, ns_per_unit: int) -> str:
        """Exact decimal text -> int64 ns (µs: 1000, ms: 1e6)."""
        if col is None or col not in self._cols:
            return "NULL::BIGINT"
        return f"TRY_CAST(round(TRY_CAST({_clean(col)} AS DECIMAL(38,6)) * {ns_per_unit}) AS BIGINT)"

    def us_ns(self, *cols: str) -> str:
        return self.dec_ns(self.first(*cols), 1000)

    def ratio_pct(self, *cols: str) -> str:
        c = self.first(*cols)
        return "NULL::DOUBLE" if c is None else f"TRY_CAST({_clean(c)} AS DOUBLE) / 100.0"

    def text_map(self, cols: Iterable[str]) -> str:
        """MAP(VARCHAR,VARCHAR) of the given columns' non-null values (for `extra`)."""
        cols = [c for c in cols if c in self._cols]
        if not cols:
            return "NULL::MAP(VARCHAR, VARCHAR)"
        entries = ", ".join(f"{{'k': {lit(c)}, 'v': {_clean(c)}}}" for c in cols)
        return f"map_from_entries(list_filter([{entries}], lambda e: e.v IS NOT NULL))"

    def num_map(self, cols: Iterable[str]) -> str:
        cols = [c for c in cols if c in self._cols]
        if not cols:
            return "NULL::MAP(VARCHAR, DOUBLE)"
        entries = ", ".join(f"{{'k': {lit(c)}, 'v': TRY_CAST({_clean(c)} AS DOUBLE)}}" for c in cols)
        return f"map_from_entries(list_filter([{entries}], lambda e: e.v IS NOT NULL))"

    # ---- reading ----------------------------------------------------------------------------------
    def from_clause(self) -> str:
        cols = "{" + ", ".join(f"{lit(c)}: 'VARCHAR'" for c in self.header) + "}"
        return (
            f"read_csv({lit(str(self.path))}, header=true, auto_detect=false, delim=',', quote='\"', escape='\"', "
            f"columns={cols}, null_padding=true, strict_mode=false, encoding='utf-8')"
        )

    def select(self, exprs: dict[str, str], where: str | None = None) -> Iterator[Any]:
        """Yield pyarrow RecordBatches of the canonical columns in `exprs` (name -> SQL expression)."""
        import duckdb

        sel = ", ".join(f"{e} AS {q(name)}" for name, e in exprs.items())
        sql = f"SELECT {sel} FROM {self.from_clause()}" + (f" WHERE {where}" if where else "")
        try:
            from .._duck import arrow_reader

            reader = arrow_reader(self.con.sql(sql), BATCH_ROWS)
            yield from reader
        except duckdb.Error as e:
            msg = str(e).strip().splitlines()[0]
            raise BadTraceError(self.path, f"malformed CSV: {msg}") from e

    def count(self) -> int:
        import duckdb

        try:
            return int(self.con.execute(f"SELECT count(*) FROM {self.from_clause()}").fetchone()[0])  # type: ignore[index]
        except duckdb.Error as e:
            raise BadTraceError(self.path, f"malformed CSV: {str(e).strip().splitlines()[0]}") from e


def read_header(path: Path) -> list[str]:
    """The header row, checked: UTF-8 (BOM allowed), non-empty, unique names (duplicates get a suffix)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(1 << 20)
    except OSError as e:
        raise BadTraceError(path, f"cannot read file: {e.strerror or e}") from e
    if not raw.strip():
        raise BadTraceError(path, "empty file; expected a CSV header row and data rows")
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    first = raw.split(b"\n", 1)[0]
    try:
        line = first.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadTraceError(path, f"not UTF-8 text (byte 0x{first[e.start]:02x} at offset {e.start}); expected a UTF-8 CSV") from e
    row = next(csv.reader(io.StringIO(line)), [])
    row = [c.strip().strip("\ufeff") for c in row]
    if not any(row):
        raise BadTraceError(path, "no CSV header row found")
    seen: dict[str, int] = {}
    out = []
    for c in row:
        if c in seen:
            seen[c] += 1
            out.append(f"{c}#{seen[c]}")
        else:
            seen[c] = 0
            out.append(c)
    return out
