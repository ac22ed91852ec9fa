"""Memory work (steps 4-6, 8, 9): fusion, UB reuse, layout, mixed precision, gradient checkpointing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...rows import ActivationMemoryRow, UbL2RatesRow
from ..base import (
    decide,
    gated_out,
    make_finding,
    op_bytes_rows,
    pct_text,
    saving_of,
    size_text,
    template_values,
    to_gb,
    to_ms,
)
from ..context import (
    ACTIVATIONS,
    CUBE,
    DTYPE_TRAFFIC,
    FUSION,
    LAYOUT_FORCERS,
    LAYOUTS,
    OP_BYTES,
    RANK_SUMMARY,
    REPEATED_READS,
    UB_L2,
    empty_row,
    run_row,
)
from ..model import Finding
from ..registry import check

if TYPE_CHECKING:  # pragma: no cover
    from ...rows import LayoutForcersRow, RepeatedReadsRow
    from ..context import Context
    from ..rules import Rule


@check("operator_fusion", FUSION)
def check_operator_fusion(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(FUSION)
    run = next((r for r in rows if r["scope"] == "run"), None)
    pats = [r for r in rows if r["scope"] == "pattern"]
    if not run or not run["occurrences"]:
        return make_finding(
            ctx, rule, fired=False, variant="none", values=template_values(rule, ctx), evidence={"chains": 0}
        )
    saved_ns = ctx.per_step(run["saved_ns"])
    share = ctx.share(saved_ns)
    top = pats[0]
    ev = {
        "chains": run["occurrences"],
        "patterns": len(pats),
        "saved_bytes": run["saved_bytes"],
        "saved_ns": run["saved_ns"],
        "saved_ns_per_step": saved_ns,
        "chain_hbm_bytes": run["chain_hbm_bytes"],
        "saved_fraction": run["saved_fraction"],
        "hbm_bytes_source": run["hbm_bytes_source"],
    }
    tops = [
        {
            "pattern": p["pattern"],
            "occurrences": p["occurrences"],
            "ranks": p["ranks"],
            "saved_gb": to_gb(p["saved_bytes"]),
            "saved_fraction": p["saved_fraction"],
            "saved_ms": to_ms(p["saved_ns"]),
            "example_names": p["example_names"],
            "example_shape": p["example_shape"],
        }
        for p in pats[:10]
    ]
    vals = template_values(
        rule,
        ctx,
        chains=run["occurrences"],
        patterns=len(pats),
        pattern=top["pattern"],
        occurrences=top["occurrences"],
        saved=size_text(top["saved_bytes"]),
        saved_fraction=top["saved_fraction"] or 0.0,
        total_saved=size_text(run["saved_bytes"]),
        saving_ms=to_ms(saved_ns) or 0.0,
        saving_share=share or 0.0,
    )
    saving = saving_of(to_ms(saved_ns), str(rule["saving_method"]), share)
    return decide(
        ctx,
        rule,
        unless=[
            (gated_out(ctx, rule), "gated"),
            (share is None or share < rule["min_saving_share"], "below"),
        ],
        share=share,
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
    )


@check("ub_reuse", REPEATED_READS, UB_L2, OP_BYTES)
def check_ub_reuse(ctx: Context, rule: Rule) -> Finding:
    rereads = _rereads(ctx, rule)
    rr = ctx.read(REPEATED_READS)
    rr_run = next((r for r in rr if r["scope"] == "run"), None)
    # repeated_reads without a run row: no bursts and no extra bytes (0, not unknown)
    bursts, rr_extra_bytes = (rr_run["bursts"], rr_run["extra_bytes"]) if rr_run else (0, 0)
    ub = _ub_overall(ctx)
    ub_util = ub["ub_utilization"]
    total_ns = sum(x["extra_ns"] for x in rereads) + float((rr_run["extra_ns"] if rr_run else None) or 0)
    per_step = ctx.per_step(total_ns)
    share = ctx.share(per_step)
    ev = {
        "reread_ops": len(rereads),
        "reread_extra_bytes": sum(x["extra_bytes"] for x in rereads),
        "repeated_read_bursts": bursts,
        "repeated_read_extra_bytes": rr_extra_bytes,
        "ub_utilization": ub_util,
        "ub_reason": ub["reason"],
        "saved_ns_per_step": per_step,
        "related_queries": [ctx.command("repeated_reads", rule.params), ctx.command("ub_l2_rates")],
    }
    tops = _ub_reuse_tops(rereads, [r for r in rr if r["scope"] == "tensor"][:5])
    ub_text = f"UB utilisation {pct_text(ub_util)}" if ub_util is not None else "no UB metrics in the dump"
    vals = template_values(
        rule,
        ctx,
        ops=len(rereads),
        bursts=bursts,
        what=_ub_reuse_what(tops[0] if tops else {}),
        ub_text=ub_text,
        saving_ms=to_ms(per_step) or 0.0,
        saving_share=share or 0.0,
        extra=size_text(ev["reread_extra_bytes"] + float(rr_extra_bytes or 0)),
    )
    low_ub = ub_util is not None and ub_util < rule["ub_low"]
    fired = share is not None and share >= rule["min_saving_share"]
    variant = (
        "gated"
        if gated_out(ctx, rule)
        else "fired"
        if fired
        else "low_ub"
        if low_ub and ctx.gate_open
        else "below"
    )
    return make_finding(
        ctx,
        rule,
        fired=variant in ("fired", "low_ub"),
        variant=variant,
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving_of(to_ms(per_step), str(rule["saving_method"]), share),
        share=share if variant in ("fired", "low_ub") else None,
        query_params={"top_n": int(rule["op_rows"])},
    )


def _ub_overall(ctx: Context) -> UbL2RatesRow:
    """ub_l2_rates' overall row (every column null without one)."""
    return next((r for r in ctx.read(UB_L2) if r["scope"] == "overall"), None) or empty_row(UbL2RatesRow)


