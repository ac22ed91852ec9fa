"""Ingest through an executor (traceql.executors: the local pool, Ray) and/or into an object store.

Map, reduce, map, commit:
1. map: one task per rank parses the rank's dump on the node that holds it (traceql.ingest's parse_unit)
   into Parquet: straight into the store's staging dir for a local store (on a cluster, a shared file
   system), or into a node-local temp dir uploaded to the run's unlisted generation prefix for an object
   store. Only Parquet leaves the node.
2. reduce, on the driver: collectives matched across ranks (traceql.derive.derive_run), from the store's
   Parquet; DuckDB reads only the columns the matching uses (projection pushdown, also over fsspec).
3. map: one task per rank builds that rank's derived tables (traceql.derive.derive_rank) from its Parquet.
4. commit, only when every rank is in: Store.commit (local: rename + manifest under the lock) or
   ObjectStore.publish (conditional put of the run record). Any failure before it discards what was
   written: no partial run is ever listed.

The tables are the ones the default ingest plus its `derive.prepare` build, file for file (same names, same
rows), so an analysis cannot tell which executor or store wrote a run.

Memory requests (Ray schedules by them): a rank's parse streams, its peak RSS flat in the rank's size
(measured: benchmarks/bench_ray.py), so PARSE_MEMORY is a constant; a rank's derive is bounded by DuckDB's
memory_limit (derive.MEMORY_FLOOR) plus the process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import derive, derived_tables, progress, schema
from .errors import TraceQLError
from .executors import Executor
from .parsers import Unit
from .store import Store, rank_of_file
from .store_fs import ObjectStore, download_files, upload_files

# peak RSS of one rank's parse worker (measured by benchmarks/bench_ray.py: flat in the rank's size) with
# headroom; and of one rank's derive task: DuckDB's memory limit plus the worker process
PARSE_MEMORY = 768 << 20
DERIVE_MEMORY = derive.MEMORY_FLOOR + (256 << 20)


# ---- tasks (module-level: workers import them by name) --------------------------------------------------
def parse_rank(
    unit: Unit,
    target: dict[str, Any],
    run_id: str,
    rank: int,
    tag: str,
    keep: str = "all",
    dump_url: str | None = None,
    slot: int = -1,
    size: int = 0,
) -> dict[str, Any]:
    """Parse one unit into the run's files; returns parse_unit's result (rows, files relative to the run).
    keep: "all" tables, only the "light" ones (traceql.tiers.LIGHT), or only the "detail" ones (the rest).
    dump_url: the unit is on object storage under this dump URL (traceql.dump_fs): its files are copied to
    a temp dir on this node first, parsed there, and deleted. slot/size: where the parse publishes its bytes
    read (the executor's progress board, traceql.progress)."""
    if dump_url is not None:
        from . import dump_fs
        from ._owned import TempDir
        from .errors import BadTraceError

        with TempDir("dump") as tmp:
            local = dump_fs.fetch_unit(unit, dump_url, Path(tmp))
            try:
                return parse_rank(local, target, run_id, rank, tag, keep, None, slot, size)
            except BadTraceError as e:
                scope = dump_fs.scope_of(unit.path, dump_url)
                raise dump_fs.relocate(
                    e, str(Path(tmp) / scope.rstrip("/").rsplit("/", 1)[-1]), scope
                ) from None
    from dataclasses import replace

    from .rank_parse import parse_unit

    if (
        keep == "light"
    ):  # parsers that know the option skip the detail files (torch_npu text); _drop does the rest
        unit = replace(unit, options=(*unit.options, ("tables", "light")))
    if target["kind"] == "local":
        r = parse_unit(unit, target["dir"], run_id, rank, tag, slot, size)
        for rel in _drop(r, keep):
            os.unlink(Path(target["dir"]) / rel)
    else:
        from ._owned import TempDir

        with TempDir("rank") as tmp:
            r = parse_unit(unit, tmp, run_id, rank, tag, slot, size)
            _drop(r, keep)
            rels = [f for fl in r["files"].values() for f in fl]
            upload_files(target["root"], Path(tmp), target["gen"], rels)
    r["worker_peak_rss"] = _peak_rss()  # the memory requests' evidence (benchmarks/bench_ray.py)
    return r


def _drop(r: dict[str, Any], keep: str) -> list[str]:
    """Remove from a parse result the tables `keep` excludes; returns their files (relative) to delete."""
    from .tiers import LIGHT

    if keep == "all":
        return []
    gone = [t for t in r["files"] if (t in LIGHT) != (keep == "light")]
    rels = [rel for t in gone for rel in r["files"].pop(t)]
    for t in gone:
        r["rows"].pop(t, None)
    return rels


def _peak_rss() -> int:
    """This worker process's peak RSS so far, bytes (Linux reports ru_maxrss in KiB)."""
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def derive_rank_task(target: dict[str, Any], rank: int, files: dict[str, list[str]]) -> dict[str, Any]:
    """One rank's derived tables (derive.derive_rank) from its files (relative to the run)."""
    if target["kind"] == "local":
        absolute = {t: [f"{target['dir']}/{rel}" for rel in rels] for t, rels in files.items()}
        return derive.derive_rank(target["dir"], rank, absolute, threads=1, mem_limit=_mem_limit())
    from ._owned import TempDir

    # the rank's Parquet comes to this node once (a few tables of one rank), then DuckDB reads it locally: the
    # derive macros scan their inputs several times, each scan over fsspec a round of HEAD/GET requests
    with TempDir("derive") as tmp, TempDir("inputs") as inputs:
        rels = [rel for fl in files.values() for rel in fl]
        download_files(target["root"], target["gen"], rels, Path(inputs))
        local = {t: [str(Path(inputs) / rel) for rel in fl] for t, fl in files.items()}
        out = derive.derive_rank(tmp, rank, local, threads=1, mem_limit=_mem_limit())
        upload_files(
            target["root"], Path(tmp), target["gen"], [f for fl in out["files"].values() for f in fl]
        )
    return out


def _mem_limit() -> str:
    return f"{derive.MEMORY_FLOOR >> 20}MB"


def _run_base(target: dict[str, Any]) -> str:
    if target["kind"] == "local":
        return str(target["dir"])
    return f"{str(target['root']).rstrip('/')}/runs/{target['gen']}"


# ---- the driver ------------------------------------------------------------------------------------------
def run(
    st: Store,
    path: Path,
    run_id: str,
    assigned: list[tuple[Unit, int]],
    executor: Executor,
    replace: bool = False,
    on_unit_done: Callable[[Unit, dict[str, Any]], None] | None = None,
    on_bytes: Callable[[int, int], None] | None = None,
    derived: bool = True,
    ranks: str | None = None,
    dump: Any = None,
) -> dict[str, Any]:
    """Ingest `assigned` (units with their ranks) into run `run_id` of `st` through `executor`. ranks:
    "light" / "light+R,..." for the tiered ingest (traceql.tiers), None for every rank in full. dump: the
    traceql.dump_fs.RemoteDump the units are on (their paths are URLs), None for a dump on a file system."""
    from . import tiers

    tiered, extra = tiers.parse_spec(ranks)
    from .rank_parse import run_info

    remote = isinstance(st, ObjectStore)
    if isinstance(st, ObjectStore):
        gen = st.new_generation(run_id)
        target: dict[str, Any] = {"kind": "object", "root": str(st.root), "gen": gen}
        staging = None
    else:
        st.root.mkdir(parents=True, exist_ok=True)
        st.tidy()
        staging = st.new_staging()
        # absolute: a worker's cwd is not the driver's (on a cluster the path must be on a shared file system)
        target = {"kind": "local", "dir": str(Path(staging).resolve())}
    try:
        sizes = [
            dump.input_bytes(u.path) if dump is not None else progress.input_bytes(u.path)
            for u, _r in assigned
        ]
        dump_url = dump.url if dump is not None else None
        keep = "light" if tiered else "all"
        jobs = [
            (u, target, run_id, rank, f"{i}", keep, dump_url, i, sizes[i])
            for i, (u, rank) in enumerate(assigned)
        ]
        results: list[dict[str, Any]] = []
        # bytes read inside each rank, from every worker (the executor's board: shared memory, or a Ray actor)
        with progress.polling(executor.progress_board(len(jobs)), sizes, on_bytes) as bar:
            for i, r in executor.map(parse_rank, jobs, memory=[PARSE_MEMORY] * len(jobs)):
                results.append(r)
                bar.finished(i)
                if on_unit_done:
                    on_unit_done(assigned[i][0], r)
        executor.progress_board(0)  # the passes after the parse publish nothing
        tier: dict[str, Any] | None = None
        if tiered:
            tier = _detail_pass(results, assigned, target, run_id, extra, executor, dump_url)
        info = run_info(path, results)
        if dump is not None:
            info["source"] = dump.url  # run_info's is the path resolved on this machine
        if tier is not None:
            info["tier"] = dict(tier, mode="light", light_tables=sorted(tiers.LIGHT))
        if derived and info["ranks_count"] >= 1:
            _derive(info, target, executor)
        if remote:
            assert isinstance(st, ObjectStore)
            st.publish(run_id, target["gen"], info, replace=replace)
        else:
            assert staging is not None
            st.commit(staging, run_id, info, replace=replace)
    except BaseException:
        if remote:
            assert isinstance(st, ObjectStore)
            st.remove_generation(target["gen"])
        elif staging is not None:
            st.discard(staging)
        raise
    info["run_id"] = run_id
    return info


def _detail_pass(
    results: list[dict[str, Any]],
    assigned: list[tuple[Unit, int]],
    target: dict[str, Any],
    run_id: str,
    extra: list[int],
    executor: Executor,
    dump_url: str | None = None,
) -> dict[str, Any]:
    """Pick the detail ranks from the light tables just written, parse them again keeping the rest of their
    tables, and add those results (in place). Returns {"ranks", "why"}."""
    import duckdb

    from . import store_fs, tiers

    base = _run_base(target)
    files = {
        t: [f"{base}/{rel}" for r in results for rel in r["files"].get(t, [])] for t in ("steps", "comm_ops")
    }
    con = duckdb.connect(":memory:")
    store_fs.register_all(con)
    try:
        picked = tiers.pick(con, files["steps"], files["comm_ops"], extra)
    finally:
        con.close()
    known = {rank for _u, rank in assigned}
    unknown = sorted(set(extra) - known)
    if unknown:
        raise TraceQLError(
            f"--ranks: rank {unknown[0]} is not in the dump (ranks {min(known)}..{max(known)})"
        )
    jobs = [
        (u, target, run_id, rank, f"{i}d", "detail", dump_url)
        for i, (u, rank) in enumerate(assigned)
        if rank in picked["ranks"]
    ]
    results.extend(r for _i, r in executor.map(parse_rank, jobs, memory=[PARSE_MEMORY] * len(jobs)))
    return picked


def _derive(info: dict[str, Any], target: dict[str, Any], executor: Executor) -> None:
    """Reduce (collectives across ranks, here) then map (each rank's derived tables, on the executor); adds
    the derived files and their version to `info` (the shape derive.prepare gives a run)."""
    from ._owned import TempDir

    base = _run_base(target)
    by_rank: dict[int, dict[str, list[str]]] = {}
    every: dict[str, list[str]] = {}
    for table in schema.TABLE_NAMES:
        for rel in info["files"].get(table, []):
            rank = rank_of_file(rel)
            if rank is not None and rank >= 0:  # rank -1 holds cluster-level rows (as derive._build)
                by_rank.setdefault(rank, {}).setdefault(table, []).append(rel)
                every.setdefault(table, []).append(f"{base}/{rel}")
    if not by_rank:
        return
    with TempDir("reduce") as tmp:
        out_dir = target["dir"] if target["kind"] == "local" else tmp
        run_level = derive.derive_run(
            out_dir, sorted(by_rank), every, threads=os.cpu_count() or 1, mem_limit=derive.memory_limit(1)
        )
        if target["kind"] != "local":
            upload_files(
                target["root"],
                Path(tmp),
                target["gen"],
                [f for fl in run_level["files"].values() for f in fl],
            )
    for rank, files in run_level["by_rank"].items():
        for t, fl in files.items():
            by_rank[rank].setdefault(t, []).extend(fl)
    jobs = [(target, rank, files) for rank, files in sorted(by_rank.items())]
    done = [run_level] + [
        d for _i, d in executor.map(derive_rank_task, jobs, memory=[DERIVE_MEMORY] * len(jobs))
    ]
    files_out, rows = derive.merge_results(done)
    for t, fl in files_out.items():
        info["files"][t] = fl
    info["derived"] = {"fingerprints": derived_tables.fingerprints(), "rows": rows}
