"""Communication: waiting on memory-bound peers (step 2) and the Ascend advisor's slow rank, slow link, alignment and small packets."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..base import (
    decide,
    lateness_split,
    make_finding,
    num_text,
    pct_text,
    per_step_rank,
    rank_skew,
    saving_of,
    scaling_of,
    scaling_text,
    template_values,
    to_gb,
    to_ms,
)
from ..context import BOUNDS, RANK_SUMMARY, TRANSPORT
from ..coverage import PIPELINE, stage_peers
from ..model import Finding
from ..registry import check
from ..text import render

if TYPE_CHECKING:  # pragma: no cover
    from ..context import Context
    from ..rules import Rule


@check("comm_waits_on_memory", RANK_SUMMARY, BOUNDS)
def check_comm_waits_on_memory(ctx: Context, rule: Rule) -> Finding:
    """Ranks waiting in collectives for a late peer that is in HBM-saturated compute. Every number is
    wait_attribution's: the wait is the waiting rank's exposed peer wait (comm_wait_peer_hbm +
    comm_wait_peer_other), its overlap with the late peer's saturated compute is wait_attribution's split of it,
    and the cause test is the late rank's extra saturated compute per step (lateness_split, as slow_rank)."""
    from ... import grades

    rs, wr = rank_skew(ctx)
    qp = ctx.wait_params()
    if len(rs) < 2 or not any(r["collectives"] for r in rs.values()):
        return make_finding(
            ctx,
            rule,
            fired=False,
            variant="single",
            values=template_values(rule, ctx, ranks=len(rs)),
            query_params=qp,
            evidence={"ranks": len(rs)},
        )

    # the rank that waits most for peers, and the rank that arrives last most
    def peer_wait(r: int) -> float:
        return per_step_rank(wr.get(r, {}), "comm_wait_peer_hbm_ns") + per_step_rank(
            wr.get(r, {}), "comm_wait_peer_other_ns"
        )

    waiter = max(rs, key=peer_wait)
    late = max(rs, key=lambda r: per_step_rank(rs[r], "lateness_ns"))
    wait = peer_wait(waiter)
    w_wait = wr.get(waiter, {})
    step_ns = (w_wait.get("wall_ns") or 0) / (w_wait.get("steps") or 1)
    wait_share = wait / step_ns if step_ns else 0.0
    d_sat = lateness_split(ctx, late, waiter)["saturated_ns"]
    peer_hbm = per_step_rank(w_wait, "comm_wait_peer_hbm_ns")
    overlap = peer_hbm / wait if wait > 0 else 0.0
    covered = min(max(d_sat / wait, 0.0), 1.0) if wait > 0 else 0.0
    transit = per_step_rank(w_wait, "comm_transit_ns")
    hbm = ctx.hbm_ranks()
    late_util = (hbm.get(late) or {}).get("busy_utilization")
    scaling, method = scaling_of(ctx)
    hbm_g = grades.hbm_grade(hbm.get(late), ctx.device_kind)
    ev = {
        "waiting_rank": waiter,
        "late_rank": late,
        "peer_wait_ns_per_step": wait,
        "wait_share": wait_share,
        "late_extra_saturated_ns_per_step": d_sat,
        "wait_on_saturated_peer_ns_per_step": peer_hbm,
        "wait_on_saturated_peer_share": overlap,
        "wait_covered_by_extra_saturated_share": covered,
        "late_rank_hbm_utilization": late_util,
        "waiting_rank_transit_ns_per_step": transit,
        **_scaling_evidence(ctx),
    }
    vals = template_values(
        rule,
        ctx,
        waiting=waiter,
        late=late,
        wait_ms=to_ms(wait),
        wait_share=wait_share,
        d_sat_ms=to_ms(d_sat),
        covered=covered,
        overlap=overlap,
        late_util=pct_text(late_util),
        transit_ms=to_ms(transit),
        scaling_text=scaling_text(scaling, method).capitalize(),
        hbm_text=hbm_g["detail"],
    )
    if wait_share < rule["min_wait_share"] or waiter == late:
        return make_finding(
            ctx, rule, fired=False, variant="small_wait", values=vals, evidence=ev, query_params=qp
        )
    if hbm_g["grade"] not in ("measured", "sampled") or late_util is None:
        piped = _pipe_memory_wait(ctx, rule, late, waiter, wait, vals, ev)
        if piped is not None:
            return piped
        return make_finding(
            ctx,
            rule,
            fired=False,
            variant="ungraded",
            values=vals,
            evidence=ev,
            query_params=qp,
            grade={**hbm_g, "grade": "insufficient"},
        )
    if covered < rule["min_explained"]:
        return make_finding(
            ctx,
            rule,
            fired=False,
            variant="not_memory",
            values=vals,
            evidence=ev,
            query_params=qp,
            grade=hbm_g,
        )
    saving_ns = min(wait, max(d_sat, 0.0))
    share = ctx.share(saving_ns)
    return make_finding(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        evidence=ev,
        query_params=qp,
        share=share,
        saving=saving_of(to_ms(saving_ns), str(rule["saving_method"]), share),
        grade=hbm_g,
        top_ops=_rank_rows(ctx, rs, wr, peer_wait),
    )