def _rereads(ctx: Context, rule: Rule) -> list[dict[str, Any]]:
    """Operators whose measured bytes exceed their tensors' bytes by the re-read ratio (op_hbm_bytes)."""
    ratio_min = float(rule["reread_ratio"])
    out = []
    for r in op_bytes_rows(ctx):
        ratio, hbm_bytes = r["measured_over_modeled"], r["hbm_bytes"]
        if ratio is None or ratio < ratio_min or not hbm_bytes or (r["share"] or 0) < rule["min_op_share"]:
            continue
        extra_frac = 1 - 1 / ratio
        out.append(
            {
                "name": r["name"],
                "op_type": r["op_type"],
                "measured_over_modeled": ratio,
                "extra_bytes": hbm_bytes * extra_frac,
                "extra_ns": (r["dur_ns"] or 0) * extra_frac,
                "hbm_gb": r["hbm_gb"],
                "share": r["share"],
            }
        )
    return out


def _ub_reuse_tops(rereads: list[dict[str, Any]], tensors: list[RepeatedReadsRow]) -> list[dict[str, Any]]:
    tops = [
        {"kind": "re-read", **x, "extra_gb": to_gb(x["extra_bytes"]), "extra_ms": to_ms(x["extra_ns"])}
        for x in rereads[:5]
    ]
    tops += [
        {
            "kind": "repeated read",
            "tensor_shape": r["tensor_shape"],
            "tensor_dtype": r["tensor_dtype"],
            "readers": r["readers"],
            "extra_reads": r["extra_reads"],
            "extra_gb": to_gb(r["extra_bytes"]),
            "extra_ms": to_ms(r["extra_ns"]),
        }
        for r in tensors
    ]
    return tops


def _ub_reuse_what(first: dict[str, Any]) -> str:
    if first.get("kind") == "re-read":
        return f"{first.get('op_type')} moves {first.get('measured_over_modeled', 0):.1f}x its tensors' bytes"
    if first:
        return f"a {first.get('tensor_dtype')} [{first.get('tensor_shape')}] tensor is read by {first.get('readers')}"
    return "nothing"


