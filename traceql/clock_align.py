"""Cross-rank clock alignment: per-rank clock offsets estimated from matched collectives.

Ranks' clocks can be off by milliseconds to minutes. Every member of a collective ends within the transfer time
of the others, so the median over matched collectives of (rank's end - reference rank's end) estimates the
rank's offset; it is applied only where it exceeds the collectives' own skew (the median duration of the
shorter member: how far apart ends can be on synchronised clocks). The SQL is queries/clock_offsets.sql
(`traceql query clock_offsets`; its body joins on (run_id, rank) into any query that needs the offsets).

Where the offsets live: they are computed on the fly from the stored `comm_events` (a few ms), not written
into `run_meta`: adding rows to an ingested run's tables would need a second commit path in the store, and an
estimate recomputed from the stored collectives can never go stale when the helper SQL changes.
Who applies them: `traceql export` (every exported time is moved onto the reference rank's clock). The
cross-rank analysis (_helpers.sql _comm_events' arrival order, wait attribution) does not yet.
"""

from __future__ import annotations

from typing import Any


def offsets(store: Any, run_id: str | None = None) -> list[dict[str, Any]]:
    """The clock_offsets rows of a run (see queries/clock_offsets.sql for the columns)."""
    from . import queries

    rows: list[dict[str, Any]] = queries.run("clock_offsets", store, run_id=run_id).to_pylist()
    return rows


def applied(rows: list[dict[str, Any]]) -> dict[int, int]:
    """rank -> ns to subtract from that rank's times, for the offsets that exceed the collectives' own skew."""
    return {int(r["rank"]): int(r["offset_ns"]) for r in rows if r["applied"]}


def _dur(ns: int | None) -> str:
    if ns is None:
        return "?"
    a = abs(ns)
    sign = "-" if ns < 0 else "+"
    if a >= 1_000_000_000:
        return f"{sign}{a / 1e9:.9f} s"
    if a >= 1_000_000:
        return f"{sign}{a / 1e6:.6g} ms"
    if a >= 1_000:
        return f"{sign}{a / 1e3:.6g} us"
    return f"{sign}{a} ns"


def describe(rows: list[dict[str, Any]], ranks: list[int] | None = None) -> list[str]:
    """One line per rank, for stderr: the offset, what it rests on and whether it was applied."""
    out = []
    for r in rows:
        if ranks is not None and int(r["rank"]) not in ranks:
            continue
        if r["n_matched"] == 0 or r["rank"] == r["ref_rank"]:
            out.append(f"rank {r['rank']}: offset 0 ({r['basis']})")
            continue
        verdict = (
            f"applied (exceeds the collectives' own skew {_dur(r['skew_ns']).lstrip('+')})"
            if r["applied"]
            else f"not applied (within the collectives' own skew {_dur(r['skew_ns']).lstrip('+')})"
        )
        out.append(
            f"rank {r['rank']}: clock {_dur(r['offset_ns'])} vs rank {r['ref_rank']} "
            f"({r['n_matched']} matched collectives, residual {_dur(r['residual_ns']).lstrip('+')}): {verdict}"
        )
    return out
