"""SQLite profiler exports (ascend_pytorch_profiler_*.db, analysis.db, msprof_*.db): open, discover, load.

Shared by the torch_npu_db and msprof_db parsers. What lives here:
- `SqliteDb`: opens a file read-only (never writes, never takes a lock that blocks the profiler), checks it
  is SQLite at all, discovers tables and columns with PRAGMA table_info (the schema changes with every CANN
  release: columns are renamed, added, dropped, so nothing here assumes a column list), and turns every
  sqlite3 error into a one-line BadTraceError naming the file.
- `load()`: copies one table into a DuckDB connection, resolving STRING_IDS / ENUM_* ids on the SQLite side
  (the lookups are primary-key probes there) and casting each column to the kind the caller declares.
  Everything after that (joins, pivots, unit conversion, maps) is vectorised DuckDB SQL, so no per-row Python
  runs beyond the sqlite3 fetch itself.

Why not DuckDB's sqlite scanner: the extension is not bundled and cannot be installed offline.
"""

from __future__ import annotations

import contextlib
import sqlite3
import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .. import _owned
from ..errors import BadTraceError

SQLITE_MAGIC = b"SQLite format 3\x00"
FETCH_ROWS = 64 * 1024

# MindStudio Insight writes its own bookkeeping into dbs it has opened; they are not profiler output.
BOOKKEEPING_TABLES = {"connectionCats", "status_info", "sqlite_sequence", "sqlite_stat1", "sqlite_stat4"}


# ENUM_* contents as MSPROF-DB-DOC documents them, used when a db lacks the ENUM table (older msprof exports).
DOC_ENUMS: dict[str, dict[int, str]] = {
    "ENUM_API_TYPE": {20000: "acl", 15000: "model", 10000: "node", 5500: "hccl", 5000: "runtime", 50001: "op",
                      50002: "queue", 50003: "trace", 50004: "mstx", 25000: "pta", 30000: "pytorch"},
    "ENUM_MSTX_EVENT_TYPE": {0: "marker", 1: "push/pop", 2: "start/end", 3: "marker_ex"},
    "ENUM_HCCL_TRANSPORT_TYPE": {0: "SDMA", 1: "RDMA", 2: "LOCAL", 3: "UB", 4: "ROCE"},
    "ENUM_HCCL_LINK_TYPE": {0: "ON_CHIP", 1: "HCCS", 2: "PCIE", 3: "ROCE", 4: "SIO", 5: "HCCS_SW",
                            6: "STANDARD_ROCE", 7: "UB", 8: "UBoE"},
    "ENUM_HCCL_RDMA_TYPE": {0: "RDMA_SEND_NOTIFY", 1: "RDMA_SEND_PAYLOAD"},
    "ENUM_HCCL_DATA_TYPE": {0: "INT8", 1: "INT16", 2: "INT32", 3: "FP16", 4: "FP32", 5: "INT64", 6: "UINT64",
                            7: "UINT8", 8: "UINT16", 9: "UINT32", 10: "FP64", 11: "BFP16", 12: "INT128"},
    "ENUM_MEMCPY_OPERATION": {0: "host to host", 1: "host to device", 2: "device to host", 3: "device to device",
                              4: "managed memory", 5: "addr device to device", 6: "host to device ex",
                              7: "device to host ex", 65535: "other"},
    "ENUM_MEMORY": {0: "app", 1: "device", 3: "read", 4: "write", 5: "allocate", 6: "release"},
}  # fmt: skip
for _name, _e in DOC_ENUMS.items():
    if _name.startswith("ENUM_HCCL_"):
        _e.update({255: "RESERVED", 65534: "N/A", 65535: "INVALID_TYPE"})


def is_bookkeeping(table: str) -> bool:
    return table in BOOKKEEPING_TABLES or table.startswith("sqlite_") or "_old_" in table