@check("memory_layout", LAYOUTS, UB_L2, LAYOUT_FORCERS, RANK_SUMMARY)
def check_memory_layout(ctx: Context, rule: Rule) -> Finding:
    lt = ctx.read(LAYOUTS)
    conv_ns = sum(r["dur_ns"] or 0 for r in lt)
    conv_bytes = sum(r["hbm_bytes"] or 0 for r in lt)
    compute = ctx.compute_ns()
    conv_share = conv_ns / compute if compute else 0.0
    l2 = _ub_overall(ctx)["l2_hit_rate"]
    forcers = layout_forcers(ctx.read(LAYOUT_FORCERS))
    per_step = ctx.per_step(conv_ns)
    share_step = ctx.share(per_step)
    tops = [
        {
            "op_type": r["op_type"],
            "src_format": r["src_format"],
            "dst_format": r["dst_format"],
            "calls": r["calls"],
            "dur_ms": to_ms(r["dur_ns"]),
            "share_of_compute": r["share_of_compute"],
            "hbm_gb": to_gb(r["hbm_bytes"]),
            "example_input_shape": r["example_input_shape"],
        }
        for r in lt[:8]
    ]
    ev = {
        "conversions": sum(r["calls"] or 0 for r in lt),
        "conversion_ns": conv_ns,
        "conversion_bytes": conv_bytes,
        "conversion_share_of_compute": conv_share,
        "l2_hit_rate": l2,
        "forced_by": forcers[:5],
        "related_queries": [ctx.command("layout_forcers"), ctx.command("ub_l2_rates")],
    }
    if lt:
        t = lt[0]
        biggest = f"{t['op_type']} {conv_text(t['src_format'], t['dst_format'])} ({t['calls']} calls, {pct_text(t['share_of_compute'])} of compute)"
    else:
        biggest = "none"
    forced = "; ".join(f["text"] for f in forcers[:3]) or "no neighbour reads or writes them"
    l2_text = (
        "No L2 hit rates in the dump"
        if l2 is None
        else f"L2 hit rate {pct_text(l2)} < {pct_text(rule['l2_low'])}: an unfriendly (non-contiguous) access pattern"
        if l2 < rule["l2_low"]
        else f"L2 hit rate {pct_text(l2)} (>= {pct_text(rule['l2_low'])})"
    )
    vals = template_values(
        rule,
        ctx,
        conv_share=conv_share,
        conv_ms=to_ms(per_step) or 0.0,
        conv_size=size_text(ctx.per_step(conv_bytes)),
        biggest=biggest,
        forced=forced,
        l2_text=l2_text,
        calls=ev["conversions"],
        saving_share=share_step or 0.0,
    )
    saving = saving_of(to_ms(per_step), str(rule["saving_method"]), share_step)
    fired = conv_share >= rule["min_compute_share"] or (l2 is not None and l2 < rule["l2_low"])
    return decide(
        ctx,
        rule,
        unless=[(not fired, "below" if lt else "none")],
        share=conv_share,
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
    )


