"""GPU check for `traceql capture`: every built-in workload at --size full on CUDA, measured and written to $OUT.

Run on the lent GPU machine, from the repository root, as ONE command (it needs only python3 + torch there):

    set -o pipefail; PYTHONUNBUFFERED=1 timeout 560 python3 benchmarks/gpu_capture_check.py 2>&1 | tee $OUT/log.txt

(device tool: timeout_s 600; it writes $OUT, else ./gpu_check_out; ncu runs stop starting after --budget-s 420).

What it does, per workload (problem and fix of each of the article's experiments):
  1. traceql.capture.capture_workload(size="full", device="cuda", gzip): a Kineto trace with shapes + memory,
     then the CUPTI range-profiler pass for per-kernel DRAM counters (records whether `cuda_profiler_range`
     events appeared; the lent H200 with stock torch wheels is expected to give none).
  2. From the trace alone (stdlib json, no duckdb): per step, GPU kernel time and count, memcpy time/bytes/kinds,
     modeled bytes (tensor inputs of the outermost aten ops, traceql.capture.compare) and the achieved modeled
     bandwidth against the device's peak HBM bandwidth (traceql.devices preset); a per-op table (kernels joined
     to their launching op by "External id").
  3. With Nsight Compute, when it can read counters there (it cannot on the gVisor runtime): measured DRAM bytes
     of one step of a few workloads (NVTX range "traceql_step", --cache-control none so L2 reuse shows),
     the independent check of the modeled bytes.
Outputs under $OUT (the device tool returns at most 8 files, 16 MiB each): results.md, results.json, log.txt
(when teed there) and dumps-N.tar.gz holding the dump folders.

duckdb and altair are NOT installed on that machine, so nothing here ingests. Back on the CPU machine:

    python3 benchmarks/gpu_capture_check.py --analyse <files_at>      # untar, traceql ingest, compare_variants

Other flags: --only a,b  --size small|full  --no-ncu  --out DIR.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NCU_WORKLOADS = [
    "intensity-tanh",
    "layernorm-naive",
    "layernorm-fused",
    "reuse-reread",
    "reuse-cached",
    "precision-fp32",
    "precision-bf16",
]
MAX_ARCHIVE = 15 * (1 << 20)
MAX_ARCHIVES = 5  # + results.md, results.json, log.txt = 8 files


def log(msg: str) -> None:
    print(msg, flush=True)


# --- trace analysis (stdlib only) ---------------------------------------------------------------------------------


def load_trace(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:  # type: ignore[operator]
        return json.load(fh)  # type: ignore[no-any-return]


def analyse_trace(path: Path, active_steps: int, peak_bps: float | None) -> dict[str, Any]:
    from traceql.capture import compare

    ev = load_trace(path).get("traceEvents", [])
    kernels = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"]
    memcpy = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy"]
    cpu_ops = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    steps = (
        sum(
            1
            for e in ev
            if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")
        )
        or active_steps
    )

    def ns(e: dict[str, Any], k: str) -> int:
        return int(round(float(e.get(k, 0)) * 1000))  # Kineto: microseconds with fractions

    rows = [
        (e["name"], e.get("pid"), e.get("tid"), ns(e, "ts"), ns(e, "dur"),
         json.dumps(e.get("args", {}).get("Input Dims")), json.dumps(e.get("args", {}).get("Input type")), None)
        for e in cpu_ops if str(e.get("name", "")).startswith("aten::")
    ]  # fmt: skip
    outer = compare.data_ops(rows)
    modeled = sum(compare.input_bytes(o["shapes"], o["dtypes"]) for o in outer)
    kernel_ns = sum(ns(e, "dur") for e in kernels)
    memcpy_ns = sum(ns(e, "dur") for e in memcpy)
    memcpy_bytes = sum(int(e.get("args", {}).get("bytes", 0) or 0) for e in memcpy)
    # per op: kernels joined to the cpu_op that launched them ("External id" on both)
    by_ext = {e.get("args", {}).get("External id"): e for e in cpu_ops}
    per_op: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"kernels": 0, "kernel_ns": 0, "modeled_bytes": 0, "ops": set()}
    )
    for k in kernels:
        ext = k.get("args", {}).get("External id")
        op = by_ext.get(ext)
        name = op["name"] if op else "(no op)"
        row = per_op[name]
        row["kernels"] += 1
        row["kernel_ns"] += ns(k, "dur")
        if op is not None and ext not in row["ops"]:
            row["ops"].add(ext)
            a = op.get("args", {})
            row["modeled_bytes"] += compare.input_bytes(
                json.dumps(a.get("Input Dims")), json.dumps(a.get("Input type"))
            )
    op_table = []
    for name, r in sorted(per_op.items(), key=lambda kv: -kv[1]["kernel_ns"])[:8]:
        bw = r["modeled_bytes"] / (r["kernel_ns"] / 1e9) if r["kernel_ns"] else None
        op_table.append({
            "op": name, "kernels_per_step": r["kernels"] / steps, "kernel_ms_per_step": r["kernel_ns"] / steps / 1e6,
            "modeled_MB_per_step": r["modeled_bytes"] / steps / 1e6, "modeled_GBps": bw / 1e9 if bw else None,
            "pct_of_peak": 100 * bw / peak_bps if bw and peak_bps else None,
        })  # fmt: skip
    achieved = modeled / (kernel_ns / 1e9) if kernel_ns else None
    return {
        "steps": steps,
        "kernels_per_step": len(kernels) / steps,
        "kernel_ms_per_step": kernel_ns / steps / 1e6,
        "outer_ops_per_step": len(outer) / steps,
        "modeled_MB_per_step": modeled / steps / 1e6,
        "modeled_GBps_over_kernel_time": achieved / 1e9 if achieved else None,
        "pct_of_peak_hbm": 100 * achieved / peak_bps if achieved and peak_bps else None,
        "memcpy_per_step": len(memcpy) / steps,
        "memcpy_ms_per_step": memcpy_ns / steps / 1e6,
        "memcpy_MB_per_step": memcpy_bytes / steps / 1e6,
        "memcpy_kinds": dict(Counter(e["name"] for e in memcpy).most_common(3)),
        "streams": sorted({e.get("tid") for e in kernels + memcpy}, key=str),
        "per_op": op_table,
    }


def cupti_summary(dump: Path, meta: dict[str, Any], steps: int) -> dict[str, Any]:
    c = dict(meta.get("cupti_counters") or {})
    f = dump / "cupti_counters.json"
    if c.get("available") and f.exists():
        totals: Counter[str] = Counter()
        for e in json.loads(f.read_text()).get("events", []):
            for k, v in (e.get("args") or {}).items():
                if isinstance(v, (int, float)) and k.startswith(("dram__", "gpu__")):
                    totals[k] += v
        c["per_step"] = {k: v / steps for k, v in totals.items()}
    return c


# --- Nsight Compute: measured DRAM bytes of one step --------------------------------------------------------------


def ncu_target(name: str, size: str) -> None:
    """Child mode under ncu: build the workload, one warm-up step, then one step inside NVTX range traceql_step."""
    import torch

    from traceql.capture import workloads

    wl = workloads.get(name)
    ctx = workloads.Ctx(device=torch.device("cuda:0"), kind="cuda", size=size, params=wl.sizes[size])
    step = wl.build(ctx)
    step()
    torch.cuda.nvtx.range_push("traceql_step")
    step()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()


def run_ncu(name: str, size: str, timeout: int = 120) -> dict[str, Any]:
    ncu = shutil.which("ncu") or next(iter(sorted(Path("/opt/nvidia").glob("nsight-compute/*/ncu"))), None)
    if not ncu:
        return {"available": False, "reason": "ncu not found"}
    metrics = "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"
    cmd = [str(ncu), "--clock-control", "none", "--cache-control", "none", "--nvtx", "--nvtx-include", "traceql_step/",
           "--metrics", metrics, "--csv", "--print-units", "base", "-c", "20000",
           sys.executable, str(Path(__file__).resolve()), "--ncu-target", name, "--size", size]  # fmt: skip
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"available": False, "reason": f"ncu timed out after {timeout}s"}
    lines = p.stdout.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        tail = (p.stderr or p.stdout)[-400:]
        return {"available": False, "reason": f"no ncu metrics (rc {p.returncode}): {tail}"}
    import csv

    totals: Counter[str] = Counter()
    kernels: set[str] = set()
    per_kernel: dict[str, Counter[str]] = defaultdict(Counter)
    for row in csv.DictReader(lines[start:]):
        try:
            v = float(str(row.get("Metric Value", "")).replace(",", ""))
        except ValueError:
            continue
        totals[row["Metric Name"]] += v
        kernels.add(row["ID"])
        per_kernel[row["Kernel Name"][:60]][row["Metric Name"]] += v
    dram = totals["dram__bytes_read.sum"] + totals["dram__bytes_write.sum"]
    t = totals["gpu__time_duration.sum"]
    return {
        "available": True,
        "kernels": len(kernels),
        "dram_read_MB": totals["dram__bytes_read.sum"] / 1e6,
        "dram_write_MB": totals["dram__bytes_write.sum"] / 1e6,
        "kernel_ms": t / 1e6,
        "dram_GBps": dram / t if t else None,  # bytes per ns = GB/s
        "top_kernels": {
            k: dict(c.items())
            for k, c in sorted(per_kernel.items(), key=lambda kv: -kv[1]["dram__bytes_read.sum"])[:4]
        },
        "wall_s": round(time.time() - t0, 1),
    }


# --- the check -------------------------------------------------------------------------------------------------------


def device_info() -> dict[str, Any]:
    import torch

    from traceql import devices

    name = torch.cuda.get_device_name(0)
    props = torch.cuda.get_device_properties(0)
    preset = devices.detect(name)
    return {
        "name": name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "sms": props.multi_processor_count,
        "memory_GiB": round(props.total_memory / (1 << 30), 1),
        "l2_MB": getattr(props, "L2_cache_size", 0) / 1e6 or None,
        "peak_hbm_bps": preset.peak_hbm_bps if preset else None,
        "preset": preset.key if preset else None,
    }


def pack_dumps(dumps: list[Path], out: Path) -> dict[str, Any]:
    """Greedy tar.gz archives of at most ~15 MiB each, at most MAX_ARCHIVES; says what did not fit."""
    archives: list[Path] = []
    dropped: list[str] = []
    cur: tarfile.TarFile | None = None
    cur_path: Path | None = None
    for d in dumps:
        size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        if size > MAX_ARCHIVE:
            dropped.append(f"{d.name} ({size / 1e6:.1f} MB)")
            continue
        if cur is not None and cur_path is not None and cur_path.stat().st_size + size > MAX_ARCHIVE:
            cur.close()
            cur = None
        if cur is None:
            if len(archives) >= MAX_ARCHIVES:
                dropped.append(f"{d.name} (no archive slot left)")
                continue
            cur_path = out / f"dumps-{len(archives) + 1}.tar.gz"
            archives.append(cur_path)
            cur = tarfile.open(cur_path, "w:gz")  # noqa: SIM115 -- closed when the next archive starts
        cur.add(d, arcname=d.name)
        cur.fileobj.flush()  # type: ignore[union-attr]  # so the size check above sees what was written
    if cur is not None:
        cur.close()
    return {"archives": [a.name for a in archives], "dropped": dropped}


def fmt(v: Any, nd: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def write_report(
    out: Path, env: dict[str, Any], results: list[dict[str, Any]], packed: dict[str, Any]
) -> None:
    (out / "results.json").write_text(
        json.dumps({"env": env, "results": results, "packed": packed}, indent=1, default=str)
    )
    lines = [
        f"# traceql capture — GPU check on {env.get('name')} (torch {env.get('torch')}, CUDA {env.get('cuda')})",
        "",
        f"Peak HBM used for % of peak: {fmt((env.get('peak_hbm_bps') or 0) / 1e12)} TB/s (preset {env.get('preset')}). "
        "Modeled bytes = tensor inputs of the outermost aten ops (a lower bound: no outputs, no re-reads).",
        "",
        "| workload | role | step wall ms | kernel ms/step | kernels/step | modeled MB/step | modeled GB/s | % peak | memcpy ms/step | CUPTI counters | ncu DRAM MB (r+w) | ncu GB/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.get("error"):
            lines.append(f"| {r['workload']} | {r.get('role', '')} | error: {r['error'][:80]} |")
            continue
        a, n = r["trace"], r.get("ncu") or {}
        wall = sum(r["active_step_wall_s"]) / len(r["active_step_wall_s"]) * 1e3
        ncu_mb = n["dram_read_MB"] + n["dram_write_MB"] if n.get("available") else None
        lines.append(
            f"| {r['workload']} | {r['role']} | {fmt(wall)} | {fmt(a['kernel_ms_per_step'], 3)} | {fmt(a['kernels_per_step'], 0)} | "
            f"{fmt(a['modeled_MB_per_step'], 1)} | {fmt(a['modeled_GBps_over_kernel_time'], 0)} | {fmt(a['pct_of_peak_hbm'], 1)} | "
            f"{fmt(a['memcpy_ms_per_step'], 3)} | {'yes' if r['cupti'].get('available') else 'no'} | {fmt(ncu_mb, 1)} | {fmt(n.get('dram_GBps'), 0)} |"
        )
    lines += ["", "## Per op (top by kernel time)", ""]
    for r in results:
        if r.get("error"):
            continue
        lines.append(f"**{r['workload']}**: " + "; ".join(
            f"{o['op']} {fmt(o['kernel_ms_per_step'], 3)} ms, {fmt(o['modeled_MB_per_step'], 1)} MB, {fmt(o['modeled_GBps'], 0)} GB/s ({fmt(o['pct_of_peak'], 1)}%)"
            for o in r["trace"]["per_op"][:4]))  # fmt: skip
    cupti = {
        r["cupti"].get("reason") for r in results if not r.get("error") and not r["cupti"].get("available")
    }
    lines += [
        "",
        f"CUPTI range counters: {'unavailable — ' + '; '.join(sorted(c for c in cupti if c)) if cupti else 'available'}",
    ]
    ncu_reasons = {r["ncu"].get("reason") for r in results if r.get("ncu") and not r["ncu"].get("available")}
    if ncu_reasons:
        lines.append(f"Nsight Compute: {'; '.join(sorted(str(x) for x in ncu_reasons))}")
    lines += [
        "",
        f"Dumps: {', '.join(packed['archives'])}"
        + (f"; not returned (too big): {', '.join(packed['dropped'])}" if packed["dropped"] else ""),
    ]
    (out / "results.md").write_text("\n".join(lines) + "\n")
    log("\n".join(lines))


def check(args: argparse.Namespace) -> int:
    import torch

    from traceql.capture import Schedule, capture_workload, workloads

    if not torch.cuda.is_available():
        log("no CUDA device: this check is for the GPU machine")
        return 1
    out = Path(args.out or os.environ.get("OUT") or "gpu_check_out")
    out.mkdir(parents=True, exist_ok=True)
    dump_root = Path(args.dump_root) if args.dump_root else Path("/tmp/traceql_gpu_dumps")
    shutil.rmtree(dump_root, ignore_errors=True)
    env = device_info()
    log(f"device: {env}")
    names = args.only.split(",") if args.only else list(workloads.WORKLOADS)
    results: list[dict[str, Any]] = []
    dumps: list[Path] = []
    t_all = time.time()
    ncu_broken: str | None = None
    for name in names:
        wl = workloads.get(name)
        t0 = time.time()
        try:
            meta = capture_workload(
                name,
                size=args.size,
                out=dump_root,
                device="cuda",
                schedule=Schedule(1, 1, 2),
                cupti=not args.no_cupti,
                use_gzip=True,
            )
            dump = Path(meta["dump"])
            dumps.append(dump)
            trace = analyse_trace(dump / meta["ingest_path"], 2, env["peak_hbm_bps"])
            r = {"workload": name, "role": wl.role, "experiment": wl.experiment, "params": wl.sizes[args.size],
                 "active_step_wall_s": meta["measured"]["active_step_wall_s"], "peak_device_memory_bytes": meta["measured"]["peak_device_memory_bytes"],
                 "trace": trace, "cupti": cupti_summary(dump, meta, 1)}  # fmt: skip
        except Exception as e:  # noqa: BLE001 - one workload failing (OOM...) must not lose the others
            traceback.print_exc()
            r = {"workload": name, "role": wl.role, "error": f"{type(e).__name__}: {e}"}
        gc.collect()
        torch.cuda.empty_cache()
        if not args.no_ncu and name in NCU_WORKLOADS and not r.get("error"):
            left = args.budget_s - (time.time() - t_all)
            if ncu_broken:
                r["ncu"] = {"available": False, "reason": ncu_broken}
            elif left < 90:
                r["ncu"] = {"available": False, "reason": f"skipped: {left:.0f} s of the --budget-s left"}
            else:
                r["ncu"] = run_ncu(name, args.size, timeout=int(min(120, left - 60)))
                if not r["ncu"]["available"] and not str(r["ncu"]["reason"]).startswith("ncu timed out"):
                    ncu_broken = r["ncu"]["reason"]  # same machine, same answer: do not pay for it again
        r["seconds"] = round(time.time() - t0, 1)
        log(
            f"{name}: {r['seconds']} s"
            + (
                f" ERROR {r['error']}"
                if r.get("error")
                else f", kernel {r['trace']['kernel_ms_per_step']:.3f} ms/step"
            )
        )
        results.append(r)
    packed = pack_dumps(dumps, out)
    env["total_seconds"] = round(time.time() - t_all, 1)
    write_report(out, env, results, packed)
    return 0


# --- back on the CPU machine -----------------------------------------------------------------------------------------


def analyse(folder: Path, store: Path) -> int:
    """Untar the returned dumps, ingest each with traceql, and print compare_variants for every pair."""
    from traceql import ingest
    from traceql.capture import compare_variants, workloads

    work = store.parent / "gpu_dumps"
    work.mkdir(parents=True, exist_ok=True)
    for a in sorted(folder.glob("dumps-*.tar.gz")):
        with tarfile.open(a) as t:
            t.extractall(work, filter="data")
    runs = set()
    for meta_file in sorted(work.glob("*/capture_meta.json")):
        meta = json.loads(meta_file.read_text())
        if not meta.get("ingest_path"):
            continue
        name = meta["run_name"]
        ingest(meta_file.parent / meta["ingest_path"], store=store, name=name, replace=True, workers=1)
        runs.add(name)
    for problem, fix in workloads.pairs():
        if problem.name in runs and fix.name in runs:
            c = compare_variants(store, problem.name, fix.name)
            keep = (
                "ops_per_step",
                "modeled_bytes_per_step",
                "max_op_modeled_bytes",
                "flops_per_modeled_byte",
                "conv_channels_last",
                "copy_overlap_ratio",
                "memory_rise_bytes",
            )
            print(f"\n## {problem.experiment}: {problem.name} vs {fix.name}")
            for side in ("problem", "fix"):
                print(f"  {side:7s}", {k: c[side].get(k) for k in keep}, "device:", c[side].get("device"))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="full", choices=["small", "full"])
    ap.add_argument("--only", help="comma-separated workload names (default: all)")
    ap.add_argument("--out", help="results folder (default $OUT, else ./gpu_check_out)")
    ap.add_argument(
        "--dump-root", help="where the dumps are written before packing (default /tmp/traceql_gpu_dumps)"
    )
    ap.add_argument("--no-ncu", action="store_true", help="skip the Nsight Compute DRAM measurement")
    ap.add_argument("--no-cupti", action="store_true", help="skip the CUPTI range-profiler pass")
    ap.add_argument(
        "--budget-s", type=float, default=420, help="no new ncu run once this many seconds have passed"
    )
    ap.add_argument("--ncu-target", help=argparse.SUPPRESS)
    ap.add_argument(
        "--analyse", type=Path, help="CPU machine: folder with the returned results/dumps-*.tar.gz"
    )
    ap.add_argument(
        "--store", type=Path, default=Path("gpu_check_store/.traceql"), help="store for --analyse"
    )
    args = ap.parse_args()
    if args.ncu_target:
        ncu_target(args.ncu_target, args.size)
        return 0
    if args.analyse:
        return analyse(args.analyse, args.store)
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
