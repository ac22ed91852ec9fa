"""The comparison's data model and its JSON format id (traceql.compare.Comparison.to_dict()).

Plain dataclasses, no I/O: gather.py fills RunNumbers from SQL, verdict.py decides comparability and the
verdict, diff.py pairs operators, traffic and findings, render.py prints them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..jsonsafe import json_safe

if TYPE_CHECKING:  # pragma: no cover
    from ..rows import FusionChainsRow

FORMAT_ID = "traceql.compare/1"
VERDICTS = ("improvement", "regression", "neutral", "inconclusive")
MODES = ("same", "cross")

# The parts of a step, in the order the split is shown: wait_attribution's disjoint parts, which add up to the
# step window (its comm_wait_other_ns is the sum of the three waiting parts below). SplitPart names them as
# wait_attribution's columns, so mypy checks each against traceql.rows.WaitAttributionRow where it is read.
SplitPart = Literal[
    "compute_hbm_saturated_ns",
    "compute_other_ns",
    "comm_transit_ns",
    "comm_wait_peer_hbm_ns",
    "comm_wait_peer_other_ns",
    "comm_wait_missing_ranks_ns",
    "comm_wait_sync_ns",
    "comm_unsplit_ns",
    "idle_ns",
    "host_ns",
]
SPLIT_PARTS: tuple[tuple[SplitPart, str], ...] = (
    ("compute_hbm_saturated_ns", "HBM-saturated compute"),
    ("compute_other_ns", "other compute"),
    ("comm_transit_ns", "communication: transit"),
    ("comm_wait_peer_hbm_ns", "communication: waiting on HBM-bound peers"),
    ("comm_wait_peer_other_ns", "communication: waiting on other late peers"),
    (
        "comm_wait_missing_ranks_ns",
        "communication: waiting after every captured peer (ranks not in the dump, or sync)",
    ),
    ("comm_wait_sync_ns", "communication: sync / HCCL idle"),
    ("comm_unsplit_ns", "communication: moving/waiting split not recorded"),
    ("idle_ns", "idle (gaps between device ops)"),
    ("host_ns", "host (before/after the device work)"),
)

# hbm_bytes_source -> evidence grade (design.md: pmu > sampled > modeled)
GRADE_OF_SOURCE = {"pmu": "measured", "sampled": "sampled", "modeled": "modeled"}
GRADE_ORDER = ("measured", "sampled", "modeled", "mixed", "none")


def weaker_grade(a: str, b: str) -> str:
    """The grade a difference of two numbers can claim: the weaker of its sides."""
    return max(a, b, key=GRADE_ORDER.index)


@dataclass
class RunInfo:
    run_id: str
    format: str
    device: str | None
    ranks: int
    profiler_level: str | None
    aic_metrics: str | None
    export_type: str | None
    kernels: int
    steps_min: int
    steps_max: int
    rows: dict[str, int]
    grade_calls: dict[str, int] = field(default_factory=dict)  # measured/sampled/modeled -> kernels
    device_preset: str | None = (
        None  # the preset findings resolve for the run (devices.resolve), None when none
    )

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "format": self.format,
            "device": self.device,
            "device_preset": self.device_preset,
            "ranks": self.ranks,
            "profiler_level": self.profiler_level,
            "aic_metrics": self.aic_metrics,
            "export_type": self.export_type,
            "kernels": self.kernels,
            "steps_per_rank": [self.steps_min, self.steps_max],
            "rows": self.rows,
            "hbm_bytes_grades": self.grade_calls,
        }


@dataclass
class StepRow:
    """One rank's one step: its window and the parts it splits into (ns)."""

    rank: int
    step: int | None
    wall_ns: int
    parts: dict[str, int]


@dataclass
class OpGroup:
    """Operators of one run under one match key, all ranks, totals (not per step)."""

    key: str  # op_type, or op_type|shapes|dtypes
    op_type: str
    shapes: str
    dtypes: str
    is_comm: bool
    calls: int = 0
    dur_ns: int = 0
    hbm_bytes: int = 0
    bytes_dur_ns: int = 0
    calls_with_bytes: int = 0
    grade_calls: dict[str, int] = field(default_factory=dict)
    example: str = ""

    @property
    def grade(self) -> str:
        used = [g for g, n in self.grade_calls.items() if n]
        if not used:
            return "none"
        return used[0] if len(used) == 1 else "mixed"

    def add(self, o: OpGroup) -> None:
        self.calls += o.calls
        self.dur_ns += o.dur_ns
        self.hbm_bytes += o.hbm_bytes
        self.bytes_dur_ns += o.bytes_dur_ns
        self.calls_with_bytes += o.calls_with_bytes
        for g, n in o.grade_calls.items():
            self.grade_calls[g] = self.grade_calls.get(g, 0) + n
        self.example = self.example or o.example


@dataclass
class RunNumbers:
    info: RunInfo
    steps: list[StepRow]
    ops: list[OpGroup]  # by (op_type, shapes, dtypes)
    chains: list[FusionChainsRow]  # fusion_chains pattern rows
    framework: (
        dict[str, Any] | None
    )  # traceql.capture.compare.run_metrics (host-side aten ops), when it applies
    framework_ops: (
        list[OpGroup] | None
    )  # --mode cross: kernels grouped by the framework op that launched them
    findings: Any | None  # traceql.findings.Report
    peaks_note: str = ""
    names: dict[str, str] = field(default_factory=dict)  # kernel name -> op_type, where the dump types it
    notes: list[str] = field(default_factory=list)  # how its operators were matched (diff.harmonize)

    @property
    def rank_steps(self) -> int:
        return len(self.steps)


def stats(values: list[float]) -> dict[str, Any]:
    """n, mean, sample standard deviation, min, max (sd null under 2 values: no spread to judge noise)."""
    n = len(values)
    if not n:
        return {"n": 0, "mean": None, "sd": None, "min": None, "max": None}
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None
    return {"n": n, "mean": mean, "sd": sd, "min": min(values), "max": max(values)}


@dataclass
class Comparison:
    base: RunNumbers
    cand: RunNumbers
    mode: str
    comparable: bool
    refusals: list[str]  # why no verdict (empty when comparable)
    differences: list[dict[str, Any]]  # what differs (incl. refusals), each {aspect, base, cand, effect}
    hidden: list[str]  # what the recording difference hides (e.g. profiler level)
    verdict: dict[str, Any] | None
    step: dict[str, Any]  # step time and split, side by side + delta per step
    ranks: list[dict[str, Any]]
    traffic: dict[str, Any]
    operators: dict[str, Any]
    findings: dict[str, Any] | None
    framework: dict[str, Any] | None
    gate: dict[str, Any] | None = None
    windows_only: bool = False  # neither run has a step marker: "per step" means the one profiled window

    def to_dict(self) -> dict[str, Any]:
        from ..version import __version__

        out: dict[str, Any] = json_safe(
            {
                "format": FORMAT_ID,
                "generated_by": f"traceql {__version__}",
                "mode": self.mode,
                "base": self.base.info.to_dict(),
                "cand": self.cand.info.to_dict(),
                "comparability": {
                    "comparable": self.comparable,
                    "refusals": self.refusals,
                    "differences": self.differences,
                    "hidden_by_difference": self.hidden,
                },
                "verdict": self.verdict,
                "gate": self.gate,
                "step": self.step,
                "ranks": self.ranks,
                "traffic": self.traffic,
                "operators": self.operators,
                "findings": self.findings,
                "framework": self.framework,
                "windows_only": self.windows_only,
            }
        )
        return out
