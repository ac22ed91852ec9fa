"""`traceql sql` (ad hoc SQL over the store's views) and `traceql schema` (table docs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._options import DocFormat, StoreOpt, TableFormat, format_opt, output_opt

# What `traceql sql` runs without --write: queries, plain EXPLAIN, and metadata pragmas. Everything else is
# refused, SET and most PRAGMAs included: DuckDB can write files through them (query logs, profiler output,
# IMPORT DATABASE running a folder's SQL), and EXPLAIN ANALYZE executes its statement.
_READ_ONLY_PRAGMAS = {
    "table_info",
    "show_tables",
    "show_tables_expanded",
    "show",
    "database_size",
    "version",
    "storage_info",
}


def _check_read_only(sql: str) -> None:
    import re

    import duckdb

    from ..errors import QueryError

    try:
        stmts = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise QueryError(f"SQL error: {str(e).splitlines()[0]}") from e
    for s in stmts:
        text = s.query.strip()
        try:
            kind = str(s.type).split(".")[-1]
        except ValueError:
            # a statement type newer than DuckDB's Python enum (UPDATE EXTENSIONS in 2.0: ValueError "29 is not
            # a valid StatementType"): unknown means refused, not an internal error
            first = " ".join(text.split()[:2])[:40]
            raise QueryError(
                f"statement {first!r} is of a type traceql does not know, refused: traceql sql runs SELECT, "
                "EXPLAIN and metadata PRAGMAs (pass --write to allow others)"
            ) from None
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
    query: Annotated[
        str,
        typer.Argument(
            help="SQL over the views: kernels, host_ops, flows, counters, comm_ops, comm_bandwidth, comm_matrix, steps, memory, l2_cache, op_stats, run_meta, runs. '-' reads stdin."
        ),
    ],
    store: StoreOpt = None,
    fmt: Annotated[
        TableFormat, format_opt("The result as a table, CSV, JSON or Parquet (parquet needs --output).")
    ] = TableFormat.table,
    output: Annotated[Optional[Path], output_opt()] = None,
    write: Annotated[
        bool,
        typer.Option(
            "--write",
            help="Allow statements other than SELECT (e.g. COPY ... TO a path given with --allow-files).",
        ),
    ] = False,
    allow_files: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--allow-files",
            help="A folder or file the SQL may read (and, with --write, write) besides the store's tables; repeatable.",
        ),
    ] = None,
    timeout: Annotated[
        Optional[float],
        typer.Option(
            "--timeout",
            help="Stop the query after SECONDS (default 300 or $TRACEQL_SQL_TIMEOUT; 0 = no limit).",
            metavar="SECONDS",
        ),
    ] = None,
    memory_limit: Annotated[
        Optional[str],
        typer.Option(
            "--memory-limit",
            help="DuckDB memory limit for the query, e.g. 4GB (default DuckDB's: 80% of RAM).",
            envvar="TRACEQL_SQL_MEMORY",
        ),
    ] = None,
) -> None:
    """Run SQL over the store (DuckDB dialect).

    The SQL sees only the store's tables: no extensions are installed or loaded, no other file or URL is
    opened (--allow-files PATH admits one), nothing is spilled to disk, and a query stops after --timeout.

    Example:  traceql sql "SELECT op_type, sum(dur_ns)/1e6 AS ms FROM kernels GROUP BY 1 ORDER BY 2 DESC LIMIT 10"
    """
    import sys

    from .. import derived_tables, engine, queries, sql_sandbox
    from ..stores import open_store
    from ._output import emit

    if query == "-":
        query = sys.stdin.read()
    if not write:
        _check_read_only(query)
    limit_s = sql_sandbox.timeout_from_env(timeout)
    st = open_store(store)
    con = engine.connect(st)
    # the helper macros and every derived table: read where every run stores it current, else its SELECT
    runs = st.runs().values()
    stored = set.intersection(*(derived_tables.current_tables(i) for i in runs)) if runs else set()
    queries.define_library(con, stored)
    # every SET (extensions off, file access confined, no temp dir) happens before lock_configuration
    sql_sandbox.confine(con, st.root, allow_files or [], memory_limit=memory_limit)
    table = sql_sandbox.run(con, query, limit_s)
    if table is None:
        return
    emit(table, fmt.value, output)


def schema_cmd(
    table: Annotated[Optional[str], typer.Argument(help="Table name; omit to list all tables.")] = None,
    fmt: Annotated[DocFormat, format_opt("The docs as a table, JSON or markdown.")] = DocFormat.table,
) -> None:
    """Show the tables (canonical, runs and derived), or one table's columns with types and docs.

    Example:  traceql schema kernels
    """
    from ..derived_tables import documented_tables
    from ..errors import TraceQLError
    from . import _console
    from ._output import write_json, write_text

    docs = documented_tables()
    names = list(docs)
    if table is None:
        rows = [(n, docs[n][0]) for n in names]
        if fmt == DocFormat.json:
            write_json(dict(rows))
        elif fmt == DocFormat.markdown:
            lines = ["| table | description |", "|---|---|"] + [f"| `{n}` | {d} |" for n, d in rows]
            write_text("\n".join(lines) + "\n")
        else:
            _console.print_table(["table", "description"], rows)
        return
    if table not in names:
        raise TraceQLError(f"unknown table {table!r}; tables: {', '.join(names)}")
    description, cols = docs[table]
    if fmt == DocFormat.json:
        write_json([c.__dict__ for c in cols])
    elif fmt == DocFormat.markdown:
        lines = [
            f"### {table}",
            "",
            description,
            "",
            "| column | type | description |",
            "|---|---|---|",
        ]
        lines += [f"| `{c.name}` | {c.type} | {c.doc} |" for c in cols]
        write_text("\n".join(lines) + "\n")
    else:
        _console.print_table(
            ["column", "type", "description"],
            [(c.name, c.type, c.doc) for c in cols],
            title=f"{table}: {description}",
        )


def register(app: typer.Typer) -> None:
    app.command("sql")(sql_cmd)
    app.command("schema")(schema_cmd)