def q(name: str) -> str:
    """Quote an identifier for SQLite and DuckDB alike."""
    return '"' + name.replace('"', '""') + '"'


def lit(s: str) -> str:
    """A SQL string literal (SQLite and DuckDB alike)."""
    return "'" + s.replace("'", "''") + "'"


def decode_text(b: bytes) -> str:
    """TEXT cells as str; bytes that are not UTF-8 (a damaged page) become U+FFFD instead of failing the run."""
    return b.decode("utf-8", "replace")


def looks_like_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def readonly_uri(path: Path) -> str | None:
    """A URI that opens `path` read-only in every sense: `immutable=1`, so SQLite creates no -wal/-shm/journal
    beside it and takes no locks (plain `mode=ro` on a WAL-mode export left both files in the dump). None when
    a non-empty `-wal` sits beside it: its rows are not in the main file yet, and immutable would skip them
    (read a private copy then: private_copy_uri)."""
    wal = Path(str(path) + "-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        return None
    return "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro&immutable=1"


def private_copy_uri(path: Path, into: Path) -> str:
    """Copy the db and its -wal into `into` and return a URI for the copy (SQLite replays the WAL there)."""
    import shutil

    dst = into / "export.db"
    shutil.copyfile(path, dst)
    shutil.copyfile(str(path) + "-wal", str(dst) + "-wal")
    return "file:" + urllib.parse.quote(str(dst))


def _bound(conn: sqlite3.Connection) -> None:
    """Cap what one value may cost: a 1 MB db whose generated column expands to 100 MB per row took 3.1 GB in
    6 s (issue 22). No profiler writes a string or blob past TRACEQL_MAX_STRING_BYTES; SQLite stops with
    'string or blob too big' instead of building it."""
    from ._limits import limit

    if hasattr(conn, "setlimit"):  # Python 3.11+
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit("TRACEQL_MAX_STRING_BYTES"))


