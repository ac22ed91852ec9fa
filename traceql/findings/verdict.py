"""The verdict: what saturates first, with what confidence, from the checks' findings and the run's shares."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import system_evidence
from .base import num_text, pct_text, scaling_of, scaling_text, to_ms
from .bounds import run_split, split_text
from .model import Finding
from .text import render

if TYPE_CHECKING:  # pragma: no cover
    from ..rows import HbmUtilizationRow, WaitAttributionRow
    from .context import Context


def hbm_summary(ctx: Context) -> dict[str, Any]:
    """The run's HBM bandwidth as the verdict may cite it: the busiest graded rank's utilisation, or for sampled
    counters too coarse to resolve the kernels their step mean, highest sample and upper bound, or a modeled
    lower bound; with the grade, a text, and whether it is known to be below the not-bound line."""
    from .. import grades

    hbm = ctx.hbm_ranks()
    utils = {r: u for r, x in hbm.items() if (u := x["busy_utilization"]) is not None}
    out: dict[str, Any] = {
        "util": None,
        "rank": None,
        "below_line": False,
        "grade": grades.hbm_grade(None, ctx.device_kind),
    }
    if utils:
        r = max(utils, key=lambda k: utils[k])
        g = grades.hbm_grade(hbm[r], ctx.device_kind)
        out.update(
            util=utils[r],
            rank=r,
            grade=g,
            below_line=utils[r] < ctx.not_bound,
            text=f"utilisation {pct_text(utils[r])} on rank {r} ({g['grade']}: {g['detail']})",
        )
        return out
    sampled = {r: x for r, x in hbm.items() if x["evidence"] == "sampled" and x["utilization"] is not None}
    if sampled:
        out.update(_sampled_summary(ctx, sampled))
        return out
    lower = [float(low) for x in hbm.values() if (low := x["modeled_utilization_lower"])]
    if lower:
        out.update(
            lower=max(lower), text=f"only a modeled lower bound ({max(lower):.1%} of peak over the step)"
        )
    else:
        from .coverage import hbm_without_peak

        # counter samples without a peak: bytes and GB/s, never "no HBM bytes"
        out["text"] = hbm_without_peak(ctx) or "no HBM bytes in the dump"
    return out


def _sampled_summary(ctx: Context, sampled: dict[int, HbmUtilizationRow]) -> dict[str, Any]:
    """hbm_summary from sampled counters (every row here has a utilization): the rank whose compute could be
    the busiest, its step mean, highest sample and upper bound while computing."""
    from .. import grades

    util = {r: float(x["utilization"] or 0.0) for r, x in sampled.items()}
    r = max(sampled, key=lambda k: (sampled[k]["busy_utilization_max"] or 0.0, util[k]))
    x = sampled[r]
    umax = x["busy_utilization_max"]
    period = (x["sample_period_ns"] or 0) / 1e6
    bound = "up to 100%" if umax is None or umax >= 1 else f"at most {umax:.0%}"
    return {
        "rank": r,
        "grade": grades.hbm_grade(x, ctx.device_kind),
        "mean": x["utilization"],
        "max_sample": x["max_utilization"],
        "busy_bound": min(umax, 1.0) if umax is not None else None,
        "below_line": all(
            (v_max := v["busy_utilization_max"]) is not None and v_max < ctx.not_bound
            for v in sampled.values()
        ),
        "text": (
            f"counters average {util[r]:.1%} of peak on rank {r} (sampled every {period:g} ms, "
            f"highest sample {(x['max_utilization'] or 0):.1%}; {bound} while computing)"
        ),
    }


def verdict_of(ctx: Context, findings: list[Finding]) -> dict[str, Any]:
    """What saturates first, in named steps: the numbers every verdict carries, the runs that cannot be judged
    (no device, graph capture, no step windows), then the bound, its message variant, and the capture's caveats."""
    w = ctx.wait_run()
    hs = hbm_summary(ctx)
    common = _common(ctx, w, hs)
    if ctx.device_kind == "cpu":
        host_ops = int((ctx.store_run_info().get("rows") or {}).get("host_ops") or 0)
        return _cannot_tell(ctx, common, "no_device", {"host_ops": host_ops})
    from . import graph_capture

    gc = graph_capture.detect(ctx)
    if gc is not None:  # the device work is not in the trace: gaps are not idle time
        return graph_capture.verdict(ctx, gc, common)
    if not w or not w["verdict"]:
        variant, ranges = _unjudged_variant(ctx)
        return _cannot_tell(ctx, common, variant, {"ranges": ranges})
    bound = str(w["verdict"]).removesuffix("-bound")
    vals = _template_values(ctx, w, hs)
    bound, variant, confidence = _bound_variant(ctx, w, hs, bound, common, vals)
    cw = next((f for f in findings if f.id == "comm_waits_on_memory" and f.fired), None)
    if cw is not None:
        piped = cw.evidence.get("outcome") == "fired_pipe"  # blamed on memory by per-task pipes, not bytes
        variant = ("memory_waits_pipe" if piped else "memory_waits") if bound == "memory" else variant
        vals.update(
            waiting=cw.evidence["waiting_rank"],
            late=cw.evidence["late_rank"],
            wait_ms=to_ms(cw.evidence["peer_wait_ns_per_step"]),
            late_util=pct_text(cw.evidence.get("late_rank_hbm_utilization")),
            d_mem_ms=to_ms(cw.evidence.get("late_extra_memory_bound_ns_per_step")) or 0.0,
        )
    if hs["util"] is None and variant in ("memory", "compute") and ctx.peak() is None:
        variant += "_no_peak"
    headline = render(ctx.rules["verdict"][variant], vals, f"verdict.{variant}")
    if common["compute_bounds"] and not variant.startswith("pipe_"):
        headline += "; " + split_text(common["compute_bounds"])
    headline += _system_clause(common, bound)
    headline, partial = _capture_caveat(ctx, w, common["capture"], headline)
    return {
        "bound": bound,
        "confidence": "cannot tell" if partial else confidence,
        "headline": headline,
        **common,
        "shares": _shares(w),
        "mean_step_ms": to_ms(w["mean_step_ns"]),
        "ranks": len(ctx.wait_by_rank()),
        "steps": w["steps"],
    }


