"""open_store: the one way to open a store from what a user typed (a folder, file:// or an fsspec URL).

A local folder opens as traceql.store.Store, a URL (s3://bucket/prefix) as traceql.store_fs.ObjectStore.
This module sits above both, so the store never imports its object-storage subclass (no import circle).
"""

from __future__ import annotations

import os
from typing import Any

from .store import Store, is_remote


def open_store(root: Any = None) -> Store:
    """The store at `root` (default: $TRACEQL_STORE, else ./.traceql); a Store given is returned as it is."""
    if isinstance(root, Store):
        return root
    if is_remote(root if root is not None else os.environ.get("TRACEQL_STORE")):
        from .store_fs import ObjectStore  # fsspec is imported only for a URL root

        return ObjectStore(root)
    return Store(root)
