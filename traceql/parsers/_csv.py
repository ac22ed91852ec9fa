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
import re
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


def path_lit(path: str) -> str:
    """A file path as the SQL literal a DuckDB reader (read_csv/read_json/read_parquet) gets: glob characters
    in it match only themselves (traceql._duck.glob_literal), so `trace[1].json` reads exactly that file."""
    from .._duck import glob_literal

    return lit(glob_literal(path))


_TXT_STRIP = ' \t\r"'  # what txt() strips around a cell
_CELL_STRIP = " \t\r"  # what _clean() strips
_MARKERS = "('N/A', '', 'NA')"  # what _clean() reads as no value


def _trimmed(expr: str, chars: str, gated: bool = True) -> str:
    """trim(expr, chars), computed only for the cells that start or end with a space, tab, CR or quote (a
    superset of every `chars` used here: trim() is a no-op where none of `chars` is at an edge).

    gated: the guard is the macro tq_edge, which CsvFile.select() answers at once for a row whose text cells
    have no such edge (the row gate, see _RowGates); tq_edge_q (gated=False) is the same test never gated,
    for columns whose cells are usually quoted (shapes), which would close the gate on every row."""
    guard = "tq_edge" if gated else "tq_edge_q"
    return f"(CASE WHEN {guard}({expr}) THEN trim({expr}, {lit(chars)}) ELSE {expr} END)"


def _text(col: str, gated: bool = True) -> str:
    """A text cell (quoted column) stripped of spaces, tabs, CRs and quotes at its edges; empty or N/A -> NULL."""
    return f"NULLIF(NULLIF({_trimmed(col, _TXT_STRIP, gated)}, ''), 'N/A')"


def _clean(col: str) -> str:
    # trailing TAB (torch_npu start times), spaces, and N/A-like markers -> NULL
    t = _trimmed(q(col), _CELL_STRIP)
    return f"(CASE WHEN {t} IN {_MARKERS} THEN NULL ELSE {t} END)"


# _clean as the two steps of a lambda pipeline over a list of cells (MapExpr.each): inside a lambda DuckDB
# shares no subexpression, so NULLIF(NULLIF(NULLIF(trim(x)...))) trimmed each cell eight times
_CLEAN_STEPS = (_trimmed("x", _CELL_STRIP), f"CASE WHEN x IN {_MARKERS} THEN NULL ELSE x END")
_NUM_STEPS = ("tq_num(x)",)  # a numeric map's one step
# txt() of a cell (_text) as a lambda step, and a metric cell kept as text only where it is not a number
_TEXT_STEPS = (_text("x"),)
_NOT_NUMBER_STEPS = (f"CASE WHEN tq_num(x) IS NULL THEN {_text('x')} END",)


# Numeric casts need no cleaning: DuckDB's string->number casts skip surrounding whitespace (the trailing TAB
# included) and TRY_CAST turns N/A/empty into NULL. Non-finite values (nan, inf, 1e400) are not measurements:
# tq_finite() maps them to NULL. These macros are created on every CsvFile connection.
# DuckDB's casts also accept what no profiler writes and what a reader would not take for a number: '1_000'
# (underscores, read as 1000) and '0x10' (hex, as BIGINT 16). tq_plain(x) is false for those, so they become
# NULL like the other unparseable cells ('١٢٣', 'NaN', 'Infinity', '1e400'), and every such cell is counted
# and reported (unparsed_cells(): ingest warns and stores them for the `unparsed_numbers` check).
_EDGE = (
    '[ \t\r"]'  # the characters _trimmed's guard looks for at a cell's edges (RE2 reads them as themselves)
)
_EDGE_TEST = f"regexp_matches(x, {lit('^' + _EDGE + '|' + _EDGE + '$')})"
_MACROS = (
    "CREATE OR REPLACE TEMP MACRO tq_finite(v) AS (CASE WHEN isfinite(v) THEN v END)",
    f"CREATE OR REPLACE TEMP MACRO tq_edge(x) AS {_EDGE_TEST}",
    f"CREATE OR REPLACE TEMP MACRO tq_edge_q(x) AS {_EDGE_TEST}",  # the same test, never gated
    # "may this shapes cell take shape_txt's short form": never, unless the row's shapes gate answers it
    "CREATE OR REPLACE TEMP MACRO tq_shape_ok(x) AS false",
    "CREATE OR REPLACE TEMP MACRO tq_plain(x) AS NOT (contains(x, '_') OR contains(x, 'x') OR contains(x, 'X'))",
    "CREATE OR REPLACE TEMP MACRO tq_num(x) AS (CASE WHEN tq_plain(x) THEN tq_finite(TRY_CAST(x AS DOUBLE)) END)",
    # a cell that holds something (not empty, not an N/A marker) yet is no finite plain number. The guard
    # first: a lambda does not share subexpressions, so each NULLIF re-evaluates its argument (three nested:
    # eight trims a cell) and this flag over a kernel_details' numeric columns cost 13 of 18 CPU-s a 500k-row
    # file; guarded, the marker tests run only for the rare cell that is no number (~1.5 CPU-s).
    "CREATE OR REPLACE TEMP MACRO tq_bad(x) AS (CASE WHEN x IS NULL OR tq_num(x) IS NOT NULL THEN false ELSE "
    "NULLIF(NULLIF(NULLIF(trim(x, E' \\t\\r'), 'N/A'), ''), 'NA') IS NOT NULL "
    "AND lower(trim(x)) NOT IN ('n/a', 'na', '-', 'none', 'null') END)",
)

