"""DuckDB over the store: one VIEW per canonical table, plus `runs` from the manifest.

All store paths are quoted into SQL in exactly one place (`_sql_path_list`), so a run name or path can never
break out of a string literal, and DuckDB's glob characters in a store path (`team*`, `a[1]`) match only
themselves (`_duck.glob_literal`).

A connection holds the store's readers' lock (shared) until it is closed or collected: a writer that replaces
or removes a run leaves the old files in place while any reader holds it (traceql.store `_reap`), so a query
never fails with "No files found" because of a concurrent `ingest --replace` or `rm`.
"""

from __future__ import annotations

import contextlib
import json
import os
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import derive, schema
from .errors import StoreError

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

    from .store import Store


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _sql_path_list(paths: list[Path] | list[str]) -> str:
    from ._duck import glob_literal

    return "[" + ", ".join(_sql_str(glob_literal(str(p))) for p in paths) + "]"


def _empty_select(table: str) -> str:
    cols = ", ".join(f"CAST(NULL AS {c.type}) AS {c.name}" for c in schema.columns(table))
    return f"SELECT {cols} WHERE false"


def _table_select(table: str, files: list[Path] | list[str], present: set[str] | None = None) -> str:
    """SELECT of the canonical columns over `files`. `present`: the columns the files hold when some were
    written by an older schema (union_by_name fills a column missing from some files; one missing from all
    files is filled here with a typed NULL)."""
    if not files:
        return _empty_select(table)
    cols = ", ".join(
        c.name if present is None or c.name in present else f"CAST(NULL AS {c.type}) AS {c.name}"
        for c in schema.columns(table)
    )
    return f"SELECT {cols} FROM read_parquet({_sql_path_list(files)}, union_by_name=true)"


def _present_columns(files: list[str]) -> set[str]:
    import duckdb

    rows = (
        duckdb.connect(":memory:")
        .execute(f"DESCRIBE SELECT * FROM read_parquet({_sql_path_list(files)}, union_by_name=true)")
        .fetchall()
    )
    return {r[0] for r in rows}


def _runs_view(store: Store, only: set[str] | None = None) -> str:
    runs = {r: i for r, i in store.runs().items() if only is None or r in only}
    rows = []
    for run_id, info in sorted(runs.items()):
        rows.append(
            "("
            + ", ".join(
                [
                    _sql_str(run_id),
                    _sql_str(str(info.get("source", ""))),
                    _sql_str(str(info.get("format", ""))),
                    _sql_str(str(info.get("parser_version", ""))),
                    _sql_str(str(info["device"])) if info.get("device") else "NULL",
                    str(int(info.get("ranks_count", len(info.get("ranks", []))))),
                    _sql_str(str(info.get("ingested_at", ""))),
                    _sql_str(json.dumps(info.get("rows", {}), sort_keys=True)),
                    "true" if derive.stored_for(info) else "false",
                ]
            )
            + ")"
        )
    names = ", ".join(c.name for c in schema.RUNS_COLUMNS)
    if rows:
        return f"CREATE OR REPLACE VIEW runs AS SELECT * FROM (VALUES {', '.join(rows)}) AS t({names})"
    return f"CREATE OR REPLACE VIEW runs AS {_empty_select('runs')}"


def _derived_view(store: Store, table: str, relative: bool, only: set[str] | None = None) -> str | None:
    """View over the stored derived table (traceql.derive) of every run whose copy is current; None if none."""
    files = [
        f"{_run_base(store, r, info, relative)}/{rel}"
        for r, info in sorted(store.runs().items())
        if derive.stored_for(info) and (only is None or r in only)
        for rel in info.get("files", {}).get(table, [])
    ]
    if not files:
        return None
    return f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM read_parquet({_sql_path_list(files)}, union_by_name=true)"


def _run_base(store: Store, run_id: str, info: dict[str, Any], relative: bool) -> str:
    """A run's directory as views name it: `runs/<dir>` relative to the store (views.sql), else absolute."""
    d = store.run_dir_name(run_id, info)
    return f"runs/{d}" if relative else str(store.root / "runs" / d)


def _view(
    store: Store, table: str, relative: bool, present: set[str] | None = None, only: set[str] | None = None
) -> str:
    runs = {r: i for r, i in store.runs().items() if only is None or r in only}
    files = [
        f"{_run_base(store, r, info, relative)}/{rel}"
        for r, info in sorted(runs.items())
        for rel in info.get("files", {}).get(table, [])
    ]
    return f"CREATE OR REPLACE VIEW {table} AS {_table_select(table, files, present)}"


def views_sql(store: Store, relative: bool = False) -> str:
    """SQL that recreates the views in the stock duckdb shell. With relative=True, run it from the store dir."""
    lines = [
        "-- traceql views: cd into the store directory, then `duckdb -c '.read views.sql'` or `.read views.sql`"
    ]
    lines += [_view(store, t, relative) + ";" for t in schema.TABLE_NAMES]
    lines += [v + ";" for t in derive.DERIVED_TABLES if (v := _derived_view(store, t, relative))]
    lines.append(_runs_view(store) + ";")
    return "\n".join(lines) + "\n"


def _snapshot(store: Store) -> Store:
    """The store with its manifest read once (runs(), run(), table_files() all answer from that read)."""
    manifest = store.manifest()

    class _Snapshot(type(store)):  # type: ignore[misc]  # ObjectStore too (traceql.store_fs)
        def manifest(self) -> dict[str, Any]:
            return manifest

    snap: Store = object.__new__(_Snapshot)
    snap.__dict__.update(store.__dict__)  # the same root (and an object store's filesystem), not reopened
    return snap


def _note_build(run_id: str) -> None:
    import sys

    print(
        f"building the analysis tables of run {run_id!r} (once; later analyses reuse them)", file=sys.stderr
    )


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
    analysis: bool = False,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the store's views. Nothing is re-parsed: views read the Parquet.

    runs: only these runs are visible (views list only their files, so a store of hundreds of runs opens as
    fast as one; None entries are ignored); default every run. analysis: first build the derived tables of
    those runs if they lack current ones (traceql.derive.ensure; once per run, noted on stderr)."""
    from .store import Store

    st = store if isinstance(store, Store) else Store(store)
    if not st.exists():
        raise StoreError(f"no traceql store at {st.root} (run `traceql ingest PATH` first, or pass --store)")
    only = None if runs is None else {r for r in runs if r}
    if only is not None:
        unknown = sorted(only - set(st.runs()))
        if unknown:
            st.run(unknown[0])  # StoreError naming the known runs
        if analysis:
            derive.ensure(st, sorted(only), on_build=_note_build)
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
    return con


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
    for table in schema.TABLE_NAMES:
        try:
            con.execute(_view(st, table, relative=False, only=only))
        except duckdb.BinderException:
            # files written by an older schema lack a column: read their footers once, fill it with NULLs
            present = _present_columns([str(p) for p in st.table_files(table, only)])
            con.execute(_view(st, table, relative=False, present=present, only=only))
        except duckdb.IOException as e:
            raise _damaged(st, only, e) from e
    for table in derive.DERIVED_TABLES:
        v = _derived_view(st, table, relative=False, only=only)
        if v:
            con.execute(v)
    con.execute(_runs_view(st, only))
    return con
