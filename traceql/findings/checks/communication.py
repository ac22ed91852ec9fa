"""Communication: waiting on memory-bound peers (step 2) and the Ascend advisor's slow rank, slow link, alignment and small packets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...rows import CommTransportRow
from ..base import (
    decide,
    lateness_split,
    make_finding,
    num_text,
    pct_text,
    per_step_rank,
    per_step_summary,
    rank_skew,
    saving_of,
    scaling_of,
    scaling_text,
    steps_of,
    template_values,
    to_gb,
    to_ms,
)
from ..context import BOUNDS, RANK_SUMMARY, TRANSPORT, empty_row, run_row
from ..coverage import PIPELINE, stage_peers
from ..model import Finding
from ..registry import check
from ..text import render

if TYPE_CHECKING:  # pragma: no cover
    from ...rows import RankSummaryRow, WaitAttributionRow
    from ..context import Context
    from ..rules import Rule


@check("comm_waits_on_memory", RANK_SUMMARY, BOUNDS)
def check_comm_waits_on_memory(ctx: Context, rule: Rule) -> Finding:
    """Ranks waiting in collectives for a late peer that is in HBM-saturated compute. Every number is
    wait_attribution's: the wait is the waiting rank's exposed peer wait (comm_wait_peer_hbm +
    comm_wait_peer_other), its overlap with the late peer's saturated compute is wait_attribution's split of it,
    and the cause test is the late rank's extra saturated compute per step (lateness_split, as slow_rank)."""
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
    m = _memory_wait(ctx, rule, rs, wr)
    return _memory_wait_finding(ctx, rule, m, rs, wr, qp)


def _peer_wait(wr: dict[int, WaitAttributionRow], r: int) -> float:
    """Rank r's exposed wait for peers per step (on saturated peers and on the others)."""
    return per_step_rank(wr.get(r), "comm_wait_peer_hbm_ns") + per_step_rank(
        wr.get(r), "comm_wait_peer_other_ns"
    )


@dataclass(frozen=True)
class _MemoryWait:
    """comm_waits_on_memory's numbers: who waits, who is late, and how much of the wait the late rank's extra
    saturated compute covers."""

    waiter: int
    late: int
    wait: float
    wait_share: float
    d_sat: float
    covered: float
    late_util: float | None
    hbm_grade: dict[str, Any]
    evidence: dict[str, Any]
    values: dict[str, Any]


def _memory_wait(
    ctx: Context, rule: Rule, rs: dict[int, RankSummaryRow], wr: dict[int, WaitAttributionRow]
) -> _MemoryWait:
    """The rank that waits most for peers, the rank that arrives last most, and the split of the wait."""
    from ... import grades

    waiter = max(rs, key=lambda r: _peer_wait(wr, r))
    late = max(rs, key=lambda r: per_step_summary(rs[r], "lateness_ns"))
    wait = _peer_wait(wr, waiter)
    w_wait = wr.get(waiter)
    step_ns = ((w_wait["wall_ns"] if w_wait else None) or 0) / steps_of(w_wait)
    wait_share = wait / step_ns if step_ns else 0.0
    d_sat = lateness_split(ctx, late, waiter)["saturated_ns"]
    peer_hbm = per_step_rank(w_wait, "comm_wait_peer_hbm_ns")
    overlap = peer_hbm / wait if wait > 0 else 0.0
    covered = min(max(d_sat / wait, 0.0), 1.0) if wait > 0 else 0.0
    transit = per_step_rank(w_wait, "comm_transit_ns")
    hbm = ctx.hbm_ranks()
    late_util = ctx.busy_utilization(late)
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
    return _MemoryWait(waiter, late, wait, wait_share, d_sat, covered, late_util, hbm_g, ev, vals)


def _memory_wait_finding(
    ctx: Context,
    rule: Rule,
    m: _MemoryWait,
    rs: dict[int, RankSummaryRow],
    wr: dict[int, WaitAttributionRow],
    qp: dict[str, Any],
) -> Finding:
    """Fires when the wait is large, graded by HBM numbers (else by pipe evidence) and covered by the late
    rank's extra saturated compute."""
    common: dict[str, Any] = {"values": m.values, "evidence": m.evidence, "query_params": qp}
    if m.wait_share < rule["min_wait_share"] or m.waiter == m.late:
        return make_finding(ctx, rule, fired=False, variant="small_wait", **common)
    if m.hbm_grade["grade"] not in ("measured", "sampled") or m.late_util is None:
        piped = _pipe_memory_wait(ctx, rule, m.late, m.waiter, m.wait, m.values, m.evidence)
        if piped is not None:
            return piped
        return make_finding(
            ctx,
            rule,
            fired=False,
            variant="ungraded",
            grade={**m.hbm_grade, "grade": "insufficient"},
            **common,
        )
    if m.covered < rule["min_explained"]:
        return make_finding(ctx, rule, fired=False, variant="not_memory", grade=m.hbm_grade, **common)
    saving_ns = min(m.wait, max(m.d_sat, 0.0))
    share = ctx.share(saving_ns)
    return make_finding(
        ctx,
        rule,
        fired=True,
        variant="fired",
        share=share,
        saving=saving_of(to_ms(saving_ns), str(rule["saving_method"]), share),
        grade=m.hbm_grade,
        top_ops=_rank_rows(ctx, rs, wr, lambda r: _peer_wait(wr, r)),
        **common,
    )