# Cells of numeric columns that held text no profiler writes go to traceql.parsers._numtext (per process:
# each unit parses in its own worker): (file, column, cells, first line, example); ingest takes them.
_BAD = "__bad"  # the select's extra column: does this row hold such a cell (the cheap detector)
# tq_num of a quoted column name (CsvFile._hoist_numbers)
_QUOTED = r'("(?:[^"]|"")*")'  # a quoted identifier, as q() writes it
_TQ_NUM = re.compile(r"tq_num\(" + _QUOTED + r"\)")


def _unquoted(ident: str) -> str:
    return ident[1:-1].replace('""', '"')


def _connection() -> Any:
    """A new cursor on this process's one in-memory DuckDB database for CSV reading (traceql.parsers.
    _process_db): a database per file cost ~60 ms, with a rank folder's 4-8 CSVs a quarter of a small rank's
    ingest; a cursor costs ~2 ms. The one setting (disabled_optimizers) is the same for every CSV read."""
    from ._process_db import process_db

    def setup(db: Any) -> None:
        # DuckDB 2.0.1 pushes a bare TRY_CAST over a VARCHAR CSV column into the reader as a *strict* cast, so
        # one N/A fails the file ("Could not convert string 'N/A'"); the type_pushdown optimizer is that step.
        db.execute("SET disabled_optimizers = 'type_pushdown'")
        for m in _MACROS:  # once, in the database (not TEMP): every cursor sees them (4 per CSV cost ~5 ms)
            db.execute(m.replace("CREATE OR REPLACE TEMP MACRO", "CREATE OR REPLACE MACRO"))

    return process_db(("csv",), setup)


ROW_GATES = True  # tests turn it off to compare the gated select with the per-cell one

# A numeric cell the row gate passes: blank, an N/A marker, or a plain decimal number with few enough digits
# to be finite. For such a cell tq_plain is true, tq_num is TRY_CAST(x AS DOUBLE) and tq_bad is false.
_PLAIN_CELL = (
    r"[ \t\r]*([+-]?([0-9]{1,20}(\.[0-9]{0,20})?|\.[0-9]{1,20})([eE][+-]?[0-9]{1,2})?|N/A|NA)?[ \t\r]*"
)
_TQ_PLAIN = re.compile(r"tq_plain\(" + _QUOTED + r"\)")
_TQ_EDGE = re.compile(r"tq_edge\(" + _QUOTED + r"\)")
_TQ_SHAPE_OK = re.compile(r"tq_shape_ok\(" + _QUOTED + r"\)")
_RE_SEP = "\\x1f"  # RE2's escape for chr(31), the text and shapes gates' separator


