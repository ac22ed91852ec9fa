"""What the dump can carry: the verdict and the findings held to the evidence the dump holds (issue 44).

capture_coverage's rows (queries/capture_coverage.sql) are the facts: the job's size as a bound or exact, each
rank's evidence inventory (task list, steps, counters, communication, host) and the task list's share of the
profiler's own computing time. This module only words them and holds claims the facts cannot carry: no confident
bound from a fragment (no step markers, no communication), no finding above info whose numbers rest on the part
of the step the task list does not hold, and no "N of M ranks" where M is only a lower bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..rows import CaptureCoverageRow, PipelineStagesRow
from .base import to_ms
from .context import COVERAGE, Read, run_row
from .text import render

if TYPE_CHECKING:  # pragma: no cover
    from .context import Context
    from .model import Finding

PIPELINE = Read("pipeline_stages", PipelineStagesRow)


def inventory(ctx: Context) -> tuple[CaptureCoverageRow | None, list[CaptureCoverageRow]]:
    """capture_coverage's run row (None when the query has none) and its per-rank rows."""
    rows = ctx.read(COVERAGE)
    return run_row(rows), [r for r in rows if r["scope"] == "rank"]


def is_fragment(run: CaptureCoverageRow | None) -> bool:
    """No step markers and no communication records (a task list's own hcom / NCCL tasks are an excerpt, not a
    record of the collectives): the shares are of a capture window, not of a step of a job."""
    return run is not None and not run["steps"] and not run["comm_ops"]


def low_coverage(ctx: Context, run: CaptureCoverageRow | None) -> float | None:
    """The task list's share of the profiler's computing time when it is below the rules' line, else None."""
    kc = run["kernel_coverage"] if run else None
    line = float(ctx.rules.get("honesty", {}).get("min_kernel_coverage", 0.9))
    return float(kc) if kc is not None and kc < line else None


def job_text(capture: dict[str, Any]) -> str:
    """The job's size as the dump records it: '8', 'at least 9' or 'unknown'."""
    n = capture.get("job_ranks")
    if n is None:
        return "unknown"
    return f"{n}" if capture.get("job_ranks_exact") else f"at least {n}"


def job_evidence(capture: dict[str, Any]) -> str:
    """What the job size rests on, in words: 'world size recorded', 'rank ids up to 8 named in the
    communication_matrix', 'job size not recorded'."""
    n, src = capture.get("job_ranks"), capture.get("job_ranks_source") or ""
    if n is None:
        return "job size not recorded"
    if src == "world size":
        return "world size recorded"
    if capture.get("job_ranks_exact"):
        return f"every rank 0-{int(n) - 1} in the dump"
    return f"rank ids up to {int(n) - 1} named in the {src}"


def stages(ctx: Context) -> dict[int, PipelineStagesRow]:
    """rank -> its pipeline_stages row (stage, stages, pp_group, source); {} when no pipeline group is named."""
    return {int(rank): r for r in ctx.read(PIPELINE) if (rank := r["rank"]) is not None}


def hold_findings(ctx: Context, findings: list[Finding]) -> None:
    """Hold at info every fired finding the dump cannot carry above it: all of them on a fragment, and those whose
    numbers rest on the step's time split (rules [honesty].uncovered) when the task list holds too little of the
    profiler's computing time. The finding keeps its numbers and says why it is held."""
    run, _ = inventory(ctx)
    h = ctx.rules.get("honesty", {})
    kc = low_coverage(ctx, run)
    for f in findings:
        if not f.fired or f.severity == "info":
            continue
        if is_fragment(run):
            why = "no step markers and no communication in the dump, so no step to take a share of"
        elif kc is not None and f.id in set(h.get("uncovered", [])):
            why = f"the task list holds only {kc:.0%} of the profiler's computing time; the rest counts as idle here"
        else:
            continue
        f.evidence["held_from"] = f.severity
        f.evidence["held_because"] = why
        f.severity = "info"
        f.message += (
            " (" + render(str(h.get("held", "held at info: {why}")), {"why": why}, "honesty.held") + ")"
        )


def hbm_without_peak(ctx: Context) -> str | None:
    """HBM counter bytes and bandwidth when the device's peak is unknown (no utilisation to give): the busiest
    rank's GB and GB/s, never "no HBM bytes" while the dump holds samples."""
    rows = [
        (float(bps), float(nbytes), r)
        for r in ctx.hbm_ranks().values()
        if r["evidence"] == "sampled" and (nbytes := r["hbm_bytes"]) and (bps := r["avg_bw_bps"]) is not None
    ]
    if not rows or ctx.peak() is not None:
        return None
    bw, hbm_bytes, r = max(rows, key=lambda x: x[0])
    vals = {
        "rank": r["rank"],
        "gb": hbm_bytes / 1e9,
        "gbps": bw / 1e9,
        "covered_ms": to_ms(r["covered_ns"]) or 0.0,
        "period_ms": (r["sample_period_ns"] or 0) / 1e6,
    }
    return render(str(ctx.rules["honesty"]["hbm_no_peak"]), vals, "honesty.hbm_no_peak")


