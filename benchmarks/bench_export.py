"""Time `traceql export` (Chrome JSON and Perfetto protobuf, whole run and a --steps slice) on a synthetic
cluster in the real torch_npu format, and print a table.

    .venv/bin/python benchmarks/bench_export.py [--ranks 2] [--mb 250] [--work /tmp/traceql-bench] [--markdown]

The cluster comes from traceql.synth.write_cluster (the article scenario replayed to the size asked, per rank),
is ingested once (with its derived tables), then each export runs in its own process, measured like
bench_ingest.py: wall and CPU seconds, peak RSS of the process tree (polled every 20 ms). Exports run with
--no-findings except the row that says so (the findings are the `traceql findings` analysis, timed in
bench_ingest/bench_queries). "events" counts what the file holds (slices + counter samples + flows).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import gen_cluster, run_measured  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--mb", type=int, default=250, help="dump size per rank, MB")
    ap.add_argument("--work", type=Path, default=Path("/tmp/traceql-bench"))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    src = gen_cluster(a.work, a.ranks, a.mb, 0)
    dump_bytes = sum(p.stat().st_size for p in src.rglob("*") if p.is_file())
    store = a.work / f"store-export-{a.ranks}x{a.mb}"
    if not (store / "manifest.json").exists():
        m = run_measured(
            [
                py,
                "-m",
                "traceql",
                "ingest",
                str(src),
                "--store",
                str(store),
                "--name",
                "bench",
                "-q",
                "--prepare",
            ],
            timeout=a.timeout,
        )
        if m["rc"] != 0:
            sys.exit(f"ingest failed:\n{m['out'][-2000:]}")
        print(f"ingested {dump_bytes / 1e6:.0f} MB in {m['wall']:.1f} s", file=sys.stderr)
    out = a.work / "export-out"
    out.mkdir(exist_ok=True)
    cases = [
        ("chrome, whole run", "chrome", "x.json", []),
        ("perfetto, whole run", "perfetto", "x.pftrace", []),
        ("chrome, --steps 10-12", "chrome", "s.json", ["--steps", "10-12"]),
        ("perfetto, --steps 10-12", "perfetto", "s.pftrace", ["--steps", "10-12"]),
        ("perfetto, --steps 10-12 + findings", "perfetto", "sf.pftrace", ["--steps", "10-12", "--findings"]),
    ]
    rows = []
    for label, fmt, name, extra in cases:
        target = out / name
        cmd = [
            py,
            "-m",
            "traceql",
            "export",
            "--store",
            str(store),
            "--run",
            "bench",
            "--format",
            fmt,
            "-o",
            str(target),
        ]
        cmd += extra if "--findings" in extra else [*extra, "--no-findings"]
        m = run_measured(cmd, timeout=a.timeout)
        if m["rc"] != 0:
            print(f"{label}: failed\n{m['out'][-2000:]}", file=sys.stderr)
            continue
        counts = re.search(r"\): (.*)$", m["out"].strip().splitlines()[-1])
        events = sum(int(x.split()[0]) for x in counts.group(1).split(", ")) if counts else 0
        rows.append((label, m["wall"], m["cpu"], m["rss"] / 2**20, target.stat().st_size / 1e6, events))
    head = ["case", "wall s", "cpu s", "peak RSS MB", "output MB", "events", "events/s"]
    table = [
        [lbl, f"{w:.1f}", f"{c:.1f}", f"{r:.0f}", f"{mb:.0f}", str(n), f"{n / w:,.0f}"]
        for lbl, w, c, r, mb, n in rows
    ]
    print(
        f"export of a {a.ranks}-rank cluster, {a.mb} MB per rank ({dump_bytes / 1e6:.0f} MB of dump), "
        f"python {sys.version.split()[0]}"
    )
    if a.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for t in table:
            print("| " + " | ".join(t) + " |")
    else:
        w = (
            [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
            if table
            else [len(h) for h in head]
        )
        print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
        for t in table:
            print("  ".join(c.ljust(w[i]) for i, c in enumerate(t)))
    print(json.dumps({"rows": rows}), file=sys.stderr)


if __name__ == "__main__":
    main()
