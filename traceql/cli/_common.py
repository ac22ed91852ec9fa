"""The run a command analyses (the options themselves are in _options)."""

from __future__ import annotations

from pathlib import Path


def resolve_run(store: str | Path | None, run: str | None) -> str:
    """The run to analyse: the given one (must exist), else the most recently ingested."""
    from ..errors import StoreError
    from ..store import Store

    st = Store(store)
    runs = st.runs() if st.exists() else {}
    if run:
        st.run(run)
        return run
    if not runs:
        raise StoreError(f"no runs in store {st.root} (run `traceql ingest PATH` first, or pass --store)")
    return max(runs.items(), key=lambda kv: kv[1].get("ingested_at", ""))[0]
