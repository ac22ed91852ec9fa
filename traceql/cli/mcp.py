"""`traceql mcp`: serve the store to a coding agent over the Model Context Protocol (stdio; traceql.mcp)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ._options import StoreOpt


def mcp_cmd(
    store: StoreOpt = None,
    max_chars: Annotated[
        int,
        typer.Option(
            "--max-chars", help="Cap on each answer's size in characters (answers say when they truncated)."
        ),
    ] = 8000,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", help="Stop a sql/query statement after SECONDS (0 = no limit).", metavar="SECONDS"
        ),
    ] = 60.0,
    memory_limit: Annotated[
        Optional[str],
        typer.Option(
            "--memory-limit",
            help="DuckDB memory limit for the sql tool, e.g. 4GB.",
            envvar="TRACEQL_SQL_MEMORY",
        ),
    ] = None,
) -> None:
    """Serve the store to a coding agent over MCP on stdin/stdout (tools: list_runs, ingest, verdict, findings,
    query, sql, compare, explain; resources: traceql://schema, traceql://queries, traceql://answer-schema).

    Every answer is JSON (format traceql.mcp/1) of at most --max-chars characters, each number with its evidence
    grade; the sql tool is read-only, sees only the store's files, opens no URL and stops after --timeout.
    Needs the mcp extra: pip install 'traceql[mcp]'. Agent instructions: docs/agents.md.

    \b
    Examples:
      traceql mcp --store ~/traces/store
      claude mcp add traceql -- traceql mcp --store ~/traces/store
    """
    from ..errors import TraceQLError

    try:
        import mcp  # noqa: F401  # the SDK: a one-line error naming the extra when it is missing
    except ImportError:
        raise TraceQLError("traceql mcp needs the MCP SDK: pip install 'traceql[mcp]'") from None
    from ..mcp.answers import MIN_CAP
    from ..mcp.server import serve
    from ..mcp.tools import Tools

    if max_chars < MIN_CAP:
        raise typer.BadParameter(f"at least {MIN_CAP}", param_hint="--max-chars")
    if timeout < 0:
        raise typer.BadParameter("seconds >= 0", param_hint="--timeout")
    serve(
        Tools(
            store=str(store) if store is not None else None,
            cap=max_chars,
            timeout_s=timeout,
            memory_limit=memory_limit,
        )
    )


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp_cmd)
