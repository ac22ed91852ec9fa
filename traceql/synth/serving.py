"""Small serving-shaped Kineto traces (vLLM, SGLang, a graph capture, graph replays) with known phases.

The events are what torch.profiler writes on a GPU (docs/formats.md, Kineto): `user_annotation` X events for
the engines' step markers (SGLang `step[EXTEND bs=15 toks=15360]` / `step[DECODE bs=.. toks=..]`, vLLM
`execute_model` and `execute_<tokens>_context_<n>(...)_generation_<m>(...)`), `cuda_runtime` launches
(`cudaLaunchKernel`, `cudaGraphLaunch`, `cudaStreamBeginCapture`...) with `args.correlation`, and `kernel` X
events on the device with the same correlation. Times: `ts`/`dur` in microseconds (floats), as Kineto writes
them. `Truth` keeps what a test checks against: each phase's marker, kind, batch and tokens, its window and its
kernels' device time.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASE_NS = (
    1_700_000_000_000_000_000  # baseTimeNanoseconds: event ts are microseconds after it, as Kineto writes
)
BASE_US = 1000.0  # the first event's ts (us after BASE_NS)
PID, TID, DEV = 1000, 1000, 0


@dataclass(frozen=True)
class Phase:
    """One engine step: `marker` over `kernels` kernels of `kernel_us` each, `gap_us` apart on the device."""

    marker: str | None  # None: no marker at all (the trace has device work but no step annotation)
    kind: str  # what the marker says: prefill | decode | mixed | unknown
    kernels: int = 4
    kernel_us: float = 50.0
    gap_us: float = 10.0
    batch: int | None = None
    tokens: int | None = None
    context: int | None = None  # vLLM: requests in context (prefill) / generation (decode)
    generation: int | None = None


@dataclass
class Truth:
    phases: list[dict[str, Any]] = field(default_factory=list)  # marker, kind, win_start_ns, win_end_ns, ...
    kernels: int = 0
    kernel_ns: int = 0
    launches: int = 0


def sglang_marker(kind: str, bs: int, toks: int) -> str:
    """SGLang's ForwardMode-named step marker: EXTEND is a prefill, DECODE a decode, MIXED both."""
    return f"step[{ {'prefill': 'EXTEND', 'decode': 'DECODE', 'mixed': 'MIXED'}[kind] } bs={bs} toks={toks}]"


def vllm_marker(tokens: int, context: int, generation: int) -> str:
    """vLLM's per-step annotation: the step's token count, then context and generation requests with their
    query / key lengths (the parenthesised parts as vLLM writes them; their values do not matter here)."""
    return (
        f"execute_{tokens}_context_{context}(sq{tokens}sk{tokens})_generation_{generation}(sq{generation}sk1)"
    )


class _Events:
    def __init__(self) -> None:
        self.ev: list[dict[str, Any]] = []
        self.corr = 1

    def x(self, cat: str, name: str, ts: float, dur: float, pid: int, tid: int, **args: Any) -> None:
        self.ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                        "args": args})  # fmt: skip

    def launch(self, ts: float, name: str = "cudaLaunchKernel") -> int:
        c = self.corr
        self.corr += 1
        self.x("cuda_runtime", name, ts, 4.0, PID, TID, correlation=c)
        return c

    def kernel(self, name: str, ts: float, dur: float, corr: int) -> None:
        self.x("kernel", name, ts, dur, DEV, 7, device=DEV, stream=7, correlation=corr)


def write_serving_trace(
    path: str | Path,
    phases: list[Phase],
    *,
    device_name: str = "NVIDIA H100 80GB HBM3",
    step_gap_us: float = 200.0,
) -> Truth:
    """A serving trace: each phase's marker on the host, its launches inside it, its kernels on the device
    (starting 20 us after their launch, one after the other). Returns the truth the tests compare against."""
    e, truth = _Events(), Truth()
    t = BASE_US
    for ph in phases:
        host_start, dev_t = t, t + 20.0
        launch_t, first_k, last_k = t + 2.0, None, 0.0
        for i in range(ph.kernels):
            corr = e.launch(launch_t)
            e.kernel(f"{ph.kind}_kernel_{i}", dev_t, ph.kernel_us, corr)
            first_k = dev_t if first_k is None else first_k
            last_k = dev_t + ph.kernel_us
            launch_t += 6.0
            dev_t += ph.kernel_us + ph.gap_us
        host_end = launch_t + 2.0
        if ph.marker is not None:
            e.x("user_annotation", ph.marker, host_start, host_end - host_start, PID, TID)
        truth.phases.append(
            {
                "marker": ph.marker,
                "kind": ph.kind,
                "batch": ph.batch,
                "tokens": ph.tokens,
                "context": ph.context,
                "generation": ph.generation,
                "host_start_ns": _ns(host_start),
                "host_end_ns": _ns(host_end),
                "device_start_ns": _ns(first_k or host_start),
                "device_end_ns": _ns(last_k),
                "kernel_ns": round(ph.kernels * ph.kernel_us * 1000),
            }
        )
        truth.kernels += ph.kernels
        truth.kernel_ns += round(ph.kernels * ph.kernel_us * 1000)
        truth.launches += ph.kernels
        t = max(host_end, last_k) + step_gap_us
    _write(path, e.ev, device_name)
    return truth


