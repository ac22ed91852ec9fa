"""traceql: what saturates first (HBM bandwidth, compute or communication), from accelerator profiler dumps.

Public API:
    traceql.connect(store=".traceql") -> duckdb.DuckDBPyConnection with one view per canonical table
    traceql.ingest(path, store=..., name=None, replace=False) -> dict (what was stored)
"""

from __future__ import annotations

from typing import Any

from .version import __version__

__all__ = ["__version__", "connect", "ingest"]

# Import the submodule traceql.ingest now, so the function defined below (not the module) stays bound to
# `traceql.ingest` even after `from traceql.ingest import ...` elsewhere (the import system binds a
# submodule to its parent attribute only when it first loads it). It imports nothing heavy.
from . import ingest as _ingest_module  # noqa: E402


def connect(store: Any = None, read_only: bool = True) -> Any:
    from .engine import connect as _connect

    return _connect(store, read_only=read_only)


def ingest(
    path: Any, store: Any = None, name: str | None = None, replace: bool = False, **kw: Any
) -> dict[str, Any]:
    return _ingest_module.ingest(path, store=store, name=name, replace=replace, **kw)
