"""Query results kept between processes, in the store's `.cache/queries/` folder.

`traceql findings` and then `traceql report` on the same run ran every findings query twice (~6-7 CPU-s on an
8-rank cluster); an agent asking the MCP server one question after another ran them once per question. An
analysis session (traceql.analysis) keeps each result it computes here and reads it back in a later process
instead of running the query again.

A result is found only under a key that holds everything it is a function of:

  - the query's name, run, rank and bound params (with the peaks that were given), and the device asked for;
  - the run's whole manifest entry (its files, their derived-table fingerprints, when it was ingested): a run
    ingested again, replaced or prepared again has another entry;
  - the code: a hash of every file of the traceql package and of queries/ (the SQL, the helper macros, the
    device presets), and the DuckDB and pyarrow versions.

So a cached result is what running the query would return, never an older answer. Files are Arrow IPC, zstd
(the table's schema metadata, which findings read, included), written atomically; at most MAX_FILES are kept
(the oldest go first). Nothing is kept for an object store, a store this process cannot write, a session that does
not prepare the run (it writes nothing), or with TRACEQL_QUERY_CACHE=0. Deleting the folder is safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from .store import Store

MAX_FILES = 2000  # ~40 files a run for findings and a report: room for ~50 runs' worth


def folder(store: Store) -> Path | None:
    """The store's query-cache folder, or None where results are not kept (see the module doc)."""
    from .store import cache_folder

    return cache_folder(store, "TRACEQL_QUERY_CACHE", "queries")


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of the code a result depends on: every file under the traceql package (which holds queries/ and
    the device presets) and the DuckDB and pyarrow versions. Computed once per process (~1 MB read)."""
    import duckdb
    import pyarrow

    from . import sqlfiles

    h = hashlib.sha256(f"duckdb {duckdb.__version__} pyarrow {pyarrow.__version__}".encode())
    roots = {Path(__file__).resolve().parent, sqlfiles.library_dir().resolve()}
    for root in sorted(roots):
        for p in sorted(root.rglob("*")):
            if p.is_file() and p.suffix in (".py", ".sql", ".toml", ".json"):
                h.update(str(p.relative_to(root)).encode())
                h.update(p.read_bytes())
    return h.hexdigest()


def key(parts: dict[str, Any]) -> str:
    """The file name of a result: a hash of `parts` (the query, run, rank, params, device, the run's manifest
    entry) and of the code."""
    text = json.dumps(parts, sort_keys=True, default=repr)
    return hashlib.sha256(f"{code_fingerprint()}\n{text}".encode()).hexdigest()[:40]


def load(where: Path, name: str) -> pa.Table | None:
    """The cached result `name`, or None (absent, or unreadable: it is then computed again)."""
    import pyarrow as pa

    path = where / f"{name}.arrow"
    try:
        # read into memory, not mapped: the table outlives the file (a later prune or replace removes it)
        with pa.OSFile(str(path), "rb") as src:
            return pa.ipc.open_file(src).read_all()
    except (OSError, pa.ArrowInvalid):
        return None


def save(where: Path, name: str, table: pa.Table) -> None:
    """Keep `table` as result `name` (written to a temporary file, then renamed: a concurrent reader sees the
    whole file or none). A folder that cannot be written only costs the next process the query."""
    import pyarrow as pa

    from .store import write_cache_file

    def write(tmp: Path) -> None:
        # zstd: a per-step result of an 8-rank cluster is 3-15 MB raw, ~15x less so, for ~0.01 CPU-s more
        opts = pa.ipc.IpcWriteOptions(compression="zstd")
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema, options=opts) as w:
            w.write_table(table)

    if not write_cache_file(where / f"{name}.arrow", write, (OSError, pa.ArrowInvalid)):
        return
    if where not in _pruned:  # once a process: a listing of up to MAX_FILES files per result would add up
        _pruned.add(where)
        _prune(where)


_pruned: set[Path] = set()


def _prune(where: Path) -> None:
    """Remove the oldest results beyond MAX_FILES."""
    try:
        files = [(p.stat().st_mtime, p) for p in where.glob("*.arrow")]
    except OSError:
        return
    if len(files) <= MAX_FILES:
        return
    for _t, p in sorted(files)[: len(files) - MAX_FILES]:
        with contextlib.suppress(OSError):
            p.unlink()
