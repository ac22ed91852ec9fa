"""The sql tool's statement, run as `traceql sql` runs it (traceql.sql_sandbox): read-only statements only,
no extensions, no file but the store's Parquet, no temp files, a time limit. Two additions for an agent: the
views can be scoped to one run, and a single SELECT runs as a LIMITed query plus a count, so a million-row
result is counted in DuckDB rather than carried into Python."""

from __future__ import annotations

from typing import Any

from ..errors import QueryError


def run_sql(
    store: Any, statement: str, run: str | None, limit: int, timeout_s: float, memory_limit: str | None
) -> tuple[Any, int]:
    """(Arrow table of at most `limit` rows, total row count) of `statement` over the store."""
    from .. import derived_tables, engine, queries, sql_sandbox

    try:
        sql_sandbox.check_read_only(statement)
    except QueryError as e:
        # the CLI's message names its --write flag; over MCP there is no way to write
        raise QueryError(
            str(e).replace(" (pass --write to allow others)", "").replace(" (pass --write to allow)", "")
        ) from None
    runs = store.runs() if store.exists() else {}
    con = engine.connect(store, runs=[run] if run else None)
    try:
        infos = [runs[run]] if run else list(runs.values())
        stored = set.intersection(*(derived_tables.current_tables(i) for i in infos)) if infos else set()
        queries.define_library(con, stored)
        sql_sandbox.confine(con, store.root, (), memory_limit=memory_limit)
        return _capped(con, statement, limit, timeout_s)
    except QueryError as e:
        # the CLI's hint names its --allow-files flag; the sql tool has none
        raise QueryError(
            str(e).replace(
                "(traceql sql reads only the store's tables; --allow-files PATH lets it read or write PATH)",
                "(the sql tool reads only the store's tables)",
            )
        ) from None
    finally:
        con.close()


def _capped(con: Any, statement: str, limit: int, timeout_s: float) -> tuple[Any, int]:
    import duckdb

    from .. import sql_sandbox

    stmts = duckdb.extract_statements(statement)
    if len(stmts) == 1 and str(stmts[0].type).split(".")[-1] == "SELECT":
        # the statement's own text as a subquery; the newline ends a trailing `-- comment` before the ')'
        inner = stmts[0].query.strip().rstrip(";")
        table = sql_sandbox.run(con, f"SELECT * FROM ({inner}\n) LIMIT {int(limit)}", timeout_s)
        if table.num_rows < limit:
            return table, table.num_rows
        counted = sql_sandbox.run(con, f"SELECT count(*) AS n FROM ({inner}\n)", timeout_s)
        return table, int(counted.column(0)[0].as_py())
    # EXPLAIN, a metadata PRAGMA, several statements: run as given (their results are small), cap here
    table = sql_sandbox.run(con, statement, timeout_s)
    if table is None:
        import pyarrow as pa

        return pa.table({}), 0
    return table.slice(0, limit), table.num_rows
