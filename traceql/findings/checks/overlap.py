"""Idle device time: transfers not overlapped (step 7) and free time (advisor)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import decide, make_finding, pct_text, saving_of, template_values, to_ms
from ..context import DEVICE_IDLE
from ..model import Finding
from ..registry import check
from ..text import render

if TYPE_CHECKING:  # pragma: no cover
    from ..context import Context
    from ..rules import Rule


def _ms_per_step(ns: int | None, steps: int | None) -> float:
    """A rank row's total per step, ms (device_idle's rank rows always have both; null reads as 0)."""
    return (ns or 0) / max(steps or 0, 1) / 1e6


@check("prefetch_overlap", DEVICE_IDLE)
def check_prefetch_overlap(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(DEVICE_IDLE)
    run = next((r for r in rows if r["scope"] == "run"), None)
    if not run or not run["window_ns"]:
        return make_finding(ctx, rule, fired=False, variant="no_data", values=template_values(rule, ctx))
    exposed = (run["idle_loading_ns"] or 0) + (run["idle_host_copy_ns"] or 0) + (run["copy_exposed_ns"] or 0)
    per_step = ctx.per_step(exposed)
    share = ctx.share(per_step)
    ev = {
        "idle_loading_ns": run["idle_loading_ns"],
        "idle_host_copy_ns": run["idle_host_copy_ns"],
        "copy_exposed_ns": run["copy_exposed_ns"],
        "device_copy_ns": run["device_copy_ns"],
        "loading_ns": run["loading_ns"],
        "preparing_ns": run["preparing_ns"],
        "free_ns": run["free_ns"],
        "exposed_ns_per_step": per_step,
        "exposed_share": share,
    }
    tops = [
        {
            "rank": r["rank"],
            "preparing_ms": _ms_per_step(r["preparing_ns"], r["steps"]),
            "idle_loading_ms": _ms_per_step(r["idle_loading_ns"], r["steps"]),
            "idle_host_copy_ms": _ms_per_step(r["idle_host_copy_ns"], r["steps"]),
            "copy_exposed_ms": _ms_per_step(r["copy_exposed_ns"], r["steps"]),
        }
        for r in rows
        if r["scope"] == "rank"
    ]
    vals = template_values(
        rule,
        ctx,
        exposed_ms=to_ms(per_step) or 0.0,
        exposed_share=share or 0.0,
        loading_ms=to_ms(ctx.per_step(run["idle_loading_ns"])) or 0.0,
        copy_ms=to_ms(ctx.per_step((run["idle_host_copy_ns"] or 0) + (run["copy_exposed_ns"] or 0))) or 0.0,
        preparing_ms=to_ms(ctx.per_step(run["preparing_ns"])) or 0.0,
        loading_total_ms=to_ms(ctx.per_step(run["loading_ns"])) or 0.0,
    )
    saving = saving_of(to_ms(per_step), str(rule["saving_method"]), share)
    return decide(
        ctx,
        rule,
        unless=[(share is None or share < rule["min_share"], "below")],
        share=share,
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
    )


@check("free_time", DEVICE_IDLE)
def check_free_time(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(DEVICE_IDLE)
    run = next((r for r in rows if r["scope"] == "run"), None)
    if not run or not run["window_ns"]:
        return make_finding(ctx, rule, fired=False, variant="no_data", values=template_values(rule, ctx))
    free = run["free_ns"] or 0
    free_share = free / run["window_ns"]
    parts = {
        "data loading": run["free_loading_ns"] or 0,
        "host->device copies": run["free_host_copy_ns"] or 0,
        "synchronisation": run["free_sync_ns"] or 0,
    }
    parts["other host work / launch gaps"] = max(0, free - sum(parts.values()))
    causes = ", ".join(
        f"{k} {pct_text(v / free if free else 0)}"
        for k, v in sorted(parts.items(), key=lambda kv: -kv[1])
        if v
    )
    if not int((ctx.store_run_info().get("rows") or {}).get("host_ops") or 0):
        # with no host timeline every gap lands in the remainder: "launch gaps 100%" would be a claim without data
        causes = "unknown: the dump has no host timeline (no host_ops rows), so what the host was doing cannot be told"
    per_step = ctx.per_step(free)
    share = ctx.share(per_step)
    vals = template_values(
        rule,
        ctx,
        free_share=free_share,
        free_ms=to_ms(per_step) or 0.0,
        gaps=run["free_gaps"],
        largest_ms=to_ms(run["largest_free_gap_ns"]) or 0.0,
        causes=causes or "none",
        main_cause=max(parts, key=lambda k: parts[k]),
    )
    ev = {
        "free_ns": free,
        "free_share": free_share,
        "free_gaps": run["free_gaps"],
        "largest_free_gap_ns": run["largest_free_gap_ns"],
        "causes_ns": parts,
        "advisor_equivalent": render(str(rule["advisor_says"]), vals, "rules.free_time.advisor_says"),
    }
    saving = saving_of(to_ms(per_step), str(rule["saving_method"]), share)
    return decide(
        ctx,
        rule,
        unless=[(free_share < rule["min_free_share"], "ok")],
        share=share,
        values=vals,
        evidence=ev,
        saving=saving,
    )
