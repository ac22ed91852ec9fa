"""The one builder of the `traceql ...` command lines shown for the user to re-run (a finding's query, the
queries behind a chart, the report's "reproduce" section, compare's and export's hints), and the one quoting
helper they use. One place decides the order of the options and when `--store` is said, so every re-run line
reads the same way and pastes into a POSIX shell as it is, whatever the run name or store path holds.

Order: the words, --run, --store (only when not the default store), --rank, --device, --peak-hbm-gbps,
--baseline, each --param NAME=VALUE, then `extra` as given."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def quote(s: object) -> str:
    """One shell word: `s` as it is when it is safe, single-quoted otherwise (shlex.quote)."""
    return shlex.quote(str(s))


def store_root(store: Any) -> Path | str | None:
    """The store's folder when it is not the default one (a re-run line then needs --store), else None.

    `store` is what the library functions take: a Store, a path, or None (the default store)."""
    if store is None:
        return None
    from .store import Store, default_store

    # a Store, not getattr(store, "root"): a Path has .root too (its "/")
    raw = store.root if isinstance(store, Store) else store
    if "://" in str(raw):  # a URL store (traceql.store_fs): as it is, a Path would fold its '//'
        return str(raw)
    root = Path(raw)
    return None if root.resolve() == Path(default_store()).resolve() else root


def command(
    *words: object,
    run: str | None = None,
    store: Any = None,
    rank: int | None = None,
    device: str | None = None,
    peak_hbm_gbps: float | None = None,
    baseline: str | None = None,
    params: Mapping[str, Any] | None = None,
    extra: Iterable[object] = (),
) -> str:
    """`traceql WORDS... [--run RUN] [--store S] ...` as one shell line, every word quoted.

    >>> command("query", "op_hbm_bytes", run="my run", params={"top_n": 10})
    "traceql query op_hbm_bytes --run 'my run' --param top_n=10"
    """
    parts: list[str] = ["traceql", *map(str, words)]
    if run is not None:
        parts += ["--run", run]
    root = store_root(store)
    if root is not None:
        parts += ["--store", str(root)]
    if rank is not None:
        parts += ["--rank", str(rank)]
    if device:
        parts += ["--device", device]
    if peak_hbm_gbps is not None:
        parts += ["--peak-hbm-gbps", f"{peak_hbm_gbps:g}"]
    if baseline:
        parts += ["--baseline", baseline]
    for k, v in (params or {}).items():
        parts += ["--param", f"{k}={v}"]
    parts += map(str, extra)
    return " ".join(quote(p) for p in parts)