def _scaling_evidence(ctx: Context) -> dict[str, Any]:
    scaling, method = scaling_of(ctx)
    return {
        "scaling_efficiency": scaling if method != "compute_fraction" else None,
        "compute_fraction": (ctx.wait_run() or {}).get("compute_fraction"),
        "related_queries": [
            ctx.command("comm_skew", {"sat_threshold": ctx.sat, "top_n": 50}),
            ctx.command("rank_summary"),
        ],
    }


def _rank_rows(
    ctx: Context,
    rs: dict[int, dict[str, Any]],
    wr: dict[int, dict[str, Any]],
    peer_wait: Callable[[int], float],
) -> list[dict[str, Any]]:
    """One row per rank: its lateness, its wait for peers and its HBM-saturated compute, per step."""
    hbm = ctx.hbm_ranks()
    return [
        {
            "rank": r,
            "lateness_ms_per_step": to_ms(per_step_rank(rs[r], "lateness_ns")),
            "peer_wait_ms_per_step": to_ms(peer_wait(r)),
            "hbm_saturated_compute_ms_per_step": to_ms(
                per_step_rank(wr.get(r, {}), "compute_hbm_saturated_ns")
            ),
            "hbm_utilization": (hbm.get(r) or {}).get("busy_utilization"),
        }
        for r in sorted(rs)
    ]


def _pipe_memory_wait(
    ctx: Context,
    rule: Rule,
    late: int,
    waiter: int,
    wait: float,
    vals: dict[str, Any],
    ev: dict[str, Any],
) -> Finding | None:
    """The article's story from pipe evidence alone (no HBM bytes): the late rank spends more time per step in
    memory-bound tasks (MTE2/MTE3 busy >= the line, bound_shares) than the waiting rank, enough to cover the
    wait. None when either rank's per-task evidence is too thin to say."""
    from ..bounds import rank_memory_ns

    wr = ctx.wait_by_rank()
    late_mem, wait_mem = rank_memory_ns(ctx, late), rank_memory_ns(ctx, waiter)
    if late_mem is None or wait_mem is None or wait <= 0:
        return None
    d_mem = late_mem / (wr.get(late, {}).get("steps") or 1) - wait_mem / (
        wr.get(waiter, {}).get("steps") or 1
    )
    covered = min(max(d_mem / wait, 0.0), 1.0)
    ev = {**ev, "late_extra_memory_bound_ns_per_step": d_mem, "wait_covered_by_memory_bound_share": covered}
    vals = {**vals, "d_mem_ms": to_ms(d_mem), "covered": covered}
    grade = {
        "grade": "pipe",
        "detail": "memory-bound tasks by per-task pipe utilisation (MTE2/MTE3 busy >= 80%), no HBM bytes",
    }
    if covered < rule["min_explained"]:
        return make_finding(
            ctx, rule, fired=False, variant="not_memory_pipe", values=vals, evidence=ev, grade=grade
        )
    saving_ns = min(wait, max(d_mem, 0.0))
    share = ctx.share(saving_ns)
    return make_finding(
        ctx,
        rule,
        fired=True,
        variant="fired_pipe",
        values=vals,
        evidence=ev,
        share=share,
        saving=saving_of(to_ms(saving_ns), str(rule["saving_method"]), share),
        grade=grade,
    )


