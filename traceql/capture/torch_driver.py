"""torch.profiler driver (CUDA when available, else CPU): a Kineto chrome trace with shapes, memory and FLOPs.

Also the optional CUPTI range-profiler pass for per-kernel DRAM counters. That pass is separate because the
range profiler runs with CUDA activities only (HTA's examples/cupti_profiler_demo.py: "Currently only supports
events on CUDA/GPU side, so do not add ProfilerActivity.CPU"), and it only yields `cuda_profiler_range` events
when Kineto was built with USE_CUPTI_RANGE_PROFILER and the driver lets this user read GPU counters: stock
wheels usually produce none (seen on the lent H200 with torch 2.11). We look for the events and say what we
found in capture_meta.json instead of assuming.

No traceql imports beyond the standard library: the user-script runner imports this module inside the
user's own interpreter.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

# Per-kernel counters asked of the CUPTI range profiler: DRAM bytes are the number the analysis needs.
CUPTI_METRICS = ["dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"]


def _experimental_config(**wanted: Any) -> tuple[Any, dict[str, Any]]:
    """torch.profiler._ExperimentalConfig with the options this torch accepts; returns (config, used options)."""
    from torch._C._profiler import _ExperimentalConfig as cls  # = torch.profiler._ExperimentalConfig

    # A pybind class: its __init__ docstring is the signature. Keep the keywords it names (an older torch lacks
    # e.g. profile_all_threads); a TypeError would not say which keyword was wrong.
    doc = cls.__init__.__doc__ or ""
    used = {k: v for k, v in wanted.items() if f"{k}:" in doc} if doc else dict(wanted)
    try:
        return cls(**used), used
    except TypeError:
        return cls(), {}


def open_profiler(
    kind: str,
    trace_dir: Path,
    worker_name: str,
    schedule: dict[str, int] | None,
    use_gzip: bool,
    all_threads: bool = False,
) -> tuple[Any, dict[str, Any]]:
    """A torch.profiler.profile (not started) writing one Kineto trace into trace_dir, and the options used.

    schedule None: record from start() to stop() (the trace is written on stop).
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if kind == "cuda" else [])
    # profile_all_threads: ops on loader/prefetch threads are recorded too (torch >= 2.6), but with torch 2.13 the
    # trace then has no [memory] events, so only the workloads that compute on a second thread ask for it
    exp, exp_used = _experimental_config(profile_all_threads=True) if all_threads else _experimental_config()
    sched = None
    if schedule is not None:
        sched = torch.profiler.schedule(
            wait=schedule["wait"], warmup=schedule["warmup"], active=schedule["active"], repeat=1
        )
    options = {
        "activities": [str(a) for a in activities],
        "record_shapes": True,  # Input Dims/type/Strides per cpu_op: modeled bytes and layouts
        "profile_memory": True,  # [memory] events: allocator totals over time
        "with_flops": True,  # FLOPs for matmul/conv: arithmetic intensity
        "with_stack": False,
        "schedule": dict(schedule, repeat=1) if schedule is not None else None,
        "experimental_config": exp_used,
        "on_trace_ready": f"tensorboard_trace_handler(worker_name={worker_name!r}, use_gzip={use_gzip})",
    }
    prof = profile(
        activities=activities,
        schedule=sched,
        on_trace_ready=tensorboard_trace_handler(str(trace_dir), worker_name=worker_name, use_gzip=use_gzip),
        record_shapes=True,
        profile_memory=True,
        with_flops=True,
        with_stack=False,
        experimental_config=exp,
    )
    return prof, options


def trace_files(trace_dir: Path) -> list[Path]:
    return sorted(p for p in trace_dir.iterdir() if p.name.endswith((".pt.trace.json", ".pt.trace.json.gz")))


def _load_trace(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def cupti_pass(step: Any, n_steps: int, out_file: Path, scratch_dir: Path) -> dict[str, Any]:
    """Run `step` n_steps times under the CUPTI range profiler; keep only the counter events.

    Writes out_file (plain JSON, not a chrome trace, so ingest never mistakes it for a rank) with the
    `cuda_profiler_range` events when any appeared. Returns what to record in capture_meta.json.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    info: dict[str, Any] = {"attempted": True, "metrics": CUPTI_METRICS, "per_kernel": True}
    try:
        exp, used = _experimental_config(profiler_metrics=CUPTI_METRICS, profiler_measure_per_kernel=True)
        if "profiler_metrics" not in used:
            return dict(
                info, available=False, reason="this torch has no _ExperimentalConfig(profiler_metrics=...)"
            )
        with profile(activities=[ProfilerActivity.CUDA], experimental_config=exp) as prof:
            for _ in range(n_steps):
                step()
            torch.cuda.synchronize()
        scratch_dir.mkdir(parents=True, exist_ok=True)
        raw = scratch_dir / "cupti_raw.json"
        prof.export_chrome_trace(str(raw))
        events = [e for e in _load_trace(raw).get("traceEvents", []) if e.get("cat") == "cuda_profiler_range"]
        os.remove(raw)
    except Exception as e:  # noqa: BLE001 - any failure here means "not available", and we say why
        return dict(info, available=False, reason=f"CUPTI range profiler failed: {type(e).__name__}: {e}")
    if not events:
        return dict(
            info,
            available=False,
            reason="no cuda_profiler_range events in the trace (Kineto built without USE_CUPTI_RANGE_PROFILER, "
            "or GPU performance counters not permitted for this user)",
        )
    out_file.write_text(json.dumps({"metrics": CUPTI_METRICS, "events": events}, indent=0))
    return dict(info, available=True, events=len(events), file=out_file.name)
