"""Ingest time vs rank count for many small ranks (issue 22: "256 small rank folders in well under a minute").

Writes an N-rank torch_npu cluster with traceql.synth (the article scenario, 2 steps, ~200 KB a rank) for each
N, then times what `traceql ingest` does, phase by phase, in this process: parse + commit (traceql.ingest), the
ingest-time checks, and the analysis tables (traceql.derive.ensure, what `ingest` builds for 2+ ranks). CPU
seconds include the worker processes (RUSAGE_CHILDREN), so they hold on a shared machine where wall time does
not; the load average is printed with each row.

    python benchmarks/bench_many_ranks.py 32 64 128 256 [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path


def cpu() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def main() -> None:
    from traceql import derive
    from traceql.checks import run_checks
    from traceql.ingest import ingest
    from traceql.store import Store
    from traceql.synth import write_torch_npu_dump
    from traceql.synth.scenarios import article_scenario

    ap = argparse.ArgumentParser()
    ap.add_argument("ranks", nargs="+", type=int)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    print(
        "| ranks | dump MB | parse+commit wall / CPU s | checks CPU s | analysis tables wall / CPU s | total wall / CPU s | CPU s per rank | load |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n in args.ranks:
        tmp = Path(tempfile.mkdtemp(prefix="bench-ranks-"))
        try:
            paths = write_torch_npu_dump(
                article_scenario(n_ranks=n, steps=2), tmp / "dump", aic_metrics="Memory"
            )
            mb = sum(p.stat().st_size for p in paths) / 1e6
            t0, c0 = time.perf_counter(), cpu()
            info = ingest(tmp / "dump", store=tmp / "store", workers=args.workers)
            t1, c1 = time.perf_counter(), cpu()
            run_checks(tmp / "store", info["run_id"], analysis=False)
            t2, c2 = time.perf_counter(), cpu()
            left = derive.ensure(Store(tmp / "store"), [info["run_id"]], workers=args.workers)
            t3, c3 = time.perf_counter(), cpu()
            assert not left and info["ranks_count"] == n, (left, info["ranks_count"])
            load = os.getloadavg()[0]
            print(f"| {n} | {mb:.1f} | {t1 - t0:.1f} / {c1 - c0:.1f} | {c2 - c1:.1f} | {t3 - t2:.1f} / {c3 - c2:.1f} | "
                  f"{t3 - t0:.1f} / {c3 - c0:.1f} | {(c3 - c0) / n:.3f} | {load:.1f} |", flush=True)  # fmt: skip
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
