"""The memory gate: is the run bandwidth-bound enough for memory work to pay? One fact, computed once per
evaluation from the declared reads (hbm_utilization, wait_attribution) before any check runs.

The bandwidth check (checklist step 1) reports it; the `gated = true` rules (fusion, UB reuse, mixed precision)
stay silent when it is closed. Because it is a pure function of the reads, no check's result depends on which
check ran first (tests/test_findings_order.py permutes the rules and the checks to hold that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..rows import HbmUtilizationRow
    from .context import Context

# which evidence decided the gate (the bandwidth check's message variants follow from it)
NO_PEAK = "no_peak"
MEASURED = "measured"  # busy utilisation from PMU bytes, or samples whose period resolves the kernels
SAMPLED_SATURATED = "sampled_saturated"  # a whole-step sampled mean at or above the saturation line
SAMPLED_NOT_BOUND = "sampled_not_bound"  # every rank's upper bound while computing below the not-bound line
SAMPLED_UNRESOLVED = "sampled_unresolved"  # the sampling period cannot tell
LOWER_BOUND = "lower_bound"  # tensor sizes only
NO_DATA = "no_data"


@dataclass(frozen=True)
class Gate:
    """open: True (memory work may pay), False (not bandwidth-bound: gated rules stay silent), None (cannot
    tell). values: the numbers the gated messages cite ({gate_util}, {gate_line}, {bound})."""

    case: str
    open: bool | None
    values: dict[str, Any]
    rank: int | None = None
    row: HbmUtilizationRow | None = None  # the rank row that decided it
    utils: dict[int, float] = field(default_factory=dict)


def _bound(ctx: Context) -> str:
    w = ctx.wait_run()
    return str((w["verdict"] if w else None) or "unknown").removesuffix("-bound")


def _values(util: float, line: float, bound: str) -> dict[str, Any]:
    return {"gate_util": util, "gate_line": line, "bound": bound}


def memory_gate(ctx: Context) -> Gate:
    """The gate from the strongest HBM evidence the run has (traceql.grades' ladder)."""
    bound = _bound(ctx)
    closed_unknown = _values(0.0, ctx.not_bound, bound)
    if ctx.peak() is None:
        return Gate(NO_PEAK, None, closed_unknown)
    ranks = ctx.hbm_ranks()
    utils = {r: float(u) for r, row in ranks.items() if (u := row["busy_utilization"]) is not None}
    if utils:
        top = max(utils, key=lambda r: utils[r])
        util = utils[top]
        return Gate(
            MEASURED, util >= ctx.not_bound, _values(util, ctx.not_bound, bound), top, ranks[top], utils
        )
    sampled = {
        r: row for r, row in ranks.items() if row["evidence"] == "sampled" and row["utilization"] is not None
    }
    if sampled:
        return _sampled_gate(ctx, sampled, bound, closed_unknown)
    if any(row["modeled_utilization_lower"] for row in ranks.values()):
        return Gate(LOWER_BOUND, None, closed_unknown)
    return Gate(NO_DATA, None, closed_unknown)


def _sampled_gate(
    ctx: Context, sampled: dict[int, HbmUtilizationRow], bound: str, unknown: dict[str, Any]
) -> Gate:
    """The gate from sampled HBM counters (every row here has a utilization: see memory_gate)."""
    util = {r: float(row["utilization"] or 0.0) for r, row in sampled.items()}
    # the rank whose compute could be the busiest: highest upper bound (then highest mean)
    top = max(sampled, key=lambda r: (sampled[r]["busy_utilization_max"] or 0.0, util[r]))
    row = sampled[top]
    if any(u >= ctx.sat for u in util.values()):
        return Gate(SAMPLED_SATURATED, True, unknown, top, row)
    if all(
        (umax_r := r["busy_utilization_max"]) is not None and umax_r < ctx.not_bound for r in sampled.values()
    ):
        umax = row["busy_utilization_max"]
        return Gate(SAMPLED_NOT_BOUND, False, _values(min(umax or 0.0, 1.0), ctx.not_bound, bound), top, row)
    return Gate(SAMPLED_UNRESOLVED, None, unknown, top, row)
