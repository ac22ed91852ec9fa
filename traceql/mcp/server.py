"""The MCP server (the official SDK's MCPServer): the tools of traceql.mcp.tools, the resources, stdio.

A tool's answer is one text block holding its JSON (format traceql.mcp/1, at most the cap's characters). A
failure is a tool error (isError: true) whose text is traceql's one-line message, so the agent reads what was
wrong and what to do, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import TraceQLError
from .tools import DEFAULT_ROWS, Tools

if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.mcpserver import MCPServer

INSTRUCTIONS = (
    "traceql answers what saturates first in an accelerator profile (HBM bandwidth, compute, communication, "
    "host/idle), with every number graded by its evidence. Start with list_runs (or ingest a dump), then "
    "verdict(run), then findings(run). Each number carries a grade: measured, pipe, sampled, modeled or "
    "insufficient. Never state a modeled number as measured traffic, and never state any number for an "
    "insufficient one: say the dump cannot tell and quote capture_advice. When confidence is 'cannot tell', "
    "report the bound as undecided. explain(term) defines every word; answers say when they were truncated."
)


def _guard(fn: Callable[..., str]) -> Callable[..., str]:
    """Run a tool; a traceql error (or any other) becomes a ToolError with one line."""
    import functools

    from mcp.server.mcpserver.exceptions import ToolError

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> str:
        try:
            return fn(*args, **kwargs)
        except TraceQLError as e:
            raise ToolError(_one_line(str(e))) from None
        except OSError as e:
            raise ToolError(_one_line(f"{e.filename or 'the store'}: {e.strerror or e}")) from None
        except Exception as e:  # noqa: BLE001  # an agent gets a line, not a traceback over the wire
            raise ToolError(_one_line(f"internal error: {type(e).__name__}: {e}")) from None

    return wrapped


def _one_line(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else "error"
    return first[:1000]


def build(tools: Tools) -> MCPServer:
    """The server over `tools`' store, every tool and resource registered."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    from ..version import __version__

    srv: MCPServer = MCPServer(
        name="traceql", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    ro = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def list_runs() -> str:
        """The runs in the store, newest first: name, format, ranks, device, when ingested, from where."""
        return tools.list_runs()

    def ingest(path: str, name: str | None = None, replace: bool = False) -> str:
        """Ingest a profiler dump (a *_ascend_pt folder, a cluster folder, a PROF_* folder, or a trace
        .json/.json.gz/.csv/.db file) into the store as run `name` (default: from the path). The dump is only
        read; links leading out of it are refused; replace=true overwrites a run of the same name."""
        return tools.ingest(path, name, replace)

    def verdict(run: str | None = None) -> str:
        """What bounds the run (memory, compute, communication, host/idle or undecided), the confidence, the
        headline, each number with its evidence grade, the caveats and the capture advice. Default run: the
        latest ingested."""
        return tools.verdict(run)

    def findings(run: str | None = None, limit: int = 10) -> str:
        """The checks that fired, ranked by estimated saving: each with severity, grade, saving, the
        suggestion and the `traceql query` command that reproduces it; and the ones that did not fire."""
        return tools.findings(run, limit)

    def query(
        name: str, run: str | None = None, params: dict[str, Any] | None = None, limit: int = DEFAULT_ROWS
    ) -> str:
        """Run a library query (resource traceql://queries lists them with their params) over a run; at most
        `limit` rows (default 50, max 500) with the total count."""
        return tools.query(name, run, params, limit)

    def sql(statement: str, run: str | None = None, limit: int = DEFAULT_ROWS) -> str:
        """Read-only DuckDB SQL over the store's tables (resource traceql://schema), scoped to `run` when
        given; SELECT/EXPLAIN/metadata PRAGMAs only, no files or network, a time limit; at most `limit`
        rows (default 50, max 500) with the total count."""
        return tools.sql(statement, run, limit)

    def compare(base: str, cand: str) -> str:
        """Did the change work: the step-time verdict of run `cand` against run `base` (noise-aware), the
        step parts that moved most, operator and finding differences, or why they are not comparable."""
        return tools.compare(base, cand)

    def explain(term: str | None = None) -> str:
        """The legend: what an evidence grade (measured, pipe, sampled, modeled, insufficient), a bound, a
        confidence or an answer field means, and what may be said with it. No term: every entry."""
        return tools.explain(term)

    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
    for fn in (list_runs, verdict, findings, query, sql, compare, explain):
        srv.add_tool(_guard(fn), annotations=ro, structured_output=False)
    srv.add_tool(_guard(ingest), annotations=writes, structured_output=False)
    _resources(srv)
    return srv


def _resources(srv: MCPServer) -> None:
    @srv.resource(
        "traceql://schema", mime_type="application/json", description="Tables and columns the sql tool sees"
    )
    def schema() -> str:
        from ..derived_tables import documented_tables

        docs = documented_tables()
        return json.dumps(
            {
                t: {"description": d, "columns": [[c.name, c.type, c.doc] for c in cols]}
                for t, (d, cols) in docs.items()
            },
            ensure_ascii=False,
        )

    @srv.resource(
        "traceql://queries",
        mime_type="application/json",
        description="The query library: names, descriptions, params",
    )
    def library() -> str:
        from .. import queries

        return json.dumps(
            [s.catalog_entry(docs=False) for s in queries.list_queries()],
            ensure_ascii=False,
            default=str,
        )

    @srv.resource(
        "traceql://answer-schema",
        mime_type="application/schema+json",
        description="JSON Schema of every tool answer (traceql.mcp/1)",
    )
    def answer_schema() -> str:
        from .schema import answer_schema_text

        return answer_schema_text()


def serve(tools: Tools) -> None:
    """Serve over stdio until the client closes stdin."""
    build(tools).run("stdio")
