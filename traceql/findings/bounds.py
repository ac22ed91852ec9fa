"""Inside compute: how the compute time splits into memory-, compute- and latency-bound tasks (bound_shares,
queries/_bounds.sql), when the per-task evidence covers enough of it to say so. Pure functions of the context's
reads: the verdict and the checks cite the same split."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..rows import BoundSharesRow
    from .context import Context

# per-task evidence (pipe ratios or PMU bytes) must cover at least this share of compute time to split it
MIN_GRADED_SHARE = 0.5

CAUSE_TEXT = {
    "scalar": "the scalar pipe (address and control work)",
    "fixpipe": "the cube output path (fixpipe)",
    "few_blocks": "too few blocks for the cores",
    "short_task": "short tasks dominated by launch and scheduling",
    "poor_overlap": "pipes waiting on each other (no pipe near its roof)",
}


def graded_share(row: BoundSharesRow | None) -> float:
    if not row:
        return 0.0
    return float(row["pipe_share"] or 0.0) + float(row["measured_share"] or 0.0)


def compute_split(row: BoundSharesRow | None) -> dict[str, Any] | None:
    """bound_shares' row as the verdict cites it, or None when per-task evidence covers too little compute."""
    if not row or not row["compute_ns"] or graded_share(row) < MIN_GRADED_SHARE:
        return None
    shares = {
        "memory": float(row["memory_share"] or 0.0),
        "compute": float(row["compute_share"] or 0.0),
        "latency": float(row["latency_share"] or 0.0),
    }
    # ties: memory first (the article's question), then compute
    bound = max(("memory", "compute", "latency"), key=lambda k: shares[k])
    grade = "measured" if float(row["measured_share"] or 0.0) >= float(row["pipe_share"] or 0.0) else "pipe"
    cause = row["top_cause"]
    return {
        "bound": bound,
        "memory_share": shares["memory"],
        "compute_share": shares["compute"],
        "latency_share": shares["latency"],
        "unknown_share": float(row["unknown_share"] or 0.0),
        "top_cause": cause,
        "top_cause_text": CAUSE_TEXT.get(str(cause), "") if cause else "",
        "top_cause_share": row["top_cause_share"],
        "grade": grade,
        "graded_share": graded_share(row),
    }


def split_text(split: dict[str, Any]) -> str:
    """'compute time: 41% memory-bound, 4% compute-bound, 55% latency-bound (pipe)'."""
    unknown = f", {split['unknown_share']:.0%} not resolved" if split["unknown_share"] >= 0.005 else ""
    return (
        f"compute time: {split['memory_share']:.0%} memory-bound, {split['compute_share']:.0%} compute-bound, "
        f"{split['latency_share']:.0%} latency-bound{unknown} ({split['grade']} evidence)"
    )


def run_split(ctx: Context) -> dict[str, Any] | None:
    return compute_split(ctx.bounds_run())


def rank_memory_ns(ctx: Context, rank: int) -> float | None:
    """A rank's compute time in memory-bound tasks, when its per-task evidence covers enough of it."""
    row = ctx.bounds_by_rank().get(rank)
    if not row or graded_share(row) < MIN_GRADED_SHARE:
        return None
    return float(row["compute_ns"] or 0) * float(row["memory_share"] or 0.0)
