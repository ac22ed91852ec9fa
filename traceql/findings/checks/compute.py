"""Compute: matmul tiling (step 10), AI CPU operators and dynamic shapes (advisor)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...rows import DeviceIdleRow
from ..base import decide, make_finding, pct_text, saving_of, template_values, to_ms
from ..context import CUBE, DEVICE_IDLE, EXEC_MODES, RANK_SUMMARY, empty_row, run_row
from ..model import Finding
from ..registry import check
from ..text import render

if TYPE_CHECKING:  # pragma: no cover
    from ..context import Context
    from ..rules import Rule


@check("matmul_tiling", CUBE, RANK_SUMMARY)
def check_matmul_tiling(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(CUBE)
    target = float(rule["target_utilization"])
    flagged: list[dict[str, Any]] = []  # the check's own rows (top_ops), not query rows
    for r in rows:
        if (r["share_of_compute"] or 0) < rule["min_op_share"]:
            continue
        fu, bu, mac, bdr = (
            r["flops_utilization"],
            r["bw_utilization"],
            r["mac_ratio"],
            r["block_dim_ratio"],
        )
        roof = max((x for x in (fu, bu) if x is not None), default=None)
        low_roofs = fu is not None and fu < rule["low_flops"] and (bu is None or bu < rule["low_bw"])
        low_mac = (
            fu is None and mac is not None and mac < rule["low_mac"] and (bu is None or bu < rule["low_bw"])
        )
        few_cores = bdr is not None and bdr < rule["low_block_dim_ratio"]
        if not (low_roofs or low_mac or few_cores):
            continue
        achieved = roof if roof is not None else mac if mac is not None else bdr
        gain = max(0.0, 1 - (achieved or 0) / target) if achieved is not None and achieved < target else 0.0
        if few_cores and bdr is not None:
            gain = max(gain, 1 - bdr)
        why = []
        if low_roofs:
            why.append(f"{pct_text(fu)} of peak FLOP/s and {pct_text(bu)} of peak HBM bandwidth")
        if low_mac:
            why.append(f"cube pipe busy {pct_text(mac)}")
        if few_cores:
            why.append(f"block dim {r['block_dim']:.0f} of {r['max_block_dim']}")
        flagged.append(
            {
                "name": r["name"],
                "op_type": r["op_type"],
                "input_shapes": r["input_shapes"],
                "input_dtypes": r["input_dtypes"],
                "calls": r["calls"],
                "dur_ms": to_ms(r["dur_ns"]),
                "share_of_compute": r["share_of_compute"],
                "flops_utilization": fu,
                "bw_utilization": bu,
                "mac_ratio": mac,
                "block_dim": r["block_dim"],
                "max_block_dim": r["max_block_dim"],
                "why": ", ".join(why),
                "saved_ns": (r["dur_ns"] or 0) * gain,
            }
        )
    compute = ctx.compute_ns()
    saved = sum(f["saved_ns"] for f in flagged)
    share_c = saved / compute if compute else None
    per_step = ctx.per_step(saved)
    ev = {
        "ops_checked": len(rows),
        "ops_flagged": len(flagged),
        "saved_ns_per_step": per_step,
        "saved_share_of_compute": share_c,
    }
    first = flagged[0] if flagged else {}
    vals = template_values(
        rule,
        ctx,
        n=len(flagged),
        op=first.get("op_type", ""),
        shapes=first.get("input_shapes") or "shapes not recorded",
        dtypes=first.get("input_dtypes") or "dtypes not recorded",
        why=first.get("why", ""),
        op_share=first.get("share_of_compute") or 0.0,
        saving_ms=to_ms(per_step) or 0.0,
        saving_share=share_c or 0.0,
        checked=len(rows),
    )
    for f in flagged:
        f["saved_ms"] = to_ms(f.pop("saved_ns"))
    saving = saving_of(to_ms(per_step), str(rule["saving_method"]), ctx.share(per_step))
    if not rows:
        return make_finding(ctx, rule, fired=False, variant="none", values=vals, evidence=ev)
    return decide(
        ctx,
        rule,
        unless=[(not flagged or share_c is None or share_c < rule["min_saving_share"], "below")],
        share=share_c,
        values=vals,
        evidence=ev,
        top_ops=flagged,
        saving=saving,
    )


@check("aicpu_ops", EXEC_MODES)
def check_aicpu_ops(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(EXEC_MODES)
    cpu = [r for r in rows if (r["task_type"] or "").upper() == "AI_CPU"]
    slow = [r for r in cpu if (r["max_dur_ns"] or 0) >= rule["min_task_ns"]]
    total = sum(r["dur_ns"] or 0 for r in cpu)
    share_c = sum(r["share_of_compute"] or 0 for r in cpu)
    per_step = ctx.per_step(total)
    share = ctx.share(per_step)
    # op_type is the query's grouping key, never null (a null would have failed the join below before)
    doubles = sorted({r["op_type"] or "" for r in cpu if "DOUBLE" in (r["input_dtypes"] or "").upper()})
    vals = template_values(
        rule,
        ctx,
        n=len(cpu),
        types=", ".join(r["op_type"] or "" for r in cpu[:5]),
        ms=to_ms(per_step) or 0.0,
        share_c=share_c,
        doubles=", ".join(doubles) or "none",
    )
    ev = {
        "aicpu_op_types": len(cpu),
        "aicpu_ns": total,
        "aicpu_share_of_compute": share_c,
        "double_dtype_ops": doubles,
    }
    tops = [
        {
            "op_type": r["op_type"],
            "calls": r["calls"],
            "dur_ms": to_ms(r["dur_ns"]),
            "max_dur_us": (r["max_dur_ns"] or 0) / 1e3,
            "share_of_compute": r["share_of_compute"],
            "input_dtypes": r["input_dtypes"],
        }
        for r in cpu[:10]
    ]
    saving = saving_of(to_ms(per_step), str(rule["saving_method"]), share)
    if not slow:
        return make_finding(ctx, rule, fired=False, variant="none", values=vals, evidence=ev, top_ops=tops)
    return make_finding(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
        share=share_c,
    )


@check("dynamic_shape", EXEC_MODES, DEVICE_IDLE)
def check_dynamic_shape(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(EXEC_MODES)
    with_state = rows[0]["ops_with_state"] if rows else 0
    static = rows[0]["static_ops"] if rows else 0
    idle = run_row(ctx.read(DEVICE_IDLE)) or empty_row(DeviceIdleRow)
    free_share = (idle["free_ns"] or 0) / window if (window := idle["window_ns"]) else 0.0
    vals = template_values(
        rule,
        ctx,
        n=with_state,
        static=static,
        free_share=free_share,
        free_ms=to_ms(ctx.per_step(idle["free_ns"])) or 0.0,
        gaps=idle["free_gaps"] or 0,
    )
    ev = {
        "ops_with_state": with_state,
        "static_ops": static,
        "free_share": free_share,
        # Ascend's advisor (msprof-analyze) and its torch_npu advice: nothing a CUDA/ROCm trace can act on
        "advisor_equivalent": render(str(rule["advisor_says"]), vals, "rules.dynamic_shape.advisor_says")
        if ctx.device_kind == "ascend"
        else None,
    }
    if not with_state:
        return make_finding(ctx, rule, fired=False, variant="no_data", values=vals, evidence=ev)
    if static:
        return make_finding(ctx, rule, fired=False, variant="ok", values=vals, evidence=ev)
    return make_finding(ctx, rule, fired=True, variant="fired", values=vals, evidence=ev, share=None)
