"""Build tiny traceql stores directly from canonical rows, so query answers are known by construction.

    build_store(root, "mem", {0: {"kernels": [{"name": "Tanh", "ts_ns": 0, "dur_ns": 10_000}]}},
                device="Ascend910")

Each rank maps table name -> list of row dicts (canonical column names, already in canonical units).
The run goes through the real Store/RankWriter/commit path, so the views see exactly what an ingest writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from traceql import schema
from traceql.rank_writer import RankWriter
from traceql.store import Store

MS = 1_000_000  # ns per millisecond
US = 1_000  # ns per microsecond
MiB = 1 << 20


def rows_to_columns(table: str, rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    known = {c.name for c in schema.columns(table)}
    names: list[str] = []
    for r in rows:
        for k in r:
            if k not in known:
                raise KeyError(f"{table}: {k!r} is not a canonical column")
            if k not in names:
                names.append(k)
    return {n: [r.get(n) for r in rows] for n in names}


def build_store(
    root: str | Path,
    run_id: str,
    ranks: dict[int, dict[str, list[dict[str, Any]]]],
    device: str | None = None,
    store: Store | None = None,
) -> Store:
    st = store or Store(root)
    staging = st.new_staging()
    files: dict[str, list[str]] = {}
    rows: dict[str, int] = {}
    for rank, tables in sorted(ranks.items()):
        w = RankWriter(staging, run_id, rank, tag=str(rank))
        for table, trows in tables.items():
            if trows:
                w.write(table, rows_to_columns(table, trows))
        w.close()
        for t, fl in w.files.items():
            files.setdefault(t, []).extend(fl)
        for t, n in w.rows.items():
            rows[t] = rows.get(t, 0) + n
    info = {
        "source": f"synthetic:{run_id}",
        "format": "canonical",
        "parser_version": "test",
        "device": device,
        "ranks": sorted(ranks),
        "ranks_count": len(ranks),
        "rows": rows,
        "files": files,
        "warnings": [],
        "meta": {},
    }
    st.commit(staging, run_id, info)
    return st