class _RowGates:
    """Two booleans per row that let a select skip its per-cell checks where the whole row is plain.

    The per-cell checks (tq_plain's three scans, tq_num's finiteness test, tq_bad, the regexp guard before a
    trim) cost ~5 of a kernel_details select's ~10 CPU-s, and on a profiler's rows they almost never fire.
    So the row's numeric cells are joined with '|' and matched once against _PLAIN_CELL repeated (with
    exactly one field per cell: a cell holding '|' fails), and its text cells are joined with chr(31) and
    searched once for an edge character next to a cell boundary (a cell holding chr(31) can only fail it);
    shapes cells, which are usually quoted (`"32,3,224,224"`), get a third gate of their own (see shape_txt).
    Where a gate holds, every expression takes its unchecked form, which gives the same value as the checked
    one for such cells; elsewhere the checked form runs, as before. CASE, not AND/OR: DuckDB evaluates both
    sides of a boolean operator in a projection, but a CASE branch only on the rows that take it."""

    def __init__(self, prefix: str, pipe_in_cells: bool = True) -> None:
        # pipe_in_cells=False (no `|` anywhere in the file): no cell can hold the numeric gate's separator, so
        # the gate's separator count could never fail and is left out (see source())
        self.pipe_in_cells = pipe_in_cells
        self.num: list[str] = []  # quoted columns the numeric gate covers, in first-use order
        self.txt: list[str] = []
        self.shp: list[str] = []
        self.g_num, self.g_txt, self.g_shp = q(prefix + "gnum"), q(prefix + "gtxt"), q(prefix + "gshp")
        self._s_num, self._s_txt, self._s_shp = q(prefix + "snum"), q(prefix + "stxt"), q(prefix + "sshp")

    def _add(self, into: list[str], cols: Iterable[str]) -> None:
        into.extend(c for c in cols if c not in into)

    def cover(self, cols: Iterable[str]) -> None:
        """Make the numeric gate cover `cols` (quoted) too."""
        self._add(self.num, cols)

    def rewrite(self, sql: str, header: set[str]) -> str:
        """tq_plain("c") and tq_edge("c") of header columns, answered by the gates where they hold."""

        def answered(into: list[str], gate: str, value: str) -> Any:
            def sub(m: re.Match[str]) -> str:
                if _unquoted(m.group(1)) not in header:
                    return m.group(0)
                self._add(into, [m.group(1)])
                return f"(CASE WHEN {gate} THEN {value} ELSE {m.group(0)} END)"

            return sub

        def shape_gate(m: re.Match[str]) -> str:
            if _unquoted(m.group(1)) not in header:
                return m.group(0)
            self._add(self.shp, [m.group(1)])
            return self.g_shp

        sql = _TQ_PLAIN.sub(answered(self.num, self.g_num, "true"), sql)
        sql = _TQ_SHAPE_OK.sub(shape_gate, sql)
        return _TQ_EDGE.sub(answered(self.txt, self.g_txt, "false"), sql)

    def number(self, col: str) -> str:
        """tq_num(col), gated (col: a quoted header column)."""
        self._add(self.num, [col])
        return f"(CASE WHEN {self.g_num} THEN TRY_CAST({col} AS DOUBLE) ELSE tq_num({col}) END)"

    def numbers(self, cols: list[str], checked: str) -> str:
        """`checked` (a list_transform of tq_num over `cols`), gated."""
        self._add(self.num, cols)
        fast = f"list_transform([{', '.join(cols)}], lambda x: TRY_CAST(x AS DOUBLE))"
        return f"(CASE WHEN {self.g_num} THEN {fast} ELSE {checked} END)"

    def cleaned(self, cols: list[str], checked: str) -> str:
        """`checked` (the _CLEAN_STEPS pipeline over `cols`), gated: with no edge to trim, only the markers."""
        self._add(self.txt, cols)
        fast = f"list_transform([{', '.join(cols)}], lambda x: {_CLEAN_STEPS[1]})"
        return f"(CASE WHEN {self.g_txt} THEN {fast} ELSE {checked} END)"

    def unless_plain(self, checked: str) -> str:
        """A per-row flag of the numeric cells (tq_bad), false where the numeric gate holds."""
        return f"(CASE WHEN {self.g_num} THEN false ELSE {checked} END)"

    def source(self, src: str) -> str:
        """`src` with the gate columns added (the joined cells first, then the gates, so each join is built
        once)."""
        if not self.num and not self.txt and not self.shp:
            return src
        joins, gates = [], []
        if self.num:
            joined = ", '|', ".join(self.num)
            joins.append(f"concat({joined}) AS {self._s_num}")
            s, n = self._s_num, len(self.num)
            pattern = lit(f"^({_PLAIN_CELL}\\|)*{_PLAIN_CELL}$")
            # a cell holding `|` would read as two fields: the separator count rules that out, unless the file
            # holds no `|` at all (the count copies every joined row: 9% of a kernel_details select)
            count = (
                f" AND strlen({s}) - strlen(replace({s}, '|', '')) = {n - 1}" if self.pipe_in_cells else ""
            )
            gates.append(f"(regexp_full_match({s}, {pattern}){count}) AS {self.g_num}")
        else:
            gates.append(f"false AS {self.g_num}")
        if self.txt:
            joins.append(f"concat({', chr(31), '.join(self.txt)}) AS {self._s_txt}")
            e, sep = _EDGE, _RE_SEP
            boundary = lit(f"^{e}|{e}{sep}|{sep}{e}|{e}$")
            gates.append(f"NOT regexp_matches({self._s_txt}, {boundary}) AS {self.g_txt}")
        else:
            gates.append(f"false AS {self.g_txt}")
        if self.shp:
            # a shapes cell whose trim would strip spaces, tabs or CRs (not only quotes): after the quotes
            # that open it, or before those that close it
            joins.append(f"concat({', chr(31), '.join(self.shp)}) AS {self._s_shp}")
            ws, sep = "[ \t\r]", _RE_SEP
            boundary = lit(f'(^|{sep})"*{ws}|{ws}"*({sep}|$)')
            gates.append(f"NOT regexp_matches({self._s_shp}, {boundary}) AS {self.g_shp}")
        else:
            gates.append(f"false AS {self.g_shp}")
        return f"(SELECT *, {', '.join(gates)} FROM (SELECT *, {', '.join(joins)} FROM {src}))"


