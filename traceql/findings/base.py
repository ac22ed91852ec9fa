"""What every check shares: number formatting, savings, the plausibility gate and `make_finding`."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Literal

from .context import OP_BYTES, RANK_SUMMARY
from .model import Finding
from .text import render

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Sequence

    from ..rows import OpHbmBytesRow, RankSummaryRow, WaitAttributionRow
    from .context import Context
    from .rules import Rule


def to_ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


def to_gb(b: float | None) -> float | None:
    return None if b is None else b / 1e9


def size_text(b: float | None) -> str:
    """Bytes as text with a unit that keeps 2-3 significant digits (decimal units, as the profilers write them)."""
    if b is None:
        return "unknown"
    for unit, f in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(b) >= f:
            return f"{b / f:.3g} {unit}"
    return f"{b:.0f} B"


def pct_text(x: float | None) -> str:
    return "unknown" if x is None else f"{100 * x:.0f}%"


def saving_of(
    value_ms: float | None, method: str, share: float | None, unit: str = "ms/step"
) -> dict[str, Any]:
    return {
        "value": None if value_ms is None else round(value_ms, 6),
        "unit": unit if value_ms is not None else None,
        "method": method,
        "share_of_step": None if share is None else round(share, 6),
    }


def template_values(rule: Rule, ctx: Context, **kw: Any) -> dict[str, Any]:
    """Template namespace: the rule's own numbers, the gate's, then the check's values."""
    v: dict[str, Any] = {
        k: x for k, x in rule.data.items() if isinstance(x, (int, float, str)) and k not in ("title",)
    }
    v.update({"sat": ctx.sat, "not_bound_line": ctx.not_bound})
    v.update(ctx.gate_values)
    v.update(kw)
    return v


_SHARE_KEY = re.compile(r"(utili[sz]ation|share|_frac|fraction|^util$|^late_util$)", re.I)
_NOT_SHARE = re.compile(r"(_rank|_id|_ns|_bytes|_count|_ms|_gbps|_bps)$")


def implausible_fields(values: dict[str, Any], prefix: str = "") -> list[dict[str, Any]]:
    """Share-like numbers above 1 (+ rounding) among `values`: [{"field", "observed"}]."""
    out = []
    for k, v in values.items():
        if (
            isinstance(v, (int, float))
            and not isinstance(v, bool)
            and _SHARE_KEY.search(k)
            and not _NOT_SHARE.search(k)
            and math.isfinite(v)
            and v > 1.0 + 1e-9
        ):
            out.append({"field": prefix + k, "observed": v})
    return out


