"""Capture: run a workload (built-in or the user's script) under the right profiler and write a dump traceql ingests.

    from traceql.capture import capture_workload, capture_script, list_workloads, compare_variants
    meta = capture_workload("layernorm-naive", size="small")      # -> {"dump": ..., "ingest_path": ..., ...}

Backends: torch_npu.profiler on an Ascend NPU, torch.profiler (Kineto) on CUDA or CPU. torch and torch_npu are
optional extras (`pip install 'traceql[capture]'`, `'traceql[npu]'`); they are imported only when a capture runs.
This package holds no analysis beyond `compare_variants`, a small problem-vs-fix summary for the built-in pairs.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "capture_workload",
    "capture_script",
    "list_workloads",
    "compare_variants",
    "CaptureError",
    "Schedule",
    "NpuOptions",
]

from .core import CaptureError, NpuOptions, Schedule, capture_script, capture_workload


def list_workloads() -> list[dict[str, Any]]:
    """Built-in workloads as rows: name, experiment, role (problem/fix), pair, title, article, sizes."""
    from .workloads import WORKLOADS

    return [
        {
            "name": w.name,
            "experiment": w.experiment,
            "role": w.role,
            "pair": w.pair,
            "title": w.title,
            "article": w.article,
            "sizes": w.sizes,
        }
        for w in WORKLOADS.values()
    ]


def compare_variants(store: Any, run_problem: str, run_fix: str) -> dict[str, Any]:
    from .compare import compare_variants as _cmp

    return _cmp(store, run_problem, run_fix)
