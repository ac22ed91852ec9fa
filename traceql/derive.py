"""Derived tables: the analysis layer every metric query starts from, computed once per run (first analysis).

Most queries in queries/ begin from the same per-kernel HBM bytes (`_kernel_bytes()`), step windows
(`_step_windows()`), device bandwidth timeline (`_bw_segments()`), matched collectives (`_comm_events()`) and the
step timeline they combine into (`_timeline_base()`).
Those helpers read the raw tables and apportion millions of HBM counter samples to kernels; re-deriving them
in each of the ~15 queries the findings run cost ~90% of the analysis time on big stores. None of them take
parameters, so they are computed once per run and stored next to the canonical tables:

    runs/<run>/kernel_bytes/r<rank>-d<v>.parquet    one row per kernel: _kernel_bytes()
    runs/<run>/step_windows/r<rank>-d<v>.parquet    _step_windows()
    runs/<run>/bw_segments/r<rank>-d<v>.parquet     _bw_segments()
    runs/<run>/comm_events/r<rank>-d<v>.parquet     _comm_events() (matched across all ranks, then split by rank)
    runs/<run>/timeline_base/r<rank>-d<v>.parquet   _timeline_base() (needs the rank's comm_events)

Files live in the run's directory (`Store.run_path`: runs/<run>.<gen>/ in a format-2 store).

When: on the first analysis of a run (findings, report, chart, query: `ensure`), or at ingest when asked
(`traceql ingest --prepare`). By default ingest stays a pure JSON/CSV/SQLite -> Parquet pass (its throughput is
what a user waits for on a multi-GB dump); the build reads the compact Parquet, costs about a third of the
ingest, and every later analysis reuses it.

The SQL in queries/_helpers.sql stays the single definition: the build runs those macros over the run's
Parquet: the collectives matched across ranks first, then everything else per rank in a process pool (those
macros all partition by run and rank), with a memory limit. The manifest records `derived.version` (a hash of
the helper macros the stored tables are computed from, `version()`); queries use the stored tables only when
it matches the helpers they load (`use_stored_sql`), else the next analysis rebuilds them, so editing a helper
can never leave a stale answer. A store that cannot be written (read-only copy) is analysed from the raw
tables.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    import duckdb

    from .store import Store

# Build order: the run-level tables first (collectives matched across ranks: they read only the canonical
# tables), then everything per rank in one worker task (one session per rank; later tables read the stored
# earlier ones: bw_segments reads kernel_bytes, step_windows and the rank's comm_events, timeline_base reads
# bw_segments). table -> (helper macro, ORDER BY for time-sorted row groups).
RUN_TABLES: dict[str, tuple[str, str]] = {
    "comm_events": ("_comm_events", "ts_ns, ordinal"),
}
RANK_TABLES: dict[str, tuple[str, str]] = {
    "kernel_bytes": ("_kernel_bytes", "ts_ns, kid"),
    "step_windows": ("_step_windows", "win_start, step"),
    "bw_segments": ("_bw_segments", "seg_start"),
    "timeline_base": ("_timeline_base", "t0"),
}
ALL_TABLES = {**RUN_TABLES, **RANK_TABLES}
DERIVED_TABLES = list(ALL_TABLES)
# canonical tables the helper macros read
# (comm_matrix and run_meta only so that the helper macros that read them bind: no derived table reads them)
_INPUTS = ["kernels", "counters", "steps", "comm_ops", "comm_matrix", "run_meta"]
# DuckDB memory per build session (one per rank, several at once in the pool): it spills to disk rather than
# grow past it. A share of the memory available when the build starts, split between the sessions, within
# [MEMORY_FLOOR, MEMORY_CAP]: a rank of ~1M kernels wants ~2.3 GB for its sorts and windows, and at a fixed
# 1 GB it spilled ~1.3 GB to disk (kernel_bytes 5.7 -> 2.3 s wall at 3 GB); the floor is what the window and
# ASOF operators that cannot spill need for such a rank.
MEMORY_FLOOR = 1 << 30
MEMORY_CAP = 3 << 30
MEMORY_SHARE = 0.5  # of MemAvailable


def memory_limit(sessions: int) -> str:
    """DuckDB memory_limit for each of `sessions` build sessions running at once."""
    avail = _available_bytes()
    per = int(avail * MEMORY_SHARE / max(1, sessions)) if avail else MEMORY_FLOOR
    return f"{max(MEMORY_FLOOR, min(MEMORY_CAP, per)) >> 20}MB"


def _available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux); None elsewhere (the floor applies)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def version() -> str:
    """Identifies the helper SQL the stored tables were computed with: the macros that compute them and every
    macro those call (so editing a parameterised helper the queries apply on top, e.g. _timeline, leaves the
    stored tables valid, while any change that could alter a stored row forces a rebuild)."""
    from . import queries

    return _version_of(tuple(queries._helper_statements()))


@lru_cache(maxsize=4)
def _version_of(statements: tuple[tuple[str, str], ...]) -> str:
    body = dict(statements)
    needed: set[str] = set()
    todo = sorted(stored_macros())
    while todo:
        name = todo.pop()
        if name in needed or name not in body:
            continue
        needed.add(name)
        todo.extend(
            other for other in body if other not in needed and re.search(rf"\b{other}\s*\(", body[name])
        )
    h = hashlib.sha256()
    for name, text in statements:  # file order: stable
        if name in needed or not name:  # a statement that is not a macro: hashed, to be safe
            h.update(text.encode())
    return h.hexdigest()[:16]


def _connect(spill: Path, threads: int, mem_limit: str) -> duckdb.DuckDBPyConnection:
    import duckdb

    con = duckdb.connect(":memory:")
    from . import store_fs  # hook: object stores' filesystems (s3://) for input paths

    store_fs.register_all(con)
    con.execute(f"SET memory_limit='{mem_limit}'")
    con.execute(f"SET temp_directory='{_q(str(spill))}'")
    con.execute(f"SET threads={max(1, int(threads))}")
    con.execute("SET preserve_insertion_order=false")
    con.execute("SET GLOBAL asof_loop_join_threshold = 0")  # see engine.connect
    return con


def _path_list(paths: list[str]) -> str:
    from ._duck import glob_literal

    return "[" + ", ".join(f"'{_q(glob_literal(p))}'" for p in paths) + "]"


def _q(s: str) -> str:
    return s.replace("'", "''")


def _input_views(con: duckdb.DuckDBPyConnection, files: dict[str, list[str]]) -> None:
    from .engine import _table_select

    for table in _INPUTS:
        con.execute(f"CREATE OR REPLACE VIEW {table} AS {_table_select(table, files.get(table, []))}")


def _copy(con: duckdb.DuckDBPyConnection, select: str, out: Path) -> int:
    from .store import ROW_GROUP

    out.parent.mkdir(parents=True, exist_ok=True)
    con.execute(
        f"COPY ({select}) TO '{_q(str(out))}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP})"
    )
    row = con.execute(f"SELECT count(*) FROM read_parquet({_path_list([str(out)])})").fetchone()
    return int(row[0]) if row else 0


class _Session:
    """A DuckDB connection over a rank's or run's files (absolute paths) with the helper macros loaded, writing
    into out_dir, with a private spill dir there."""

    def __init__(self, out_dir: Path, files: dict[str, list[str]], threads: int, mem_limit: str) -> None:
        from . import queries

        self.out_dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self.spill = Path(tempfile.mkdtemp(prefix=".derive-", dir=out_dir))
        self.con = _connect(self.spill, threads, mem_limit)
        _input_views(self.con, files)
        queries._load_helpers(self.con)
        # derived tables already computed for these files: read them instead of recomputing
        for table, (macro, _order) in ALL_TABLES.items():
            paths = files.get(table, [])
            if paths:
                self.con.execute(
                    f"CREATE OR REPLACE TEMP MACRO {macro}() AS TABLE "
                    f"SELECT * FROM read_parquet({_path_list(paths)}, union_by_name=true)"
                )

    def close(self) -> None:
        self.con.close()
        shutil.rmtree(self.spill, ignore_errors=True)


def _name(table: str, rank: int) -> str:
    # the helper-SQL version in the name: a rebuild never overwrites files a reader may still have open
    return f"{table}/r{rank}-d{version()[:8]}.parquet"


def derive_rank(
    out_dir: str, rank: int, files: dict[str, list[str]], threads: int = 1, mem_limit: str = "1GB"
) -> dict[str, Any]:
    """Per-rank derived tables from one rank's files (absolute paths, including its run-level comm_events),
    written under out_dir. Runs in a worker process."""
    s = _Session(Path(out_dir), files, threads, mem_limit)
    out: dict[str, Any] = {"files": {}, "rows": {}}
    try:
        for table, (macro, order) in RANK_TABLES.items():
            rel = _name(table, rank)
            path = s.out_dir / rel
            out["rows"][table] = _copy(s.con, f"SELECT * FROM {macro}() ORDER BY {order}", path)
            out["files"][table] = [rel]
            # later tables of this rank read this one instead of recomputing it
            s.con.execute(
                f"CREATE OR REPLACE TEMP MACRO {macro}() AS TABLE SELECT * FROM read_parquet({_path_list([str(path)])})"
            )
    finally:
        s.close()
    return out


def derive_run(
    out_dir: str, ranks: list[int], files: dict[str, list[str]], threads: int = 1, mem_limit: str = "1GB"
) -> dict[str, Any]:
    """Run-level derived tables (collectives matched across ranks) from every file of the run, stored one file
    per rank like every other table (a rank without rows still gets an empty file, so the columns are known)."""
    s = _Session(Path(out_dir), files, threads, mem_limit)
    out: dict[str, Any] = {"files": {}, "rows": {}, "by_rank": {}}
    try:
        for table, (macro, order) in RUN_TABLES.items():
            s.con.execute(f"CREATE TEMP TABLE _d AS SELECT * FROM {macro}()")
            out["files"][table], out["rows"][table] = [], 0
            for rank in ranks:
                rel = _name(table, rank)
                out["rows"][table] += _copy(
                    s.con, f"SELECT * FROM _d WHERE rank = {int(rank)} ORDER BY {order}", s.out_dir / rel
                )
                out["files"][table].append(rel)
                out["by_rank"].setdefault(rank, {})[table] = [rel]
            s.con.execute("DROP TABLE _d")
    finally:
        s.close()
    return out


def _build(run_dir: Path, out_dir: Path, files: dict[str, list[str]], workers: int) -> dict[str, Any]:
    """Every derived table of one run: the run-level ones (all ranks at once), then the rest per rank in a
    process pool. files: the run's canonical files relative to run_dir (named r<rank>-<tag>.parquet by the
    store). Returns {"version", "rows", "files"} with files relative to out_dir."""
    from concurrent.futures import ProcessPoolExecutor

    from .ingest import _abort_pool, _map
    from .store import rank_of_file

    by_rank: dict[int, dict[str, list[str]]] = {}
    every: dict[str, list[str]] = {}
    for table in _INPUTS:
        for rel in files.get(table, []):
            rank = rank_of_file(rel)
            if rank is not None and rank >= 0:  # rank -1 holds cluster-level rows, no kernels
                by_rank.setdefault(rank, {}).setdefault(table, []).append(str(run_dir / rel))
                every.setdefault(table, []).append(str(run_dir / rel))
    done: list[dict[str, Any]] = []
    if not by_rank:
        return {"version": version(), "rows": {}, "files": {}}
    run_level = derive_run(str(out_dir), sorted(by_rank), every, threads=workers, mem_limit=memory_limit(1))
    done.append(run_level)
    for rank, rank_files in run_level["by_rank"].items():
        for t, fl in rank_files.items():
            by_rank[rank].setdefault(t, []).extend(str(out_dir / rel) for rel in fl)
    n_pool = max(1, min(len(by_rank), workers))
    threads = max(1, workers // n_pool)
    from . import _procs

    ex = (
        ProcessPoolExecutor(max_workers=n_pool, initializer=_procs.worker_init, initargs=(os.getpid(),))
        if n_pool > 1
        else None
    )
    try:
        mem = memory_limit(n_pool)
        jobs = [
            (str(out_dir), rank, rank_files, threads, mem) for rank, rank_files in sorted(by_rank.items())
        ]
        done.extend(d for _job, d in _map(ex, derive_rank, jobs))
    except BaseException:
        if ex is not None:
            _abort_pool(ex)
        raise
    if ex is not None:
        ex.shutdown(wait=True)
    out_files: dict[str, list[str]] = {}
    rows: dict[str, int] = {}
    for d in done:
        for t, fl in d["files"].items():
            out_files.setdefault(t, []).extend(fl)
        for t, n in d["rows"].items():
            rows[t] = rows.get(t, 0) + n
    for fl in out_files.values():
        fl.sort()
    return {"version": version(), "rows": rows, "files": out_files}


def ensure(
    store: Store,
    run_ids: list[str],
    workers: int | None = None,
    on_build: Callable[[str], None] | None = None,
) -> list[str]:
    """Build and store the derived tables of each run that lacks current ones (the first analysis of a run
    after ingest, or after an upgrade changed the helper SQL). Returns the runs that still lack them because the
    store is not writable or the build failed; queries on those compute everything from the raw tables.

    The build reads the run's Parquet (never the dump), writes under the store's .staging dir, then moves the
    files into the run and records them in the manifest under the store lock (Store.add_derived), so readers
    see either no derived tables or all of them. Two commands building at once both compute; the second commit
    finds the tables current and discards its copy."""
    from concurrent.futures.process import BrokenProcessPool

    import duckdb

    from .errors import StoreError

    left: list[str] = []
    for run_id in run_ids:
        info = store.run(run_id)
        if stored_for(info) or os.environ.get("TRACEQL_NO_DERIVED"):
            continue
        if not os.access(store.root, os.W_OK):
            left.append(run_id)
            continue
        if on_build:
            on_build(run_id)
        staging = store.new_staging()
        try:
            # the run's files are read under the readers' lock (a concurrent --replace keeps them meanwhile),
            # released before add_derived, which reaps superseded files only when no reader holds it
            with store.reading():
                info = store.run(run_id)
                built = _build(
                    store.run_path(run_id, info),
                    staging,
                    info.get("files", {}),
                    workers or os.cpu_count() or 1,
                )
            store.add_derived(run_id, staging, built, expect_ingested_at=info.get("ingested_at"))
        except (duckdb.Error, OSError, StoreError, BrokenProcessPool, MemoryError):
            # the analysis still runs, from the raw tables (slower); the next one tries the build again
            left.append(run_id)
        finally:
            store.discard(staging)
    return left


def stored_for(info: dict[str, Any]) -> bool:
    """Whether a run's stored derived tables were computed by the helper SQL this traceql loads.
    TRACEQL_NO_DERIVED=1 ignores them (queries then compute everything from the raw tables)."""
    if os.environ.get("TRACEQL_NO_DERIVED"):
        return False
    d = info.get("derived")
    return (
        isinstance(d, dict)
        and d.get("version") == version()
        and all(info.get("files", {}).get(t) for t in DERIVED_TABLES)
    )


def stored_macros() -> set[str]:
    """The helper macros whose results are stored (use_stored_sql replaces them)."""
    return {macro for macro, _order in ALL_TABLES.values()}


def use_stored_sql() -> list[str]:
    """Statements that point the helper macros at the stored derived tables (run after the helpers load)."""
    return [
        f"CREATE OR REPLACE TEMP MACRO {macro}() AS TABLE SELECT * FROM {table}"
        for table, (macro, _o) in ALL_TABLES.items()
    ]