def _common(ctx: Context, w: WaitAttributionRow | None, hs: dict[str, Any]) -> dict[str, Any]:
    """The numbers every verdict carries, judged or not."""
    scaling, method = scaling_of(ctx)
    cov = ctx.coverage()
    capture: dict[str, Any] = {
        "ranks_captured": cov["ranks_captured"],
        "job_ranks": cov["job_ranks"],
        "job_ranks_source": cov["job_ranks_source"],
        "job_ranks_exact": cov["job_ranks_exact"],
        "missing_ranks": cov["missing_ranks"] or "",
        "complete": cov["complete"],
        "kernel_coverage": cov["kernel_coverage"],
    }
    return {
        "hbm_utilization": hs["util"],
        "hbm_utilization_rank": hs["rank"],
        "hbm_evidence": hs["grade"],
        "hbm_mean_utilization": hs.get("mean"),
        "hbm_max_sample": hs.get("max_sample"),
        "hbm_busy_utilization_bound": hs.get("busy_bound"),
        "scaling_efficiency": scaling if method != "compute_fraction" else None,
        "scaling_method": method,
        "compute_fraction": w["compute_fraction"] if w else None,
        "capture": capture,
        "device_kind": ctx.device_kind,
        "compute_bounds": run_split(ctx),
        "links": system_evidence.links(ctx),
        "host": system_evidence.host(ctx),
    }


def _system_clause(common: dict[str, Any], bound: str) -> str:
    """The links' evidence for a communication-bound step, the host's for a host/idle-bound one."""
    if bound == "communication" and common["links"]:
        return "; " + system_evidence.links_text(common["links"])
    if bound == "host/idle" and common["host"]:
        return "; " + system_evidence.host_text(common["host"])
    return ""


def _cannot_tell(
    ctx: Context, common: dict[str, Any], variant: str, values: dict[str, Any]
) -> dict[str, Any]:
    return {
        "bound": None,
        "confidence": "cannot tell",
        "headline": render(ctx.rules["verdict"][variant], values, f"verdict.{variant}"),
        **common,
        "shares": {},
        "mean_step_ms": None,
        "ranks": len(ctx.hbm_ranks()),
        "steps": 0,
    }


def _unjudged_variant(ctx: Context) -> tuple[str, int]:
    """No step windows: a cluster summary, CUPTI range-profiler rows only, or no device time at all."""
    info = ctx.store_run_info()
    k = ctx.session.con.execute(
        "SELECT count(*), count(*) FILTER (WHERE task_type = 'cuda_profiler_range') FROM kernels WHERE run_id = $r",
        {"r": ctx.run_id},
    ).fetchall()[0]
    if str(info.get("format", "")).endswith("cluster") and not k[0]:
        return "cluster_summary", k[1]
    if k[0] and k[0] == k[1]:
        return "ranges_only", k[1]
    return "none", k[1]


def _shares(w: WaitAttributionRow) -> dict[str, Any]:
    return {
        "memory": w["memory_share"],
        "communication": w["communication_share"],
        "compute": w["compute_share"],
        "idle_host": w["idle_host_share"],
    }


