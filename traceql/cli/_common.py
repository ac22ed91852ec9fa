"""The run a command analyses (the options themselves are in _options)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..store import Store


def open_store(store: str | Path | None) -> Store:
    """The store a read command reads. A --store (or $TRACEQL_STORE) naming no store is an error (a typo must
    not read as an empty store); the default ./.traceql missing reads as a store with no runs."""
    from ..errors import StoreError
    from ..store import MANIFEST
    from ..stores import open_store as open_any

    st = open_any(store)
    if store is not None and not st.exists():
        raise StoreError(
            f"no traceql store at {st.root} (no {MANIFEST} there): check --store / $TRACEQL_STORE, or "
            f"make one with `traceql ingest PATH --store {st.root}`"
        )
    return st


def resolve_run(store: str | Path | None, run: str | None) -> str:
    """The run to analyse, by the one rule (traceql.analysis.resolve_run): the given one (must exist), else the
    most recently ingested (ties: the larger name)."""
    from ..analysis import resolve_run as resolve

    return resolve(open_store(store), run)
