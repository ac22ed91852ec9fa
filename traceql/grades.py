"""Evidence grades: what each number that reaches a verdict or a finding rests on.

    measured      per-task PMU counters (torch_npu/msprof Memory or MemoryAccess aic-metrics: bytes per task),
                  or, for times, the profiler's own timestamps
    pipe          per-task pipe utilisation (PipeUtilization: the share of each task's cycles its MTE2/MTE3, cube,
                  vector and scalar pipes are busy): says what bounds each task at the task's own resolution, not
                  how many bytes it moved (docs/bounds.md)
    sampled       device counters sampled at a period (HBM bandwidth every 20 ms by default): resolved in time
                  only to that period; `period_ns` says which
    modeled       tensor sizes from shapes x dtypes: a lower bound (no re-reads, no workspace), never compared
                  with the 70% / 80% lines
    insufficient  nothing in the dump resolves the quantity: the verdict says "cannot tell" and names the
                  capture settings that would tell (`capture_advice`)

A grade is a small dict: {"grade": ..., "detail": "...", "period_ns": ... (sampled only)}. The weakest
source behind a number decides its grade (`weakest`): a figure mixing PMU bytes with modeled ones is modeled.
"""

from __future__ import annotations

from typing import Any

from .rows import HbmUtilizationRow

GRADES = ("measured", "pipe", "sampled", "modeled", "insufficient")
# kernel_bytes.hbm_bytes_source / hbm_utilization.evidence -> grade
_SOURCE_GRADE = {"pmu": "measured", "measured": "measured", "sampled": "sampled", "modeled": "modeled"}

# The capture settings that make HBM traffic measurable, per profiler (the argument names as the profilers
# spell them; `traceql capture` on an NPU passes the torch_npu ones).
CAPTURE_ADVICE = {
    "ascend": (
        "capture with torch_npu.profiler._ExperimentalConfig(aic_metrics=torch_npu.profiler.AiCMetrics.Memory "
        "(or MemoryAccess), profiler_level=torch_npu.profiler.ProfilerLevel.Level1 (or Level2), l2_cache=True) "
        "and profile_memory=True with sys_hardware_mem for the HBM counters; with the msprof CLI: "
        "msprof --aic-metrics=Memory --sys-hardware-mem=on; `traceql capture` uses these"
    ),
    "gpu": (
        "measure per-kernel DRAM bytes with Nsight Compute (ncu --metrics dram__bytes_read.sum,"
        "dram__bytes_write.sum) or CUPTI range profiling (torch.profiler _ExperimentalConfig(profiler_metrics="
        "['dram__bytes_read.sum', 'dram__bytes_write.sum'], profiler_measure_per_kernel=True)); a Kineto trace "
        "alone carries tensor shapes only; Nsight Systems samples device DRAM throughput with nsys profile "
        "--gpu-metrics-devices=all (sampled, not per kernel)"
    ),
}


def grade_of_source(source: str | None) -> str:
    """kernel_bytes.hbm_bytes_source (pmu | sampled | modeled | mixed | None) -> a grade."""
    return _SOURCE_GRADE.get(source or "", "insufficient")


def weakest(sources: list[str | None]) -> str:
    """The grade of a figure built from several sources: its weakest one (no sources: insufficient)."""
    grades = [grade_of_source(s) for s in sources if s and s != "mixed"]
    if any(s == "mixed" for s in sources):
        grades.append("modeled")  # a mix always holds modeled or sampled rows beside measured ones
    if not grades:
        return "insufficient"
    return max(grades, key=GRADES.index)


def hbm_grade(row: HbmUtilizationRow | None, device_kind: str = "ascend") -> dict[str, Any]:
    """The grade of a scope's HBM bandwidth from its hbm_utilization row (evidence, sample_period_ns,
    resolved_share)."""
    ev = row["evidence"] if row else None
    if row and ev == "measured":
        return {"grade": "measured", "detail": "per-task PMU bytes"}
    if row and ev == "sampled":
        period = row["sample_period_ns"]
        ms = f"{period / 1e6:g} ms" if period else "an unknown period"
        res = row["resolved_share"]
        resolved = row["busy_utilization"] is not None
        detail = f"HBM counters sampled every {ms}" + (
            ""
            if resolved
            else f"; too coarse for the kernels ({_pct(res)} of compute time in kernels "
            "at least half a period long): bandwidth while computing is bounded, "
            "not resolved"
        )
        return {"grade": "sampled", "detail": detail, "period_ns": period}
    if ev == "modeled":
        return {
            "grade": "modeled",
            "detail": "tensor sizes only: a lower bound, not tested against the lines",
            "capture": CAPTURE_ADVICE.get(device_kind, CAPTURE_ADVICE["ascend"]),
        }
    if ev == "mixed":
        return {
            "grade": "modeled",
            "detail": "ranks with different byte sources: graded by the weakest",
            "capture": CAPTURE_ADVICE.get(device_kind, CAPTURE_ADVICE["ascend"]),
        }
    return {
        "grade": "insufficient",
        "detail": "no HBM bytes: no PMU counters, no counter samples, no shapes",
        "capture": CAPTURE_ADVICE.get(device_kind, CAPTURE_ADVICE["ascend"]),
    }


def timing_grade() -> dict[str, Any]:
    """Times, waits and idle gaps come from the profiler's timestamps: measured."""
    return {"grade": "measured", "detail": "profiler timestamps"}


def _pct(x: float | None) -> str:
    return "unknown" if x is None else f"{100 * x:.0f}%"
