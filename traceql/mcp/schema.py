"""The answers' JSON Schema (answer_schema.json, format traceql.mcp/1), served as traceql://answer-schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def answer_schema_text() -> str:
    return (Path(__file__).parent / "answer_schema.json").read_text(encoding="utf-8")


def answer_schema() -> dict[str, Any]:
    out: dict[str, Any] = json.loads(answer_schema_text())
    return out