class CsvFile:
    """One CSV, or several with one header read as one table (`also`: the parts after `path`, in order; e.g.
    msprof's op_summary slices: a query costs ~40-130 CPU-ms of planning whatever the file's size, so 3,000
    slices read one by one spent minutes planning). Errors and unparsed-cell warnings still name the file."""

    def __init__(self, path: Path, con: Any = None, also: Iterable[Path] = ()) -> None:
        self.path = Path(path)
        self.con = con or _connection()
        if con is not None:
            self.con.execute("SET disabled_optimizers = 'type_pushdown'")  # see _connection
            for m in _MACROS:
                self.con.execute(m)
        self.header = read_header(self.path)
        # does any cell hold the numeric row gate's separator (see _RowGates): found on check_quotes' pass
        self._holds_pipe = check_quotes(self.path)
        self.paths = [self.path]
        for p in also:
            if read_header(Path(p)) != self.header:
                raise ValueError(f"{p}: not the header of {self.path}")  # the caller groups by header
            self._holds_pipe = check_quotes(Path(p)) or self._holds_pipe
            self.paths.append(Path(p))
        self._cols = set(self.header)
        self._numeric: set[str] = set()  # columns read as numbers: checked for unparsed cells after select()
        self._hoisted: list[tuple[str, str]] = []  # (quoted column, alias) while select() builds its SQL
        self._gates: _RowGates | None = None  # while select() builds its SQL

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
                self.path,
                f"missing required column(s) {', '.join(repr(m) for m in missing)}; header has {len(self.header)} columns",
            )

    # ---- SQL expressions (NULL when the column is absent) -----------------------------------------
    def txt(self, *cols: str) -> str:
        c = self.first(*cols)
        if c is None:
            return "NULL::VARCHAR"
        # shapes are written as `"32,3,224,224"` (literal quotes inside the cell): strip them with the spaces.
        # trim() with a character set costs ~0.25 CPU-s per 1M cells even where there is nothing to strip (most
        # cells): the regexp guard finds the cells that start or end with one of those characters first.
        return _text(q(c))

    def shape_txt(self, col: str) -> str:
        """A shapes/dtypes/formats cell (`"32,3,224,224"`, `"a;b"`: literal quotes inside it) with every quote
        dropped. These cells are usually quoted, so they would close the row's text gate on every row: they
        have a gate of their own (tq_shape_ok, answered by _RowGates), and where it is closed the per-cell
        form runs, whose edge test (tq_edge_q) is never gated."""
        if col not in self._cols:
            return "NULL::VARCHAR"
        c = q(col)
        checked = f"NULLIF(replace({_text(c, gated=False)}, '\"', ''), '')"
        # The short form, for a cell whose edges hold no space, tab or CR inside its quotes (the row's shapes
        # gate, see _RowGates.source): there the trim with a character set (~60% of these columns' cost)
        # strips only quotes, which replace() drops anyway, so the value is the cell without quotes. N/A as
        # before (`"N/A"` is no value, `N"/A` the text N/A), with the trim only for cells holding N/A (its
        # result is a substring of the cell). replace() is written once per branch: DuckDB shares no
        # subexpression inside a CASE, and each branch runs only on its rows.
        r = f"NULLIF(replace({c}, '\"', ''), '')"
        short = f"(CASE WHEN contains({c}, 'N/A') THEN (CASE WHEN trim({c}, '\"') = 'N/A' THEN NULL ELSE {r} END) ELSE {r} END)"
        return f"(CASE WHEN tq_shape_ok({c}) THEN {short} ELSE {checked} END)"

    def num(self, *cols: str) -> str:
        c = self.first(*cols)
        if c is None:
            return "NULL::DOUBLE"
        self._numeric.add(c)
        return f"tq_num({q(c)})"

    def int_(self, *cols: str) -> str:
        c = self.first(*cols)
        if c is None:
            return "NULL::BIGINT"
        self._numeric.add(c)
        # '12.0' casts too (DuckDB rounds decimal text to integers); '0x10' and '1_000' do not (tq_plain)
        return f"(CASE WHEN tq_plain({q(c)}) THEN TRY_CAST({q(c)} AS BIGINT) END)"

    def scaled(self, col: str | None, factor: float) -> str:
        """Number x factor rounded to BIGINT (MB -> bytes, GB/s -> bytes/s...)."""
        if col is None or col not in self._cols:
            return "NULL::BIGINT"
        self._numeric.add(col)
        return f"TRY_CAST(round(tq_num({q(col)}) * {factor!r}) AS BIGINT)"

    def dec_ns(self, col: str | None, ns_per_unit: int) -> str:
        """Exact decimal text -> int64 ns (µs: 1000, ms: 1e6)."""
        if col is None or col not in self._cols:
            return "NULL::BIGINT"
        self._numeric.add(col)
        c = q(col)
        exact = f"TRY_CAST(round(TRY_CAST({c} AS DECIMAL(26,6)) * {ns_per_unit}) AS BIGINT)"
        scale = len(str(ns_per_unit)) - 1  # ns_per_unit = 10^scale
        if ns_per_unit == 10**scale and scale <= 6:
            # The same arithmetic in DECIMAL(18,6) (int64) where the cell has at most 12 - scale characters and
            # no exponent: its value is below 10^(12 - scale), so the product (which DuckDB keeps in 18 digits
            # and raises on overflow, even under TRY_CAST) stays below 10^18. The 128-bit multiply and round
            # were ~85% of a conversion (500k durations: 124 -> 20 ms on one thread). Start times (16 integer
            # digits), long durations and exponents take the 26-digit form; so do cells it reads as NULL.
            fast = f"TRY_CAST(round(TRY_CAST({c} AS DECIMAL(18,6)) * {ns_per_unit}) AS BIGINT)"
            short = f"strlen({c}) <= {12 - scale} AND NOT (contains({c}, 'e') OR contains({c}, 'E'))"
            exact = f"(CASE WHEN {short} THEN COALESCE({fast}, {exact}) ELSE {exact} END)"
        return f"(CASE WHEN tq_plain({c}) THEN {exact} END)"

    def us_ns(self, *cols: str) -> str:
        return self.dec_ns(self.first(*cols), 1000)

    def ratio_pct(self, *cols: str) -> str:
        c = self.first(*cols)
        return "NULL::DOUBLE" if c is None else f"tq_num({q(c)}) / 100.0"

    def text_map(self, cols: Iterable[str]) -> str:
        """MAP(VARCHAR,VARCHAR) of the given columns' non-null values (for `extra`)."""
        cols = [c for c in cols if c in self._cols]
        if not cols:
            return "NULL::MAP(VARCHAR, VARCHAR)"
        return MapExpr(cols, [_clean(c) for c in cols], each=_CLEAN_STEPS)

    def text_cells_map(self, cols: Iterable[str], not_numbers: Iterable[str] = ()) -> str:
        """MAP(VARCHAR,VARCHAR) of txt() of `cols`, then of the `not_numbers` cells that are not numbers (a
        metric cell written as text), non-null values only, keys in that order. Lambdas over the lists of
        cells, however many columns a header has (one expression per column made a 3,000-column op_summary
        cost ~16 CPU-s in DuckDB's optimizer)."""
        cols = [c for c in cols if c in self._cols]
        nn = [c for c in not_numbers if c in self._cols]
        self._numeric.update(nn)
        parts = []
        if cols:
            parts.append(MapExpr(cols, [_text(q(c)) for c in cols], each=_TEXT_STEPS))
        if nn:
            values = [f"CASE WHEN tq_num({q(c)}) IS NULL THEN {_text(q(c))} END" for c in nn]
            parts.append(MapExpr(nn, values, each=_NOT_NUMBER_STEPS))
        if not parts:
            return "NULL::MAP(VARCHAR, VARCHAR)"
        return parts[0] if len(parts) == 1 else MapExpr.joined(parts[0], parts[1])

    def num_map(self, cols: Iterable[str]) -> str:
        """MAP(VARCHAR,DOUBLE) of the given columns' finite numeric values (for `metrics`)."""
        cols = [c for c in cols if c in self._cols]
        if not cols:
            return "NULL::MAP(VARCHAR, DOUBLE)"
        return MapExpr(cols, [f"tq_num({q(c)})" for c in cols], each=_NUM_STEPS)

    # ---- reading ----------------------------------------------------------------------------------
    def from_clause(self, only: Path | None = None) -> str:
        """The read_csv of the file(s) (only: just that one of them)."""
        cols = "{" + ", ".join(f"{lit(c)}: 'VARCHAR'" for c in self.header) + "}"
        paths = [only] if only is not None else self.paths
        files = (
            path_lit(str(paths[0]))
            if len(paths) == 1
            else "[" + ", ".join(path_lit(str(p)) for p in paths) + "]"
        )
        src = (
            f"read_csv({files}, header=true, auto_detect=false, delim=',', quote='\"', escape='\"', "
            f"columns={cols}, null_padding=true, strict_mode=false, encoding='utf-8')"
        )
        gates = self._gates
        if gates is not None:  # the hoisted numbers below use them: see _RowGates
            hoisted = [(gates.number(c), a) for c, a in self._hoisted]
            src = gates.source(src)
        else:
            hoisted = [(f"tq_num({c})", a) for c, a in self._hoisted]
        if hoisted:  # see _hoist_numbers
            src = f"(SELECT *, {', '.join(f'{e} AS {a}' for e, a in hoisted)} FROM {src})"
        return src

    def _private(self, pre: str) -> str:
        """A prefix no header column starts with (a header may hold any name: never shadow one)."""
        while any(h.startswith(pre) for h in self._cols):
            pre += "_"
        return pre

    def _hoist_numbers(self, select: str, where: str | None) -> tuple[str, str | None]:
        """`select` and `where` with each tq_num("col") of a header column read from a subquery that converts
        the column once. The same values: tq_num is a pure function of the cell. DuckDB plans the macro's
        expansion at every use, and a kernel_details select repeats tq_num of a PMU column up to ~8 times
        (HBM bytes = bandwidth x core time, with COALESCEs): planning took ~65 CPU-ms a file whatever its
        size, a sixth of a small rank's ingest; converted once it takes ~half that."""
        found = {m.group(1) for m in _TQ_NUM.finditer(select + (where or ""))}
        cols = sorted(c for c in found if _unquoted(c) in self._cols)
        if not cols:
            return select, where
        pre = self._private("__tqn")
        alias = {c: q(f"{pre}{i}") for i, c in enumerate(cols)}
        self._hoisted = list(alias.items())

        def sub(text: str) -> str:
            return _TQ_NUM.sub(lambda m: alias.get(m.group(1), m.group(0)), text)

        return sub(select), (sub(where) if where else where)

    def select(self, exprs: dict[str, str], where: str | None = None) -> Iterator[Any]:
        """Yield pyarrow RecordBatches of the canonical columns in `exprs` (name -> SQL expression)."""
        import duckdb

        gates = _RowGates(self._private("__tqg"), self._holds_pipe) if ROW_GATES else None
        parts = []
        maps = {}
        for name, e in exprs.items():
            if isinstance(e, MapExpr):
                # fast path: select the values as a list (+ non-null count), build the MAP in Arrow
                maps[name] = e
                parts.append(f"{e.values_sql(gates)} AS {q(name)}")
                parts.append(f"list_count({q(name)}) AS {q('__n_' + name)}")
            else:
                parts.append(f"{e} AS {q(name)}")
        numeric = sorted(self._numeric)
        if numeric:
            # one flag per row, from one lambda over the numeric columns (not an expression per column: DuckDB's
            # optimizer is superlinear in their number); the exact per-column count runs only when it fires
            cells = ", ".join(q(c) for c in numeric)
            flag = f"list_bool_or(list_transform([{cells}], lambda x: tq_bad(x)))"
            if gates is not None:
                gates.cover(q(c) for c in numeric)
                flag = gates.unless_plain(flag)
            parts.append(f"{flag} AS {q(_BAD)}")
        select = ", ".join(parts)
        if gates is not None:
            select, where = (
                gates.rewrite(select, self._cols),
                (gates.rewrite(where, self._cols) if where else where),
            )
        select, where = self._hoist_numbers(select, where)
        self._gates = gates
        try:
            sql = f"SELECT {select} FROM {self.from_clause()}" + (f" WHERE {where}" if where else "")
        finally:
            self._hoisted, self._gates = [], None
        bad = False
        try:
            from .._duck import arrow_reader

            reader = arrow_reader(self.con.sql(sql), BATCH_ROWS)
            for batch in _prefetch(reader):
                if numeric:
                    flag = batch.column(batch.num_columns - 1)
                    bad = bad or bool(_any_true(flag))
                    batch = batch.drop_columns([_BAD])
                yield _build_maps(batch, maps) if maps else batch
        except (duckdb.Error, OSError) as e:
            # DuckDB messages quote the offending line (which may be megabytes): keep the first line, capped
            culprit, err = self._failing_part(e)
            msg = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
            raise BadTraceError(culprit, f"malformed CSV: {msg}") from e
        if bad:
            for p in self.paths:
                self._count_unparsed(where, p)

    def _failing_part(self, err: BaseException) -> tuple[Path, BaseException]:
        """The file of several that the read failed on, and its own error (the first file when none fails
        alone)."""
        import duckdb

        if len(self.paths) > 1:
            for p in self.paths:
                try:
                    self.con.execute(f"SELECT count(*) FROM {self.from_clause(p)}").fetchall()
                except (duckdb.Error, OSError) as e:
                    return p, e
        return self.path, err

    def _count_unparsed(self, where: str | None, path: Path) -> None:
        """One more pass over the numeric columns, only for a file where the select's flag saw such a cell:
        count the cells that held something yet became NULL, with the first line and an example."""
        cols = sorted(self._numeric)
        if not cols:
            return
        import duckdb

        # its own connection: the caller's may hold another open result (two CsvFiles streaming on one con)
        con = duckdb.connect(":memory:")
        try:
            con.execute("SET disabled_optimizers = 'type_pushdown'")
            con.execute(
                "SET threads = 1"
            )  # a few columns of one file: no parallel scan (its null_padding limits)
            for m in _MACROS:
                con.execute(m)
            base = CsvFile.from_clause(
                self, path
            )  # without TaskCsv's l2 join (a temp table of the caller's connection)
            # the cells unnested to (column index, cell) pairs and grouped: one expression whatever the header's
            # width (three aggregates per column made 5,000 columns cost minutes in DuckDB's optimizer)
            cells = ", ".join(q(c) for c in cols)
            rows = f"SELECT *, row_number() OVER () AS __row FROM {base}" + (
                f" WHERE {where}" if where else ""
            )
            sql = (
                f"SELECT k, count(*), min(__row), arg_min(left(v, 40), __row) FROM (SELECT __row, "
                f"unnest(range({len(cols)})) AS k, unnest([{cells}]) AS v FROM ({rows})) WHERE tq_bad(v) GROUP BY k"
            )
            try:
                got = con.execute(sql).fetchall()
            except duckdb.Error:
                # a file this count cannot scan (e.g. quoted newlines the parallel reader refuses) is read, or
                # refused with its own message, by the select that follows; the count is a diagnostic only
                return
        finally:
            con.close()
        from ._numtext import add_cells

        for k, n, row, example in sorted(got):
            add_cells(str(path), cols[k], int(n), int(row) + 1, str(example))  # +1: the header is line 1

    def count(self) -> int:
        import duckdb

        try:
            return int(self.con.execute(f"SELECT count(*) FROM {self.from_clause()}").fetchone()[0])
        except duckdb.Error as e:
            raise BadTraceError(self.path, f"malformed CSV: {str(e).strip().splitlines()[0]}") from e


