"""Issue 48's budgets in one command, each beside DuckDB's raw CSV reader measured in the same round.

    .venv/bin/python benchmarks/budgets.py --dir /tmp/tq-bench --rounds 2
    .venv/bin/python benchmarks/budgets.py --dir /tmp/tq-bench --only ref,findings,report

The shared 2-core machines these budgets are checked on change speed from hour to hour: the same derive code
took 13.3 CPU-s at one hour and 17.8 at another, and DuckDB's raw reader of the same CSV 3.1 and 3.8. A budget in
CPU-seconds is only read together with a reference measured beside it, so every round starts with one: DuckDB's
`read_csv` of the 250 MB kernel_details tile written to Parquet (`ref`). Each row prints its CPU-seconds, the
same over the round's reference ("x ref"), and whether the issue's figure is met as stated.

Budgets (`--only` takes these names):
  ref        DuckDB read_csv of the real level1 kernel_details.csv tiled to 250 MB -> Parquet (the reference)
  kd         `traceql ingest` of that tile: <= 1.3x the reference
  tv         `traceql ingest` of the real level1 trace_view.json tiled to 0.25 and 1 GB (tile_real.py, the real
             layout): <= 9 CPU-s per GB; DuckDB's raw X-event reader of the same file beside it
  kineto     `traceql ingest` of HTA's real cupti Kineto trace tiled to 1 GB: <= 12 CPU-s per GB
  ingest     the whole `traceql ingest` of the 8 x 290 MB, the kernel-dense 8 x 200 MB (3.2 GB) and the
             64 x 40 MB clusters with default flags: <= 1 GB peak RSS, all processes
  derive     `derive.prepare` on a fresh copy of the `--no-prepare` store: <= 3 CPU-s per GB on 8 x 290 MB,
             <= 10 on the kernel-dense cluster (also per million kernels)
  findings   `findings --all --format json` on the prepared 8 x 290 MB store, no kept results
             (TRACEQL_QUERY_CACHE=0): <= 4 CPU-s
  report     `report` on the same: <= 8 CPU-s

Inputs are made once under --dir and reused: the clusters by traceql.synth (bench_ingest.gen_cluster), the tiles
from ../shared/real_traces (a budget whose real file is absent is skipped with a note). CPU is user + sys of the
whole process tree, peak RSS its sum (bench_ingest.run_measured); the package is byte-compiled first, as an
installed traceql is.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import (  # noqa: E402
    DUCK_CSV,
    DUCK_TV,
    OUT_DIR,
    REAL_TRACES,
    ROOT,
    _done,
    compile_traceql,
    dir_bytes,
    gen_cluster,
    run_measured,
    tile_real_file,
    tile_trace_view,
)

KD_SOURCE = "Ascend__msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
KINETO_SOURCE = (
    "facebookresearch__HolisticTraceAnalysis/tests/data/cupti_profiler/"
    "benchmark_result_924719_1679055439_trace.json.gz"
)
CLUSTERS = {"8x290": (8, 290, False), "dense-8x200": (8, 200, True), "64x40": (64, 40, False)}
GB = 1e9
MB = 2**20


@dataclass
class Row:
    """One budget: its measurements over the rounds and the issue's figure."""

    budget: str
    target: float
    unit: str  # "CPU-s", "CPU-s/GB", "x ref" or "MB"
    values: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    ref: list[float] = field(default_factory=list)  # the round's reference CPU-s, one per value
    note: str = ""

    def met(self) -> str:
        if not self.values:
            return "not measured"
        return "yes" if max(self.values) <= self.target else "no"


@dataclass
class Work:
    dir: Path
    rows: dict[str, Row] = field(default_factory=dict)
    ref_cpu: float | None = None

    def row(self, budget: str, target: float, unit: str) -> Row:
        return self.rows.setdefault(budget, Row(budget, target, unit))

    def record(self, budget: str, target: float, unit: str, value: float, cpu: float, rss: int) -> None:
        r = self.row(budget, target, unit)
        r.values.append(value)
        r.cpu.append(cpu)
        r.rss.append(rss / MB)
        r.ref.append(self.ref_cpu or float("nan"))