class SqliteDb:
    """A read-only SQLite export with its discovered schema. `what` says what the file should be (for errors)."""

    def __init__(self, path: str | Path, what: str) -> None:
        self.path = Path(path)
        self.what = what
        self._check_header()
        self.conn = self._open()
        _bound(self.conn)
        with self.errors():
            names = [r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            self.schema: dict[str, list[tuple[str, str]]] = {}
            for t in names:
                if is_bookkeeping(t):
                    continue
                # table_xinfo: generated columns too (table_info hides them; a query can still read them)
                info = self.conn.execute(f"PRAGMA table_xinfo({q(t)})").fetchall()
                self.schema[t] = [(r[1], (r[2] or "").upper()) for r in info if r[6] != 1]
        self._count_unresolved_strings()

    def _count_unresolved_strings(self) -> None:
        """STRING_IDS values that read as NULL: names, types and shapes referring to them would be NULL with no
        word. SQLite makes a computed value past SQLITE_LIMIT_LENGTH (see _bound) NULL rather than failing
        (a generated column's printf), and a dump may hold NULL there; both are counted and warned about
        (traceql.parsers._numtext, the `unreadable_values` check). A *stored* value past the limit fails the
        read instead, and the file is refused (_describe)."""
        if not self.has("STRING_IDS", "id", "value"):
            return
        with self.errors():
            n, first = self.conn.execute(
                "SELECT count(*), min(id) FROM STRING_IDS WHERE value IS NULL"
            ).fetchone()
        if n:
            from ._limits import limit
            from ._numtext import add_unreadable

            add_unreadable(
                str(self.path), "STRING_IDS.value", int(n),
                f"id {first}: NULL (longer than {limit('TRACEQL_MAX_STRING_BYTES')} bytes, or missing)",
            )  # fmt: skip

    # ---- opening ----------------------------------------------------------------------------------
    def _check_header(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                head = fh.read(100)
        except OSError as e:
            raise BadTraceError(self.path, f"cannot read file: {e.strerror or e}") from e
        if not head:
            raise BadTraceError(self.path, f"empty file; expected {self.what} (an SQLite database)")
        if not head.startswith(SQLITE_MAGIC):
            raise BadTraceError(
                self.path, f"not an SQLite database (no 'SQLite format 3' header); expected {self.what}"
            )
        if len(head) < 100:
            raise BadTraceError(
                self.path, f"truncated SQLite database ({len(head)} bytes); expected {self.what}"
            )

    def _open(self) -> sqlite3.Connection:
        self._private = None
        uri = readonly_uri(self.path)
        if uri is None:  # un-checkpointed WAL content: read a private copy, never the dump's own files
            self._private = _owned.TempDir("sqlite")
            uri = private_copy_uri(self.path, Path(self._private.name))
        try:
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            conn.text_factory = decode_text
            conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
            return conn
        except sqlite3.DatabaseError as e:
            self._drop_copy()
            raise BadTraceError(self.path, f"{_describe(e)}; expected {self.what}") from e

    def _drop_copy(self) -> None:
        if self._private is not None:
            self._private.cleanup()
            self._private = None

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()
        self._drop_copy()

    def __enter__(self) -> SqliteDb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """sqlite3 errors (corrupt page, truncated file, locked) -> one BadTraceError naming this file."""
        try:
            yield
        except (sqlite3.DatabaseError, UnicodeDecodeError, OverflowError) as e:
            raise BadTraceError(self.path, f"{_describe(e)}; expected {self.what}") from e

    # ---- schema -----------------------------------------------------------------------------------
    def has(self, table: str, *cols: str) -> bool:
        if table not in self.schema:
            return False
        names = {c for c, _ in self.schema[table]}
        return all(c in names for c in cols)

    def cols(self, table: str) -> list[str]:
        return [c for c, _ in self.schema.get(table, [])]

    def first(self, table: str, *cols: str) -> str | None:
        """The first of several alternative column names present (blockNum vs blockDim...)."""
        names = set(self.cols(table))
        return next((c for c in cols if c in names), None)

    def decl(self, table: str, col: str) -> str:
        return dict(self.schema.get(table, [])).get(col, "")

    def require(self, table: str, *cols: str) -> None:
        if table not in self.schema:
            raise BadTraceError(self.path, f"no {table} table; expected {self.what}")
        missing = [c for c in cols if not self.has(table, c)]
        if missing:
            raise BadTraceError(
                self.path, f"table {table} lacks column(s) {', '.join(missing)}; expected {self.what}"
            )

    # ---- small reads ------------------------------------------------------------------------------
    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.errors():
            return self.conn.execute(sql, params).fetchall()

    # ---- SQL expressions for load() ----------------------------------------------------------------
    def string_expr(self, col: str) -> str:
        """Text of a STRING_IDS reference; a column already holding text passes through."""
        c = q(col)
        if "STRING_IDS" not in self.schema:
            return f"CAST({c} AS TEXT)"
        return (
            f"CASE WHEN typeof({c}) = 'integer' THEN (SELECT value FROM STRING_IDS WHERE id = {c}) "
            f"ELSE CAST({c} AS TEXT) END"
        )

    def enum_expr(self, col: str, enum_table: str) -> str:
        """Name from an ENUM_* table; older exports (2023 msprof) had no ENUM table and used STRING_IDS."""
        c = q(col)
        if self.has(enum_table, "id", "name"):
            return f"(SELECT name FROM {q(enum_table)} WHERE id = {c} LIMIT 1)"
        doc = DOC_ENUMS.get(enum_table)
        if not doc:
            return self.string_expr(col)
        whens = " ".join(f"WHEN {i} THEN '{n}'" for i, n in doc.items())
        return f"CASE {c} {whens} ELSE {self.string_expr(col)} END"

    def word_expr(self, col: str, enum_table: str, words: tuple[str, ...]) -> str:
        """STRING_IDS when it decodes to one of the expected words, else the ENUM table (2023 NPU_OP_MEM.type)."""
        if "STRING_IDS" not in self.schema:
            return self.enum_expr(col, enum_table)
        c = q(col)
        in_list = ", ".join("'" + w + "'" for w in words)
        alt = self.enum_expr(col, enum_table) if self.has(enum_table, "id", "name") else "NULL"
        return (
            f"COALESCE((SELECT value FROM STRING_IDS WHERE id = {c} AND lower(value) IN ({in_list})), {alt}, "
            f"{self.string_expr(col)})"
        )

    def expr(self, table: str, col: str, kind: str) -> tuple[str, str]:
        """(SQLite select expression, DuckDB type) for a column of a declared kind.

        Kinds: int (also TEXT ns timestamps such as PYTORCH_API.startNs: SQLite parses the digits exactly),
        float, text (verbatim), str (STRING_IDS id), enum:<ENUM_TABLE>, word:<ENUM_TABLE>:<w1,w2..>.
        """
        c = q(col)
        if kind == "int":
            return f"CAST({c} AS INTEGER)", "BIGINT"
        if kind == "float":
            return f"CAST({c} AS REAL)", "DOUBLE"
        if kind == "text":
            return f"CAST({c} AS TEXT)", "VARCHAR"
        if kind == "str":
            return self.string_expr(col), "VARCHAR"
        if kind.startswith("enum:"):
            return self.enum_expr(col, kind[5:]), "VARCHAR"
        if kind.startswith("word:"):
            _, enum_table, words = kind.split(":", 2)
            return self.word_expr(col, enum_table, tuple(words.split(","))), "VARCHAR"
        raise ValueError(f"unknown column kind {kind!r}")

    def default_kind(self, table: str, col: str) -> str:
        """Kind of a column the caller did not declare: numbers stay numbers, the rest is verbatim text."""
        d = self.decl(table, col)
        if "INT" in d:
            return "int"
        if "REAL" in d or "FLOA" in d or "DOUB" in d:
            return "float"
        if "NUM" in d:
            # ns timestamps must stay exact int64 (1.7e18 > 2^53); other NUMERIC columns (ms in analysis.db,
            # bytes/s, MB...) may hold fractions
            return "int" if col.endswith("Ns") or col in ("timestamp", "timestampNs") else "float"
        return "text"

    # ---- bulk load into DuckDB ----------------------------------------------------------------------
    def load(
        self,
        duck: Any,
        table: str,
        kinds: Mapping[str, str] | None = None,
        dst: str | None = None,
        only_declared: bool = False,
    ) -> list[str]:
        """Copy `table` into DuckDB table `dst` (default: the same name). Returns the loaded column names.

        Columns in `kinds` get that kind; other columns get `default_kind` (or are skipped with only_declared).
        An absent table loads as nothing and returns [].

        STRING_IDS references ('str') travel as integer ids and are resolved by a DuckDB hash join against
        STRING_IDS loaded once: per-row lookups in SQLite and millions of Python str objects were the
        dominant cost (6.4M TASK_PMU_INFO rows: 24 s -> 9 s).
        """
        if table not in self.schema:
            return []
        kinds = dict(kinds or {})
        cols: list[str] = []
        raw: list[tuple[str, str, str]] = []  # (raw column, SQLite expr, DuckDB type)
        final: list[str] = []  # DuckDB select list building `dst` from the raw table
        joins: list[str] = []
        for col in self.cols(table):
            if col not in kinds and only_declared:
                continue
            kind = kinds.get(col) or self.default_kind(table, col)
            cols.append(col)
            if kind == "str" and "STRING_IDS" in self.schema:
                c, i, t = q(col), q("__id__" + col), q("__tx__" + col)
                raw.append((i, f"CASE WHEN typeof({c}) = 'integer' THEN {c} END", "BIGINT"))
                j = f"s{len(joins)}"
                joins.append(f"LEFT JOIN _traceql_strings {j} ON {j}.id = r.{i}")
                if self._holds_text(table, col):  # a writer that stored the text itself: keep it
                    raw.append(
                        (
                            t,
                            f"CASE WHEN typeof({c}) = 'integer' THEN NULL ELSE CAST({c} AS TEXT) END",
                            "VARCHAR",
                        )
                    )
                    final.append(f"COALESCE({j}.value, r.{t}) AS {q(col)}")
                else:
                    final.append(f"{j}.value AS {q(col)}")
            else:
                e, typ = self.expr(table, col, kind)
                raw.append((q(col), e, typ))
                final.append(f"r.{q(col)}")
        if not cols:
            return []
        dst = dst or table
        if joins:
            self._load_strings(duck)
        stage = q("_raw_" + dst) if joins else q(dst)
        self._copy(duck, table, stage, raw)
        if joins:
            duck.execute(
                f"CREATE OR REPLACE TABLE {q(dst)} AS SELECT {', '.join(final)} FROM {stage} r {' '.join(joins)}"
            )
            duck.execute(f"DROP TABLE {stage}")
        return cols

    def _holds_text(self, table: str, col: str) -> bool:
        c = q(col)
        sql = f"SELECT 1 FROM {q(table)} WHERE {c} IS NOT NULL AND typeof({c}) <> 'integer' LIMIT 1"
        return bool(self.rows(sql))

    def _load_strings(self, duck: Any) -> None:
        if getattr(duck, "_traceql_strings_from", None) == str(self.path):
            return
        self._copy(duck, "STRING_IDS", "_traceql_strings",
                   [("id", 'CAST("id" AS INTEGER)', "BIGINT"), ("value", 'CAST("value" AS TEXT)', "VARCHAR")])  # fmt: skip
        with contextlib.suppress(AttributeError, TypeError):
            duck._traceql_strings_from = str(self.path)

    def _copy(self, duck: Any, table: str, dst: str, cols: list[tuple[str, str, str]]) -> None:
        """SELECT the SQLite expressions into a new DuckDB table, in Arrow batches."""
        import pyarrow as pa

        duck.execute(f"CREATE OR REPLACE TABLE {dst} (" + ", ".join(f"{c} {t}" for c, _, t in cols) + ")")
        arrow = {"BIGINT": pa.int64(), "DOUBLE": pa.float64(), "VARCHAR": pa.string()}
        # rows arrive as tuples; converting them as one struct array is ~4x faster than zip(*rows) per column
        row_type = pa.struct([(f"c{i}", arrow[t]) for i, (_, _, t) in enumerate(cols)])
        with self.errors():
            cur = self.conn.execute(f"SELECT {', '.join(e for _, e, _ in cols)} FROM {q(table)}")
            while True:
                rows = cur.fetchmany(FETCH_ROWS)
                if not rows:
                    break
                batch = pa.Table.from_batches(
                    [pa.RecordBatch.from_struct_array(pa.array(rows, type=row_type))]
                )
                duck.register("_traceql_batch", batch)
                try:
                    duck.execute(f"INSERT INTO {dst} SELECT * FROM _traceql_batch")
                finally:
                    duck.unregister("_traceql_batch")


def _describe(e: Exception | None) -> str:
    msg = (str(e).strip() or type(e).__name__) if e is not None else "unknown error"
    if any(k in msg for k in ("malformed", "not a database", "disk I/O", "file is not")):
        return f"corrupt or truncated SQLite database ({msg})"
    if "too big" in msg:
        from ._limits import limit

        return (
            f"a stored string or blob is longer than {limit('TRACEQL_MAX_STRING_BYTES')} bytes, more than profilers "
            "write (raise the limit with TRACEQL_MAX_STRING_BYTES)"
        )
    return f"SQLite error: {msg}"
