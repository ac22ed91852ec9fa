"""`traceql sql` (ad hoc SQL over the store's views) and `traceql schema` (table docs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._common import StoreOpt

# What `traceql sql` runs without --write: queries, plain EXPLAIN, and metadata pragmas. Everything else is
# refused, SET and most PRAGMAs included: DuckDB can write files through them (query logs, profiler output,
# IMPORT DATABASE running a folder's SQL), and EXPLAIN ANALYZE executes its statement.
_READ_ONLY_PRAGMAS = {"table_info", "show_tables", "show_tables_expanded", "show", "database_size", "version", "storage_info"}


def _check_read_only(sql: str) -> None:
    import re

    import duckdb

    from ..errors import QueryError

    try:
        stmts = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise QueryError(f"SQL error: {str(e).splitlines()[0]}") from e
    for s in stmts:
        kind = str(s.type).split(".")[-1]
        text = s.query.strip()
        if kind == "SELECT":
            continue
        if kind == "EXPLAIN" and not re.match(r"(?is)^explain\s+analy[sz]e\b", text):
            inner = re.sub(r"(?is)^explain\s+", "", text)
            _check_read_only(inner)
            continue
        if kind == "PRAGMA":
            m = re.match(r"(?is)^pragma\s+([a-z_]+)", text)
            if m and m.group(1).lower() in _READ_ONLY_PRAGMAS:
                continue
        raise QueryError(
            f"{kind} statements are refused: traceql sql is read-only over the store (pass --write to allow)"
        )


def sql_cmd(
    query: Annotated[str, typer.Argument(help="SQL over the views: kernels, host_ops, flows, counters, comm_ops, comm_bandwidth, comm_matrix, steps, memory, l2_cache, op_stats, run_meta, runs. '-' reads stdin.")],
    store: StoreOpt = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table|csv|json|parquet")] = "table",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the result to FILE.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Allow statements other than SELECT (e.g. COPY ... TO).")] = False,
) -> None:
    """Run SQL over the store (DuckDB dialect).

    Example:  traceql sql "SELECT op_type, sum(dur_ns)/1e6 AS ms FROM kernels GROUP BY 1 ORDER BY 2 DESC LIMIT 10"
    """
    import sys

    import duckdb

    from .. import engine
    from ..errors import QueryError
    from ._output import emit

    if query == "-":
        query = sys.stdin.read()
    if not write:
        _check_read_only(query)
    con = engine.connect(store)
    if not write:
        # defence in depth: no setting (log paths, profiling output...) can be changed by the user's SQL
        con.execute("SET lock_configuration = true")
    try:
        from .._duck import arrow_table

        rel = con.sql(query)
        table = arrow_table(rel) if rel is not None else None
    except duckdb.Error as e:
        raise QueryError(f"SQL error: {str(e).strip().splitlines()[0]}") from e
    if table is None:
        return
    emit(table, fmt, output)


def schema_cmd(
    table: Annotated[Optional[str], typer.Argument(help="Table name; omit to list all tables.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table|json|markdown")] = "table",
) -> None:
    """Show the canonical tables, or one table's columns with types and docs.

    Example:  traceql schema kernels
    """
    import json

    from .. import schema
    from ..errors import TraceQLError
    from . import _console

    names = ["runs", *schema.TABLE_NAMES]
    if table is None:
        rows = [(n, schema.describe(n)) for n in names]
        if fmt == "json":
            _console.out.print(json.dumps(dict(rows), indent=1), markup=False)
        else:
            _console.print_table(["table", "description"], rows)
        return
    if table not in names:
        raise TraceQLError(f"unknown table {table!r}; tables: {', '.join(names)}")
    cols = schema.columns(table)
    if fmt == "json":
        _console.out.print(json.dumps([c.__dict__ for c in cols], indent=1), markup=False)
    elif fmt == "markdown":
        lines = [f"### {table}", "", schema.describe(table), "", "| column | type | description |", "|---|---|---|"]
        lines += [f"| `{c.name}` | {c.type} | {c.doc} |" for c in cols]
        _console.out.print("\n".join(lines), markup=False)
    else:
        _console.print_table(["column", "type", "description"], [(c.name, c.type, c.doc) for c in cols], title=f"{table}: {schema.describe(table)}")


def register(app: typer.Typer) -> None:
    app.command("sql")(sql_cmd)
    app.command("schema")(schema_cmd)
