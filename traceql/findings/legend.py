"""The legend: what each word of the findings output means (verdict words, confidence, evidence grades,
severity, the checklist step, saving, compute fraction), each with an example. One source for
`traceql findings --explain`, the report's legend section and docs/reading-the-output.md (tests/test_docs.py
checks the doc names every term here)."""

from __future__ import annotations

from dataclasses import dataclass

LEGEND_POINTER = "What the words mean: `traceql findings --explain` or docs/reading-the-output.md."


@dataclass(frozen=True)
class Term:
    group: str  # verdict | confidence | grade | severity | column
    word: str
    meaning: str
    example: str


LEGEND: tuple[Term, ...] = (
    Term(
        "verdict",
        "memory-bound",
        "the step is mostly compute that runs at or above the HBM saturation line (80% of peak), or waiting on it",
        "memory-bound: rank 1 computes at 81% of peak HBM bandwidth while rank 0 waits 2.90 ms per step",
    ),
    Term(
        "verdict",
        "communication-bound",
        "the largest share of the step is exposed communication (moving data, or waiting in a collective)",
        "communication-bound: 64% of step time is exposed communication (2% moving data, 62% waiting)",
    ),
    Term(
        "verdict",
        "compute-bound",
        "the step is mostly compute below the HBM line: look at the kernels' arithmetic",
        "compute-bound: 70% of step time is compute below the HBM saturation line",
    ),
    Term(
        "verdict",
        "host/idle-bound",
        "the device waits for the host (launches, data loading) or sits idle between kernels",
        "host/idle-bound: the device is idle 45% of the step",
    ),
    Term(
        "verdict",
        "latency-bound",
        "the compute time is mostly in tasks where no pipe is near its roof (per-task pipe utilisation): neither "
        "HBM nor the compute units saturate; the cause (scalar, few blocks, short tasks...) is named "
        "(docs/bounds.md)",
        "latency-bound (per-task pipe utilisation): 54% of step time is compute and 55% of that time is in tasks "
        "where no pipe is near its roof, mostly too few blocks for the cores",
    ),
    Term(
        "verdict",
        "cannot tell",
        "the dump cannot decide the bound (ranks missing, HBM evidence too coarse, no device timeline); the "
        "caveats say what is missing and what capture would tell",
        "cannot tell (these ranks look communication-bound): ...  - only 2 of 8 ranks captured",
    ),
    Term(
        "confidence",
        "judged",
        "the evidence decides the bound (JSON verdict.confidence)",
        '"confidence": "judged"',
    ),
    Term(
        "grade",
        "measured",
        "per-task hardware counters (PMU bytes) or the profiler's own timestamps: the strongest evidence",
        "Bytes from pmu.",
    ),
    Term(
        "grade",
        "pipe",
        "per-task pipe utilisation (MTE2/MTE3 memory movement, cube, vector): which unit was busy, not bytes",
        "grade pipe: MTE2 busy 92% of the task",
    ),
    Term(
        "grade",
        "sampled",
        "device counters read at a period (HBM every 20 ms by default): only as sharp as that period",
        "HBM counters sampled every 20 ms; too coarse for the kernels",
    ),
    Term(
        "grade",
        "modeled",
        "computed from tensor shapes and dtypes: a lower bound, never tested against the 70% / 80% lines",
        "only a modeled lower bound (3.1% of peak over the step)",
    ),
    Term(
        "grade",
        "unresolved",
        "the counters exist but cannot resolve the quantity (kernels shorter than the sampling period): "
        "shown as a range, never as a verdict",
        "bandwidth while computing is anywhere up to 100% of peak",
    ),
    Term(
        "grade",
        "insufficient",
        "nothing in the dump measures it; the finding names the capture settings that would",
        "No HBM bytes in the dump ...: cannot test the 80% / 70% lines",
    ),
    Term(
        "severity",
        "critical / high / medium / low",
        "how much the finding costs the step, from the rule's thresholds (traceql/rules.toml)",
        "free_time high: the device is idle 17% of the step",
    ),
    Term("severity", "info", "context, or a check that did not fire (--all shows why)", "top_hbm_ops info"),
    Term(
        "column",
        "saving",
        "the estimated time per step of one rank the fix would save (ms/step); rows are ordered by it, then "
        "by severity; empty for diagnosis checks",
        "26.21 ms/step",
    ),
    Term(
        "column",
        "step",
        "where the check sits in the article's checklist (1 bandwidth diagnosis ... 10 matmul tiling, 11 Ascend "
        "advisor parity): a label, not a rank",
        "11 (slow_rank, free_time, dynamic_shape ...)",
    ),
    Term(
        "column",
        "compute fraction",
        "compute time / step time of the busiest rank; not a scaling efficiency (that needs --baseline)",
        "(compute fraction 0.06): 6% of the step computes",
    ),
)


def legend_text(width: int = 100) -> str:
    """The legend as plain text, one term a block, wrapped to `width`."""
    import textwrap

    out: list[str] = []
    group = ""
    for t in LEGEND:
        if t.group != group:
            group = t.group
            out += ["", f"{group}:"] if out else [f"{group}:"]
        out.append(f"  {t.word}")
        out += textwrap.wrap(t.meaning, width, initial_indent="      ", subsequent_indent="      ")
        out += textwrap.wrap(
            f"e.g. {t.example}", width, initial_indent="      ", subsequent_indent="        "
        )
    return "\n".join(out) + "\n"
