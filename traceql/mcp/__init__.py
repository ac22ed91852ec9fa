"""`traceql mcp`: traceql's verdict, findings, queries and sandboxed SQL for coding agents, over the Model
Context Protocol (the official `mcp` SDK: `pip install 'traceql[mcp]'`).

    tools.py     the tools as plain functions over a store (each returns its answer's JSON text, capped)
    shape.py     traceql.findings/N and traceql.compare/N documents -> answers, each number with its grade
    answers.py   the envelope (format traceql.mcp/1), readable numbers, the size cap
    sandboxed.py the sql tool through traceql.sql_sandbox (read-only, store files only, no network, timeout)
    legend.py    the explain tool's terms       schema.py / answer_schema.json  the answers' JSON Schema
    server.py    the SDK server: tools, resources (traceql://schema, traceql://queries, traceql://answer-schema)

Agent instructions: docs/agents.md.
"""

from __future__ import annotations

from .answers import DEFAULT_CAP, FORMAT_ID

__all__ = ["DEFAULT_CAP", "FORMAT_ID"]
