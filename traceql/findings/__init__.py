"""Findings: the seed article's checklist and six optimisations, detected and quantified from one run.

    from traceql.findings import evaluate
    report = evaluate(store, "resnet-8card", device="ascend910b")
    report.verdict["headline"]           # "memory-bound: rank 1 computes at 81% of peak HBM bandwidth while ..."
    [f.id for f in report.findings if f.fired]
    print(report.to_json())

Every check reads the metric library (queries/*.sql through traceql.queries.run) and turns the numbers into a
`Finding`. Thresholds, message templates, suggestions and the article's optimisation each check maps to live in
traceql/rules.toml (data, like msprof-analyze's advisor YAML); this module only computes the numbers the
templates need. A check that does not fire says why (its message), so `--all` reads as the whole checklist.

Checklist order (checklist_step): 1 bandwidth_bound, 2 comm_waits_on_memory, 3 top_hbm_ops, 4 operator_fusion,
5 ub_reuse, 6 memory_layout, 7 prefetch_overlap, 8 mixed_precision, 9 gradient_checkpointing,
10 matmul_tiling, 11 Ascend-advisor parity: slow_rank, slow_link, comm_alignment, small_packets, aicpu_ops,
dynamic_shape, free_time. Checks whose rule says `gated = true` (memory work: fusion, UB reuse, mixed precision,
checkpointing) do not fire when the run is not bandwidth-bound (every rank's busy HBM utilisation below the
article's 70% line): the article's checklist step 1, "if not, look at compute or communication".

JSON format (`Report.to_json()`, `traceql findings --format json`), format id "traceql.findings/2". Keys are
stable; new keys may be added, none renamed or removed without a new format id (/2: evidence grades,
capture coverage and confidence were added, and scaling_efficiency is null without a baseline run):

    {
      "format": "traceql.findings/2",
      "run_id": "level1",
      "generated_by": "traceql 0.1.0",
      "rules_version": 1,
      "device": {"preset": "ascend910b", "peaks": {"peak_hbm_bps": 1.6e12, ...}, "note": "device preset ...",
                 "observed_ceiling": [{"rank", "level", "name", "ts_ns", "ceiling_bps", "preset_peak_bps", "times_peak"}]},
      "verdict": {
        "bound": "communication",            # memory | communication | compute | host/idle | null (no device time)
        "confidence": "cannot tell",          # judged | cannot tell (the evidence or the capture cannot decide)
        "headline": "2 of at least 8 ranks captured (rank ids up to 7 named in the communication_matrix; ...): ... the job's bound cannot be judged from these ranks alone ...",
        "hbm_utilization": null,             # busiest rank's HBM utilisation while computing, 0..1: measured, or
                                             # sampled at a period that resolves the kernels; else null
        "hbm_utilization_rank": 0,
        "hbm_evidence": {"grade": "sampled", "detail": "HBM counters sampled every 20 ms; ...", "period_ns": 20000000},
        "hbm_mean_utilization": 0.0276,      # sampled counters: time-weighted mean over the step, 0..1
        "hbm_max_sample": 0.0859,            # sampled counters: the highest sample, 0..1
        "hbm_busy_utilization_bound": 0.57,  # sampled counters: the most utilisation while computing can be
        "scaling_efficiency": null,          # baseline step / this step; only with --baseline
        "scaling_method": "compute_fraction",  # or "baseline:<run>"
        "compute_fraction": 0.06,            # compute time / step time (not a scaling efficiency)
        "capture": {"ranks_captured": 2, "job_ranks": 8, "job_ranks_source": "communication_matrix",
                    "job_ranks_exact": false,   # false: "at least 8"; job_ranks null: job size not recorded
                    "missing_ranks": "2,3,4,5,6,7", "complete": false,
                    "kernel_coverage": 1.0,      # task-list compute time / step_trace Computing (null without it)
                    "kernel_span_coverage": 1.0, # first-to-last task span / the step's device time, beside it
                    "evidence": "task list (382 tasks); 2 steps; ...", "ranks_without_kernel_list": [],
                    "ranks": [{"rank": 0, "kernel_list": true, "compute_ns": ..., "steps": 1, "counters": ...,
                               "comm_ops": 8, "comm_tasks": ..., "evidence": "..."}, ...]},  # capture_coverage
        "device_kind": "ascend",             # ascend | gpu | cpu (no device timeline): whose advice applies
        "compute_bounds": {"bound": "latency", "memory_share": 0.41, "compute_share": 0.04,  # compute time split
                           "latency_share": 0.55, "unknown_share": 0.0, "top_cause": "few_blocks",  # by per-task
                           "top_cause_text": "...", "top_cause_share": 0.24, "grade": "pipe",  # evidence
                           "graded_share": 1.0},     # (docs/bounds.md); null when pipes/PMU cover < half of it
        "shares": {"memory": 0.0, "communication": 0.64, "compute": 0.06, "idle_host": 0.30},
        "mean_step_ms": 154.9, "ranks": 2, "steps": 2,
        "short": "cannot tell (these ranks look communication-bound): 64% of step time is ...",  # <= 160 chars,
                                             # the bound (or "cannot tell") first (findings/headline.py)
        "caveats": ["only 2 of 8 ranks captured (missing: 2,3,4,5,6,7)", ...]   # short lines
      },
      "findings": [                          # every check (fired or not), fired first by saving then severity,
                                             # the rest in checklist order (findings/order.py)
        {
          "id": "memory_layout", "title": "...", "severity": "medium",   # info | low | medium | high | critical
          "optimisation": "memory layout", "checklist_step": 6, "fired": true,
          "message": "Layout conversions take 16% of compute time ...",
          "evidence": {"outcome": "fired", "conversion_share_of_compute": 0.16, ...},  # base units (ns, bytes, 0..1)
          "top_ops": [{"op_type": "TransData", "src_format": "NCHW", ...}],
          "saving": {"value": 1.42, "unit": "ms/step", "method": "...", "share_of_step": 0.009},
          "query": "traceql query layout_transforms --run level1 --device ascend910b",
          "suggestion": "...",
          "grade": {"grade": "measured", "detail": "profiler timestamps"}   # what the numbers rest on
        }
      ],
      "summary": {"checks": 17, "fired": 5, "worst": "medium", "by_severity": {"medium": 2, "low": 3}}
    }

Evidence grades (traceql.grades): measured (per-task PMU bytes; profiler timestamps for times), sampled (device
counters at a period: the grade carries period_ns), modeled (tensor sizes: a lower bound, never tested against
the 70% / 80% lines), insufficient (the dump cannot resolve it: the grade names the capture settings that
would, under "capture"). A number that cannot be true (a share above 100% of a peak, a step or compute time)
is a data problem, not a finding: the check does not fire, its outcome is "implausible" and
evidence.implausible lists the fields (plausibility gate in _make); a top_ops row with such a number keeps
the row, nulls the number and says why under "implausible".

evidence.outcome names the message the check chose (fired, below, gated, not_bound, no_data, ...: the keys of its
[rules.<id>.messages] table). Severity of a non-firing finding is "info". saving.value is null when a check cannot quantify a saving
(diagnosis checks, packet alignment); saving values are per step of one rank ("ms/step") unless the unit says
otherwise. evidence keys ending in _ns are nanoseconds, _bytes bytes, _bps bytes/s; shares and utilisations are 0..1.
"""

from __future__ import annotations

from .evaluate import evaluate, evaluate_session, plan
from .model import FORMAT_ID, SEVERITIES, Finding, Report, severity_rank
from .registry import CHECKS
from .rules import RULES_PATH, Rule, load_rules
from .text import render

__all__ = [
    "CHECKS",
    "FORMAT_ID",
    "RULES_PATH",
    "SEVERITIES",
    "Finding",
    "Report",
    "Rule",
    "evaluate",
    "evaluate_session",
    "load_rules",
    "plan",
    "render",
    "severity_rank",
]
