"""Ingest orchestration: detect -> parse units (in parallel processes) -> commit the run atomically."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import _owned, progress
from .errors import BadTraceError
from .executors.local import LocalPool
from .parsers import Unit, detect
from .rank_parse import parse_unit, run_info
from .store import Store, check_run_name, run_name_from_path
from .stores import open_store


def _assign_ranks(units: list[Unit]) -> list[tuple[Unit, int]]:
    out: list[tuple[Unit, int]] = []
    used = {u.rank for u in units if u.rank is not None}
    nxt = 0
    for u in units:
        if u.rank is not None:
            out.append((u, u.rank))
            continue
        while nxt in used:
            nxt += 1
        out.append((u, nxt))
        used.add(nxt)
    return out


def ingest(
    path: str | Path,
    store: str | Path | Store | None = None,
    name: str | None = None,
    replace: bool = False,
    workers: int | None = None,
    on_unit_done: Callable[[Unit, dict[str, Any]], None] | None = None,
    on_units: Callable[[list[Unit]], None] | None = None,
    on_bytes: Callable[[int, int], None] | None = None,
    follow_links: bool = False,
    executor: Any = None,
    ranks: str | None = None,
    on_detect: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Parse the dump at `path` into a new run of the store, atomically. on_bytes(done, total) is called about
    5 times a second with the input bytes read so far (traceql.progress), for a progress bar. follow_links:
    read symbolic links in the dump that lead outside it (refused by default: a dump from someone else can
    carry a link to your own files; a cluster folder assembled from links to rank dumps needs it).
    executor: a traceql.executors Executor (Ray...): the ingest runs as traceql.distributed's map/reduce and
    stores the derived tables with the run; also the path for an object store (s3://), with the local pool.
    ranks: "light" / "light+R1,R2" keeps full detail only for the ranks traceql.tiers picks (and R1, R2).
    on_detect(done, total): the folders of a cluster dump looked at so far, while the formats are detected.
    With an object store (s3://) or a dump URL and no executor given, the pool's workers are spawned, not
    forked (see executors.local.LocalPool): a script calling ingest() then needs the usual
    `if __name__ == "__main__":` guard, as on macOS and Windows."""
    # --- hook: a dump on object storage (traceql.dump_fs): detected on a sniff mirror, parsed on the workers
    from .dump_fs import is_url

    if is_url(path):
        return _ingest_remote(
            str(path), store, name, replace, workers, on_unit_done, on_units, on_bytes, executor, ranks
        )
    # --- end hook ---------------------------------------------------------------------------------------
    p = Path(path)
    if not p.exists():
        raise BadTraceError(p, "no such file or directory")
    if not os.access(p, os.R_OK):
        raise BadTraceError(p, "not readable (permission denied)")
    if not follow_links:
        _refuse_links_outside(p)
    st = open_store(store)
    run_id = check_run_name(name) if name else run_name_from_path(p.resolve())
    st.check_can_add(run_id, replace)  # fail before parsing; commit() re-checks under the lock
    units = detect(p, on_progress=on_detect)
    if on_units:
        on_units(units)
    assigned = _assign_ranks(units)
    # --- hook: executors and object stores (traceql.distributed) ------------------------------------------
    from .store_fs import ObjectStore

    if executor is not None or isinstance(st, ObjectStore) or ranks not in (None, "all"):
        from . import distributed

        own = executor is None
        # the pool's workers talk to S3 through fsspec: spawned, not forked (see LocalPool)
        spawn = "spawn" if isinstance(st, ObjectStore) else None
        ex = LocalPool(workers, start_method=spawn) if own else executor
        try:
            return distributed.run(st, p, run_id, assigned, ex, replace, on_unit_done, on_bytes, ranks=ranks)
        finally:
            if own:
                ex.close()
    # --- end hook ---------------------------------------------------------------------------------------
    try:
        st.root.mkdir(parents=True, exist_ok=True)
        st.tidy()  # the start-up check: reap what killed ingests and commits left (under the writers' lock)
        _owned.reap_temp()  # and their temp dirs in the system temp folder
        staging = st.new_staging()
    except OSError as e:
        from .fs_errors import store_error

        raise (store_error(e, st.root, "creating the store") or e) from e
    results: list[dict[str, Any]] = []
    try:
        sizes = [progress.input_bytes(u.path) for u, _rank in assigned]
        jobs = [(u, str(staging), run_id, rank, f"{i}", i, sizes[i]) for i, (u, rank) in enumerate(assigned)]
        pool = LocalPool(workers or os.cpu_count() or 1)  # one job or one worker: runs here, in order
        try:
            with progress.polling(pool.progress_board(len(jobs)), sizes, on_bytes):
                for i, r in pool.map(parse_unit, jobs):
                    results.append(r)
                    if on_unit_done:
                        on_unit_done(jobs[i][0], r)
        finally:
            pool.close()  # after an error or Ctrl-C map() has already stopped the workers
        info = run_info(p, results)
        st.commit(staging, run_id, info, replace=replace)
    except BaseException:
        st.discard(staging)
        raise
    info["run_id"] = run_id
    return info


def _ingest_remote(
    url: str,
    store: str | Path | Store | None,
    name: str | None,
    replace: bool,
    workers: int | None,
    on_unit_done: Callable[[Unit, dict[str, Any]], None] | None,
    on_units: Callable[[list[Unit]], None] | None,
    on_bytes: Callable[[int, int], None] | None,
    executor: Any,
    ranks: str | None,
) -> dict[str, Any]:
    """ingest() for a dump at a URL: always traceql.distributed's path (each rank task fetches its files)."""
    from . import distributed
    from .dump_fs import detect_remote

    st = open_store(store)
    run_id = check_run_name(name) if name else run_name_from_path(Path(url.rstrip("/").rsplit("/", 1)[-1]))
    st.check_can_add(run_id, replace)
    dump, units = detect_remote(url)
    if on_units:
        on_units(units)
    assigned = _assign_ranks(units)
    own = executor is None
    ex = LocalPool(workers, start_method="spawn") if own else executor  # fsspec in the workers: spawned
    try:
        return distributed.run(
            st, Path(url), run_id, assigned, ex, replace, on_unit_done, on_bytes, ranks=ranks, dump=dump
        )
    finally:
        if own:
            ex.close()


def _refuse_links_outside(dump: Path) -> None:
    """Keep every read inside the dump: a symbolic link in it that leads outside (a planted link to a
    token-bearing JSON landed in run_meta) is refused before anything is read, naming the link."""
    if not dump.is_dir():
        return
    root = os.path.realpath(dump)
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            if not os.path.islink(path):
                continue
            target = os.path.realpath(path)
            if os.path.commonpath([root, target]) != root:
                raise BadTraceError(
                    path,
                    f"symbolic link to {target}, outside the dump; traceql reads only files "
                    "inside the dump unless told to (--follow-links)",
                )
