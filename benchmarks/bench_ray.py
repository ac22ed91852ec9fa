"""Ray vs the local process pool: overhead per rank, peak RSS per worker against the rank count, and a
projection for 1,000 ranks x 2 GB on N nodes from the measured per-rank cost.

    .venv/bin/python benchmarks/bench_ray.py                       # 8 and 64 ranks, 1 MB each, 2 workers
    .venv/bin/python benchmarks/bench_ray.py --ranks 64 --mb 4 --workers 2 --json out.json

Each case ingests the same synthetic cluster (traceql.synth.write_cluster: real torch_npu text format) into a
fresh local store through traceql.distributed (parse map, collective reduce, derive map, commit) with the
`local` executor and with `ray` (a local Ray of --workers CPUs, started once, outside the timing). Measured:
wall seconds; CPU seconds of the driver (time.process_time) plus its pool children (RUSAGE_CHILDREN) or plus
the Ray worker processes (psutil, user+sys of every `ray::` worker before/after); each parse task's worker peak
RSS (ru_maxrss, reported by the task itself: traceql.distributed.parse_rank); the 1-min load average.
Wall time on this shared 2-core machine is inflated by other sessions: read the CPU seconds first.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any


def _ray_cpu() -> float:
    import psutil

    total = 0.0
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info.get("cmdline") or []
        if cmd and cmd[0].startswith("ray::"):
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                continue
    return total


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_case(dump: Path, store: Path, executor: Any) -> dict[str, Any]:
    from traceql.ingest import ingest

    peaks: list[int] = []
    load0 = os.getloadavg()[0]
    c0, ch0, r0 = time.process_time(), _children_cpu(), _ray_cpu()
    t0 = time.perf_counter()
    info = ingest(
        dump,
        store=store,
        name="bench",
        executor=executor,
        on_unit_done=lambda u, r: peaks.append(r.get("worker_peak_rss", 0)),
    )
    wall = time.perf_counter() - t0
    executor.close()  # the pool's workers are reaped here: only then does RUSAGE_CHILDREN count their CPU
    cpu_driver = time.process_time() - c0
    cpu_workers = (_ray_cpu() - r0) if executor.name == "ray" else (_children_cpu() - ch0)
    return {
        "executor": executor.name,
        "ranks": info["ranks_count"],
        "wall_s": round(wall, 2),
        "cpu_driver_s": round(cpu_driver, 2),
        "cpu_workers_s": round(cpu_workers, 2),
        "worker_peak_rss_mb_max": round(max(peaks, default=0) / 2**20, 1),
        "worker_peak_rss_mb_median": round(sorted(peaks)[len(peaks) // 2] / 2**20, 1) if peaks else 0,
        "load_1min_before": round(load0, 2),
        "load_1min_after": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", default="8,64", help="rank counts, comma separated")
    ap.add_argument("--mb", type=float, default=1.0, help="MB (1e6 bytes) of dump per rank")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--split",
        default="",
        help="RANKS:MB,RANKS:MB (e.g. 4:0.5,4:40): local-pool runs at two rank sizes, to split the per-rank "
        "CPU into a fixed part and a per-byte part for the projection",
    )
    args = ap.parse_args()

    import ray

    from traceql.executors.local import LocalPool
    from traceql.executors.ray import RayExecutor
    from traceql.synth import write_cluster

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    tmp = Path(tempfile.mkdtemp(prefix="tq-bench-ray-"))
    results: list[dict[str, Any]] = []
    try:
        for n in [int(x) for x in args.ranks.split(",")]:
            dump = tmp / f"c{n}"
            w = write_cluster(dump, n, int(args.mb * 1e6))
            for ex in (LocalPool(args.workers), RayExecutor()):
                r = run_case(dump, tmp / f"s-{ex.name}-{n}", ex)
                r["input_bytes"] = int(w["bytes"])  # type: ignore[call-overload]
                results.append(r)
                print(json.dumps(r), flush=True)
            shutil.rmtree(dump, ignore_errors=True)
        for spec in [x for x in args.split.split(",") if x]:
            n_s, mb_s = spec.split(":")
            dump = tmp / f"split{n_s}-{mb_s}"
            w = write_cluster(dump, int(n_s), int(float(mb_s) * 1e6))
            r = run_case(dump, tmp / f"s-split-{n_s}-{mb_s}", LocalPool(args.workers))
            r["input_bytes"] = int(w["bytes"])  # type: ignore[call-overload]
            r["split"] = True
            results.append(r)
            print(json.dumps(r), flush=True)
            shutil.rmtree(dump, ignore_errors=True)
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    print(summary(results, args.workers))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def summary(results: list[dict[str, Any]], workers: int) -> str:
    lines = [
        "",
        "| ranks | executor | wall s | CPU s (driver + workers) | CPU s per rank | worker peak RSS MB (max) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        cpu = r["cpu_driver_s"] + r["cpu_workers_s"]
        lines.append(
            f"| {r['ranks']} | {r['executor']} | {r['wall_s']} | {cpu:.1f} | {cpu / r['ranks']:.3f} | {r['worker_peak_rss_mb_max']} |"
        )
    split = sorted((r for r in results if r.get("split")), key=lambda r: r["input_bytes"] / r["ranks"])
    results = [r for r in results if not r.get("split")]
    by = {(r["executor"], r["ranks"]): r for r in results}
    big = max(r["ranks"] for r in results)
    loc, ray_ = by.get(("local", big)), by.get(("ray", big))
    if loc and ray_:
        over_cpu = (
            (ray_["cpu_driver_s"] + ray_["cpu_workers_s"]) - (loc["cpu_driver_s"] + loc["cpu_workers_s"])
        ) / big
        over_wall = (ray_["wall_s"] - loc["wall_s"]) / big
        per_byte = (loc["cpu_driver_s"] + loc["cpu_workers_s"]) / max(1, loc["input_bytes"])
        lines += [
            "",
            f"Ray overhead per rank at {big} ranks: {over_cpu:+.3f} CPU-s, {over_wall:+.3f} wall-s (measured, {workers} workers).",
            f"Per-rank cost (local pool): {per_byte * 1e9:.2f} CPU-s per GB of dump (measured on {loc['input_bytes'] / 1e6:.0f} MB in all).",
            "",
            "Projection (not a measurement): 1,000 ranks x 2 GB, the per-GB cost above applied linearly, 1 task "
            "per core, plus the Ray overhead per rank. With small ranks the per-GB cost includes the fixed "
            "per-rank cost (processes, DuckDB sessions), so this overstates large ranks: run two --mb sizes.",
        ]
        per_rank = per_byte * 2e9 + max(0.0, over_cpu)
        if len(split) >= 2:
            # two rank sizes (local pool): CPU per rank = fixed + per_byte x bytes per rank, a two-point fit
            (x1, y1), (x2, y2) = (
                (r["input_bytes"] / r["ranks"], (r["cpu_driver_s"] + r["cpu_workers_s"]) / r["ranks"])
                for r in (split[0], split[-1])
            )
            slope = (y2 - y1) / (x2 - x1)
            fixed = y1 - slope * x1
            per_rank = fixed + slope * 2e9 + max(0.0, over_cpu)
            lines += [
                "",
                f"Two-size fit (local pool, {split[0]['ranks']} ranks of {x1 / 1e6:.1f} MB and {split[-1]['ranks']} of "
                f"{x2 / 1e6:.1f} MB): {fixed:.2f} CPU-s fixed per rank + {slope * 1e9:.2f} CPU-s per GB "
                f"(measured points, linear fit: a modelled extrapolation to 2 GB) -> {per_rank:.0f} CPU-s per 2 GB rank "
                "including Ray's overhead per rank.",
            ]
        for nodes, cores in ((1, 16), (8, 16), (32, 16), (125, 16)):
            waves = -(-1000 // (nodes * cores))
            lines.append(
                f"  {nodes:>4} nodes x {cores} cores: {waves} wave(s) x {per_rank:.0f} s = ~{waves * per_rank / 60:.0f} min "
                "(map only; the driver's collective match reads comm_ops/steps columns of all ranks and is not modelled)"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