def amend_verdict(ctx: Context, v: dict[str, Any]) -> dict[str, Any]:
    """The verdict held to the inventory: the capture gains each rank's evidence; a fragment cannot tell the
    bound; a task list short of the profiler's computing time says what the shares rest on; a distributed dump
    that records no job size says so."""
    run, ranks = inventory(ctx)
    cap = v.setdefault("capture", {})
    cap.update(
        kernel_span_coverage=run["kernel_span_coverage"] if run else None,
        evidence=run["evidence"] if run else None,
        ranks_without_kernel_list=[r["rank"] for r in ranks if not r["kernel_list"]],
        ranks=[_rank_inventory(r) for r in ranks],
    )
    if not run or v.get("bound") is None:
        return v
    h = ctx.rules["honesty"]
    if cap.get("job_ranks") is None and ((run["ranks_captured"] or 0) > 1 or run["comm_ops"]):
        vals: dict[str, Any] = {"captured": run["ranks_captured"] or 0}
        v["headline"] = render(str(h["job_unknown"]), vals, "honesty.job_unknown") + "; " + v["headline"]
        if v["bound"] == "communication":
            # exposed communication may be waiting for ranks the dump does not name
            v["confidence"] = "cannot tell"
    if is_fragment(run):
        advice = h["fragment_capture_gpu" if ctx.device_kind == "gpu" else "fragment_capture_ascend"]
        vals = {"evidence": run["evidence"] or "", "local": v["headline"], "capture": advice}
        v.update(confidence="cannot tell", headline=render(str(h["fragment"]), vals, "honesty.fragment"))
        return v
    kc = low_coverage(ctx, run)
    if kc is not None:
        span = run["kernel_span_coverage"]
        vals = {
            "kc": kc,
            "kernel_ms": kc * (to_ms(run["step_computing_ns"]) or 0.0),
            "computing_ms": to_ms(run["step_computing_ns"]) or 0.0,
            "steps": run["steps_reported"] or 0,
            "span_text": "unknown" if span is None else f"{span:.0%}",
        }
        v["headline"] += render(str(h["low_coverage"]), vals, "honesty.low_coverage")
        v["confidence"] = "cannot tell"
    bare = [r for r in ranks if not r["kernel_list"]]
    if bare:
        vals = {
            "ranks": ",".join(str(r["rank"]) for r in bare),
            "computing": ", ".join(
                "not recorded" if (ns := r["step_computing_ns"]) is None else f"{to_ms(ns):.2f}" for r in bare
            ),
        }
        v["headline"] += render(str(h["no_task_list"]), vals, "honesty.no_task_list")
        v["confidence"] = "cannot tell"
    return v


def _rank_inventory(r: CaptureCoverageRow) -> dict[str, Any]:
    """A rank's evidence inventory as the verdict's capture lists it."""
    return {
        "rank": r["rank"],
        "kernel_list": r["kernel_list"],
        "compute_ns": r["compute_ns"],
        "steps": r["steps"],
        "counters": r["counters"],
        "comm_ops": r["comm_ops"],
        "comm_tasks": r["comm_tasks"],
        "evidence": r["evidence"],
    }


def stage_peers(ctx: Context, ranks: list[int]) -> tuple[list[list[int]], str]:
    """The ranks to compare lateness between: one list per pipeline stage (ranks of one stage do the same work),
    or all of them in one list where the dump names no pipeline group; with a note naming the stages that differ
    by design ('' without stages). A rank the pipeline groups leave out is a stage of its own."""
    st = stages(ctx)
    if not st:
        return [sorted(ranks)], ""
    by_stage: dict[object, list[int]] = {}
    for r in sorted(ranks):
        by_stage.setdefault(st[r]["stage"] if r in st else ("alone", r), []).append(r)
    differ = [r for r in sorted(ranks) if r in st]
    src = ", ".join(sorted({str(st[r]["source"]) for r in differ}))
    groups = sorted({str(st[r]["pp_group"]) for r in differ})
    note = render(
        str(ctx.rules["honesty"]["pp_stage"]),
        {"ranks": "; ".join(groups), "source": src},
        "honesty.pp_stage",
    )
    return list(by_stage.values()), note
