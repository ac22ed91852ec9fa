"""Benchmark the streaming trace_view.json reader on large synthetic traces.

    .venv/bin/python benchmarks/bench_trace_json.py 0.25 1          # sizes in GB
    .venv/bin/python benchmarks/bench_trace_json.py 1 --keep        # keep the generated file (prints its path)

For each size it generates a seeded, realistic torch_npu trace_view.json in a temp dir (never the repo):
one JSON array on one line, `ts` as strings with 3 decimals, ~60% X events with args (Python cpu_op /
python_function / enqueue / dequeue, CANN, Ascend Hardware tasks, HCCL), ~30% counter events (HBM/LLC/NPU
MEM/QoS), flow s/f pairs (async_npu with big int ids, HostToDevice with string ids), M events in the middle
and at the end like the real dumps. It then parses it with `parse_trace_view` into a throwaway store in a
*fresh subprocess* (so peak RSS is that of the parse alone) and prints wall time, MB/s and peak RSS.

Target (issue "Scale"): >= 150 MB/s on 2 cores, peak RSS <= 1 GB, flat from 0.25 to 4 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY_PID = 3096504
PIDS = {
    "CANN": 3170820320,
    "Ascend Hardware": 3170820512,
    "AI Core Freq": 3170820544,
    "HCCL": 3170820576,
    "HBM": 3170820640,
    "LLC": 3170820672,
    "NPU MEM": 3170820704,
    "Overlap Analysis": 3170820832,
}
TIDS = [3096504, 3099702, 3105075]
OPS = ["aten::add", "aten::mul", "aten::conv2d", "aten::matmul", "aten::empty", "aten::to", "aten::copy_"]
KERNELS = ["MatMulV2", "Add", "Mul", "TransData", "Conv2D", "Cast", "ReduceSum"]
TASK_TYPES = ["AI_CORE", "AI_VECTOR_CORE", "MIX_AIV", "SDMA_SQE", "EVENT_RECORD_SQE"]


def _ts(us_ns: int) -> str:
    return f'"{us_ns // 1000}.{us_ns % 1000:03d}"'


def _metadata() -> list[str]:
    out = [f'{{"ph": "M", "name": "process_name", "pid": {PY_PID}, "tid": 0, "args": {{"name": "Python"}}}}']
    for name, pid in PIDS.items():
        out.append(
            f'{{"name": "process_name", "pid": {pid}, "tid": 0, "args": {{"name": "{name}"}}, "ph": "M"}}'
        )
        out.append(
            f'{{"name": "process_labels", "pid": {pid}, "tid": 0, "args": {{"labels": "NPU"}}, "ph": "M"}}'
        )
    out.append(
        f'{{"name": "thread_name", "pid": {PIDS["HCCL"]}, "tid": 0, "args": {{"name": "Group 0 Communication"}}, "ph": "M"}}'
    )
    out.append(
        f'{{"name": "thread_name", "pid": {PIDS["HCCL"]}, "tid": 1, "args": {{"name": "Plane 0"}}, "ph": "M"}}'
    )
    for s in range(4):
        out.append(
            f'{{"name": "thread_name", "pid": {PIDS["Ascend Hardware"]}, "tid": {s}, "args": {{"name": "Stream {s}"}}, "ph": "M"}}'
        )
    return out


def _events(rng: random.Random, t: list[int], step: list[int], conn: list[int]) -> list[str]:
    """One 'launch' worth of events: a realistic mix, advancing the clock t[0] (ns)."""
    ev: list[str] = []
    t[0] += rng.randint(2_000, 40_000)
    now = t[0]
    r = rng.random()
    if r < 0.002:  # a new profiler step
        step[0] += 1
        ev.append(
            f'{{"ph": "X", "name": "ProfilerStep#{step[0]}", "pid": {PY_PID}, "tid": {PY_PID}, "ts": {_ts(now)}, '
            f'"dur": {rng.randint(100_000, 900_000) / 1000}, "cat": "cpu_op", "args": {{"Sequence number": -1, "Fwd thread id": 0}}}}'
        )
    tid = rng.choice(TIDS)
    op = rng.choice(OPS)
    dims = ";\\r\\n".join(
        ",".join(str(rng.choice([1, 3, 64, 128, 224, 1024])) for _ in range(4)) for _ in range(2)
    )
    ev.append(
        f'{{"ph": "X", "name": "{op}", "pid": {PY_PID}, "tid": {tid}, "ts": {_ts(now)}, "dur": {rng.randint(1_000, 300_000) / 1000}, '
        f'"cat": "cpu_op", "args": {{"Sequence number": {rng.randint(-1, 90000)}, "Fwd thread id": 0, "Input Dims": "{dims}", '
        f'"Input type": "float;\\r\\nfloat"}}}}'
    )
    ev.append(
        f'{{"ph": "X", "name": "torch/nn/modules/module.py(1501): _call_impl", "pid": {PY_PID}, "tid": {tid}, '
        f'"ts": {_ts(now + 300)}, "dur": {rng.randint(100, 9_000) / 1000}, "cat": "python_function", '
        f'"args": {{"Python id": {rng.randint(1, 10**6)}, "Python parent id": {rng.randint(1, 10**6)}}}}}'
    )
    corr = rng.randint(1, 10**6)
    ev.append(
        f'{{"ph": "X", "name": "Enqueue", "pid": {PY_PID}, "tid": {tid}, "ts": {_ts(now + 700)}, '
        f'"dur": {rng.randint(1_000, 20_000) / 1000}, "cat": "enqueue", "args": {{"correlation_id": {corr}}}}}'
    )
    ev.append(
        f'{{"ph": "X", "name": "Dequeue@{op}", "pid": {PY_PID}, "tid": 3099702, "ts": {_ts(now + 1_200)}, '
        f'"dur": {rng.randint(1_000, 60_000) / 1000}, "cat": "dequeue", "args": {{"correlation_id": {corr}}}}}'
    )
    conn[0] += 1
    c = conn[0]
    cann_ts = now + 1_500
    ev.append(
        f'{{"name": "AscendCL@aclopCompileAndExecute", "pid": {PIDS["CANN"]}, "tid": {tid}, "ts": {_ts(cann_ts)}, '
        f'"dur": {rng.randint(5_000, 60_000) / 1000}, "args": {{"Thread Id": {tid}, "Mode": "ACL_OP", "level": "acl", '
        f'"id": "aclopCompileAndExecute", "item_id": "{op}", "connection_id": {c}}}, "ph": "X"}}'
    )
    dev_ts = now + rng.randint(20_000, 80_000)
    stream = rng.randint(0, 3)
    ev.append(
        f'{{"name": "{rng.choice(KERNELS)}", "pid": {PIDS["Ascend Hardware"]}, "tid": {stream}, "ts": {_ts(dev_ts)}, '
        f'"dur": {rng.randint(500, 90_000) / 1000}, "args": {{"Model Id": 4294967295, "Task Type": "{rng.choice(TASK_TYPES)}", '
        f'"Physic Stream Id": {stream}, "Task Id": {rng.randint(1, 65535)}, "Batch Id": 0, "Subtask Id": 4294967295, '
        f'"connection_id": {c}}}, "ph": "X"}}'
    )
    # flows: framework op -> kernel (big int id) and CANN -> kernel (string id)
    fid = 1736408883000000000 + dev_ts % 10**9
    if rng.random() < 0.5:
        ev.append(
            f'{{"ph": "s", "bp": "e", "name": "torch_to_npu", "id": {fid}, "pid": {PY_PID}, "tid": {tid}, "ts": {_ts(now)}, "cat": "async_npu"}}'
        )
        ev.append(
            f'{{"ph": "f", "bp": "e", "name": "torch_to_npu", "id": {fid}, "pid": {PIDS["Ascend Hardware"]}, "tid": {stream}, "ts": {_ts(dev_ts)}, "cat": "async_npu"}}'
        )
    if rng.random() < 0.1:
        ev.append(
            f'{{"name": "HostToDevice{c}", "ph": "s", "cat": "HostToDevice", "id": "{c}", "pid": {PIDS["CANN"]}, "tid": {tid}, "ts": {_ts(cann_ts)}}}'
        )
        ev.append(
            f'{{"name": "HostToDevice{c}", "ph": "f", "id": "{c}", "ts": {_ts(dev_ts)}, "cat": "HostToDevice", "pid": {PIDS["Ascend Hardware"]}, "tid": {stream}, "bp": "e"}}'
        )
    if rng.random() < 0.01:
        ev.append(
            f'{{"name": "hcom_allReduce__586_{c % 7}_1", "pid": {PIDS["HCCL"]}, "tid": 0, "ts": {_ts(dev_ts)}, '
            f'"dur": {rng.randint(10_000, 900_000) / 1000}, "args": {{"connection_id": {c}, "model id": 4294967295, '
            f'"data_type": "FP32", "alg_type": "MESH-RING", "count": {rng.randint(1, 10**7)}}}, "ph": "X"}}'
        )
    # counters: ~30% of events
    for _ in range(4 if rng.random() < 0.3 else 3):
        k = rng.random()
        if k < 0.55:
            hbm = rng.randint(0, 3)
            rw = rng.choice(["Read", "Write"])
            ev.append(
                f'{{"name": "HBM {hbm}/{rw}", "ts": {_ts(now)}, "pid": {PIDS["HBM"]}, "tid": 0, "args": {{"{rw}(MB/s)": {rng.randint(0, 900_000) / 10}}}, "ph": "C"}}'
            )
        elif k < 0.8:
            llc = rng.randint(0, 1)
            if rng.random() < 0.5:
                ev.append(
                    f'{{"name": "LLC {llc} Read/Throughput", "ts": {_ts(now)}, "pid": {PIDS["LLC"]}, "tid": 0, "args": {{"Throughput(MB/s)": {rng.randint(0, 90_000) / 10}}}, "ph": "C"}}'
                )
            else:
                ev.append(
                    f'{{"name": "LLC {llc} Read/Hit Rate", "ts": {_ts(now)}, "pid": {PIDS["LLC"]}, "tid": 0, "args": {{"Hit Rate(%)": {rng.randint(0, 1000) / 1000}}}, "ph": "C"}}'
                )
        else:
            ev.append(
                f'{{"name": "APP/HBM", "ts": {_ts(now)}, "pid": {PIDS["NPU MEM"]}, "tid": 0, "args": {{"KB": {rng.randint(0, 64 * 2**20)}.0}}, "ph": "C"}}'
            )
    if rng.random() < 0.3:
        ev.append(
            f'{{"name": "Computing", "pid": {PIDS["Overlap Analysis"]}, "tid": 0, "ts": {_ts(dev_ts)}, "dur": {rng.randint(500, 90_000) / 1000}, "ph": "X"}}'
        )
    return ev


def generate(path: Path, size_bytes: int, seed: int = 0) -> int:
    """Write a synthetic trace_view.json of about size_bytes; returns the number of events."""
    rng = random.Random(seed)
    t = [1736408883000000000]
    step = [0]
    conn = [0]
    meta = _metadata()
    n = 0
    written = 0
    half = size_bytes // 2
    mid_done = False
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("[")
        first = True
        while written < size_bytes:
            block = _events(rng, t, step, conn)
            if not mid_done and written >= half:
                block += meta[: len(meta) // 2]
                mid_done = True
            s = ", ".join(block)
            if not first:
                s = ", " + s
            first = False
            fh.write(s)
            written += len(s)
            n += len(block)
        fh.write(", " + ", ".join(meta[len(meta) // 2 :]) + "]")
        n += len(meta) - len(meta) // 2
    return n


_CHILD = r"""
import json, os, resource, sys, time, tempfile
from pathlib import Path
import duckdb, pyarrow, pyarrow.compute, pyarrow.parquet, ijson  # imported before the clock starts
from traceql.parsers.trace_view import parse_trace_view
from traceql.rank_writer import RankWriter, sort_parquet_by_time
path = Path(sys.argv[1])
with tempfile.TemporaryDirectory() as d:
    w = RankWriter(Path(d), "bench", 0)
    c0, t0 = time.process_time(), time.perf_counter()
    meta = parse_trace_view(path, w, kernels=True, comm_ops=True, write_steps=True)
    w.close(sort=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_parse = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    # the store then sorts each time-series table by ts_ns (RankWriter.close(sort=True)); timed apart
    t1 = time.perf_counter()
    for table, rels in w.files.items():
        if table in ("kernels", "host_ops", "counters", "comm_ops", "steps"):
            for rel in rels:
                sort_parquet_by_time(Path(d) / rel)
    sort_wall = time.perf_counter() - t1
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"wall": wall, "cpu": cpu, "rss": rss_parse, "rss_with_sort": rss, "sort_wall": sort_wall,
                  "rows": w.rows, "reader": meta.get("reader"), "load": os.getloadavg()[0]}))
