"""Time `traceql compare` on two synthetic N-rank clusters once both are ingested, and print a table.

    .venv/bin/python benchmarks/bench_compare.py [--ranks 8] [--mb-per-rank 250] [--repeat 2] [--keep DIR]

The clusters are traceql.synth.write_cluster's torch_npu text dumps (the article scenario replayed to the size
asked; seeds 0 and 1 shift the clock, the content is the same pattern): the before/after pair of one job.
Each is ingested with its derived analysis tables (the default for 2+ ranks), then compare runs in this
process, without and with the findings diff (which evaluates every check on both runs). Wall and process CPU
seconds are reported; on a shared machine wall time also measures the neighbours.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--mb-per-rank", type=int, default=250)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument(
        "--keep", type=Path, default=None, help="work folder to keep (default: a temp dir, removed)"
    )
    a = ap.parse_args()

    from traceql import ingest
    from traceql.compare import compare
    from traceql.synth import write_cluster

    work = a.keep or Path(tempfile.mkdtemp(prefix="bench_compare_"))
    work.mkdir(parents=True, exist_ok=True)
    store = work / "store"
    rows: list[tuple[str, str, str]] = []
    try:
        for name, seed in (("before", 0), ("after", 1)):
            d = work / name
            from traceql.store import Store

            if not (Store(store).exists() and name in Store(store).runs()):
                if not d.exists():
                    g = write_cluster(d, a.ranks, a.mb_per_rank * 1_000_000, seed=seed)
                    rows.append((f"generate {name}", f"{g['seconds']:.1f}", f"{g['bytes'] / 1e9:.2f} GB"))
                t0 = time.perf_counter()
                ingest(d, store, name=name)
                # what `traceql ingest` does for a run of 2+ ranks: build its analysis tables now
                from traceql import derive

                derive.prepare(Store(store), [name])
                rows.append((f"ingest {name} (+ analysis tables)", f"{time.perf_counter() - t0:.1f}", ""))
        for with_findings, with_chains in ((False, False), (False, True), (True, True)):
            for i in range(a.repeat):
                t0, c0 = time.perf_counter(), _cpu()
                c = compare(
                    store,
                    "before",
                    "after",
                    device="ascend910b",
                    with_findings=with_findings,
                    with_chains=with_chains,
                )
                dt, dc = time.perf_counter() - t0, _cpu() - c0
                v = c.verdict or {}
                label = (
                    "compare"
                    + (" + findings" if with_findings else "")
                    + ("" if with_chains else " --no-fused-groups")
                )
                rows.append(
                    (
                        f"{label} #{i + 1}",
                        f"{dt:.2f}",
                        f"cpu {dc:.1f} s; verdict {v.get('verdict')}; {v.get('base', {}).get('n')} steps",
                    )
                )
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"compare on two {a.ranks} x {a.mb_per_rank} MB clusters (peak RSS of this process {rss:.0f} MB)\n"
        )
        print(f"| {'step':<40} | {'wall s':>7} | notes")
        print(f"|{'-' * 42}|{'-' * 9}|{'-' * 40}")
        for r in rows:
            print(f"| {r[0]:<40} | {r[1]:>7} | {r[2]}")
    finally:
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
