"""Ingest time vs rank count for many small ranks (issue 22: "256 small rank folders in well under a minute").

Writes an N-rank torch_npu cluster with traceql.synth (the article scenario, 2 steps a rank: 0.2-0.7 MB a rank,
growing with N because its all-reduce's communication matrix is all-to-all) for each N, then runs what
`traceql ingest DIR` runs, phase by phase, in this process: detection, parse + commit (traceql.ingest), the
ingest-time checks and the analysis tables (traceql.post_ingest.after_ingest's two steps), and one query over
the stored run (`traceql sql`-like, through traceql.connect). CPU seconds include the worker processes
(RUSAGE_CHILDREN), so they hold on a shared machine where wall time does not; the 1-minute load average is
printed with each row. `--cli` instead times the whole `traceql ingest DIR` command in a subprocess.

    python benchmarks/bench_many_ranks.py 32 64 128 256 [--workers 2] [--dir /tmp/keep] [--cli]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cpu() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def dump(root: Path, n: int) -> tuple[Path, float]:
    from traceql.synth import write_torch_npu_dump
    from traceql.synth.scenarios import article_scenario

    d = root / f"ranks{n}" / "dump"
    if not d.is_dir():
        write_torch_npu_dump(article_scenario(n_ranks=n, steps=2), d, aic_metrics="Memory")
    mb = sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) / 1e6
    return d, mb


def phases(d: Path, store: Path, workers: int) -> list[tuple[float, float]]:
    import traceql
    from traceql import derive
    from traceql.checks import run_checks
    from traceql.ingest import ingest
    from traceql.parsers import detect
    from traceql.store import Store

    marks = [(time.perf_counter(), cpu())]
    units = detect(d)
    marks.append((time.perf_counter(), cpu()))
    info = ingest(d, store=store, workers=workers)
    marks.append((time.perf_counter(), cpu()))
    run_checks(store, info["run_id"], analysis=False)
    marks.append((time.perf_counter(), cpu()))
    left = derive.prepare(Store(store), [info["run_id"]], workers=workers)
    marks.append((time.perf_counter(), cpu()))
    con = traceql.connect(store)
    con.execute("SELECT rank, count(*), sum(dur_ns) FROM kernels GROUP BY rank").fetchall()
    con.close()
    marks.append((time.perf_counter(), cpu()))
    assert not left and info["ranks_count"] == len(units), (left, info["ranks_count"], len(units))
    return [(b[0] - a[0], b[1] - a[1]) for a, b in zip(marks, marks[1:], strict=False)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ranks", nargs="+", type=int)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--dir", type=Path, help="keep the dumps here (reused by a later run)")
    ap.add_argument("--cli", action="store_true", help="time `traceql ingest DIR` as one subprocess")
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-ranks-"))
    if args.cli:
        print("| ranks | dump MB | `traceql ingest DIR` wall / CPU s | CPU s per rank | load before-after |")
        print("|---|---|---|---|---|")
    else:
        print(
            "| ranks | dump MB | detect wall / CPU s | parse+commit wall / CPU s | checks wall / CPU s "
            "| analysis tables wall / CPU s | one query wall / CPU s | total wall / CPU s | CPU s per rank | load |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
    try:
        for n in args.ranks:
            d, mb = dump(root, n)
            store = root / f"ranks{n}" / "store"
            shutil.rmtree(store, ignore_errors=True)
            if args.cli:
                exe = Path(sys.executable).parent / "traceql"
                l0, t0, c0 = os.getloadavg()[0], time.perf_counter(), cpu()
                subprocess.run([str(exe), "ingest", str(d), "--store", str(store), "-q"], check=True)
                w, c = time.perf_counter() - t0, cpu() - c0
                print(
                    f"| {n} | {mb:.1f} | {w:.1f} / {c:.1f} | {c / n:.3f} | {l0:.1f}-{os.getloadavg()[0]:.1f} |"
                )
            else:
                p = phases(d, store, args.workers)
                w, c = sum(x[0] for x in p), sum(x[1] for x in p)
                cells = " | ".join(f"{a:.1f} / {b:.1f}" for a, b in p)
                print(
                    f"| {n} | {mb:.1f} | {cells} | {w:.1f} / {c:.1f} | {c / n:.3f} | {os.getloadavg()[0]:.1f} |"
                )
            sys.stdout.flush()
            shutil.rmtree(store, ignore_errors=True)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
