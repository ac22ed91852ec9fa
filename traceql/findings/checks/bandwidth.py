"""Checklist steps 1 and 3: is the run bandwidth-bound, and which operators move the bytes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base import bound_share_of, make_finding, op_bytes_rows, saving_of, template_values, to_ms
from ..context import OP_BYTES
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
    between the answer is 'cannot tell'); a modeled lower bound never."""
    from ... import grades

    ranks = ctx.hbm_ranks()
    utils = {
        r: row["busy_utilization"] for r, row in ranks.items() if row.get("busy_utilization") is not None
    }
    peak = ctx.peak()
    w = ctx.wait_run()
    bound = str((w or {}).get("verdict") or "unknown").removesuffix("-bound")
    bound_share = bound_share_of(w)
    qp = {"sat_threshold": rule["saturated"], "low_threshold": rule["not_bound"]}
    ev: dict[str, Any] = {
        "peak_hbm_bps": peak,
        "busy_utilization_by_rank": {str(k): v for k, v in sorted(utils.items())},
        "bound": bound,
    }
    capture = grades.CAPTURE_ADVICE["gpu" if ctx.device_kind == "gpu" else "ascend"]
    base = {
        "bound": bound,
        "bound_share": bound_share if bound_share is not None else 0.0,
        "capture": capture,
    }
    ctx.gate_open = None
    ctx.gate_values = {"gate_util": 0.0, "gate_line": ctx.not_bound, "bound": bound}
    if peak is None:
        note = ctx.meta.get(b"traceql.peaks_note", b"").decode()
        return make_finding(
            ctx,
            rule,
            fired=False,
            variant="no_peak",
            values=template_values(rule, ctx, note=note, **base),
            evidence=ev,
            query_params=qp,
        )
    if utils:  # measured, or sampled with a period that resolves the kernels
        top_rank = max(utils, key=lambda r: utils[r])
        util = float(utils[top_rank])
        row = ranks[top_rank]
        sat_ranks = sorted(r for r, u in utils.items() if u >= rule["saturated"])
        ev.update(
            max_utilization=util,
            max_rank=top_rank,
            saturated_ranks=sat_ranks,
            frac_busy_saturated=row.get("frac_busy_saturated"),
            busy_bw_bps=row.get("busy_bw_bps"),
            hbm_bytes_source=row.get("hbm_bytes_source"),
        )
        ctx.gate_open = util >= rule["not_bound"]
        ctx.gate_values = {"gate_util": util, "gate_line": float(rule["not_bound"]), "bound": bound}
        vals = template_values(
            rule,
            ctx,
            util=util,
            rank=top_rank,
            ranks=", ".join(map(str, sat_ranks)) or str(top_rank),
            frac_saturated=row.get("frac_busy_saturated") or 0.0,
            busy_gbps=(row.get("busy_bw_bps") or 0) / 1e9,
            source=row.get("hbm_bytes_source") or "unknown",
            **base,
        )
        grade = grades.hbm_grade(row, ctx.device_kind)
        if util >= rule["saturated"]:
            return make_finding(
                ctx,
                rule,
                fired=True,
                variant="fired",
                values=vals,
                evidence=ev,
                query_params=qp,
                saving=saving_of(None, str(rule["saving_method"]), None),
                grade=grade,
            )
        variant = "borderline" if util >= rule["not_bound"] else "not_bound"
        return make_finding(
            ctx, rule, fired=False, variant=variant, values=vals, evidence=ev, query_params=qp, grade=grade
        )
    sampled = {
        r: row
        for r, row in ranks.items()
        if row.get("evidence") == "sampled" and row.get("utilization") is not None
    }
    if sampled:
        # the rank whose compute could be the busiest: highest upper bound (then highest mean)
        top_rank = max(
            sampled, key=lambda r: (sampled[r].get("busy_utilization_max") or 0.0, sampled[r]["utilization"])
        )
        row = sampled[top_rank]
        mean, umax = float(row["utilization"]), row.get("busy_utilization_max")
        period_ms = (row.get("sample_period_ns") or 0) / 1e6
        ev.update(
            sampled_mean_utilization=mean,
            busy_utilization_bound=min(umax, 1.0) if umax is not None else None,
            max_sample_utilization=row.get("max_utilization"),
            sample_period_ns=row.get("sample_period_ns"),
            max_rank=top_rank,
            resolved_share=row.get("resolved_share"),
        )
        vals = template_values(
            rule,
            ctx,
            rank=top_rank,
            mean_util=mean,
            max_sample=row.get("max_utilization") or 0.0,
            period_ms=period_ms,
            util_max=min(umax or 0.0, 1.0),
            util_max_text="100%" if umax is None or umax >= 1 else f"{umax:.0%}",
            **base,
        )
        grade = grades.hbm_grade(row, ctx.device_kind)
        if any(float(r["utilization"]) >= rule["saturated"] for r in sampled.values()):
            ctx.gate_open = True
            return make_finding(
                ctx,
                rule,
                fired=True,
                variant="fired_sampled",
                values=vals,
                evidence=ev,
                query_params=qp,
                saving=saving_of(None, str(rule["saving_method"]), None),
                grade=grade,
            )
        if all(
            r.get("busy_utilization_max") is not None and r["busy_utilization_max"] < rule["not_bound"]
            for r in sampled.values()
        ):
            ctx.gate_open = False
            ctx.gate_values = {
                "gate_util": min(umax or 0.0, 1.0),
                "gate_line": float(rule["not_bound"]),
                "bound": bound,
            }
            return make_finding(
                ctx,
                rule,
                fired=False,
                variant="not_bound_sampled",
                values=vals,
                evidence=ev,
                query_params=qp,
                grade=grade,
            )
        grade = {**grade, "grade": "insufficient", "capture": capture}
        return make_finding(
            ctx,
            rule,
            fired=False,
            variant="unresolved",
            values=vals,
            evidence=ev,
            query_params=qp,
            grade=grade,
        )
    lower = [
        float(row["modeled_utilization_lower"])
        for row in ranks.values()
        if row.get("modeled_utilization_lower")
    ]
    if lower:
        ev.update(modeled_lower_bound_utilization=max(lower))
        vals = template_values(rule, ctx, lower=max(lower), **base)
        return make_finding(
            ctx,
            rule,
            fired=False,
            variant="lower_bound",
            values=vals,
            evidence=ev,
            query_params=qp,
            grade={"grade": "insufficient", "detail": "tensor sizes only: a lower bound", "capture": capture},
        )
    return make_finding(
        ctx,
        rule,
        fired=False,
        variant="no_data",
        values=template_values(rule, ctx, **base),
        evidence=ev,
        query_params=qp,
        grade={"grade": "insufficient", "detail": "no HBM bytes", "capture": capture},
    )


@check("top_hbm_ops", OP_BYTES)
def check_top_hbm_ops(ctx: Context, rule: Rule) -> Finding:
    rows = op_bytes_rows(ctx)[: int(rule.params.get("top_n", 10))]
    rows = [r for r in rows if r.get("hbm_bytes")]
    if not rows:
        return make_finding(ctx, rule, fired=False, variant="no_data", values=template_values(rule, ctx))
    total = (
        rows[0]["hbm_bytes"] / rows[0]["share"] if rows[0].get("share") else sum(r["hbm_bytes"] for r in rows)
    )
    top_share = sum(r["share"] or 0 for r in rows)
    sources = sorted({r["hbm_bytes_source"] for r in rows if r.get("hbm_bytes_source")})
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
