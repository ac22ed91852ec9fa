"""Checklist steps 1 and 3: is the run bandwidth-bound, and which operators move the bytes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import gate as gate_mod
from ..base import bound_share_of, make_finding, op_bytes_rows, saving_of, template_values, to_ms
from ..context import OP_BOUNDS, OP_BYTES
from ..model import Finding
from ..registry import check

if TYPE_CHECKING:  # pragma: no cover
    from ..context import Context
    from ..rules import Rule


@check("bandwidth_bound")
def check_bandwidth_bound(ctx: Context, rule: Rule) -> Finding:
    """The article's checklist step 1 on the strongest evidence the dump has (traceql.grades): measured busy
    utilisation against the 80% / 70% lines; sampled counters against them only as far as the sampling period
    resolves (the whole-step mean can prove saturation, its upper bound while computing can rule it out, and in
    between the answer is 'cannot tell'); a modeled lower bound never. The evidence case is the run's memory
    gate (findings.gate), computed before any check; this check only reports it."""
    gate = ctx.gate
    b = _Base.of(ctx, rule)
    if gate.case == gate_mod.NO_PEAK:
        note = ctx.meta.get(b"traceql.peaks_note", b"").decode()
        return b.finding(False, "no_peak", template_values(rule, ctx, note=note, **b.base))
    if gate.case == gate_mod.MEASURED:
        return _measured(ctx, rule, b, gate)
    if gate.case in (gate_mod.SAMPLED_SATURATED, gate_mod.SAMPLED_NOT_BOUND, gate_mod.SAMPLED_UNRESOLVED):
        return _sampled(ctx, rule, b, gate)
    if gate.case == gate_mod.LOWER_BOUND:
        lower = max(float(x) for row in ctx.hbm_ranks().values() if (x := row["modeled_utilization_lower"]))
        b.ev.update(modeled_lower_bound_utilization=lower)
        grade = {"grade": "insufficient", "detail": "tensor sizes only: a lower bound", "capture": b.capture}
        return b.finding(False, "lower_bound", template_values(rule, ctx, lower=lower, **b.base), grade=grade)
    grade = {"grade": "insufficient", "detail": "no HBM bytes", "capture": b.capture}
    return b.finding(False, "no_data", template_values(rule, ctx, **b.base), grade=grade)


@dataclass
class _Base:
    """What every outcome of the bandwidth check carries: its evidence, the bound and the query it cites."""

    ctx: Context
    rule: Rule
    ev: dict[str, Any]
    base: dict[str, Any]
    capture: str

    @classmethod
    def of(cls, ctx: Context, rule: Rule) -> _Base:
        from ... import grades

        w = ctx.wait_run()
        bound = str((w["verdict"] if w else None) or "unknown").removesuffix("-bound")
        bound_share = bound_share_of(w)
        capture = grades.CAPTURE_ADVICE["gpu" if ctx.device_kind == "gpu" else "ascend"]
        ev: dict[str, Any] = {
            "peak_hbm_bps": ctx.peak(),
            "busy_utilization_by_rank": {str(k): v for k, v in sorted(ctx.gate.utils.items())},
            "bound": bound,
        }
        base = {
            "bound": bound,
            "bound_share": bound_share if bound_share is not None else 0.0,
            "capture": capture,
        }
        return cls(ctx, rule, ev, base, capture)

    def finding(
        self,
        fired: bool,
        variant: str,
        values: dict[str, Any],
        grade: dict[str, Any] | None = None,
    ) -> Finding:
        rule = self.rule
        qp = {"sat_threshold": rule["saturated"], "low_threshold": rule["not_bound"]}
        return make_finding(
            self.ctx,
            rule,
            fired=fired,
            variant=variant,
            values=values,
            evidence=self.ev,
            query_params=qp,
            saving=saving_of(None, str(rule["saving_method"]), None) if fired else None,
            grade=grade,
        )


def _measured(ctx: Context, rule: Rule, b: _Base, gate: gate_mod.Gate) -> Finding:
    from ... import grades

    utils, top_rank, row = gate.utils, gate.rank, gate.row
    assert row is not None  # a measured gate names the rank row it read
    util = utils[top_rank] if top_rank is not None else 0.0
    sat_ranks = sorted(r for r, u in utils.items() if u >= rule["saturated"])
    b.ev.update(
        max_utilization=util,
        max_rank=top_rank,
        saturated_ranks=sat_ranks,
        frac_busy_saturated=row["frac_busy_saturated"],
        busy_bw_bps=row["busy_bw_bps"],
        hbm_bytes_source=row["hbm_bytes_source"],
    )
    vals = template_values(
        rule,
        ctx,
        util=util,
        rank=top_rank,
        ranks=", ".join(map(str, sat_ranks)) or str(top_rank),
        frac_saturated=row["frac_busy_saturated"] or 0.0,
        busy_gbps=(row["busy_bw_bps"] or 0) / 1e9,
        source=row["hbm_bytes_source"] or "unknown",
        **b.base,
    )
    grade = grades.hbm_grade(row, ctx.device_kind)
    if util >= rule["saturated"]:
        return b.finding(True, "fired", vals, grade)
    return b.finding(False, "borderline" if util >= rule["not_bound"] else "not_bound", vals, grade)


def _sampled(ctx: Context, rule: Rule, b: _Base, gate: gate_mod.Gate) -> Finding:
    from ... import grades

    row, top_rank = gate.row, gate.rank
    # a sampled gate names the rank row it read, and that row has a utilization (gate.memory_gate)
    assert row is not None and row["utilization"] is not None
    mean, umax = float(row["utilization"]), row["busy_utilization_max"]
    b.ev.update(
        sampled_mean_utilization=mean,
        busy_utilization_bound=min(umax, 1.0) if umax is not None else None,
        max_sample_utilization=row["max_utilization"],
        sample_period_ns=row["sample_period_ns"],
        max_rank=top_rank,
        resolved_share=row["resolved_share"],
    )
    vals = template_values(
        rule,
        ctx,
        rank=top_rank,
        mean_util=mean,
        max_sample=row["max_utilization"] or 0.0,
        period_ms=(row["sample_period_ns"] or 0) / 1e6,
        util_max=min(umax or 0.0, 1.0),
        util_max_text="100%" if umax is None or umax >= 1 else f"{umax:.0%}",
        **b.base,
    )
    grade = grades.hbm_grade(row, ctx.device_kind)
    if gate.case == gate_mod.SAMPLED_SATURATED:
        return b.finding(True, "fired_sampled", vals, grade)
    if gate.case == gate_mod.SAMPLED_NOT_BOUND:
        return b.finding(False, "not_bound_sampled", vals, grade)
    return b.finding(False, "unresolved", vals, {**grade, "grade": "insufficient", "capture": b.capture})


@check("top_hbm_ops", OP_BYTES, OP_BOUNDS)
def check_top_hbm_ops(ctx: Context, rule: Rule) -> Finding:
    rows = op_bytes_rows(ctx)[: int(rule.params.get("top_n", 10))]
    rows = [r for r in rows if r["hbm_bytes"]]
    if not any(r["hbm_bytes_source"] in ("pmu", "sampled", "mixed") for r in rows):
        piped = _pipe_candidates(ctx, rule)  # tensor sizes at best: rank by memory-bound time instead
        if piped is not None:
            return piped
    if not rows:
        return make_finding(ctx, rule, fired=False, variant="no_data", values=template_values(rule, ctx))
    # every row kept has bytes (filtered above)
    first_share = rows[0]["share"]
    total = (
        (rows[0]["hbm_bytes"] or 0) / first_share if first_share else sum(r["hbm_bytes"] or 0 for r in rows)
    )
    top_share = sum(r["share"] or 0 for r in rows)
    sources = sorted({src for r in rows if (src := r["hbm_bytes_source"])})
    top = [
        {
            "name": r["name"],
            "op_type": r["op_type"],
            "calls": r["calls"],
            "hbm_gb": r["hbm_gb"],
            "share": r["share"],
            "dur_ms": to_ms(r["dur_ns"]),
            "bw_utilization": r["bw_utilization"],
            "hbm_bytes_source": r["hbm_bytes_source"],
            "measured_over_modeled": r["measured_over_modeled"],
        }
        for r in rows
    ]
    first = rows[0]
    vals = template_values(
        rule,
        ctx,
        n=len(rows),
        top_share=top_share,
        total_gb=total / 1e9,
        op1=first["op_type"] or first["name"],
        op1_gb=first["hbm_gb"],
        op1_share=first["share"] or 0.0,
        sources=", ".join(sources) or "unknown",
    )
    return make_finding(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        top_ops=top,
        evidence={"total_hbm_bytes": total, "top_share": top_share, "sources": sources},
    )


def _pipe_candidates(ctx: Context, rule: Rule) -> Finding | None:
    """Without measured or sampled bytes, the operators spending the most time memory-bound by per-task pipe
    utilisation (op_bounds, grade pipe) are the memory checklist's candidates; None without pipe evidence."""
    n = int(rule.params.get("top_n", 10))
    ops = [
        r for r in ctx.read(OP_BOUNDS) if r["grade"] in ("pipe", "measured") and (r["memory_share"] or 0) > 0
    ]
    if not ops:
        return None
    ops.sort(key=lambda r: (-(r["dur_ns"] or 0) * (r["memory_share"] or 0), r["name"]))
    top = ops[:n]
    per_step = [ctx.per_step((r["dur_ns"] or 0) * (r["memory_share"] or 0)) or 0.0 for r in top]
    compute = ctx.compute_ns()
    mem_ns = sum((r["dur_ns"] or 0) * (r["memory_share"] or 0) for r in top)
    first = top[0]
    vals = template_values(
        rule,
        ctx,
        n=len(top),
        mem_ms=to_ms(sum(per_step)) or 0.0,
        mem_share=mem_ns / compute if compute else 0.0,
        op1=first["op_type"] or first["name"],
        op1_ms=to_ms(per_step[0]) or 0.0,
    )
    rows = [
        {
            "name": r["name"],
            "op_type": r["op_type"],
            "calls": r["calls"],
            "dur_ms": to_ms(r["dur_ns"]),
            "memory_share": r["memory_share"],
            "memory_ms_per_step": to_ms(ps),
            "mem_pipe": r["mem_pipe"],
            "bound": r["bound"],
            "grade": r["grade"],
        }
        for r, ps in zip(top, per_step, strict=True)
    ]
    return make_finding(
        ctx,
        rule,
        fired=True,
        variant="fired_pipe",
        values=vals,
        top_ops=rows,
        evidence={"ranked_by": "memory-bound time (op_bounds, per-task pipe utilisation)"},
        query="op_bounds",
        query_params={"top_n": 200},
        grade={
            "grade": "pipe",
            "detail": "operators ranked by memory-bound time from per-task pipe utilisation",
        },
    )