@check("slow_rank", RANK_SUMMARY, PIPELINE)
def check_slow_rank(ctx: Context, rule: Rule) -> Finding:
    rs, wr = rank_skew(ctx)
    if len(rs) < 2 or not any(r["collectives"] for r in rs.values()):
        return make_finding(
            ctx,
            rule,
            fired=False,
            variant="single",
            values=template_values(rule, ctx, ranks=len(rs)),
            evidence={"ranks": len(rs)},
        )
    # pipeline stages do different work by design: lateness is compared within a stage only
    peers, stage_note = stage_peers(ctx, list(rs))
    peers = [p for p in peers if len(p) > 1]
    if not peers:
        return make_finding(
            ctx,
            rule,
            fired=False,
            variant="pp_stages",
            values=template_values(rule, ctx, ranks=len(rs), stage_note=stage_note),
            evidence={"ranks": len(rs), "pipeline_stages": stage_note},
        )

    def spread(p: list[int]) -> float:
        lates = [per_step_rank(rs[r], "lateness_ns") for r in p]
        return max(lates) - min(lates)

    group = max(peers, key=spread)
    slow = max(group, key=lambda r: per_step_rank(rs[r], "lateness_ns"))
    fast = min(group, key=lambda r: per_step_rank(rs[r], "lateness_ns"))
    late = per_step_rank(rs[slow], "lateness_ns") - (
        per_step_rank(rs[fast], "lateness_ns") if stage_note else 0.0
    )
    # a share needs a step to be a share of: a cluster summary without step times has none
    step_ns = ctx.mean_step_ns
    late_share = late / step_ns if step_ns else None
    split = lateness_split(ctx, slow, fast)
    d_sat, d_other, d_host = split["saturated_ns"], split["other_compute_ns"], split["host_idle_ns"]
    d_kernels = per_step_rank(rs[slow], "compute_kernels") - per_step_rank(rs[fast], "compute_kernels")
    causes = {"memory": d_sat, "compute": d_other, "host": d_host}
    cause = max(causes, key=lambda k: causes[k])
    if late <= 0 or causes[cause] < rule["min_explained"] * late:
        cause = "unexplained"
    no_list = [r for r in (slow, fast) if rs[r].get("kernel_list") is False]
    if no_list:
        # a rank without a task list is not idle: its compute is not recorded, so the lateness cannot be split
        cause = "not_recorded"
    hbm = ctx.hbm_ranks()
    vals = template_values(
        rule,
        ctx,
        slow=slow,
        fast=fast,
        late_ms=to_ms(late),
        late_share=late_share or 0.0,
        d_sat_ms=to_ms(d_sat),
        d_compute_ms=to_ms(d_other),
        d_host_ms=to_ms(d_host),
        d_kernels=int(round(d_kernels)),
        slow_util=pct_text((hbm.get(slow) or {}).get("busy_utilization")),
        fast_util=pct_text((hbm.get(fast) or {}).get("busy_utilization")),
        advisor_ms=to_ms(per_step_rank(rs[fast], "peer_wait_ns")),
        no_list=", ".join(str(r) for r in no_list),
        stage_note=stage_note,
    )
    vals["cause_text"] = render(str(rule["causes"][cause]), vals, f"rules.slow_rank.causes.{cause}")
    if stage_note:
        vals["cause_text"] += f" ({stage_note})"
    ev = {
        "slow_rank": slow,
        "fast_rank": fast,
        "lateness_ns_per_step": late,
        "lateness_share": late_share,
        "cause": cause,
        "extra_saturated_ns_per_step": d_sat,
        "extra_other_compute_ns_per_step": d_other,
        "extra_host_idle_ns_per_step": d_host,
        "extra_kernels_per_step": d_kernels,
        "advisor_equivalent": render(str(rule["advisor_says"]), vals, "rules.slow_rank.advisor_says"),
        "compared_ranks": group,
        "pipeline_stages": stage_note or None,
        "related_queries": [ctx.command("wait_attribution", ctx.wait_params())],
    }
    tops = [
        {
            "rank": r,
            "lateness_ms_per_step": to_ms(per_step_rank(rs[r], "lateness_ns")),
            "kernels_per_step": per_step_rank(rs[r], "compute_kernels"),
            "compute_ms_per_step": to_ms(per_step_rank(rs[r], "compute_ns")),
            "hbm_saturated_ms_per_step": to_ms(per_step_rank(wr.get(r, {}), "compute_hbm_saturated_ns")),
            "idle_host_ms_per_step": to_ms(
                per_step_rank(wr.get(r, {}), "idle_ns") + per_step_rank(wr.get(r, {}), "host_ns")
            ),
        }
        for r in sorted(rs)
    ]
    share = ctx.share(late)
    saving = saving_of(to_ms(late), str(rule["saving_method"]), share)
    if late_share is None:
        return make_finding(
            ctx,
            rule,
            fired=False,
            variant="no_steps",
            values=vals,
            evidence=ev,
            top_ops=tops,
            saving=saving_of(None, "no step times in the dump", None),
        )
    return decide(
        ctx,
        rule,
        unless=[(late_share < rule["min_lateness_share"], "balanced")],
        share=share,
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
    )


