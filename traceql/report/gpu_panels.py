"""A GPU report without Ascend panels: no Unified Buffer / L2 chart, no UB peak row, no Ascend-only checks in
the "did not fire" list, and HBM charts that say what is missing (per-kernel DRAM bytes, and how to capture
them) instead of drawing empty axes. Ascend and CPU runs are left as they are.
"""

from __future__ import annotations

from typing import Any

from .. import grades

ASCEND_ONLY_CHARTS = ("ub_l2",)  # Unified Buffer / L2 hit rate: Ascend PMU metrics
HBM_CHARTS = ("hbm_timeline", "hbm_ranks", "op_hbm_bytes")
# checks whose subject exists only on Ascend (UB, AI Core clock, AI CPU operators)
ASCEND_ONLY_CHECKS = ("ub_reuse", "aicore_freq", "aicpu_ops")
ASCEND_ONLY_META = ("UB peak",)


def charts(kind: str, names: list[str]) -> list[str]:
    return [n for n in names if not (kind == "gpu" and n in ASCEND_ONLY_CHARTS)]


def no_hbm_bytes(session: Any) -> bool:
    """Whether no kernel of the run carries HBM bytes (a Kineto trace without CUPTI / ncu counters)."""
    rows = session.query("hbm_utilization").to_pylist()
    return not any(r.get("hbm_bytes") for r in rows)


def stub_hbm_charts(kind: str, session: Any, specs: dict[str, dict[str, Any]]) -> None:
    """On a GPU run without HBM bytes, the HBM charts say so (and how to capture them) instead of drawing."""
    from .. import charts as ch

    if kind != "gpu" or not no_hbm_bytes(session):
        return
    why = (
        "This GPU trace records no HBM (DRAM) bytes per kernel: a Kineto trace carries tensor shapes only. To get "
        "them, "
        + grades.CAPTURE_ADVICE["gpu"]
        + "; with record_shapes=True traceql can at least model a lower bound."
    )
    for name in HBM_CHARTS:
        specs[name] = ch.to_spec(ch.message_chart(ch.get(name).description, why))


def silent(kind: str, views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [v for v in views if not (kind == "gpu" and v["id"] in ASCEND_ONLY_CHECKS)]


def meta(kind: str, rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [r for r in rows if not (kind == "gpu" and r[0] in ASCEND_ONLY_META)]
