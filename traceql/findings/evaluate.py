"""Evaluate every check of the rules over one analysis session: the planner runs what the checks declare."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._duck import reraise_interrupt
from ..analysis import PLANNER_WORKERS
from ..errors import QueryError
from . import checks as _register_checks  # noqa: F401 - importing registers every check
from .context import BOUNDS, COVERAGE, HBM, ROLES, WAIT, Context, Read
from .coverage import PIPELINE, amend_verdict, hold_findings
from .headline import has_step_markers, headline_parts
from .model import Finding, Report
from .order import by_impact
from .registry import CHECKS
from .rules import Rule, load_rules
from .system_evidence import HOST, LINKS
from .verdict import verdict_of

if TYPE_CHECKING:  # pragma: no cover
    from ..analysis import Analysis

# what the verdict reads besides the checks' findings
VERDICT_READS = (WAIT, HBM, COVERAGE, BOUNDS, PIPELINE, LINKS, HOST, ROLES)


def plan() -> list[Read[Any]]:
    """Every read the checks and the verdict declare (the planner: derived from the declarations)."""
    return [r for c in CHECKS.values() for r in c.reads] + list(VERDICT_READS)


def evaluate(
    store: Any,
    run_id: str | None = None,
    *,
    device: str | None = None,
    peaks: Any = None,
    baseline: str | None = None,
    rules: str | Path | None = None,
    workers: int | None = None,
    step_marker: str = "",
) -> Report:
    """Run every check of the rules file over one run (default: the most recently ingested) and return a Report.

    device: a preset name (traceql.devices) instead of the one detected in the dump; peaks: a devices.Device or
    a mapping of peak params ({"peak_hbm_bps": 1.6e12}); baseline: a run (e.g. 1 card) whose mean step time
    gives the scaling efficiency. rules: another rules file (tests, site policies). workers: threads running the
    metric queries (default: up to 4). step_marker: a regex over host range names that marks the steps for the
    phases (queries/phases.sql) instead of the built-in markers."""
    from ..analysis import Analysis, planner_threads

    rules_data = load_rules(rules)  # a bad rules file is refused before the store is touched
    threads = planner_threads()
    with Analysis(store, run_id, device=device, peaks=peaks, baseline=baseline, threads=threads) as session:
        session.step_marker = step_marker
        return evaluate_session(session, rules=rules_data, workers=workers)


def evaluate_session(
    session: Analysis, *, rules: str | Path | dict[str, Any] | None = None, workers: int | None = None
) -> Report:
    """Every check over an open analysis session (its query cache is shared with charts and the report)."""
    rules_data = rules if isinstance(rules, dict) else load_rules(rules)
    base_ns = session.mean_step_ns(session.baseline) if session.baseline else None
    ctx = Context(session, rules_data, base_ns)
    ctx.prefetch(plan(), workers if workers is not None else min(PLANNER_WORKERS, os.cpu_count() or 1))
    ctx.settle()
    findings: list[Finding] = []
    order = sorted(rules_data["rules"].items(), key=lambda kv: int(kv[1]["step"]))
    for rule_id, rdata in order:
        rule = Rule(rule_id, rdata, rules_data)
        try:
            findings.append(CHECKS[rule_id](ctx, rule))
        except QueryError as e:  # one check's query failing must not hide the others
            reraise_interrupt(e)  # but an interrupt is not a failing query
            findings.append(
                Finding(
                    rule_id,
                    str(rdata["title"]),
                    "info",
                    str(rdata["optimisation"]),
                    int(rdata["step"]),
                    False,
                    f"check could not run: {e}",
                    {"error": str(e)},
                    [],
                    {},
                    "",
                    str(rdata.get("suggestion", "")),
                )
            )
    from . import graph_capture, phase_verdicts, roles, windows

    findings = graph_capture.screen(graph_capture.detect(ctx), findings)  # no "idle" from unrecorded kernels
    # held to what the dump can carry: severities and the verdict's confidence follow its evidence inventory
    hold_findings(ctx, findings)
    verdict = amend_verdict(ctx, verdict_of(ctx, findings))
    findings, verdict = windows.apply(ctx, findings, verdict)  # no step marker: never "per step"
    verdict = phase_verdicts.attach(ctx, verdict)  # prefill / decode ... each judged on its own windows
    verdict = roles.attach(ctx, verdict)  # RL: one folder per role (actor, rollout ...), each described alone
    # the short headline and caveats beside the full text
    markers = not verdict.get("bound") or has_step_markers(session.con, session.run_id)
    verdict.update(headline_parts(verdict, markers))
    findings = by_impact(findings)  # display order: biggest saving first (the step stays as a label)
    meta = ctx.meta
    dev: dict[str, Any] = {
        "preset": session.device,
        # floats whichever query's metadata came first (a preset's int peak and a bound DOUBLE param are equal)
        "peaks": {
            k: float(v) if isinstance(v, (int, float)) else v
            for k, v in json.loads(meta.get(b"traceql.peaks", b"{}") or b"{}").items()
        },
        "note": meta.get(b"traceql.peaks_note", b"").decode(),
    }
    # a measured bandwidth above the preset's peak says the preset is wrong for this device
    from ..observed_ceiling import ceiling_note, observed_ceiling

    dev["observed_ceiling"] = observed_ceiling(session.con, session.run_id, dev["peaks"])
    if dev["observed_ceiling"]:
        dev["note"] = "; ".join(x for x in (dev["note"], ceiling_note(dev["observed_ceiling"])) if x)
    rep = Report(session.run_id, verdict, findings, dev, int(rules_data.get("version", 1)))
    rep.late_queries = list(ctx.late)
    return rep