def gate_top_ops(top_ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of a top list whose share-like numbers exceed 1 keep their other numbers; those become null with a
    note (the row is a data or model problem for `traceql check`, not a measurement)."""
    out = []
    for row in top_ops:
        bad = implausible_fields(row)
        if bad:
            row = {
                **row,
                **{b["field"]: None for b in bad},
                "implausible": "; ".join(
                    f"{b['field']} {b['observed']:.3g}x the whole (above the device peak "
                    "or the step): a data or model problem, see `traceql check`"
                    for b in bad
                ),
            }
        out.append(row)
    return out


def make_finding(
    ctx: Context,
    rule: Rule,
    *,
    fired: bool,
    variant: str,
    values: dict[str, Any],
    evidence: dict[str, Any] | None = None,
    top_ops: list[dict[str, Any]] | None = None,
    saving: dict[str, Any] | None = None,
    query_params: dict[str, Any] | None = None,
    share: float | None = None,
    query: str | None = None,
    grade: dict[str, Any] | None = None,
) -> Finding:
    """One Finding, through the plausibility gate: a share above 100% (of a peak, a step, compute) in the
    values its message would cite or in its evidence means the data or the model is wrong, so the finding
    does not fire and says that instead."""
    top_ops = gate_top_ops(list(top_ops or []))
    bad = implausible_fields(values) + implausible_fields(evidence or {}, "evidence.")
    if bad:
        evidence = {
            k: (None if any(b["field"] in (k, "evidence." + k) for b in bad) else v)
            for k, v in (evidence or {}).items()
        }
        evidence["implausible"] = bad
        what = ", ".join(f"{b['field'].removeprefix('evidence.')} = {b['observed']:.3g}x" for b in bad)
        msg = render(
            str(ctx.rules["plausibility"]["message"]),
            {"what": what, "check": rule.id},
            "plausibility.message",
        )
        return Finding(
            id=rule.id,
            title=str(rule["title"]),
            severity="info",
            optimisation=str(rule["optimisation"]),
            checklist_step=int(rule["step"]),
            fired=False,
            message=msg,
            evidence={"outcome": "implausible", **evidence},
            top_ops=top_ops,
            saving=saving_of(None, "not estimated: implausible input", None),
            query=ctx.command(
                query or str(rule["query"]), query_params if query_params is not None else rule.params
            ),
            suggestion=str(ctx.rules["plausibility"]["suggestion"]),
            grade={"grade": "insufficient", "detail": "implausible values: " + what},
        )
    sev = rule.severity(share) if fired else "info"
    suggestion = rule.get(f"suggestion_{ctx.device_kind}") or rule["suggestion"]
    return Finding(
        id=rule.id,
        title=str(rule["title"]),
        severity=sev,
        optimisation=str(rule["optimisation"]),
        checklist_step=int(rule["step"]),
        fired=fired,
        message=rule.message(variant, values),
        evidence={"outcome": variant, **(evidence or {})},
        top_ops=list(top_ops or []),
        saving=saving or saving_of(None, str(rule.get("saving_method", "no estimate")), None),
        query=ctx.command(
            query or str(rule["query"]), query_params if query_params is not None else rule.params
        ),
        suggestion=render(str(suggestion), values, f"rules.{rule.id}.suggestion", lenient=not fired),
        grade=grade if grade is not None else ctx.grade_for(rule, top_ops),
    )


def decide(
    ctx: Context,
    rule: Rule,
    *,
    unless: Sequence[tuple[bool, str]] = (),
    share: float | None = None,
    **common: Any,
) -> Finding:
    """The common end of a check: the first `(holds, variant)` of `unless` that holds gives a finding of that
    variant that does not fire; when none holds, the finding fires (variant "fired") with `share`. Both carry
    the same `common` fields (values, evidence, top_ops, saving, ...), so a reader sees the same numbers
    whether or not the rule fired."""
    for holds, variant in unless:
        if holds:
            return make_finding(ctx, rule, fired=False, variant=variant, **common)
    return make_finding(ctx, rule, fired=True, variant="fired", share=share, **common)


def gated_out(ctx: Context, rule: Rule) -> bool:
    """True when this memory-work rule must stay silent (the run is not bandwidth-bound)."""
    return bool(rule.get("gated", False)) and ctx.gate_open is False


def num_text(x: Any) -> str:
    return "unknown" if x is None else f"{x:.2f}"


def scaling_text(scaling: float | None, method: str) -> str:
    """'scaling efficiency 0.58 vs baseline run X' only with a baseline; otherwise the compute fraction, named
    as such (without a baseline there is no scaling efficiency)."""
    if method.startswith("baseline:"):
        return f"scaling efficiency {num_text(scaling)} vs baseline run {method.removeprefix('baseline:')}"
    return f"compute fraction {num_text(scaling)}"


def scaling_of(ctx: Context) -> tuple[float | None, str]:
    w = ctx.wait_run()
    scaling = w["scaling_vs_baseline"] if w else None
    if scaling is not None:
        return float(scaling), f"baseline:{ctx.baseline}"
    fraction = w["compute_fraction"] if w else None
    return (float(fraction) if fraction is not None else None), "compute_fraction"


def op_bytes_rows(ctx: Context) -> list[OpHbmBytesRow]:
    """op_hbm_bytes once for the whole report: its top rows serve the top-10 and the re-read checks."""
    return ctx.read(OP_BYTES)


def bound_share_of(w: WaitAttributionRow | None) -> float | None:
    """The share of the step in what bounds it (wait_attribution's verdict), None without a verdict."""
    verdict = w["verdict"] if w else None
    if not w or not verdict:
        return None
    if verdict == "memory-bound":
        return w["memory_share"]
    if verdict == "communication-bound":
        return w["communication_share"]
    if verdict == "compute-bound":
        return w["compute_share"]
    if verdict == "host/idle-bound":
        return w["idle_host_share"]
    return None


def rank_skew(ctx: Context) -> tuple[dict[int, RankSummaryRow], dict[int, WaitAttributionRow]]:
    # rank_summary has one row per rank, every one naming its rank
    rs = {rank: r for r in ctx.read(RANK_SUMMARY) if (rank := r["rank"]) is not None}
    return rs, ctx.wait_by_rank()


# the per-rank totals per_step_rank divides by the rank's steps (columns of both rank_summary and
# wait_attribution, or of one of them: mypy checks each name against the row it is read from)
SummaryTotal = Literal["lateness_ns", "compute_kernels", "compute_ns", "peer_wait_ns"]
WaitTotal = Literal[
    "comm_wait_peer_hbm_ns",
    "comm_wait_peer_other_ns",
    "comm_transit_ns",
    "compute_hbm_saturated_ns",
    "compute_other_ns",
    "idle_ns",
    "host_ns",
]


def per_step_summary(row: RankSummaryRow, key: SummaryTotal) -> float:
    """A rank_summary total per step of that rank."""
    steps = row["steps"] or 1
    return float(row[key] or 0) / steps


def per_step_rank(row: WaitAttributionRow | None, key: WaitTotal) -> float:
    """A wait_attribution rank total per step of that rank (0 for a rank without a row)."""
    if row is None:
        return 0.0
    steps = row["steps"] or 1
    return float(row[key] or 0) / steps


def steps_of(row: WaitAttributionRow | None) -> int:
    """A rank's steps from its wait_attribution row, 1 without a row or a step (what per-step numbers divide by)."""
    return (row["steps"] if row else None) or 1


def lateness_split(ctx: Context, slow: int, fast: int) -> dict[str, float]:
    """Per step, what rank `slow` does more than rank `fast`: HBM-saturated compute, other compute and host/idle
    time, all from wait_attribution's rank rows (one definition of the split, read by comm_waits_on_memory and
    slow_rank alike)."""
    wr = ctx.wait_by_rank()
    ws, wf = wr.get(slow), wr.get(fast)

    def host(w: WaitAttributionRow | None) -> float:
        return per_step_rank(w, "idle_ns") + per_step_rank(w, "host_ns")

    return {
        "saturated_ns": per_step_rank(ws, "compute_hbm_saturated_ns")
        - per_step_rank(wf, "compute_hbm_saturated_ns"),
        "other_compute_ns": per_step_rank(ws, "compute_other_ns") - per_step_rank(wf, "compute_other_ns"),
        "host_idle_ns": host(ws) - host(wf),
    }
