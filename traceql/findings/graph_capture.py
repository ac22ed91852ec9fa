"""Graph capture vs replay: a trace whose device work the profiler did not record is never judged "idle".

Two shapes (CUDA graphs, HIP graphs, ACLGraph on Ascend):
- capture: the trace spans a graph capture (cudaStreamBeginCapture / hipStreamBeginCapture / aclmdlRICaptureBegin,
  torch.cuda.graph's capture_begin, vLLM's `capture_<batch>_<mode>` annotation). Kernel launches inside a
  capture are recorded into the graph, not run, so they have no device rows; the gaps between the few kernels
  that did run are not idle time.
- replay without device rows: graph launches (cudaGraphLaunch, hipGraphLaunch, aclmdlRIExecuteAsync) whose
  correlation id has no kernel: the profiler did not record the graph's kernels (CUPTI without graph-node
  tracing, a ROCm tracer that misses graph kernels).

Either way the verdict says the device timeline is incomplete and why, and the checks that read idle time as
host-boundness stand down. TraceLens writes the replay next to a capture as `graph_execution.json(.gz)`: when
such a file sits beside the trace, it is named and summarised (kernel count and time) from the raw file.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .model import Finding
from .text import render

if TYPE_CHECKING:  # pragma: no cover
    from .context import Context

# host-side calls that begin or end a capture (CUDA runtime, HIP runtime, CANN ACL model-RI capture)
CAPTURE_CALLS = (
    "cudaStreamBeginCapture", "cudaStreamBeginCapture_v10000", "cudaStreamEndCapture", "cudaGraphInstantiate",
    "cudaGraphInstantiateWithFlags", "hipStreamBeginCapture", "hipStreamEndCapture", "hipGraphInstantiate",
    "hipGraphInstantiateWithFlags", "aclmdlRICaptureBegin", "aclmdlRICaptureEnd",
    "AscendCL@aclmdlRICaptureBegin", "AscendCL@aclmdlRICaptureEnd",
)  # fmt: skip
GRAPH_LAUNCHES = (
    "cudaGraphLaunch", "cudaGraphLaunch_v10000", "hipGraphLaunch", "aclmdlRIExecuteAsync", "aclmdlRIExecute",
    "AscendCL@aclmdlRIExecuteAsync", "AscendCL@aclmdlRIExecute",
)  # fmt: skip
# user annotations that name a capture: vLLM's `capture_<batch>_<FULL|PIECEWISE>`, torch's graphs.py frames
CAPTURE_NAME_RE = r"^capture_[0-9]+_[A-Za-z]+$|torch/cuda/graphs\.py\([0-9]+\): capture_begin"
LAUNCH_RE = r"(cuda|hip|hipExtModule|hipModule|cuModule|cu)Launch(Kernel|CooperativeKernel)(Ex)?(_v[0-9]+)?$"
GRAPH_EXECUTION_FILES = ("graph_execution.json.gz", "graph_execution.json")
MAX_BESIDE_BYTES = 64 << 20  # a summary is read only from a file this small (compressed)

SQL = f"""
WITH h AS (SELECT name, correlation_id FROM host_ops WHERE run_id = $r),
k AS (SELECT DISTINCT connection_id AS correlation_id FROM kernels WHERE run_id = $r AND connection_id IS NOT NULL),
launches AS (SELECT h.correlation_id, k.correlation_id IS NOT NULL AS ran FROM h LEFT JOIN k USING (correlation_id)
             WHERE contains(h.name, 'Launch') AND regexp_matches(h.name, '{LAUNCH_RE}')
               AND h.correlation_id IS NOT NULL),
graphs AS (SELECT k.correlation_id IS NOT NULL AS ran FROM h LEFT JOIN k USING (correlation_id)
           WHERE h.name IN ({", ".join(f"'{n}'" for n in GRAPH_LAUNCHES)}))
SELECT
  (SELECT count(*) FROM h WHERE name IN ({", ".join(f"'{n}'" for n in CAPTURE_CALLS)})) AS capture_calls,
  (SELECT list(DISTINCT name) FROM h WHERE contains(name, 'capture')
     AND regexp_matches(name, '{CAPTURE_NAME_RE}')) AS capture_names,
  (SELECT count(*) FROM launches) AS launches,
  (SELECT count(*) FILTER (WHERE ran) FROM launches) AS launches_ran,
  (SELECT count(*) FROM graphs) AS graph_launches,
  (SELECT count(*) FILTER (WHERE ran) FROM graphs) AS graph_launches_ran,
  (SELECT count(*) FROM kernels WHERE run_id = $r) AS kernels
