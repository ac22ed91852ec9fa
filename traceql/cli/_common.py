"""The run a command analyses (the options themselves are in _options)."""

from __future__ import annotations

from pathlib import Path


def resolve_run(store: str | Path | None, run: str | None) -> str:
    """The run to analyse, by the one rule (traceql.analysis.resolve_run): the given one (must exist), else the
    most recently ingested (ties: the larger name)."""
    from ..analysis import resolve_run as resolve
    from ..stores import open_store

    return resolve(open_store(store), run)