def _scaling_evidence(ctx: Context) -> dict[str, Any]:
    scaling, method = scaling_of(ctx)
    return {
        "scaling_efficiency": scaling if method != "compute_fraction" else None,
        "compute_fraction": w["compute_fraction"] if (w := ctx.wait_run()) else None,
        "related_queries": [
            ctx.command("comm_skew", {"sat_threshold": ctx.sat, "top_n": 50}),
            ctx.command("rank_summary"),
        ],
    }


def _rank_rows(
    ctx: Context,
    rs: dict[int, RankSummaryRow],
    wr: dict[int, WaitAttributionRow],
    peer_wait: Callable[[int], float],
) -> list[dict[str, Any]]:
    """One row per rank: its lateness, its wait for peers and its HBM-saturated compute, per step."""
    return [
        {
            "rank": r,
            "lateness_ms_per_step": to_ms(per_step_summary(rs[r], "lateness_ns")),
            "peer_wait_ms_per_step": to_ms(peer_wait(r)),
            "hbm_saturated_compute_ms_per_step": to_ms(per_step_rank(wr.get(r), "compute_hbm_saturated_ns")),
            "hbm_utilization": ctx.busy_utilization(r),
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
    d_mem = late_mem / steps_of(wr.get(late)) - wait_mem / steps_of(wr.get(waiter))
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
    group, slow, fast = _slow_and_fast(rs, peers)
    late = per_step_summary(rs[slow], "lateness_ns") - (
        per_step_summary(rs[fast], "lateness_ns") if stage_note else 0.0
    )
    # a share needs a step to be a share of: a cluster summary without step times has none
    step_ns = ctx.mean_step_ns
    late_share = late / step_ns if step_ns else None
    vals, ev = _slow_rank_numbers(ctx, rule, rs, group, slow, fast, late, late_share, stage_note)
    tops = _slow_rank_rows(rs, wr)
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


def _slow_and_fast(rs: dict[int, RankSummaryRow], peers: list[list[int]]) -> tuple[list[int], int, int]:
    """The peer group whose lateness spreads most, its latest rank and its earliest."""

    def spread(p: list[int]) -> float:
        lates = [per_step_summary(rs[r], "lateness_ns") for r in p]
        return max(lates) - min(lates)

    group = max(peers, key=spread)
    slow = max(group, key=lambda r: per_step_summary(rs[r], "lateness_ns"))
    fast = min(group, key=lambda r: per_step_summary(rs[r], "lateness_ns"))
    return group, slow, fast


def _slow_rank_numbers(
    ctx: Context,
    rule: Rule,
    rs: dict[int, RankSummaryRow],
    group: list[int],
    slow: int,
    fast: int,
    late: float,
    late_share: float | None,
    stage_note: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """slow_rank's template values and evidence: what the slow rank does more than the fast one, per step, and
    the cause that explains the lateness (or none)."""
    split = lateness_split(ctx, slow, fast)
    d_sat, d_other, d_host = split["saturated_ns"], split["other_compute_ns"], split["host_idle_ns"]
    d_kernels = per_step_summary(rs[slow], "compute_kernels") - per_step_summary(rs[fast], "compute_kernels")
    causes = {"memory": d_sat, "compute": d_other, "host": d_host}
    cause = max(causes, key=lambda k: causes[k])
    if late <= 0 or causes[cause] < rule["min_explained"] * late:
        cause = "unexplained"
    no_list = [r for r in (slow, fast) if rs[r]["kernel_list"] is False]
    if no_list:
        # a rank without a task list is not idle: its compute is not recorded, so the lateness cannot be split
        cause = "not_recorded"
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
        slow_util=pct_text(ctx.busy_utilization(slow)),
        fast_util=pct_text(ctx.busy_utilization(fast)),
        advisor_ms=to_ms(per_step_summary(rs[fast], "peer_wait_ns")),
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
    return vals, ev


def _slow_rank_rows(rs: dict[int, RankSummaryRow], wr: dict[int, WaitAttributionRow]) -> list[dict[str, Any]]:
    """One row per rank: its lateness, kernels, compute, saturated compute and host/idle time, per step."""
    return [
        {
            "rank": r,
            "lateness_ms_per_step": to_ms(per_step_summary(rs[r], "lateness_ns")),
            "kernels_per_step": per_step_summary(rs[r], "compute_kernels"),
            "compute_ms_per_step": to_ms(per_step_summary(rs[r], "compute_ns")),
            "hbm_saturated_ms_per_step": to_ms(per_step_rank(wr.get(r), "compute_hbm_saturated_ns")),
            "idle_host_ms_per_step": to_ms(
                per_step_rank(wr.get(r), "idle_ns") + per_step_rank(wr.get(r), "host_ns")
            ),
        }
        for r in sorted(rs)
    ]


@check("slow_link", TRANSPORT)
def check_slow_link(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(TRANSPORT)
    links = [r for r in rows if r["scope"] == "link" and r["transport"] != "SDMA" and r["bandwidth_bps"]]
    if not links:
        return make_finding(ctx, rule, fired=False, variant="no_data", values=template_values(rule, ctx))
    expected: dict[str | None, float] = {k.upper(): float(v) * 1e9 for k, v in rule["expected_gbps"].items()}
    slow, saved = _slow_links(rule, links, expected)
    w = ctx.wait_run()
    transit = (w["comm_transit_ns"] if w else None) or 0
    comm = (
        transit
        + ((w["comm_wait_other_ns"] if w else None) or 0)
        + ((w["comm_wait_peer_hbm_ns"] if w else None) or 0)
    )
    transit_share = transit / comm if comm else None
    per_step = ctx.per_step(saved)
    share = ctx.share(per_step)
    small = next((r for r in rows if r["scope"] == "run"), None)
    if slow:
        first_d = slow[0]
    else:
        first = min(links, key=lambda r: r["bandwidth_bps"] or 0.0)
        first_d = {
            "rank": first["rank"],
            "transport": first["transport"],
            "gbps": (first["bandwidth_bps"] or 0.0) / 1e9,
            "expected_gbps": (expected.get(first["transport"]) or 0) / 1e9 or None,
        }
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
        small_ops=(small["small_ops"] if small else None) or 0,
    )
    ev = {
        "links": len(links),
        "slow_links": len(slow),
        "transit_share_of_comm": transit_share,
        "saved_ns_per_step": per_step,
        "advisor_equivalent": render(str(rule["advisor_says"]), vals, "rules.slow_link.advisor_says"),
    }
    tops = slow or [
        {"rank": r["rank"], "transport": r["transport"], "gbps": (r["bandwidth_bps"] or 0.0) / 1e9}
        for r in links
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


def _slow_links(
    rule: Rule, links: list[CommTransportRow], expected: dict[str | None, float]
) -> tuple[list[dict[str, Any]], float]:
    """The links below the expected bandwidth of their transport or below the best rank's on it (evidence rows),
    and the transit time they would save at the better of the two, ns."""
    best: dict[str | None, float] = {}
    for r in links:
        best[r["transport"]] = max(best.get(r["transport"], 0.0), r["bandwidth_bps"] or 0.0)
    slow: list[dict[str, Any]] = []
    saved = 0.0
    for r in links:
        bps = r["bandwidth_bps"] or 0.0  # links have a bandwidth (check_slow_link keeps only those)
        exp = expected.get(r["transport"])
        vs_exp = bps / exp if exp else None
        vs_best = bps / best[r["transport"]] if best[r["transport"]] else None
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
                    "gbps": bps / 1e9,
                    "expected_gbps": exp / 1e9 if exp else None,
                    "vs_expected": vs_exp,
                    "vs_best_rank": vs_best,
                    "gb": to_gb(r["bytes"]),
                    "transit_ms": to_ms(r["transit_ns"]),
                    "ops": r["ops"],
                }
            )
    return slow, saved


@check("comm_alignment", TRANSPORT)
def check_comm_alignment(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(TRANSPORT)
    run = run_row(rows) or empty_row(CommTransportRow)
    ops = [r for r in rows if r["scope"] == "op" and (r["unaligned_packets"] or 0) > 0]
    vals = template_values(
        rule,
        ctx,
        packets=run["packets"] or 0,
        unaligned=run["unaligned_packets"] or 0,
        ops=run["unaligned_ops"] or 0,
        unaligned_share=(run["unaligned_packets"] or 0) / packets if (packets := run["packets"]) else 0.0,
        example=ops[0]["name"] if ops else "",
    )
    ev = {
        "packets": run["packets"],
        "unaligned_packets": run["unaligned_packets"],
        "unaligned_ops": run["unaligned_ops"],
        "has_packet_sizes": run["has_packet_sizes"],
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
    if not run["has_packet_sizes"]:
        return make_finding(ctx, rule, fired=False, variant="no_data", values=vals, evidence=ev)
    if not run["unaligned_packets"]:
        return make_finding(ctx, rule, fired=False, variant="ok", values=vals, evidence=ev)
    share = vals["unaligned_share"]
    return make_finding(
        ctx, rule, fired=True, variant="fired", values=vals, evidence=ev, top_ops=tops, share=share
    )


@check("small_packets", TRANSPORT)
def check_small_packets(ctx: Context, rule: Rule) -> Finding:
    rows = ctx.read(TRANSPORT)
    run = run_row(rows) or empty_row(CommTransportRow)
    n, small = run["ops"] or 0, run["small_ops"] or 0
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
        small_mb=(run["small_bytes"] or 0) / 1e6,
    )
    ev = {
        "ops": n,
        "small_ops": small,
        "small_ratio": ratio,
        "small_bytes": run["small_bytes"],
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