@check("slow_link", TRANSPORT)
def check_slow_link(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(TRANSPORT)
    links = [r for r in rows if r["scope"] == "link" and r["transport"] != "SDMA" and r.get("bandwidth_bps")]
    if not links:
        return make_finding(ctx, rule, fired=False, variant="no_data", values=template_values(rule, ctx))
    expected = {k.upper(): float(v) * 1e9 for k, v in rule["expected_gbps"].items()}
    best: dict[str, float] = {}
    for r in links:
        best[r["transport"]] = max(best.get(r["transport"], 0.0), r["bandwidth_bps"])
    slow = []
    saved = 0.0
    for r in links:
        exp = expected.get(r["transport"])
        vs_exp = r["bandwidth_bps"] / exp if exp else None
        vs_best = r["bandwidth_bps"] / best[r["transport"]] if best[r["transport"]] else None
        is_slow = (vs_exp is not None and vs_exp < rule["min_fraction_of_expected"]) or (
            vs_best is not None and vs_best < rule["min_fraction_of_best"]
        )
        if is_slow:
            target = max(x for x in (exp or 0.0, best[r["transport"]]) if x)
            saved += max(0.0, (r["transit_ns"] or 0) - (r["bytes"] or 0) / target * 1e9)
            slow.append(
                {
                    "rank": r["rank"],
                    "transport": r["transport"],
                    "gbps": r["bandwidth_bps"] / 1e9,
                    "expected_gbps": exp / 1e9 if exp else None,
                    "vs_expected": vs_exp,
                    "vs_best_rank": vs_best,
                    "gb": to_gb(r["bytes"]),
                    "transit_ms": to_ms(r["transit_ns"]),
                    "ops": r["ops"],
                }
            )
    w = ctx.wait_run() or {}
    comm = (
        (w.get("comm_transit_ns") or 0)
        + (w.get("comm_wait_other_ns") or 0)
        + (w.get("comm_wait_peer_hbm_ns") or 0)
    )
    transit_share = (w.get("comm_transit_ns") or 0) / comm if comm else None
    per_step = ctx.per_step(saved)
    share = ctx.share(per_step)
    small = next((r for r in rows if r["scope"] == "run"), {})
    first = slow[0] if slow else min(links, key=lambda r: r["bandwidth_bps"])
    first_d = (
        first
        if slow
        else {
            "rank": first["rank"],
            "transport": first["transport"],
            "gbps": first["bandwidth_bps"] / 1e9,
            "expected_gbps": (expected.get(first["transport"]) or 0) / 1e9 or None,
        }
    )
    vals = template_values(
        rule,
        ctx,
        n=len(slow),
        rank=first_d["rank"],
        transport=first_d["transport"],
        gbps=first_d["gbps"],
        expected=num_text(first_d.get("expected_gbps")),
        transit_share=pct_text(transit_share),
        saving_ms=to_ms(per_step) or 0.0,
        saving_share=share or 0.0,
        small_ops=small.get("small_ops") or 0,
    )
    ev = {
        "links": len(links),
        "slow_links": len(slow),
        "transit_share_of_comm": transit_share,
        "saved_ns_per_step": per_step,
        "advisor_equivalent": render(str(rule["advisor_says"]), vals, "rules.slow_link.advisor_says"),
    }
    tops = slow or [
        {"rank": r["rank"], "transport": r["transport"], "gbps": r["bandwidth_bps"] / 1e9} for r in links
    ]
    saving = saving_of(to_ms(per_step), str(rule["saving_method"]), share)
    return decide(
        ctx,
        rule,
        unless=[(not slow, "ok")],
        share=share,
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
    )


@check("comm_alignment", TRANSPORT)
def check_comm_alignment(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(TRANSPORT)
    run = next((r for r in rows if r["scope"] == "run"), {})
    ops = [r for r in rows if r["scope"] == "op" and (r.get("unaligned_packets") or 0) > 0]
    vals = template_values(
        rule,
        ctx,
        packets=run.get("packets") or 0,
        unaligned=run.get("unaligned_packets") or 0,
        ops=run.get("unaligned_ops") or 0,
        unaligned_share=(run.get("unaligned_packets") or 0) / run["packets"] if run.get("packets") else 0.0,
        example=ops[0]["name"] if ops else "",
    )
    ev = {
        "packets": run.get("packets"),
        "unaligned_packets": run.get("unaligned_packets"),
        "unaligned_ops": run.get("unaligned_ops"),
        "has_packet_sizes": run.get("has_packet_sizes"),
    }
    tops = [
        {
            "rank": r["rank"],
            "name": r["name"],
            "transport": r["transport"],
            "packets": r["packets"],
            "unaligned_packets": r["unaligned_packets"],
            "bytes": r["bytes"],
        }
        for r in ops[:10]
    ]
    if not run.get("has_packet_sizes"):
        return make_finding(ctx, rule, fired=False, variant="no_data", values=vals, evidence=ev)
    if not run.get("unaligned_packets"):
        return make_finding(ctx, rule, fired=False, variant="ok", values=vals, evidence=ev)
    share = vals["unaligned_share"]
    return make_finding(
        ctx, rule, fired=True, variant="fired", values=vals, evidence=ev, top_ops=tops, share=share
    )


@check("small_packets", TRANSPORT)
def check_small_packets(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(TRANSPORT)
    run = next((r for r in rows if r["scope"] == "run"), {})
    n, small = run.get("ops") or 0, run.get("small_ops") or 0
    ratio = small / n if n else 0.0
    op_rows = [r for r in rows if r["scope"] == "op" and r["transport"] in ("SDMA", "RDMA")]
    mean_mb = (sum(r["bytes"] or 0 for r in op_rows) / len(op_rows) / 1e6) if op_rows else 0.0
    vals = template_values(
        rule,
        ctx,
        ops=n,
        small=small,
        ratio=ratio,
        mean_mb=mean_mb,
        small_mb=(run.get("small_bytes") or 0) / 1e6,
    )
    ev = {
        "ops": n,
        "small_ops": small,
        "small_ratio": ratio,
        "small_bytes": run.get("small_bytes"),
        "mean_op_bytes": mean_mb * 1e6,
    }
    tops = [
        {
            "rank": r["rank"],
            "name": r["name"],
            "transport": r["transport"],
            "mb": (r["bytes"] or 0) / 1e6,
            "transit_ms": to_ms(r["transit_ns"]),
        }
        for r in op_rows
        if r["small_ops"]
    ][:10]
    if not n:
        return make_finding(ctx, rule, fired=False, variant="no_data", values=vals, evidence=ev)
    if ratio <= rule["max_small_ratio"]:
        return make_finding(ctx, rule, fired=False, variant="ok", values=vals, evidence=ev)
    return make_finding(
        ctx, rule, fired=True, variant="fired", values=vals, evidence=ev, top_ops=tops, share=None
    )