def layout_forcers(rows: list[LayoutForcersRow]) -> list[dict[str, Any]]:
    """layout_forcers rows grouped by who forces the conversion, with a sentence each."""
    agg: dict[tuple[str | None, str, str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["role"], r["forced_by"] or "?", r["src_format"] or "?", r["dst_format"] or "?")
        a = agg.setdefault(
            key,
            {
                "role": r["role"],
                "forced_by": r["forced_by"],
                "src_format": r["src_format"],
                "dst_format": r["dst_format"],
                "calls": 0,
                "dur_ns": 0,
            },
        )
        a["calls"] += r["calls"] or 0
        a["dur_ns"] += r["dur_ns"] or 0
    out = sorted(agg.values(), key=lambda a: -a["dur_ns"])
    for a in out:
        conv = conv_text(a["src_format"], a["dst_format"])
        if a["forced_by"] and any(a["forced_by"].lower().startswith(t) for t in ("transdata", "transpose")):
            a["text"] = f"{conv} converted straight back by the next conversion, a round trip ({a['calls']}x)"
        elif a["role"] == "weight":
            a["text"] = (
                f"weights kept in {a['src_format']} are converted {conv} around {a['forced_by'] or 'the cube ops'} every step ({a['calls']}x)"
            )
        elif a["role"] == "feeds_next":
            a["text"] = (
                f"{a['forced_by']} needs {a['dst_format'] or 'another layout'} ({conv}, {a['calls']}x)"
            )
        elif a["role"] == "drains_prev":
            a["text"] = (
                f"{a['forced_by']} writes {a['src_format'] or 'a layout'} that the next op cannot use ({conv}, {a['calls']}x)"
            )
        else:
            a["text"] = f"{conv} with no neighbour reading or writing it ({a['calls']}x)"
        a["dur_ms"] = to_ms(a.pop("dur_ns"))
    return out


def conv_text(src: str | None, dst: str | None) -> str:
    return f"{src}->{dst}" if src and dst else "(formats not recorded)"


@check("mixed_precision", DTYPE_TRAFFIC)
def check_mixed_precision(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(DTYPE_TRAFFIC)
    run = next((r for r in rows if r["scope"] == "run"), None)
    ops = [r for r in rows if r["scope"] == "op" and (r["fp32_fraction"] or 0) > 0]
    if not run or not run["tensor_bytes"]:
        return make_finding(ctx, rule, fired=False, variant="no_data", values=template_values(rule, ctx))
    fp32 = run["fp32_fraction"] or 0.0
    per_step = ctx.per_step(run["saved_ns"])
    share = ctx.share(per_step)
    ev = {
        "fp32_fraction": fp32,
        "fp32_tensor_bytes": run["fp32_tensor_bytes"],
        "tensor_bytes": run["tensor_bytes"],
        "saved_bytes": run["saved_bytes"],
        "saved_ns": run["saved_ns"],
        "saved_ns_per_step": per_step,
    }
    tops: list[dict[str, Any]] = [
        {
            "name": r["name"],
            "op_type": r["op_type"],
            "fp32_fraction": r["fp32_fraction"],
            "hbm_gb": to_gb(r["hbm_bytes"]),
            "hbm_share": r["hbm_share"],
            "bw_utilization": r["bw_utilization"],
            "keep_fp32": r["keep_fp32"],
            "saved_gb": to_gb(r["saved_bytes"]),
            "saved_ms": to_ms(r["saved_ns"]),
        }
        for r in ops[:10]
    ]
    vals = template_values(
        rule,
        ctx,
        fp32=fp32,
        saved=size_text(ctx.per_step(run["saved_bytes"])),
        saving_ms=to_ms(per_step) or 0.0,
        saving_share=share or 0.0,
        top=", ".join(t["op_type"] for t in tops[:3]) or "none",
    )
    saving = saving_of(to_ms(per_step), str(rule["saving_method"]), share)
    return decide(
        ctx,
        rule,
        unless=[
            (fp32 < rule["min_fp32_share"], "low_fp32"),
            (gated_out(ctx, rule), "gated"),
            (share is None or share < rule["min_saving_share"], "below"),
        ],
        share=share,
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
    )


@check("gradient_checkpointing", ACTIVATIONS, CUBE, RANK_SUMMARY)
def check_gradient_checkpointing(ctx: Context, rule: Rule) -> Finding:
    mem = ctx.read(ACTIVATIONS)
    run = run_row(mem) or empty_row(ActivationMemoryRow)
    act = run["activation_bytes"]
    hbm = ctx.hbm_ranks()
    utils = [u for x in hbm.values() if (u := x["busy_utilization"]) is not None]
    util = max(utils) if utils else None
    busy_bw = max((x["busy_bw_bps"] or 0 for x in hbm.values()), default=0) or None
    cube = ctx.read(CUBE)
    compute = ctx.compute_ns()
    cube_busy_ns = sum(
        (r["dur_ns"] or 0) * (mac if (mac := r["mac_ratio"]) is not None else 1.0) for r in cube
    )
    cube_busy = cube_busy_ns / compute if compute else None
    headroom = None if cube_busy is None else max(0.0, 1 - cube_busy)
    traffic_ns = (
        act / busy_bw * 1e9 * rule["traffic_cut"] if act and busy_bw else None
    )  # per step (act is per step)
    recompute_ns = ctx.per_step(compute * rule["recompute_cost"]) if compute else None
    share = ctx.share(traffic_ns)
    ev = {
        "activation_bytes_per_step": act,
        "peak_allocated_bytes": run["max_allocated_bytes"],
        "hbm_utilization": util,
        "cube_busy_share": cube_busy,
        "compute_headroom": headroom,
        "traffic_saved_ns_per_step": traffic_ns,
        "recompute_cost_ns_per_step": recompute_ns,
        "related_queries": [ctx.command("hbm_utilization"), ctx.command("cube_efficiency")],
    }
    vals = template_values(
        rule,
        ctx,
        act=size_text(act),
        util=pct_text(util),
        headroom=pct_text(headroom),
        saving_ms=to_ms(traffic_ns) or 0.0,
        saving_share=share or 0.0,
        recompute_ms=to_ms(recompute_ns) or 0.0,
        reason=run["reason"]
        or "allocated memory does not change inside the steps (no activations "
        "come and go in the allocator records)",
    )
    saving = saving_of(to_ms(traffic_ns), str(rule["saving_method"]), share)
    return decide(
        ctx,
        rule,
        unless=[
            (not act, "no_data"),
            (util is None or util < ctx.sat, "not_bound"),
            (headroom is None or headroom < rule["min_headroom"], "no_headroom"),
            (share is None or share < rule["min_saving_share"], "below"),
        ],
        share=share,
        values=vals,
        evidence=ev,
        saving=saving,
    )