def write_capture_trace(path: str | Path, *, captured: int = 40, ran: int = 3, batch: int = 32) -> Truth:
    """A vLLM-style CUDA-graph capture: `capture_<batch>_FULL` around cudaStreamBeginCapture, `captured` launches
    recorded into the graph (no kernel rows), `ran` set-up kernels that did run, cudaStreamEndCapture and
    cudaGraphInstantiate; long host gaps between the few kernels (what a naive reader calls idle)."""
    e, truth = _Events(), Truth()
    t = BASE_US
    start = t
    e.x("cuda_runtime", "cudaStreamBeginCapture", t + 1.0, 2.0, PID, TID, correlation=0)
    t += 5.0
    for i in range(ran):
        corr = e.launch(t)
        e.kernel(f"setup_fill_{i}", t + 20.0, 3.0, corr)
        truth.kernel_ns += 3000
        t += 2000.0  # 2 ms apart: host-side compilation between them
    for _ in range(captured):
        e.launch(t)  # recorded into the graph: no device row
        t += 5.0
    e.x("cuda_runtime", "cudaStreamEndCapture", t, 2.0, PID, TID, correlation=0)
    e.x("cuda_runtime", "cudaGraphInstantiate", t + 3.0, 500.0, PID, TID, correlation=0)
    t += 510.0
    e.x("user_annotation", f"capture_{batch}_FULL", start, t - start, PID, TID)
    truth.kernels, truth.launches = ran, ran + captured
    _write(path, e.ev, "NVIDIA H100 80GB HBM3")
    return truth


def write_replay_trace(path: str | Path, *, replays: int = 5) -> Truth:
    """Graph replays whose kernels the profiler did not record: cudaGraphLaunch calls and no kernel rows for
    them, besides one ordinary kernel (a sampling step) that did get recorded."""
    e, truth = _Events(), Truth()
    t = BASE_US
    for i in range(replays):
        e.x("user_annotation", "execute_model", t, 300.0, PID, TID)
        e.launch(t + 5.0, "cudaGraphLaunch")
        if i == 0:
            corr = e.launch(t + 20.0)
            e.kernel("sample_kernel", t + 40.0, 10.0, corr)
            truth.kernels, truth.kernel_ns = 1, 10_000
        t += 1000.0
    truth.launches = replays + 1
    _write(path, e.ev, "NVIDIA H100 80GB HBM3")
    return truth


def _ns(ts_us: float) -> int:
    return BASE_NS + round(ts_us * 1000)


def _write(path: str | Path, events: list[dict[str, Any]], device_name: str) -> None:
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": DEV,
                "name": device_name,
                "totalGlobalMem": 85_018_279_936,
                "computeMajor": 9,
                "computeMinor": 0,
                "warpSize": 32,
                "numSms": 132,
            }
        ],  # fmt: skip
        "baseTimeNanoseconds": BASE_NS,
        "traceEvents": events,
        "traceName": str(path),
        "displayTimeUnit": "ms",
    }
    p = Path(path)
    text = json.dumps(doc)
    if p.suffix == ".gz":
        with gzip.open(p, "wt") as fh:
            fh.write(text)
    else:
        p.write_text(text)


def add_mstx_ranges(db_path: str | Path, ranges: list[tuple[str, int, int]], global_tid: int = 0) -> None:
    """Add torch_npu mstx ranges (`mstx.range_start(msg)` ... `range_end`) to an Ascend profiler DB export, as
    the profiler writes them: MSTX_EVENTS rows (eventType 2 = start/end range, startNs/endNs, message = an id
    into STRING_IDS, globalTid = pid << 32 | tid), the table created in the real export's column layout when
    the DB has none. `ranges`: (message, start_ns, end_ns)."""
    import sqlite3

    con = sqlite3.connect(str(db_path))
    try:
        con.execute(
            'CREATE TABLE IF NOT EXISTS "MSTX_EVENTS" ("startNs" INTEGER, "endNs" INTEGER, "eventType" INTEGER, '
            '"rangeId" INTEGER, "category" INTEGER, "message" INTEGER, "globalTid" INTEGER, "endGlobalTid" INTEGER, '
            '"domainId" INTEGER, "connectionId" INTEGER, "depth" integer)'
        )
        con.execute("CREATE TABLE IF NOT EXISTS STRING_IDS (id INTEGER PRIMARY KEY,value TEXT)")
        next_id = (con.execute("SELECT max(id) FROM STRING_IDS").fetchone()[0] or 0) + 1
        for i, (msg, start, end) in enumerate(ranges):
            sid = next_id + i
            con.execute("INSERT INTO STRING_IDS VALUES (?, ?)", (sid, msg))
            con.execute(
                'INSERT INTO "MSTX_EVENTS" VALUES (?, ?, 2, ?, 4294967295, ?, ?, ?, 0, ?, NULL)',
                (start, end, i + 1, sid, global_tid, global_tid, 4_100_000_000 + i),
            )
        con.commit()
    finally:
        con.close()