"""


@dataclass(frozen=True)
class GraphCapture:
    kind: str  # "capture" | "replay_unrecorded"
    capture_calls: int
    capture_names: list[str]
    launches: int
    launches_ran: int
    graph_launches: int
    graph_launches_ran: int
    kernels: int
    beside: dict[str, Any] = field(default_factory=dict)  # graph_execution file: path, kernels, kernel_ms

    def evidence(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def detect(ctx: Context) -> GraphCapture | None:
    """The run's capture / unrecorded-replay signature, or None for an ordinary trace (once per run: the
    verdict and the screen of the findings both ask)."""
    return ctx.once("graph_capture", lambda: _detect(ctx))


def _detect(ctx: Context) -> GraphCapture | None:
    row = ctx.session.con.execute(SQL, {"r": ctx.run_id}).fetchall()[0]
    calls, names, launches, ran, glaunch, gran, kernels = row
    names = sorted(names or [])
    unrun = launches - ran
    kind = None
    # a capture: a capture call or annotation, and most kernel launches never reached the device
    if (calls or names) and launches and unrun >= 0.5 * launches:
        kind = "capture"
    # a replay the profiler did not follow: graph launches, none of them with kernel rows
    elif glaunch and not gran:
        kind = "replay_unrecorded"
    if kind is None:
        return None
    gc = GraphCapture(kind, int(calls), names, int(launches), int(ran), int(glaunch), int(gran), int(kernels))
    return replace(gc, beside=_beside(str(ctx.store_run_info().get("source") or "")))


def _beside(source: str) -> dict[str, Any]:
    """The TraceLens graph_execution file in the trace's folder or the folder above it, summarised from the raw
    JSON (kernel events and their summed duration); {} when there is none or the source is not a local file."""
    if not source or "://" in source:
        return {}
    here = Path(source)
    for folder in (here.parent, here.parent.parent):
        for name in GRAPH_EXECUTION_FILES:
            p = folder / name
            if p.is_file() and p != here:
                return {"path": str(p), **_summary(p)}
    return {}


def _summary(p: Path) -> dict[str, Any]:
    if p.stat().st_size > MAX_BESIDE_BYTES:
        return {"kernels": None, "why": "not summarised: larger than 64 MiB; ingest it"}
    try:
        with gzip.open(p, "rt") if p.suffix == ".gz" else open(p) as fh:  # noqa: SIM115 (one expression)
            events = json.load(fh).get("traceEvents") or []
    except (OSError, ValueError, AttributeError, EOFError) as e:
        return {"kernels": None, "why": f"unreadable: {e}"}
    ks = [e for e in events if isinstance(e, dict) and e.get("cat") == "kernel" and e.get("ph") == "X"]
    return {"kernels": len(ks), "kernel_ms": sum(float(e.get("dur") or 0) for e in ks) / 1e3}


def verdict(ctx: Context, gc: GraphCapture, common: dict[str, Any]) -> dict[str, Any]:
    """The verdict of a trace whose device work is not recorded: no bound, cannot tell, and why."""
    tmpl = ctx.rules["verdict"]
    b = gc.beside
    if b.get("kernels"):
        beside = (
            f"; the replay is recorded beside it in {b['path']} ({b['kernels']} kernels, "
            f"{b['kernel_ms']:.2f} ms of kernel time): analyse that file instead (traceql ingest {b['path']})"
        )
    elif b:
        beside = f"; {b['path']} sits beside it ({b.get('why', 'no kernels in it')})"
    elif gc.kind == "capture":
        beside = "; profile the graph replays (the serving steps after capture) instead"
    else:
        beside = ""
    variant = "graph_capture" if gc.kind == "capture" else "graph_replay_unrecorded"
    vals = {
        "what": ", ".join(gc.capture_names) or f"{gc.capture_calls} capture call(s)",
        "launches": gc.launches,
        "unrun": gc.launches - gc.launches_ran,
        "kernels": gc.kernels,
        "graph_launches": gc.graph_launches,
        "beside": beside,
    }
    return {
        "bound": None,
        "confidence": "cannot tell",
        "headline": render(tmpl[variant], vals, f"verdict.{variant}"),
        **common,
        "graph_capture": gc.evidence(),
        "shares": {},
        "mean_step_ms": None,
        "ranks": len(ctx.hbm_ranks()),
        "steps": 0,
    }


# checks that read gaps between kernels as the host starving the device: wrong when the kernels were not recorded
IDLE_CHECKS = ("free_time", "prefetch_overlap")


def screen(gc: GraphCapture | None, findings: list[Finding]) -> list[Finding]:
    """The findings with the idle-time checks stood down (not fired, saying why) when the device work is not
    recorded; unchanged otherwise."""
    if gc is None:
        return findings
    why = (
        "Not judged: the device timeline is incomplete (graph capture: kernels launched into a graph do not run)"
        if gc.kind == "capture"
        else "Not judged: the device timeline is incomplete (graph replays without recorded kernels)"
    )
    return [
        replace(
            f, fired=False, severity="info", message=why + "; the gaps between kernels are not idle time."
        )
        if f.id in IDLE_CHECKS
        else f
        for f in findings
    ]
