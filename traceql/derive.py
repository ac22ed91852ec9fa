"""Building the derived tables: queries/derived/*.sql computed once per run and stored next to its tables.

Most queries start from the same per-kernel HBM bytes (kernel_bytes), step windows (step_windows), matched
collectives (comm_events), device bandwidth timeline (bw_segments) and step timeline (timeline_base). Their
definitions are SQL files (traceql.derived_tables: grain, order, columns, fingerprint); a session sees each as
a view over its own SELECT until it is stored, which this module does:

    runs/<run>.<gen>/<table>/r<rank>-d<fingerprint>.parquet    one file per rank and table

When: only when asked, through `prepare` (`traceql ingest --prepare`, or an analysis command through its
session, traceql.analysis): a connection never writes. The build reads the run's Parquet (never the dump):
level=run tables first (collectives matched across ranks), then everything else per rank (those tables
partition by run and rank): one session at a time in this process, big ranks alone and small ones in groups,
each with every thread and a memory budget (BUILD_MEMORY). The manifest records each table's fingerprint; a
stale one is never read (sessions fall back to its SELECT) and the next prepare rebuilds it. A store that cannot be written (read-only copy) is
analysed from the SELECTs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import derived_tables
from ._duck import sql_path_list, sql_str

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    import duckdb

    from .store import Store

# canonical tables the derived SQL and the helper macros it calls read
# (comm_matrix and run_meta only so that every helper macro binds: no derived table reads them)
_INPUTS = ["kernels", "counters", "steps", "comm_ops", "comm_matrix", "run_meta"]
# DuckDB memory of the run-level session and of a rank session that ran out within BUILD_MEMORY: it spills to
# disk rather than grow past it. A share of the memory available when the build starts, split between the
# sessions, within [MEMORY_FLOOR, MEMORY_CAP]: a rank of ~1M kernels wants ~2.3 GB for its sorts and windows, and at a fixed
# 1 GB it spilled ~1.3 GB to disk (kernel_bytes 5.7 -> 2.3 s wall at 3 GB); the floor is what the window and
# ASOF operators that cannot spill need for such a rank.
MEMORY_FLOOR = 1 << 30
MEMORY_CAP = 3 << 30
MEMORY_SHARE = 0.5  # of MemAvailable
# The budget a rank-level build session starts with (TRACEQL_INGEST_MEMORY overrides it): the whole ingest
# stays under ~1 GB of resident memory. A session over it spills its sorts to disk; one that still runs out
# is built again with memory_limit(1) (_budgeted).
BUILD_MEMORY = "512MB"


def build_memory() -> str:
    from ._duck import ingest_memory

    return ingest_memory(BUILD_MEMORY)


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


def _connect(spill: Path, threads: int, mem_limit: str) -> duckdb.DuckDBPyConnection:
    import duckdb

    con = duckdb.connect(":memory:")
    from . import store_fs  # hook: object stores' filesystems (s3://) for input paths

    store_fs.register_all(con)
    con.execute(f"SET memory_limit='{mem_limit}'")
    con.execute(f"SET temp_directory={sql_str(str(spill))}")
    con.execute(f"SET threads={max(1, int(threads))}")
    con.execute("SET preserve_insertion_order=false")
    con.execute("SET GLOBAL asof_loop_join_threshold = 0")  # see engine.connect
    # each helper macro and view binds against the Parquet files: read each footer once per session
    con.execute("SET parquet_metadata_cache=true")
    return con


def _input_views(con: duckdb.DuckDBPyConnection, files: dict[str, list[str]]) -> None:
    from .views import table_select

    for table in _INPUTS:
        # one run's files, one ingest's schema (views.table_select)
        con.execute(
            f"CREATE OR REPLACE VIEW {table} AS {table_select(table, files.get(table, []), one_schema=True)}"
        )


def _stored_view(con: duckdb.DuckDBPyConnection, table: str, paths: list[str]) -> None:
    con.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT * FROM read_parquet({sql_path_list(paths)})")


def _copy(con: duckdb.DuckDBPyConnection, select: str, out: Path) -> int:
    from .rank_writer import ROW_GROUP

    out.parent.mkdir(parents=True, exist_ok=True)
    con.execute(
        f"COPY ({select}) TO {sql_str(str(out))} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP})"
    )
    row = con.execute(f"SELECT count(*) FROM read_parquet({sql_path_list([out])})").fetchone()
    return int(row[0]) if row else 0


class _Session:
    """A DuckDB connection over a rank's or run's files (absolute paths) with every derived table defined (a
    view over its stored file where `files` has one, else over its SELECT) and the helper macros loaded,
    writing into out_dir, with a private spill dir there."""

    def __init__(self, out_dir: Path, files: dict[str, list[str]], threads: int, mem_limit: str) -> None:
        self.out_dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self.spill = Path(tempfile.mkdtemp(prefix=".derive-", dir=out_dir))
        self.con = _connect(self.spill, threads, mem_limit)
        self.threads = max(1, int(threads))
        _input_views(self.con, files)
        stored = {t for t in derived_tables.names() if files.get(t)}
        for table in stored:  # computed already for these files (the run-level ones): read, not recomputed
            _stored_view(self.con, table, files[table])
        for stmt in derived_tables.statements(stored):
            self.con.execute(stmt)

    def retarget(self, files: dict[str, list[str]]) -> None:
        """Point the session at another rank's files: the input views and every derived table's view (over its
        stored file or its SELECT) again. The helper macros stay: they bind at each use, and defining them is
        most of what a session costs before any row is read (~0.2 CPU-s, ~10% of a 290 MB rank's build)."""
        _input_views(self.con, files)
        stored = {t for t in derived_tables.names() if files.get(t)}
        for table in stored:
            _stored_view(self.con, table, files[table])
        for stmt in derived_tables.view_statements(stored):
            self.con.execute(stmt)

    def write(self, table: derived_tables.DerivedTable, select: str, path: Path) -> int:
        """Store `select` at path (sorted by the table's order); later tables of the session read the file."""
        n = _copy(self.con, f"{select} ORDER BY {table.order}", path)
        if select == f"SELECT * FROM {table.name}":
            _stored_view(self.con, table.name, [str(path)])
        return n

    def close(self) -> None:
        self.con.close()
        shutil.rmtree(self.spill, ignore_errors=True)


def derive_rank(
    out_dir: str, rank: int, files: dict[str, list[str]], threads: int = 1, mem_limit: str = "1GB"
) -> dict[str, Any]:
    """The rank-level derived tables of one rank from its files (absolute paths, including its part of the
    run-level tables), written under out_dir. Runs in a worker process."""
    s = _Session(Path(out_dir), files, threads, mem_limit)
    try:
        return _write_rank(s, rank)
    finally:
        s.close()


def _write_rank(s: _Session, rank: int) -> dict[str, Any]:
    """Every rank-level derived table of `rank`, from the files session `s` points at."""
    out: dict[str, Any] = {"files": {}, "rows": {}}
    for table in derived_tables.tables():
        if table.level != "rank":
            continue
        rel = derived_tables.file_name(table.name, rank)
        out["rows"][table.name] = s.write(table, f"SELECT * FROM {table.name}", s.out_dir / rel)
        out["files"][table.name] = [rel]
    return out


class _OneSession:
    """derive_rank for big ranks one after another, in one session (retargeted per rank) instead of one each:
    `derive_rank` here has derive_rank's signature for _budgeted; a call with another memory limit (the
    retry after running out) gets a session of its own."""

    def __init__(self) -> None:
        self.s: _Session | None = None
        self.limit = ""

    def derive_rank(
        self, out_dir: str, rank: int, files: dict[str, list[str]], threads: int, mem_limit: str
    ) -> dict[str, Any]:
        if self.s is not None and (self.limit != mem_limit or self.s.out_dir != Path(out_dir)):
            return derive_rank(out_dir, rank, files, threads, mem_limit)
        if self.s is None:
            self.s, self.limit = _Session(Path(out_dir), files, threads, mem_limit), mem_limit
        else:
            self.s.retarget(files)
        return _write_rank(self.s, rank)

    def close(self) -> None:
        if self.s is not None:
            self.s.close()
            self.s = None


# ---- small ranks in groups ---------------------------------------------------------------------------------
# A session costs ~0.3 CPU-s before any row is read (defining the helper macros binds each against the views'
# Parquet) and each COPY ~60 ms: for a rank of a few thousand rows that was all of its build, so 256 small
# ranks spent minutes in fixed costs. Ranks whose inputs are small are built GROUP_RANKS at a time in one
# session (the derived SQL partitions by run and rank, so a group gives each rank's rows as its own session
# would; tests/test_many_ranks.py holds the two to the same files), each table computed once for the group and
# split into the same per-rank files with Arrow. A rank with GROUP_ROWS input rows or more is built alone.
# Rows, not bytes: a group's tables are held in memory (temp tables, then Arrow), and Parquet compresses the
# counter samples ~100x (8M rows of an 8-rank cluster in 5 MB), so 32 MB of input grouped the whole cluster
# into one session of 1.1 GB.
GROUP_ROWS = 200_000
GROUP_RANKS = 64
WRITE_THREADS = 4  # at most this many threads write one table's per-rank files (_write_by_rank)


def input_rows(by_rank: dict[int, dict[str, list[str]]]) -> dict[int, int]:
    """Each rank's input rows (from the Parquet footers; a file that cannot be read counts as none)."""
    import pyarrow.parquet as pq

    def rows(p: str) -> int:
        try:
            return int(pq.read_metadata(p).num_rows)
        except (OSError, ValueError):
            return 0

    return {r: sum(rows(p) for fl in f.values() for p in fl) for r, f in by_rank.items()}


def groups(
    by_rank: dict[int, dict[str, list[str]]], pool: int, size: dict[int, int] | None = None
) -> list[list[int]]:
    """Ranks in build groups: big ranks alone; small ones in groups of up to GROUP_RANKS ranks and GROUP_ROWS
    input rows, at least `pool` groups when there are that many ranks. size: input_rows of these ranks, when
    the caller has it."""
    size = size if size is not None else input_rows(by_rank)
    small = sorted(r for r in by_rank if size[r] < GROUP_ROWS)
    out = [[r] for r in sorted(by_rank) if size[r] >= GROUP_ROWS]
    if small:
        per = max(
            1, min(GROUP_RANKS, -(-len(small) // max(1, pool - len(out))) if pool > len(out) else GROUP_RANKS)
        )
        group: list[int] = []
        n = 0
        for r in small:
            if group and (len(group) >= per or n + size[r] > GROUP_ROWS):
                out.append(group)
                group, n = [], 0
            group.append(r)
            n += size[r]
        out.append(group)
    return out


def derive_ranks(
    out_dir: str, ranks: list[int], files: dict[str, list[str]], threads: int = 1, mem_limit: str = "1GB"
) -> dict[str, Any]:
    """derive_rank for a group of ranks in one session: `files` holds all of their files; each table is
    computed once into a temp table (later tables read it) and written as one file per rank."""
    if len(ranks) == 1:
        return derive_rank(out_dir, ranks[0], files, threads, mem_limit)
    s = _Session(Path(out_dir), files, threads, mem_limit)
    out: dict[str, Any] = {"files": {}, "rows": {}}
    try:
        for table in derived_tables.tables():
            if table.level != "rank":
                continue
            s.con.execute(f"CREATE TEMP TABLE _g_{table.name} AS SELECT * FROM {table.name}")
            s.con.execute(f"CREATE OR REPLACE TEMP VIEW {table.name} AS SELECT * FROM _g_{table.name}")
            rels = _write_by_rank(s, f"_g_{table.name}", table, ranks)
            out["files"][table.name] = [rel for rel, _n in rels]
            out["rows"][table.name] = sum(n for _rel, n in rels)
    finally:
        s.close()
    return out


def _write_by_rank(
    s: _Session, source: str, table: derived_tables.DerivedTable, ranks: list[int]
) -> list[tuple[str, int]]:
    """The rows of temp table `source` (sorted by rank, then the table's order) as one Parquet file per rank of
    `ranks`, named and typed as _copy writes them (zstd, ROW_GROUP rows; a rank without rows gets an empty
    file). HUGEINT (a window sum of BIGINT) goes to Parquet as DOUBLE in COPY, to Arrow as decimal(38): cast
    here so both builds write the same types."""
    import pyarrow.parquet as pq

    from .rank_writer import ROW_GROUP

    cols = ", ".join(
        f'CAST("{n}" AS DOUBLE) AS "{n}"' if t == "HUGEINT" else f'"{n}"'
        for n, t, *_ in s.con.execute(f"DESCRIBE {source}").fetchall()
    )
    t = s.con.sql(f"SELECT {cols} FROM {source} ORDER BY rank, {table.order}").to_arrow_table()
    # each rank's rows are one slice of the sorted table (a filter per rank cost ranks x rows)
    at: dict[int, tuple[int, int]] = {}
    offset = 0
    if t.num_rows:
        counts = t.group_by("rank").aggregate([("rank", "count")]).to_pydict()
        # in the ORDER BY's order: ascending, NULLs last (a NULL rank's rows went to no file before either)
        pairs = zip(counts["rank"], counts["rank_count"], strict=True)
        for r, n in sorted(pairs, key=lambda x: (x[0] is None, x[0] or 0)):
            if r is not None:
                at[r] = (offset, n)
            offset += n

    def write(rank: int) -> tuple[str, int]:
        first, n = at.get(rank, (0, 0))
        part = t.slice(first, n)
        rel = derived_tables.rank_file_name(table, rank)
        path = s.out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(part, path, compression="zstd", row_group_size=ROW_GROUP)
        return rel, part.num_rows

    if len(ranks) < 2 or s.threads < 2:
        return [write(r) for r in ranks]
    from concurrent.futures import ThreadPoolExecutor

    # the Parquet encoding releases the GIL: a group's many small files are written side by side
    with ThreadPoolExecutor(min(s.threads, WRITE_THREADS)) as pool:
        return list(pool.map(write, ranks))


def _merged(parts: list[dict[str, list[str]]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in parts:
        for t, fl in p.items():
            out.setdefault(t, []).extend(fl)
    return out


def derive_run(
    out_dir: str, ranks: list[int], files: dict[str, list[str]], threads: int = 1, mem_limit: str = "1GB"
) -> dict[str, Any]:
    """The run-level derived tables (collectives matched across ranks) from every file of the run, stored one
    file per rank like every other table (a rank without rows still gets an empty file, so the columns are
    known)."""
    s = _Session(Path(out_dir), files, threads, mem_limit)
    out: dict[str, Any] = {"files": {}, "rows": {}, "by_rank": {}}
    try:
        for table in derived_tables.tables():
            if table.level != "run":
                continue
            s.con.execute(f"CREATE TEMP TABLE _d AS SELECT * FROM {table.name}")
            out["files"][table.name], out["rows"][table.name] = [], 0
            # one sorted read split per rank (a COPY ... WHERE rank = r per rank costs ranks x rows)
            for rank, (rel, n) in zip(ranks, _write_by_rank(s, "_d", table, ranks), strict=True):
                out["rows"][table.name] += n
                out["files"][table.name].append(rel)
                out["by_rank"].setdefault(rank, {})[table.name] = [rel]
            s.con.execute("DROP TABLE _d")
    finally:
        s.close()
    return out


def _build(run_dir: Path, out_dir: Path, files: dict[str, list[str]], workers: int) -> dict[str, Any]:
    """Every derived table of one run: the run-level ones (all ranks at once), then the rest per rank (big ranks
    alone, small ones in groups, one session at a time). files: the run's canonical files relative to run_dir (named
    r<rank>-<tag>.parquet by the store). Returns {"version", "rows", "files"} with files relative to out_dir."""
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
        return {"fingerprints": derived_tables.fingerprints(), "rows": {}, "files": {}}
    run_level = derive_run(str(out_dir), sorted(by_rank), every, threads=workers, mem_limit=memory_limit(1))
    done.append(run_level)
    for rank, rank_files in run_level["by_rank"].items():
        for t, fl in rank_files.items():
            by_rank[rank].setdefault(t, []).extend(str(out_dir / rel) for rel in fl)
    size = input_rows(by_rank)
    big = {r: f for r, f in by_rank.items() if size[r] >= GROUP_ROWS}
    small = {r: f for r, f in by_rank.items() if size[r] < GROUP_ROWS}
    # One session at a time, here, with every thread and the build budget (BUILD_MEMORY): the peak is one
    # session's whatever the rank count. Big ranks (GROUP_ROWS input rows or more) alone; small ones in groups
    # (a session's fixed cost is too much for a rank of a few thousand rows). A process per big rank (a pool of
    # `workers`) summed their sessions and forked images: an 8 x 290 MB cluster peaked at 2.1 GB over the
    # processes (benchmarks/README.md has the figures).
    one = _OneSession()
    try:
        for r in sorted(big):
            done.append(_budgeted(one.derive_rank, str(out_dir), r, big[r], workers))
    finally:
        one.close()
    for g in groups(small, 1, size):
        done.append(_budgeted(derive_ranks, str(out_dir), g, _merged([small[r] for r in g]), workers))
    out_files, rows = merge_results(done)
    return {"fingerprints": derived_tables.fingerprints(), "rows": rows, "files": out_files}


def merge_results(done: list[dict[str, Any]]) -> tuple[dict[str, list[str]], dict[str, int]]:
    """The files (sorted, per table) and row counts of several builds' results ({"files", "rows"})."""
    out_files: dict[str, list[str]] = {}
    rows: dict[str, int] = {}
    for d in done:
        for t, fl in d["files"].items():
            out_files.setdefault(t, []).extend(fl)
        for t, n in d["rows"].items():
            rows[t] = rows.get(t, 0) + n
    for fl in out_files.values():
        fl.sort()
    return out_files, rows


def _budgeted(
    build: Callable[..., dict[str, Any]], out_dir: str, ranks: Any, files: Any, threads: int
) -> dict[str, Any]:
    """build(out_dir, ranks, files, threads, limit) within the build budget (BUILD_MEMORY), again with the
    larger share of available memory (memory_limit) only if DuckDB ran out within the budget: the window and
    ASOF operators cannot spill, and a rank of millions of kernels needs more than the budget for them."""
    import duckdb

    try:
        return build(out_dir, ranks, files, threads, build_memory())
    except duckdb.OutOfMemoryException:
        return build(out_dir, ranks, files, threads, memory_limit(1))


def prepare(
    store: Store,
    run_ids: list[str],
    workers: int | None = None,
    on_build: Callable[[str], None] | None = None,
) -> list[str]:
    """Build and store the derived tables of each run that lacks current ones (after ingest, or after an
    upgrade changed their SQL): the one function every caller that wants them stored goes through. Returns the runs that still lack them because the
    store is not writable or the build failed; queries on those compute everything from the raw tables.

    The build reads the run's Parquet (never the dump), writes under the store's .staging dir, then moves the
    files into the run and records them in the manifest under the store lock (Store.add_derived), so readers
    see either no derived tables or all of them. Two commands building at once both compute; the second commit
    finds the tables current and discards its copy."""
    import duckdb

    from .errors import StoreError

    left: list[str] = []
    for run_id in run_ids:
        info = store.run(run_id)
        if derived_tables.stored_for(info) or os.environ.get("TRACEQL_NO_DERIVED"):
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
        except (duckdb.Error, OSError, StoreError, MemoryError):
            # the analysis still runs, from the raw tables (slower); the next one tries the build again
            left.append(run_id)
        finally:
            store.discard(staging)
    return left