class TaskCsv(CsvFile):
    """A per-task CSV (kernel_details / op_summary), optionally LEFT JOINed to l2_cache.csv hit rates that the
    caller registered as the temp table `__l2hit(s, t, h)` keyed by (stream id, task id)."""

    join_l2 = False

    def from_clause(self, only: Path | None = None) -> str:
        base = super().from_clause(only)
        if not self.join_l2:
            return base
        return f"{base} LEFT JOIN __l2hit ON __l2hit.s = {self.int_('Stream ID')} AND __l2hit.t = {self.int_('Task ID')}"


def _any_true(flag: Any) -> bool:
    import pyarrow.compute as pc

    return bool(pc.any(flag).as_py()) if len(flag) else False


def _prefetch(reader: Any, depth: int = 2) -> Iterator[Any]:
    """Pull batches from `reader` in a background thread, so DuckDB parses the next batches while the caller
    converts and writes this one (pyarrow's Parquet writer and DuckDB both release the GIL). Bounded queue:
    at most `depth` batches wait in memory. Exceptions are re-raised in the caller's thread."""
    import queue
    import threading

    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def pump() -> None:
        try:
            for b in reader:
                while not stop.is_set():
                    try:
                        q.put(b, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            q.put(e)

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        t.join(timeout=5)


class MapExpr(str):
    """A MAP column built from fixed keys (CSV column names) and one SQL value expression per key.

    As a string it is valid DuckDB SQL (map_from_entries over the non-null pairs), so it can be embedded in
    any query; CsvFile.select() instead selects the values as a list and builds the MAP in Arrow, ~5x faster
    than DuckDB 2.0's map construction on a 500k-row kernel_details.csv.
    """

    keys: list[str]
    values: list[str]
    each: tuple[str, ...] | None  # lambda bodies over `x`, applied in turn to the list of raw cells
    parts: tuple[MapExpr, ...] = ()  # a joined map's parts (values_sql concatenates theirs)

    def __new__(cls, keys: list[str], values: list[str], each: tuple[str, ...] | None = None) -> MapExpr:
        entries = ", ".join(f"{{'k': {lit(k)}, 'v': {v}}}" for k, v in zip(keys, values, strict=True))
        obj = super().__new__(cls, f"map_from_entries(list_filter([{entries}], lambda e: e.v IS NOT NULL))")
        obj.keys, obj.values, obj.each = list(keys), list(values), each
        return obj

    @classmethod
    def joined(cls, a: MapExpr, b: MapExpr) -> MapExpr:
        """One map of a's entries then b's (each part keeps its own lambda pipeline)."""
        obj = cls(a.keys + b.keys, a.values + b.values)
        obj.parts = (a, b)
        return obj

    def values_sql(self, gates: _RowGates | None = None) -> str:
        if self.parts:
            return f"list_concat({', '.join(p.values_sql(gates) for p in self.parts)})"
        if self.each is not None:
            # one lambda over the list of raw columns, not one expression per column: DuckDB's optimizer is
            # superlinear in the number of expressions (2,000 NULLIF(trim()) columns: 124 s, as a lambda 0.5 s;
            # issue 22's 10,000-column header took 262 s)
            cols = [q(k) for k in self.keys]
            sql = f"[{', '.join(cols)}]"
            for step in self.each:
                sql = f"list_transform({sql}, lambda x: {step})"
            if gates is not None and self.each == _NUM_STEPS:
                return gates.numbers(cols, sql)
            if gates is not None and self.each == _CLEAN_STEPS:
                return gates.cleaned(cols, sql)
            return sql
        return "[" + ", ".join(self.values) + "]"


def text_map_of(entries: list[tuple[str, str]]) -> str:
    """MAP(VARCHAR,VARCHAR) from (key, SQL expression) pairs, NULL values dropped. Valid SQL anywhere; built
    in Arrow when it reaches CsvFile.select()."""
    if not entries:
        return "NULL::MAP(VARCHAR, VARCHAR)"
    return MapExpr([k for k, _ in entries], [f"CAST(({e}) AS VARCHAR)" for _, e in entries])


def _key_positions(k: int, rows: int) -> Any:
    """0, 1, ..., k-1 repeated `rows` times, as an int32 Arrow array (by doubling: ~20 copies, not `rows`)."""
    import pyarrow as pa

    out = pa.array(range(k), pa.int32())
    while len(out) < k * rows:
        out = pa.concat_arrays([out, out])
    return out.slice(0, k * rows)


def _build_maps(batch: Any, maps: dict[str, MapExpr]) -> Any:
    """Replace each list column of `maps` in `batch` by a MapArray of its non-null (key, value) pairs, its keys
    dictionary-encoded (RankWriter writes them so; the Parquet file reads back with text keys).

    The query gives, per map column NAME: NAME (the k values of each row, as a list of exactly k) and
    __n_NAME (non-null count per row). Each value's key index is its position in the list, 0..k-1 over and
    over (_key_positions; the query selected that constant list per row before, 12.5M integers for a
    500k-row kernel_details, converted to Arrow only to be filtered).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = {}
    for name in batch.schema.names:
        if name.startswith("__n_"):
            continue
        col = batch.column(name)
        if name in maps:
            flat = col.flatten()
            k = len(maps[name].keys)
            if len(flat) != k * len(col):  # a list of the k columns: never shorter, never longer
                raise AssertionError(f"map {name}: {len(flat)} values for {len(col)} rows of {k} keys")
            mask = pc.is_valid(flat)
            key_idx = pc.filter(_key_positions(k, len(col)), mask)
            # dictionary-encoded keys: a row reorder (RankWriter's split of interleaved streams) then moves int32
            # indices, not text, and the Parquet writer writes the indices as they are (_arrow_helpers.
            # parquet_writer): 12.5M key strings for 500k kernels were made, copied and hashed, now never
            keys = pa.DictionaryArray.from_arrays(key_idx, pa.array(maps[name].keys, pa.string()))
            counts = batch.column("__n_" + name)
            offsets = pa.concat_arrays(
                [pa.array([0], pa.int32()), pc.cumulative_sum(counts).cast(pa.int32())]
            )
            col = pa.MapArray.from_arrays(offsets, keys, pc.filter(flat, mask))
        cols[name] = col
    return pa.RecordBatch.from_pydict(cols)


def check_quotes(path: Path) -> bool:
    """Refuse a CSV with a quote that is never closed, naming the line it opens on; return whether the file
    holds a `|` anywhere (looked for on the same pass, with memchr until the first is found: _RowGates).

    DuckDB's lenient reader (strict_mode=false, which the profilers' ragged rows need) reads an unclosed `"` as
    one field running to the end of the file: the rest of the file became one garbage row, with exit 0; its
    strict mode drops that row without a word when reading serially (issue 22). Every proper quote comes in
    pairs (open, close; `""` inside), so an odd count of `"` in the file means one is never closed: counted
    at C speed over the file (~1 GB/s), and only then is the line found, with Python's csv reader."""
    from ._files import open_regular

    odd = pipe = False
    with open_regular(path) as fh:
        while chunk := fh.read(8 << 20):
            odd ^= chunk.count(b'"') % 2 == 1
            pipe = pipe or b"|" in chunk
    if not odd:
        return pipe
    line = _unclosed_quote_line(path)
    if line is not None:
        raise BadTraceError(
            path,
            f'a quote (") opened on line {line} is never closed: the rest of the file would be read as one '
            "field; expected a CSV whose quoted fields end with a quote",
        )
    return pipe


