"""Derived tables: the analysis layer every metric query starts from, computed once at ingest.

Most queries in queries/ begin from the same per-kernel HBM bytes (`_kernel_bytes()`), step windows
(`_step_windows()`), device bandwidth timeline (`_bw_segments()`), matched collectives (`_comm_events()`) and the
step timeline they combine into (`_timeline_base()`).
Those helpers read the raw tables and apportion millions of HBM counter samples to kernels; re-deriving them
in each of the ~15 queries the findings run cost ~90% of the analysis time on big stores. None of them take
parameters, so ingest computes them once and stores them next to the canonical tables:

    runs/<run>/kernel_bytes/r<rank>-d.parquet    one row per kernel: _kernel_bytes()
    runs/<run>/step_windows/r<rank>-d.parquet    _step_windows()
    runs/<run>/bw_segments/r<rank>-d.parquet     _bw_segments()
    runs/<run>/comm_events/r<rank>-d.parquet     _comm_events() (matched across all ranks, then split by rank)
    runs/<run>/timeline_base/r<rank>-d.parquet   _timeline_base() (needs the rank's comm_events)

The SQL in queries/_helpers.sql stays the single definition: derivation runs those macros over the staged
Parquet, per rank in the ingest worker pool (they all partition by run and rank), with a memory limit. The
manifest records `derived.version` (a hash of the helper SQL); queries use the stored tables only when it
matches the helpers they load (`use_stored_sql`), else they recompute from the raw tables, so editing a
helper can never leave a stale answer, only a slower one (re-ingest with --replace to refresh).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

# table -> (helper macro, ORDER BY for time-sorted row groups); per rank, in dependency order: later ones read
# the stored earlier ones (bw_segments reads kernel_bytes and step_windows)
RANK_TABLES: dict[str, tuple[str, str]] = {
    "kernel_bytes": ("_kernel_bytes", "ts_ns, kid"),
    "step_windows": ("_step_windows", "win_start, step"),
    "bw_segments": ("_bw_segments", "seg_start"),
}
RUN_TABLES: dict[str, tuple[str, str]] = {
    "comm_events": ("_comm_events", "ts_ns, ordinal"),
}
# per rank again, once the run-level ones exist (the timeline cuts at the matched collectives' arrivals)
LATE_RANK_TABLES: dict[str, tuple[str, str]] = {
    "timeline_base": ("_timeline_base", "t0"),
}
ALL_TABLES = {**RANK_TABLES, **RUN_TABLES, **LATE_RANK_TABLES}
DERIVED_TABLES = list(ALL_TABLES)
# canonical tables the helper macros read
_INPUTS = ["kernels", "counters", "steps", "comm_ops"]
# per derivation: spill to disk rather than grow past this (several run at once in the ingest pool)
MEMORY_LIMIT = "512MB"


def version() -> str:
    """Identifies the helper SQL the stored tables were computed with."""
    from . import queries

    h = hashlib.sha256()
    for text in queries.helper_sql():
        h.update(text.encode())
    return h.hexdigest()[:16]


def _connect(spill: Path, threads: int) -> duckdb.DuckDBPyConnection:
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute(f"SET memory_limit='{MEMORY_LIMIT}'")
    con.execute(f"SET temp_directory='{_q(str(spill))}'")
    con.execute(f"SET threads={max(1, int(threads))}")
    con.execute("SET preserve_insertion_order=false")
    con.execute("SET GLOBAL asof_loop_join_threshold = 0")  # see engine.connect
    return con


def _path_list(paths: list[str]) -> str:
    return "[" + ", ".join(f"'{_q(p)}'" for p in paths) + "]"


def _q(s: str) -> str:
    return s.replace("'", "''")


def _input_views(con: duckdb.DuckDBPyConnection, run_dir: Path, files: dict[str, list[str]]) -> None:
    from .engine import _table_select

    for table in _INPUTS:
        paths = [str(run_dir / rel) for rel in files.get(table, [])]
        con.execute(f"CREATE OR REPLACE VIEW {table} AS {_table_select(table, paths)}")


def _copy(con: duckdb.DuckDBPyConnection, select: str, out: Path) -> int:
    from .store import ROW_GROUP

    out.parent.mkdir(parents=True, exist_ok=True)
    con.execute(f"COPY ({select}) TO '{_q(str(out))}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP})")
    row = con.execute(f"SELECT count(*) FROM read_parquet('{_q(str(out))}')").fetchone()
    return int(row[0]) if row else 0


class _Session:
    """A DuckDB connection over staged files with the helper macros loaded and a private spill dir."""

    def __init__(self, run_dir: Path, files: dict[str, list[str]], threads: int) -> None:
        from . import queries

        self.run_dir = run_dir
        self.spill = Path(tempfile.mkdtemp(prefix=".derive-", dir=run_dir))
        self.con = _connect(self.spill, threads)
        _input_views(self.con, run_dir, files)
        queries._load_helpers(self.con)
        # derived tables already computed for these files: read them instead of recomputing
        for table, (macro, _order) in ALL_TABLES.items():
            paths = [str(run_dir / rel) for rel in files.get(table, [])]
            if paths:
                self.con.execute(f"CREATE OR REPLACE TEMP MACRO {macro}() AS TABLE "
                                 f"SELECT * FROM read_parquet({_path_list(paths)}, union_by_name=true)")

    def close(self) -> None:
        self.con.close()
        shutil.rmtree(self.spill, ignore_errors=True)


def derive_rank(run_dir: str, rank: int, files: dict[str, list[str]], threads: int = 1, late: bool = False) -> dict[str, Any]:
    """Per-rank derived tables from one rank's staged files (relative to run_dir). Runs in a worker process.
    late: the tables that need the run-level ones (files must then include the rank's comm_events)."""
    s = _Session(Path(run_dir), files, threads)
    out: dict[str, Any] = {"files": {}, "rows": {}}
    try:
        for table, (macro, order) in (LATE_RANK_TABLES if late else RANK_TABLES).items():
            rel = f"{table}/r{rank}-d.parquet"
            path = s.run_dir / rel
            out["rows"][table] = _copy(s.con, f"SELECT * FROM {macro}() ORDER BY {order}", path)
            out["files"][table] = [rel]
            # later tables of this rank read this one instead of recomputing it
            s.con.execute(f"CREATE OR REPLACE TEMP MACRO {macro}() AS TABLE SELECT * FROM read_parquet('{_q(str(path))}')")
    finally:
        s.close()
    return out


def derive_run(run_dir: str, ranks: list[int], files: dict[str, list[str]], threads: int = 1) -> dict[str, Any]:
    """Run-level derived tables (collectives matched across ranks) from every staged file of the run, stored
    one file per rank like every other table (a rank without rows still gets an empty file, so the table's
    columns are known)."""
    s = _Session(Path(run_dir), files, threads)
    out: dict[str, Any] = {"files": {}, "rows": {}, "by_rank": {}}
    try:
        for table, (macro, order) in RUN_TABLES.items():
            s.con.execute(f"CREATE TEMP TABLE _d AS SELECT * FROM {macro}()")
            out["files"][table], out["rows"][table] = [], 0
            for rank in ranks:
                rel = f"{table}/r{rank}-d.parquet"
                out["rows"][table] += _copy(s.con, f"SELECT * FROM _d WHERE rank = {int(rank)} ORDER BY {order}", s.run_dir / rel)
                out["files"][table].append(rel)
                out["by_rank"].setdefault(rank, {})[table] = [rel]
            s.con.execute("DROP TABLE _d")
    finally:
        s.close()
    return out


def stored_for(info: dict[str, Any]) -> bool:
    """Whether a run's stored derived tables were computed by the helper SQL this traceql loads.
    TRACEQL_NO_DERIVED=1 ignores them (queries then compute everything from the raw tables)."""
    if os.environ.get("TRACEQL_NO_DERIVED"):
        return False
    d = info.get("derived")
    return isinstance(d, dict) and d.get("version") == version() and all(
        info.get("files", {}).get(t) for t in DERIVED_TABLES
    )


def use_stored_sql() -> list[str]:
    """Statements that point the helper macros at the stored derived tables (run after the helpers load)."""
    return [f"CREATE OR REPLACE TEMP MACRO {macro}() AS TABLE SELECT * FROM {table}" for table, (macro, _o) in ALL_TABLES.items()]
