"""Options shared by several commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

StoreOpt = Annotated[
    Optional[str],  # a str, not a Path: a URL root (s3://bucket/prefix) must keep its '//' (traceql.store_fs)
    typer.Option(
        "--store",
        "-s",
        help="Store directory or URL (s3://bucket/prefix with traceql[s3]); default ./.traceql, or $TRACEQL_STORE.",
        envvar="TRACEQL_STORE",
    ),
]
RunOpt = Annotated[
    Optional[str], typer.Option("--run", "-r", help="Run name (default: the only/most recent run).")
]
RankOpt = Annotated[Optional[int], typer.Option("--rank", help="Only this rank.")]


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
