"""The words traceql's answers use, for the `explain` tool: the evidence grades, the verdict's bounds and
confidence, and the answer fields an agent must not misread. The grades' meanings are traceql.grades' own
(its module docstring is the source); this adds what an agent may and may not say with each."""

from __future__ import annotations

GRADE_TERMS: dict[str, str] = {
    "measured": (
        "per-task hardware counters (PMU bytes per task) or, for times, the profiler's own timestamps. "
        "An agent may state the number as a measurement."
    ),
    "pipe": (
        "per-task pipe utilisation (which pipe - MTE2/MTE3 memory movement, cube, vector, scalar - was busy how "
        "much of the task's time): says what a task waited on, not how many bytes it moved. State it as a "
        "utilisation, never as bytes or bandwidth."
    ),
    "sampled": (
        "device counters sampled at a period (grade_detail/period_ns says which): resolved in time only to that "
        "period. State it as a sampled figure with its period; for kernels shorter than the period it bounds, "
        "it does not resolve."
    ),
    "modeled": (
        "tensor sizes from shapes x dtypes: a lower bound (no re-reads, no workspace), never tested against the "
        "70% / 80% lines. State it as 'at least', never as measured traffic."
    ),
    "insufficient": (
        "nothing in the dump resolves the quantity. Do NOT state a number for it: say the dump cannot tell and "
        "quote the capture advice (capture_advice / grade.capture) that would."
    ),
    "unresolved": "the same as insufficient: the dump cannot tell; quote the capture advice, state no number.",
}

OTHER_TERMS: dict[str, str] = {
    "memory": "bound: the step's time goes mostly to compute that runs with HBM bandwidth near its peak.",
    "compute": "bound: the step's time goes mostly to compute that is not limited by HBM bandwidth.",
    "latency": (
        "bound: the compute time goes mostly to tasks where no pipe is near its roof (per-task pipe "
        "utilisation): neither HBM nor the compute units saturate; compute_bounds.top_cause names why."
    ),
    "communication": "bound: the step's time goes mostly to collectives (transfer or waiting for peers).",
    "host/idle": "bound: the device is mostly idle: host code, data loading or launch gaps.",
    "judged": "confidence: the evidence and the capture decide the bound.",
    "cannot tell": (
        "confidence: the evidence or the capture cannot decide the bound; the headline says why and "
        "capture_advice says what to capture. Report it as undecided."
    ),
    "saving": (
        "an estimate of what a finding's fix would save, per step of one rank unless its unit says otherwise "
        "(saving.method says how it was estimated). It carries the finding's grade."
    ),
    "share_of_step": "a saving or time as a fraction (0..1) of the mean step time.",
    "truncated": (
        "false, or what the size cap left out (dropped_items per list, clipped_strings) and how_to_get_more."
    ),
    "total_rows": "how many rows the query or SQL returned in all; rows holds the first `limit` of them.",
    "shown": "a number written for reading (3 significant digits, with unit); value beside it is exact.",
    "severity": "info (did not fire), low, medium, high, critical: how much the finding matters.",
}


def terms() -> dict[str, str]:
    """Every term, grades first."""
    return {**GRADE_TERMS, **OTHER_TERMS}