def _unclosed_quote_line(path: Path) -> int | None:
    """The line where the record holding the unclosed quote starts (None if the csv reader sees none: an odd
    count from a literal quote inside an unquoted field, which DuckDB reads as written)."""
    start = 1
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        reader = csv.reader(fh, strict=True)
        try:
            for _row in reader:
                start = reader.line_num + 1
        except csv.Error:
            return start
    return None


def read_header(path: Path) -> list[str]:
    """The header row, checked: UTF-8 (BOM allowed), non-empty, unique names (duplicates get a suffix)."""
    from ._files import open_regular
    from ._limits import limit

    try:
        with open_regular(path) as fh:
            raw = fh.read(1 << 20)
    except OSError as e:
        raise BadTraceError(path, f"cannot read file: {e.strerror or e}") from e
    if len(raw) == 1 << 20 and b"\n" not in raw:
        raise BadTraceError(path, "the CSV header row is longer than 1 MiB: not a profiler CSV")
    if not raw.strip():
        raise BadTraceError(path, "empty file; expected a CSV header row and data rows")
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    first = raw.split(b"\n", 1)[0]
    try:
        line = first.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadTraceError(
            path, f"not UTF-8 text (byte 0x{first[e.start]:02x} at offset {e.start}); expected a UTF-8 CSV"
        ) from e
    row = next(csv.reader(io.StringIO(line)), [])
    cap = limit("TRACEQL_MAX_CSV_COLUMNS")
    if len(row) > cap:
        raise BadTraceError(path, f"the CSV header has {len(row)} columns, more than the {cap} traceql accepts "
                                  "(profilers write under 200; raise the limit with TRACEQL_MAX_CSV_COLUMNS)")  # fmt: skip
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


def comm_task_sql(task_type: str, name: str) -> str:
    """SQL: is this per-task CSV row a communication task? Every Ascend parser that classifies tasks uses it.

    Older torch_npu/msprof exports write the HCCL tasks' core (kernel_details 'Accelerator Core', op_summary
    'Task Type') as `HCCL`; torch_npu 2.7 / CANN 8.3 write `COMMUNICATION`. Level0 dumps may write N/A there
    and keep only the name (`hcom_allReduce__...`), hence the name fallback."""
    return (
        f"COALESCE(upper({task_type}) IN ('HCCL', 'COMMUNICATION'), false) "
        f"OR COALESCE(lower({name}) LIKE 'hcom%', false)"
    )
