"""traceql: what saturates first (HBM bandwidth, compute or communication), from accelerator profiler dumps.

Public API:
    traceql.connect(store=".traceql") -> duckdb.DuckDBPyConnection with one view per canonical table
    traceql.ingest(path, store=..., name=None, replace=False) -> dict (what was stored)
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "connect", "ingest"]


def connect(store: Any = None, read_only: bool = True) -> Any:
    from .engine import connect as _connect

    return _connect(store, read_only=read_only)


def ingest(path: Any, store: Any = None, name: str | None = None, replace: bool = False, **kw: Any) -> dict[str, Any]:
    from .ingest import ingest as _ingest

    return _ingest(path, store=store, name=name, replace=replace, **kw)
