"""This process's shared in-memory DuckDB databases, for parsers that run many small queries per unit:
`duckdb.connect` costs ~25 CPU-ms, a cursor ~0.3, and a cluster of small ranks opened three databases a rank
(issue 22). Kept per process (a forked worker never uses its parent's) with a private spill dir."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

_DBS: dict[tuple[Any, ...], Any] = {}
_TEMP: dict[int, Any] = {}


def process_db(key: tuple[Any, ...], setup: Callable[[Any], None]) -> Any:
    """A new cursor on this process's one in-memory database for `key` (the settings `setup` applies to a
    fresh database: threads, memory_limit, temp_directory...). Keyed by pid as well: a forked worker never
    uses its parent's database. Callers set only session settings on the cursor (a database-wide SET would
    change it for every later user of the key) and close it when done."""
    import duckdb

    full = (os.getpid(), *key)
    db = _DBS.get(full)
    if db is None:
        db = duckdb.connect(":memory:")
        setup(db)
        _DBS[full] = db
    return db.cursor()


def process_temp_dir() -> str:
    """A private temp dir (traceql._owned) for this process's shared databases to spill into; removed at this
    process's exit (a pool worker's too: multiprocessing runs its finalizers, not atexit), else by the next
    ingest's reaper."""
    pid = os.getpid()
    d = _TEMP.get(pid)
    if d is None:
        from multiprocessing import util

        from .._owned import TempDir

        d = _TEMP[pid] = TempDir("duck")
        util.Finalize(None, d.cleanup, exitpriority=1)
    return str(d.name)