def _run(cmd: list[str], label: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    res = run_measured(cmd, timeout=3600, env=env, cwd=ROOT)
    if res["rc"] != 0:
        raise SystemExit(f"budgets: {' '.join(cmd[:6])} ... exited {res['rc']}:\n{res['out'][-2000:]}")
    load = f"{res['load'][0]:.1f}-{res['load'][1]:.1f}"
    print(f"  {time.strftime('%H:%M:%S')} load {load} cpu {res['cpu']:6.1f} s  rss {res['rss'] / MB:5.0f} MB  "
          f"{label}", file=sys.stderr)  # fmt: skip
    return res


def _traceql(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return _run([sys.executable, "-m", "traceql", *args], f"traceql {' '.join(args[:2])}", env)


def _tile(work: Path, source: str, mb: float) -> Path | None:
    """A real file of ../shared/real_traces tiled to `mb` MB (bench_ingest.tile_real_file): its torch_npu folder,
    or for a Kineto trace the file itself; None when the real traces are absent."""
    src = REAL_TRACES / source
    if not src.is_file():
        print(f"budgets: {src} absent: its budget is skipped", file=sys.stderr)
        return None
    folder, dst = tile_real_file(work, src, mb)
    return dst if dst.suffix == ".json" and "trace_view" not in dst.name else folder


def _no_prepare_store(work: Path, key: str, dump: Path) -> Path:
    store = work / f"budget-store-{key}-np"
    if not _done(store).exists():
        shutil.rmtree(store, ignore_errors=True)
        _traceql("ingest", str(dump), "--store", str(store), "-q", "--no-check", "--no-prepare")
        _done(store).touch()
    return store


def _kernels(store: Path) -> int:
    out = subprocess.run(
        [sys.executable, "-m", "traceql", "sql", "SELECT count(*) AS n FROM kernels", "--store", str(store),
         "--format", "csv"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    return int(out.stdout.split()[-1])


# --- the budgets, one function each ------------------------------------------------------------------------


def b_ref(w: Work) -> None:
    csv = _tile(w.dir, KD_SOURCE, 250)
    if csv is None:
        return
    res = _run(
        [
            sys.executable,
            "-c",
            DUCK_CSV,
            str(csv / OUT_DIR / "kernel_details.csv"),
            str(w.dir / "ref.parquet"),
        ],
        "DuckDB read_csv (the reference)",
    )
    w.ref_cpu = res["cpu"]
    w.record("reference: DuckDB read_csv, 250 MB kernel_details -> Parquet", float("inf"), "CPU-s", res["cpu"],
             res["cpu"], res["rss"])  # fmt: skip


def b_kd(w: Work) -> None:
    folder = _tile(w.dir, KD_SOURCE, 250)
    if folder is None or not w.ref_cpu:
        return
    res = _traceql(
        "ingest", str(folder), "--store", str(w.dir / "budget-s-kd"), "-q", "--no-check", "--replace"
    )
    w.record("kernel_details 250 MB tile: ingest <= 1.3x the reference", 1.3, "x ref", res["cpu"] / w.ref_cpu,
             res["cpu"], res["rss"])  # fmt: skip


def b_tv(w: Work) -> None:
    for gb in (0.25, 1.0):
        folder = tile_trace_view(w.dir, gb)
        if folder is None:
            return
        tv = folder / OUT_DIR / "trace_view.json"
        n = tv.stat().st_size
        res = _traceql(
            "ingest", str(folder), "--store", str(w.dir / "budget-s-tv"), "-q", "--no-check", "--replace"
        )
        w.record(f"trace_view {gb:g} GB tile: <= 9 CPU-s/GB", 9, "CPU-s/GB", res["cpu"] / (n / GB), res["cpu"],
                 res["rss"])  # fmt: skip
        duck = _run(
            [sys.executable, "-c", DUCK_TV, str(w.dir / "duck-tv.parquet"), str(tv)], "DuckDB X reader"
        )
        w.record(f"trace_view {gb:g} GB tile: DuckDB's raw X-event reader (beside)", float("inf"), "CPU-s/GB",
                 duck["cpu"] / (n / GB), duck["cpu"], duck["rss"])  # fmt: skip


def b_kineto(w: Work) -> None:
    src = _tile(w.dir, KINETO_SOURCE, 1000)
    if src is None:
        return
    n = src.stat().st_size
    res = _traceql(
        "ingest", str(src), "--store", str(w.dir / "budget-s-kineto"), "-q", "--no-check", "--replace"
    )
    w.record("Kineto (HTA cupti trace) 1 GB tile: <= 12 CPU-s/GB", 12, "CPU-s/GB", res["cpu"] / (n / GB),
             res["cpu"], res["rss"])  # fmt: skip


def b_ingest(w: Work) -> None:
    for key, (n, mb, dense) in CLUSTERS.items():
        dump = gen_cluster(w.dir, n, mb, 0, dense)
        res = _traceql("ingest", str(dump), "--store", str(w.dir / f"budget-store-{key}"), "-q", "--replace")
        w.record(f"whole ingest, default flags, {key} cluster ({dir_bytes(dump) / GB:.2f} GB): peak RSS <= 1 GB",
                 1024, "MB", res["rss"] / MB, res["cpu"], res["rss"])  # fmt: skip


def b_derive(w: Work) -> None:
    for key, target in (("8x290", 3.0), ("dense-8x200", 10.0)):
        n, mb, dense = CLUSTERS[key]
        dump = gen_cluster(w.dir, n, mb, 0, dense)
        src = _no_prepare_store(w.dir, key, dump)
        copy = w.dir / f"budget-store-{key}-derive"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(src, copy)
        code = ("from traceql.stores import open_store; from traceql import derive; "
                f"s = open_store({str(copy)!r}); derive.prepare(s, sorted(s.runs()))")  # fmt: skip
        res = _run([sys.executable, "-c", code], f"derive.prepare {key}")
        size = dir_bytes(dump)
        r = w.row(f"derive, {key} cluster ({size / GB:.2f} GB): <= {target:g} CPU-s/GB", target, "CPU-s/GB")
        w.record(r.budget, target, "CPU-s/GB", res["cpu"] / (size / GB), res["cpu"], res["rss"])
        kernels = _kernels(src)
        r.note = f"{kernels / 1e6:.2f}M kernels: {res['cpu'] / (kernels / 1e6):.1f} CPU-s per million kernels"


def _prepared_8x290(w: Work) -> Path:
    store = w.dir / "budget-store-8x290"
    if not (store / "manifest.json").exists():
        n, mb, dense = CLUSTERS["8x290"]
        _traceql("ingest", str(gen_cluster(w.dir, n, mb, 0, dense)), "--store", str(store), "-q", "--replace")
    return store


def b_findings(w: Work) -> None:
    store = _prepared_8x290(w)
    env = {**os.environ, "TRACEQL_QUERY_CACHE": "0"}
    out = w.dir / "budget-findings.json"
    res = _traceql("findings", "--all", "--format", "json", "--store", str(store), "-o", str(out), env=env)
    w.record("findings --all, prepared 8x290 cluster, nothing kept: <= 4 CPU-s", 4, "CPU-s", res["cpu"],
             res["cpu"], res["rss"])  # fmt: skip


def _keep_bundle(store: Path) -> None:
    """The Vega bundle kept in the store's .cache/ (~1.5 CPU-s, once per store and vl-convert version), untimed:
    every report after the first reads it, so the budget is a report's own cost."""
    code = (
        "from traceql.stores import open_store; from traceql.report.page import js_bundle, bundle_cache_dir; "
        f"js_bundle(bundle_cache_dir(open_store({str(store)!r})))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def b_report(w: Work) -> None:
    store = _prepared_8x290(w)
    _keep_bundle(store)
    env = {**os.environ, "TRACEQL_QUERY_CACHE": "0"}
    res = _traceql("report", "--store", str(store), "-o", str(w.dir / "budget-report.html"), env=env)
    w.record("report, prepared 8x290 cluster, nothing kept: <= 8 CPU-s", 8, "CPU-s", res["cpu"], res["cpu"],
             res["rss"])  # fmt: skip


BUDGETS: dict[str, Callable[[Work], None]] = {
    "ref": b_ref,
    "kd": b_kd,
    "tv": b_tv,
    "kineto": b_kineto,
    "ingest": b_ingest,
    "derive": b_derive,
    "findings": b_findings,
    "report": b_report,
}


def _fmt(values: list[float], unit: str) -> str:
    return ", ".join(
        f"{v:.2f}" if unit == "x ref" else f"{v:.0f}" if unit == "MB" else f"{v:.1f}" for v in values
    )


def table(w: Work, scale_to: float | None) -> str:
    """One row per budget. With scale_to, each CPU figure also as it reads at a reference of scale_to CPU-s
    (value x scale_to / the round's reference): the same work on the machine at another hour's speed."""
    head = "| budget (issue 48) | measured, each round | x ref (CPU-s over the round's reference) |"
    head += f" at a reference of {scale_to:g} CPU-s |" if scale_to else ""
    lines = [head + " peak RSS | met as measured? |", "|---" * (5 + bool(scale_to)) + "|"]
    for r in w.rows.values():
        xref = ", ".join(f"{c / f:.2f}" for c, f in zip(r.cpu, r.ref, strict=True) if f == f and f > 0)
        cells = [f"{r.budget}{f' ({r.note})' if r.note else ''}", f"{_fmt(r.values, r.unit)} {r.unit}", xref]
        if scale_to:
            cpu_unit = r.unit not in ("MB", "x ref")  # a ratio or a memory figure does not scale with speed
            scaled = [v * scale_to / f for v, f in zip(r.values, r.ref, strict=True)] if cpu_unit else []
            cells.append(f"{_fmt(scaled, r.unit)} {r.unit}" if scaled else "")
        met = "" if r.target == float("inf") else r.met()
        cells += [f"{min(r.rss):.0f}-{max(r.rss):.0f} MB" if r.rss else "", met]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, required=True, help="work folder: inputs and stores, kept and reused")
    ap.add_argument("--rounds", type=int, default=2, help="times each budget is measured (default 2)")
    ap.add_argument("--only", default=",".join(BUDGETS), help="comma-separated budgets (default: all)")
    ap.add_argument(
        "--scale-to",
        type=float,
        default=None,
        help="also print each CPU figure scaled to a reference of this many CPU-s (another hour's speed)",
    )
    a = ap.parse_args()
    names = [s.strip() for s in a.only.split(",") if s.strip()]
    unknown = [n for n in names if n not in BUDGETS]
    if unknown:
        ap.error(f"unknown budget(s) {', '.join(unknown)}; known: {', '.join(BUDGETS)}")
    if "ref" not in names:
        names.insert(0, "ref")  # every round's figures are read against it
    a.dir.mkdir(parents=True, exist_ok=True)
    compile_traceql()
    w = Work(a.dir)
    for i in range(a.rounds):
        print(f"round {i + 1} of {a.rounds}", file=sys.stderr)
        for name in names:
            BUDGETS[name](w)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    print(f"traceql {head.stdout.strip() or '?'}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{_cpu_model()}, {os.cpu_count()} cores, "
          f"median reference {statistics.median(w.rows[next(iter(w.rows))].cpu):.2f} CPU-s\n")  # fmt: skip
    print(table(w, a.scale_to))


if __name__ == "__main__":
    main()
