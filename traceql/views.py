"""The SQL of the store's views: one per canonical table, one per stored (current) derived table, and `runs`.

Written from a manifest alone (no connection): the engine runs these statements to open a store, and the store
writes them to views.sql for the stock duckdb shell. All store paths are quoted into SQL here only
(`_duck.sql_path_list`), so a run name or path can never break out of a string literal, and DuckDB's glob
characters in a store path (`team*`, `a[1]`) match only themselves (`_duck.glob_literal`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import derived_tables, schema
from ._duck import sql_path_list, sql_str

if TYPE_CHECKING:  # pragma: no cover
    from .store import Store


def empty_select(table: str) -> str:
    cols = ", ".join(f"CAST(NULL AS {c.type}) AS {c.name}" for c in schema.columns(table))
    return f"SELECT {cols} WHERE false"


def table_select(
    table: str, files: list[Path] | list[str], present: set[str] | None = None, one_schema: bool = False
) -> str:
    """SELECT of the canonical columns over `files`. `present`: the columns the files hold when some were
    written by an older schema (union_by_name fills a column missing from some files; one missing from all
    files is filled here with a typed NULL). one_schema: the files are known to share one schema (one run's,
    written by one ingest through _arrow_helpers.conform): no union_by_name, which makes DuckDB read every
    file's footer each time a statement using the view is bound (1,792 files of 256 ranks: ~3 CPU-s to set
    up one derive session, most of a small-rank build)."""
    if not files:
        return empty_select(table)
    cols = ", ".join(
        c.name if present is None or c.name in present else f"CAST(NULL AS {c.type}) AS {c.name}"
        for c in schema.columns(table)
    )
    union = "" if one_schema and present is None else ", union_by_name=true"
    return f"SELECT {cols} FROM read_parquet({sql_path_list(files)}{union})"


def _runs(store: Store, only: set[str] | None) -> dict[str, dict[str, Any]]:
    return {r: i for r, i in sorted(store.runs().items()) if only is None or r in only}


def runs_view(store: Store, only: set[str] | None = None) -> str:
    rows = []
    for run_id, info in _runs(store, only).items():
        current = derived_tables.current_tables(info)
        values = [
            sql_str(run_id),
            sql_str(str(info.get("source", ""))),
            sql_str(str(info.get("format", ""))),
            sql_str(str(info.get("parser_version", ""))),
            sql_str(str(info["device"])) if info.get("device") else "NULL",
            str(int(info.get("ranks_count", len(info.get("ranks", []))))),
            sql_str(str(info.get("ingested_at", ""))),
            sql_str(json.dumps(info.get("rows", {}), sort_keys=True)),
            "true" if current == set(derived_tables.names()) else "false",
            sql_str(",".join(t for t in derived_tables.names() if t in current)),
        ]
        rows.append("(" + ", ".join(values) + ")")
    names = ", ".join(c.name for c in schema.RUNS_COLUMNS)
    if rows:
        return f"CREATE OR REPLACE VIEW runs AS SELECT * FROM (VALUES {', '.join(rows)}) AS t({names})"
    return f"CREATE OR REPLACE VIEW runs AS {empty_select('runs')}"


def run_base(store: Store, run_id: str, info: dict[str, Any], relative: bool) -> str:
    """A run's directory as views name it: `runs/<dir>` relative to the store (views.sql), else absolute."""
    d = store.run_dir_name(run_id, info)
    return f"runs/{d}" if relative else str(store.root / "runs" / d)


def derived_view(store: Store, table: str, relative: bool, only: set[str] | None = None) -> str | None:
    """View over the stored copy of a derived table, for every run whose copy is current; None if none."""
    per_run = [
        [f"{run_base(store, r, info, relative)}/{rel}" for rel in info.get("files", {}).get(table, [])]
        for r, info in _runs(store, only).items()
        if table in derived_tables.current_tables(info)
    ]
    per_run = [fl for fl in per_run if fl]
    if not per_run:
        return None
    # one build's files share a schema; runs (built by other versions, perhaps) are joined by column name
    select = " UNION ALL BY NAME ".join(f"SELECT * FROM read_parquet({sql_path_list(fl)})" for fl in per_run)
    return f"CREATE OR REPLACE VIEW {table} AS {select}"


def table_view(
    store: Store, table: str, relative: bool, present: set[str] | None = None, only: set[str] | None = None
) -> str:
    """The view of a canonical table: one read_parquet per run, without union_by_name (one run's files share
    one schema: see table_select), the runs joined with UNION ALL (each lists the canonical columns in one
    order). union_by_name over every file made each query's bind read every file's footer: a 1,000-rank run
    has ~7,000 files, and each of a report's queries paid for them. A run written by an older schema fails
    that bind (a column missing): the engine then asks again with `present`, for the store-wide
    union_by_name read that fills the missing columns."""
    per_run = [
        [f"{run_base(store, r, info, relative)}/{rel}" for rel in info.get("files", {}).get(table, [])]
        for r, info in _runs(store, only).items()
    ]
    per_run = [fl for fl in per_run if fl]
    if present is None and per_run:
        select = " UNION ALL ".join(table_select(table, fl, one_schema=True) for fl in per_run)
    else:
        select = table_select(table, [f for fl in per_run for f in fl], present)
    return f"CREATE OR REPLACE VIEW {table} AS {select}"


def views_sql(store: Store, relative: bool = False) -> str:
    """SQL that recreates the views in the stock duckdb shell. With relative=True, run it from the store dir.
    Derived tables appear when stored and current; queries.shell_script defines the others from their SQL."""
    lines = [
        "-- traceql views: cd into the store directory, then `duckdb -c '.read views.sql'` or `.read views.sql`"
    ]
    lines += [table_view(store, t, relative) + ";" for t in schema.TABLE_NAMES]
    lines += [v + ";" for t in derived_tables.names() if (v := derived_view(store, t, relative))]
    lines.append(runs_view(store) + ";")
    return "\n".join(lines) + "\n"
