"""Dump *shapes* that stress ingest differently from large.py's event mix (benchmarks and scale tests).

- interleaved_kernel_details(path, n_rows, streams): a kernel_details.csv whose rows are NOT in time order:
  each replayed second writes stream 0's tasks, then stream 1's... (as multi-stream dumps group rows by
  stream), so the store must re-sort the whole table.
- device_trace_view(path, target_bytes): a trace_view.json of only `X` events on the "Ascend Hardware"
  process (~10 args each, as torch_npu writes device tasks), plus its metadata; no host events, no flows.
- host_trace_view / counter_trace_view: host-op-heavy (CANN/PyTorch `X` events with few args) and
  counter-heavy (HBM/LLC `C` samples) trace_view.json files.
- many_small_ranks(out_dir, n_ranks, bytes_per_rank): a cluster folder of many small torch_npu rank dumps.

All deterministic for a seed; times are written from int ns as exact µs text (_text.us_text).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path

from ._text import NS_PER_S, REP, SEC, Replay, dur_text
from .scenarios import dense_scenario
from .torch_npu_writer import RankWriter, WriteOptions, csv_line

BASE_S = 1736408883  # the synthetic dumps' wall-clock second (model.BASE_NS // 1e9)


def interleaved_kernel_details(
    out_path: str | Path,
    n_rows: int,
    streams: int = 4,
    seed: int = 0,
    *,
    aic_metrics: str = "PipeUtilization",
) -> dict[str, float]:
    """A kernel_details.csv of exactly `n_rows` tasks on `streams` streams, grouped by stream per second.

    The template second's rows are dealt round-robin to streams (row i -> stream 2 + i % streams), and each
    second is written stream by stream: row order is time order only within a stream. Returns {"bytes",
    "rows", "seconds", "mb_per_s"}."""
    t0 = time.perf_counter()
    sc = dense_scenario(seed * 1000, hbm_period_ns=500_000)
    sc.finalize()
    rw = RankWriter(sc, sc.ranks[0], WriteOptions(aic_metrics=aic_metrics, metric_decimals=3), repeat=2)
    header_cols = rw.kernel_header()
    si = header_cols.index("Stream ID")
    header = csv_line(header_cols, "\r\n")
    rows = [r for r in rw.kernel_rows().split("\r\n") if r]
    groups: list[list[str]] = [[] for _ in range(streams)]
    for i, row in enumerate(rows):
        cells = row.split(",", si + 1)  # the columns before Stream ID hold no commas
        cells[si] = str(2 + i % streams)
        groups[i % streams].append(",".join(cells))
    template = "".join("\r\n".join(g) + "\r\n" for g in groups if g)
    per_rep = len(rows)
    replay = Replay(sc.base_ns, 2, NS_PER_S, [s.id for s in sc.ranks[0].steps])
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    written, left, k = 0, n_rows, 0
    with open(out, "w", encoding="utf-8", newline="") as fh:
        written += fh.write(header)
        while left > 0:
            text = replay.rep(template, k)
            if left < per_rep:
                text = "\r\n".join(text.split("\r\n", left)[:left]) + "\r\n"
            written += fh.write(text)
            left -= min(left, per_rep)
            k += 1
    dt = time.perf_counter() - t0
    return {"bytes": written, "rows": n_rows, "seconds": dt, "mb_per_s": written / 1e6 / dt if dt else 0.0}


# ---- trace_view.json shapes ---------------------------------------------------------------------------
_TASK_TYPES = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "AI_CPU", "HCCL")
_OPS = ("MatMulV3", "Add", "Mul", "Cast", "LayerNormV4", "Softmax", "TransData", "ReduceSum", "Gelu", "Slice")


def _meta(pid: int, name: str, tids: list[tuple[int, str]], sort: int) -> list[str]:
    out = [
        json.dumps({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}),
        json.dumps({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": "NPU"}}),
        json.dumps(
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}}
        ),
    ]
    for tid, tname in tids:
        out.append(
            json.dumps({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": tname}})
        )
    return out


def _ts(off_ns: int) -> str:
    """µs text of an offset inside the template second; the second itself is the SEC token."""
    return f"{SEC}{off_ns // 1000:06d}.{off_ns % 1000:03d}"


def _device_events(rng: random.Random, n: int, streams: int) -> list[tuple[int, str]]:
    """One second of device tasks on `streams` streams, as torch_npu writes the Ascend Hardware rows (its
    args verbatim, connection ids unique per repetition through the REP token)."""
    out = []
    per = n // streams
    gap = NS_PER_S // (per + 1)
    for s in range(streams):
        t = 1000 + s * 37
        for i in range(per):
            dur = rng.randrange(1000, max(1001, gap - 200))
            op = _OPS[rng.randrange(len(_OPS))]
            task_type = _TASK_TYPES[rng.randrange(len(_TASK_TYPES))]
            out.append(
                (
                    t,
                    f'{{"name": "{op}_{i % 97}", "pid": 2, "tid": {2 + s}, "ts": "{_ts(t)}", '
                    f'"dur": {dur_text(dur)}, "ph": "X", "args": {{"Model Id": 4294967295, '
                    f'"Task Type": "{task_type}", "Physic Stream Id": {2 + s}, "Stream Id": {2 + s}, '
                    f'"Task Id": {i % 65536}, "Batch Id": 0, "Subtask Id": 4294967295, '
                    f'"connection_id": {REP}{s}{i:06d}}}}}',
                )
            )
            t += gap
    return out


def _host_events(rng: random.Random, n: int) -> list[tuple[int, str]]:
    out = []
    gap = NS_PER_S // (n + 1)
    t = 500
    for i in range(n):
        name = rng.choice(("aten::add", "aten::mm", "aten::layer_norm", "aclnnAdd", "AscendCL@aclnnMatmul"))
        dur = dur_text(rng.randrange(500, max(501, gap)))
        out.append(
            (
                t,
                f'{{"ph": "X", "name": "{name}", "pid": 1, "tid": {100 + i % 4}, "ts": "{_ts(t)}", '
                f'"dur": {dur}, "cat": "cpu_op", "args": {{"Sequence number": {i}, "Fwd thread id": 0}}}}',
            )
        )
        t += gap
    return out


def _counter_events(rng: random.Random, n: int) -> list[tuple[int, str]]:
    out = []
    per = n // 8
    period = NS_PER_S // (per + 1)
    for ch in range(4):
        for kind in ("Read", "Write"):
            for i in range(per):
                t = 1000 + i * period
                v = f"{rng.uniform(0, 200000):.3f}"
                out.append(
                    (
                        t,
                        f'{{"name": "HBM {ch}/{kind}", "pid": 3, "tid": 0, "ts": "{_ts(t)}", "ph": "C", '
                        f'"args": {{"{kind}(MB/s)": {v}}}}}',
                    )
                )
    return out


def _trace_view(
    out_path: str | Path, target_bytes: int, seed: int, second: Callable[[random.Random], list[tuple[int, str]]],
    meta: list[str],
) -> dict[str, float]:  # fmt: skip
    """Render a few one-second templates (events in time order, as the profiler writes the file), replay them
    second after second (the SEC and REP tokens replaced) until `target_bytes`."""
    t0 = time.perf_counter()
    rng = random.Random(seed)
    templates = []
    for _ in range(3):
        ev = second(rng)
        ev.sort(key=lambda e: e[0])
        templates.append(",\n".join(e[1] for e in ev))
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    written, k = 0, 0
    with open(out, "w", encoding="utf-8", newline="") as fh:
        written += fh.write("[" + ",\n".join(meta))
        while written < target_bytes:
            text = templates[rng.randrange(3)].replace(SEC, str(BASE_S + k)).replace(REP, str(k + 1))
            written += fh.write(",\n" + text)
            k += 1
        written += fh.write("]")
    dt = time.perf_counter() - t0
    return {"bytes": written, "seconds": dt, "mb_per_s": written / 1e6 / dt if dt else 0.0, "repetitions": k}


def device_trace_view(
    out_path: str | Path, target_bytes: int, seed: int = 0, streams: int = 4
) -> dict[str, float]:
    """trace_view.json of device tasks only: `X` events on "Ascend Hardware" with 10 args each (Model Id, Task
    Type, Physic Stream Id, Stream Id, Task Id, ...), ~4,000 per second of timeline."""
    meta = _meta(2, "Ascend Hardware", [(2 + s, f"Stream {2 + s}") for s in range(streams)], 8)
    return _trace_view(out_path, target_bytes, seed, lambda r: _device_events(r, 4000, streams), meta)


def host_trace_view(out_path: str | Path, target_bytes: int, seed: int = 0) -> dict[str, float]:
    """trace_view.json of host ops only (CANN/PyTorch `X` events with one arg), ~4,000 per second."""
    meta = _meta(1, "Python3", [(100 + i, f"Thread {100 + i}") for i in range(4)], 1)
    return _trace_view(out_path, target_bytes, seed, lambda r: _host_events(r, 4000), meta)


def counter_trace_view(out_path: str | Path, target_bytes: int, seed: int = 0) -> dict[str, float]:
    """trace_view.json of HBM counter samples only (`C` events, 4 channels x Read/Write), ~8,000 per second."""
    meta = _meta(3, "HBM", [], 9)
    return _trace_view(out_path, target_bytes, seed, lambda r: _counter_events(r, 8000), meta)
