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


class _Cursors:
    """A connection that remembers the cursors it hands out, so a library query (traceql.queries.run opens
    its own cursor) can be interrupted from outside when its time is up."""

    def __init__(self, con: Any) -> None:
        self.con = con
        self.open: list[Any] = []

    def cursor(self) -> Any:
        c = self.con.cursor()
        self.open.append(c)
        return c


def run_library_query(session: Any, name: str, params: dict[str, Any], timeout_s: float) -> Any:
    """The Arrow table of library query `name` over the session's run, interrupted after `timeout_s` (0: no
    limit). The library's SQL is traceql's own and the params are bound, not spliced: the time limit is
    the one guard it needs."""
    import threading

    from .. import queries

    con = _Cursors(session.con)
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["table"] = queries.run(
                name,
                session.store,
                run_id=session.run_id,
                params=params,
                con=con,  # type: ignore[arg-type]
            )
        except BaseException as e:  # noqa: BLE001  # handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=work, name="traceql-mcp-query", daemon=True)
    t.start()
    t.join(timeout_s if timeout_s > 0 else None)
    if t.is_alive():
        for c in con.open:
            c.interrupt()
        t.join(10)
        raise QueryError(
            f"query {name} stopped after the {timeout_s:g} s limit (traceql mcp --timeout SECONDS)"
        )
    if "error" in box:
        raise box["error"]
    return box["table"]
