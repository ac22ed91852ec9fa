"""torch_npu's `ASCEND_PROFILER_OUTPUT/analyse.done` completion marker: is this dump still being written?

What is known (sources read with the search tool, Dec 2026):
- Newer torch_npu writes an empty-or-tiny file `analyse.done` into `ASCEND_PROFILER_OUTPUT/` once its offline
  or on_trace_ready analysis has finished; tools that wait for a parse check for exactly that path after
  `torch_npu.profiler.profiler.analyse(...)` returns (e.g. vllm-ascend profiling helpers:
  `ANALYSE_DONE_FILE = "analyse.done"` next to `PARSED_OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"`; a 2026-04 dump
  listing `tbe_..._20260414221524290_ascend_pt/ASCEND_PROFILER_OUTPUT/analyse.done` beside kernel_details.csv,
  op_statistic.csv, step_trace_time.csv, trace_view.json).
- The torch_npu versions of `torch_npu/profiler/analysis/_profiling_parser.py` stored in the code index
  (Ascend/pytorch commits 090d1a0b, 7a39f6d5: `analyse_profiling_data` -> run_parser -> simplify_data) write
  no such file, and none of the real dumps under ../shared/real_traces (torch_npu 2023-09 .. 2.7.1 / CANN
  8.3.RC1) has one. So the marker is new in 2026 and its absence in an older dump means nothing.
- The exact first torch_npu release that writes it was not found in the sources [I]. The earliest public use
  seen pairs it with torch_npu 2.10.0 (vipshop/cache-dit PR #1093 log, 2026-07: torch_npu 2.10.0, CANN 9.x).

The rule traceql applies (`check`): a dump whose profiler_info records `torch_npu_version` >= MARKER_SINCE and
has no `analyse.done` is refused, one line naming the folder: it is still being written (or its analysis
died), and ingesting it would store half a dump. A dump of an older or unrecorded version without the marker
ingests as before (no warning: those versions never write it). A marker present is always accepted.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import BadTraceError
from ._files import read_small

MARKER = "analyse.done"
MARKER_SINCE = (2, 10)  # [I] first torch_npu version seen writing the marker (see the module doc)


def torch_npu_version(root: Path) -> tuple[int, ...] | None:
    """profiler_info*.json `torch_npu_version` as numbers ('2.10.0.post1' -> (2, 10, 0)), or None."""
    found = sorted(root.glob("profiler_info*.json"))
    if not found:
        return None
    try:
        data = json.loads(read_small(found[0]).decode("utf-8-sig"))
    except (OSError, ValueError):
        return None  # the metadata parser reports a broken profiler_info with its own message
    text = data.get("torch_npu_version") if isinstance(data, dict) else None
    if not isinstance(text, str):
        return None
    m = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def check(root: Path, outdir: Path) -> None:
    """BadTraceError when a dump of a marker-writing torch_npu lacks ASCEND_PROFILER_OUTPUT/analyse.done."""
    if (outdir / MARKER).exists():
        return
    version = torch_npu_version(root)
    if version is None or version[:2] < MARKER_SINCE:
        return
    shown = ".".join(str(v) for v in version)
    raise BadTraceError(
        outdir,
        f"no {MARKER}: torch_npu {shown} writes it when its analysis has finished, so this dump is still being "
        "written (or its analysis failed); wait for the profiler to finish (or rerun "
        "torch_npu.profiler.profiler.analyse on the *_ascend_pt folder) and ingest again",
    )


__all__ = ["MARKER", "MARKER_SINCE", "check", "torch_npu_version"]
