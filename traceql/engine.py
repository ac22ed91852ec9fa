"""DuckDB over the store: one VIEW per canonical table, per stored derived table, and `runs` from the manifest.

The views' SQL comes from traceql.views (the one place store paths are quoted into SQL). The engine reads
the store and never writes it; it knows nothing of the analysis layer above it.

A connection holds the store's readers' lock (shared) until it is closed or collected: a writer that replaces
or removes a run leaves the old files in place while any reader holds it (traceql.store `_reap`), so a query
never fails with "No files found" because of a concurrent `ingest --replace` or `rm`.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import derived_tables, schema, views
from .errors import StoreError

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

    from .store import Store


def _present_columns(files: list[str]) -> set[str]:
    import duckdb

    from ._duck import sql_path_list

    rows = (
        duckdb.connect(":memory:")
        .execute(f"DESCRIBE SELECT * FROM read_parquet({sql_path_list(files)}, union_by_name=true)")
        .fetchall()
    )
    return {r[0] for r in rows}


def _snapshot(store: Store) -> Store:
    """The store with its manifest read once (runs(), run(), table_files() all answer from that read)."""
    manifest = store.manifest()

    class _Snapshot(type(store)):  # type: ignore[misc]  # ObjectStore too (traceql.store_fs)
        def manifest(self) -> dict[str, Any]:
            return manifest

    snap: Store = object.__new__(_Snapshot)
    snap.__dict__.update(store.__dict__)  # the same root (and an object store's filesystem), not reopened
    return snap


def _damaged(st: Store, only: set[str] | None, e: Exception) -> StoreError:
    """The start-up check's report: which run lost which file (a reader never sees a file traceql deleted:
    only damage from outside the store does this), and how to recover the rest of the store."""
    missing = st.missing_files(only)
    if missing:
        run_id, path = missing[0]
        return StoreError(
            f"store {st.root} is damaged: run {run_id!r} lists {path}, which is missing "
            f"({len(missing)} file(s) in all); `traceql rm {run_id}` and re-ingest it (other runs are intact)"
        )
    return StoreError(f"store {st.root} is damaged: {str(e).splitlines()[0]}")


def connect(
    store: Any = None,
    read_only: bool = True,
    threads: int | None = None,
    runs: Iterable[str | None] | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the store's views. Nothing is re-parsed: views read the Parquet,
    and nothing is written: the derived tables appear as views where stored and current (traceql.derive builds
    them, an explicit step); queries define the others from their SQL.

    runs: only these runs are visible (views list only their files, so a store of hundreds of runs opens as
    fast as one; None entries are ignored); default every run."""
    from .stores import open_store

    st = open_store(store)
    if not st.exists():
        raise StoreError(f"no traceql store at {st.root} (run `traceql ingest PATH` first, or pass --store)")
    only = None if runs is None else {r for r in runs if r}
    if only is not None:
        unknown = sorted(only - set(st.runs()))
        if unknown:
            st.run(unknown[0])  # StoreError naming the known runs
    # the readers' lock before the manifest is read: no writer deletes what this manifest lists while held
    lock_fd = st.reader_lock()
    try:
        con = _connect_snapshot(st, only, threads)
    except BaseException:
        if lock_fd is not None:
            os.close(lock_fd)
        raise
    if lock_fd is not None:
        weakref.finalize(con, os.close, lock_fd)  # released when the connection is closed and collected
    if only is not None and len(only) == 1:
        _SOLE_RUN[con] = next(iter(only))
    return con


# connections whose views show one run only (connect(runs=[r])): a query over that run on them needs no
# per-cursor views filtered to it (queries.scope)
_SOLE_RUN: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def sole_run(con: Any) -> str | None:
    """The one run `con` shows when connect() was given exactly one, else None (every run, or several)."""
    return _SOLE_RUN.get(con)


def _connect_snapshot(st: Store, only: set[str] | None, threads: int | None) -> duckdb.DuckDBPyConnection:
    import duckdb

    # every view from one read of the manifest: consistent under a concurrent commit, and one JSON parse
    # instead of one per table on a store of many runs
    st = _snapshot(st)
    con = duckdb.connect(":memory:")
    from . import store_fs  # hook: object stores' filesystems (s3://) for the views' paths

    store_fs.register_all(con)
    # DuckDB turns an ASOF join whose other side is estimated tiny (step windows) into a nested loop: at
    # 16x data activation_memory went quadratic (71 CPU-s vs 0.37 s). GLOBAL so query cursors see it too.
    # (An older DuckDB without the setting raises: nothing to turn off there.)
    with contextlib.suppress(duckdb.Error):
        con.execute("SET GLOBAL asof_loop_join_threshold = 0")
    if threads:
        con.execute(f"SET threads={int(threads)}")
    # a query binds each view it reads (and the helper macros bind theirs): read each file's footer once per
    # connection, not once per bind (a run of many ranks has thousands of files)
    with contextlib.suppress(duckdb.Error):
        con.execute("SET parquet_metadata_cache=true")
    for table in schema.TABLE_NAMES:
        try:
            con.execute(views.table_view(st, table, relative=False, only=only))
        except duckdb.BinderException:
            # files written by an older schema lack a column: read their footers once, fill it with NULLs
            present = _present_columns([str(p) for p in st.table_files(table, only)])
            con.execute(views.table_view(st, table, relative=False, present=present, only=only))
        except duckdb.IOException as e:
            raise _damaged(st, only, e) from e
    for table in derived_tables.names():
        v = views.derived_view(st, table, relative=False, only=only)
        if v:
            con.execute(v)
    con.execute(views.runs_view(st, only))
    return con