"""


def measure(path: Path) -> dict[str, object]:
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env, check=False
    )
    total = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"parse failed:\n{res.stderr}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["process_wall"] = total
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sizes_gb", nargs="+", type=float, help="file sizes in GB (1 GB = 1e9 bytes)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the generated files (their paths are printed)")
    ap.add_argument("--dir", default=None, help="where to generate (default: a temp dir)")
    args = ap.parse_args()
    rows = []
    tmp = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="traceql-bench-"))
    try:
        for gb in args.sizes_gb:
            path = tmp / f"trace_view_{gb:g}GB.json"
            if not path.exists():
                t0 = time.perf_counter()
                n = generate(path, int(gb * 1e9), seed=args.seed)
                print(
                    f"generated {path} ({path.stat().st_size / 1e6:.0f} MB, {n} events) in {time.perf_counter() - t0:.0f}s",
                    file=sys.stderr,
                )
            size = path.stat().st_size
            m = measure(path)
            rows.append((gb, size, m))
            if not args.keep:
                path.unlink()
    finally:
        if not args.keep and not args.dir:
            for p in tmp.glob("*"):
                p.unlink()
            tmp.rmdir()
    print(
        f"{'size':>7} {'MB':>6} {'wall s':>7} {'MB/s':>6} {'cpu s':>6} {'MB/cpu-s':>8} {'peak RSS MB':>11}"
        f" {'+sort s':>7} {'RSS w/ sort':>11} {'load':>5}  reader"
    )
    for gb, size, m in rows:
        wall, cpu = float(m["wall"]), float(m["cpu"])  # type: ignore[arg-type]
        print(
            f"{gb:>6g}G {size / 1e6:>6.0f} {wall:>7.2f} {size / 1e6 / wall:>6.0f} {cpu:>6.2f} {size / 1e6 / cpu:>8.0f}"
            f" {int(m['rss']) / 2**20:>11.0f} {float(m['sort_wall']):>7.2f} {int(m['rss_with_sort']) / 2**20:>11.0f}"  # type: ignore[call-overload, arg-type]
            f" {float(m['load']):>5.1f}  {m['reader']}"  # type: ignore[arg-type]
        )
        print("   rows:", json.dumps(m["rows"], sort_keys=True), file=sys.stderr)
    print(
        "wall/MB/s: parse_trace_view + Parquet writing (RankWriter, unsorted); cpu s: process CPU time (all "
        "threads); MB/cpu-s x 2 is the 2-core ceiling; +sort s: the store's sort of the written tables by ts_ns; "
        "load: 1-min load average when the parse ended (other work on the machine inflates wall time)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