def _template_values(ctx: Context, w: WaitAttributionRow, hs: dict[str, Any]) -> dict[str, Any]:
    """The [verdict] templates' values (rules.toml)."""
    from .. import grades

    scaling, method = scaling_of(ctx)
    shares = _shares(w)
    wall = w["wall_ns"] or 1
    return {
        "util": pct_text(hs["util"]),
        "util_rank": hs["rank"] if hs["rank"] is not None else "?",
        "not_bound": ctx.not_bound,
        "sat": ctx.sat,
        "scaling": num_text(scaling),
        "scaling_method": method.replace("_", " "),
        "scaling_text": scaling_text(scaling, method),
        "hbm_text": hs.get("text", ""),
        "hbm_grade": f"{hs['grade']['grade']}: {hs['grade']['detail']}",
        "capture": grades.CAPTURE_ADVICE["gpu" if ctx.device_kind == "gpu" else "ascend"],
        "memory_share": shares["memory"] or 0.0,
        "communication_share": shares["communication"] or 0.0,
        "compute_share": shares["compute"] or 0.0,
        "idle_host_share": shares["idle_host"] or 0.0,
        "transit_share": (w["comm_transit_ns"] or 0) / wall,
        "wait_share": ((w["comm_wait_other_ns"] or 0) + (w["comm_wait_peer_hbm_ns"] or 0)) / wall,
        "idle_share": (w["idle_ns"] or 0) / wall,
        "host_share": (w["host_ns"] or 0) / wall,
    }


def _bound_variant(
    ctx: Context,
    w: WaitAttributionRow,
    hs: dict[str, Any],
    bound: str,
    common: dict[str, Any],
    vals: dict[str, Any],
) -> tuple[str, str, str]:
    """The bound (refined inside compute by per-task evidence), its message variant and the confidence."""
    util = hs["util"]
    variant = {"memory": "memory", "communication": "communication", "compute": "compute"}.get(
        bound, "host_idle"
    )
    if bound == "communication":
        comm = (
            (w["comm_transit_ns"] or 0)
            + (w["comm_wait_other_ns"] or 0)
            + (w["comm_wait_peer_hbm_ns"] or 0)
            + (w["comm_unsplit_ns"] or 0)
        )
        if comm and (w["comm_unsplit_ns"] or 0) >= 0.5 * comm:
            variant = "unsplit"
        elif util is not None and util >= ctx.not_bound:
            variant = "communication_busy_hbm"
        elif ctx.peak() is None:
            variant = "communication_no_peak"
        elif not hs["below_line"]:
            variant = "communication_hbm_unknown"
    elif bound == "compute" and common["compute_bounds"]:
        # per-task pipes (or PMU bytes) say what bounds the compute time, at each task's own resolution: finer
        # than a step-wide HBM figure, which can only say whether HBM saturates on average
        split = common["compute_bounds"]
        vals.update(_split_values(split, ctx))
        return split["bound"], f"pipe_{split['bound']}", "judged"
    elif bound == "compute" and not (util is not None or hs["below_line"]):
        return bound, "compute_no_peak" if ctx.peak() is None else "compute_ungraded", "cannot tell"
    return bound, variant, "judged"


def _capture_caveat(
    ctx: Context, w: WaitAttributionRow, capture: dict[str, Any], headline: str
) -> tuple[str, bool]:
    """The headline with what the capture lacks (ranks outside the dump), and whether the job's bound cannot be
    judged from the ranks here (their peers' waiting is for ranks outside the dump)."""
    if capture["complete"] is not False:
        return headline, False
    from .coverage import job_evidence, job_text

    wall = w["wall_ns"] or 1
    missing_ns = w["comm_wait_missing_ranks_ns"] or 0
    n_missing = int(capture["job_ranks"] or 0) - int(capture["ranks_captured"] or 0)
    ids = capture["missing_ranks"]
    missing = f"{job_evidence(capture)}; {n_missing} not in the dump" + (f": ranks {ids}" if ids else "")
    # a job size read from rank ids is a lower bound (ranks above the highest id named may exist)
    job = job_text(capture)
    if missing_ns / wall >= 0.05:
        values = {
            "captured": capture["ranks_captured"],
            "job": job,
            "missing": missing,
            "missing_share": missing_ns / wall,
            "local": headline,
        }
        return render(ctx.rules["verdict"]["partial"], values, "verdict.partial"), True
    return f"{capture['ranks_captured']} of {job} ranks captured ({missing}); {headline}", False


def _split_values(split: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The pipe verdicts' template values (rules.toml [verdict] pipe_*)."""
    cause = split.get("top_cause_text") or "no single cause"
    return {
        "mem_pct": split["memory_share"],
        "comp_pct": split["compute_share"],
        "lat_pct": split["latency_share"],
        "graded_pct": split["graded_share"],
        "cause_text": cause,
        "split_text": split_text(split),
        **_bound_lines(),
    }


def _bound_lines() -> dict[str, float]:
    """The memory and compute lines bound_shares classified with (its header defaults: one definition)."""
    from .. import queries

    spec = queries.get("bound_shares")
    return {p.name: float(p.default) for p in spec.params if p.name in ("mem_line", "compute_line")}
