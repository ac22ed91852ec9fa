"""PyTorch Kineto / torch.profiler Chrome traces (`{"traceEvents": [...], ...}`, .json or .json.gz).

Read with ijson (exact numbers: µs with decimals arrive as Decimal), one pass, bounded memory.

Mapping:

| events                                                   | table     | notes |
|----------------------------------------------------------|-----------|-------|
| X cat kernel / gpu_memcpy / gpu_memset (old: Kernel, Memcpy, Memset) | kernels | task_type = cat; stream_id <- args.stream, device_id <- args.device, connection_id <- args.correlation, block_dim = product of args.grid, op_type = `kernel_class(name)`, is_comm for NCCL kernels; grid, block, registers, shared memory, bytes... -> extra |
| X cat cuda_profiler_range (CUPTI range profiling)        | kernels   | one row per profiled kernel: task_type 'cuda_profiler_range', every numeric arg -> metrics (as named, e.g. `smsp__sass_thread_inst_executed_op_ffma_pred_on.sum`), `dram__bytes_read.sum`/`dram__bytes_write.sum` -> hbm_read/write_bytes, flops = sum over fp64/fp32/fp16 of add + mul + 2 x fma thread-instruction counts when those counters are present. ts/dur are the profiling range, which includes counter replay: not kernel time |
| other X (cpu_op, python_function, cuda_runtime, cuda_driver, user_annotation, gpu_user_annotation, cuda_sync...) | host_ops | cat as written; correlation_id <- args.correlation, else args["External id"]; seq_num <- "Sequence number"; input_shapes/dtypes <- "Input Dims"/"Input type" as compact JSON; other args -> extra |
| X ProfilerStep#N                                         | steps     | also kept in host_ops |
| s / f (ac2g, fwdbwd...)                                  | flows     | paired on (cat, id); unpaired ends kept with the other side null |
| C                                                        | counters  | track = process name, one row per numeric arg |
| i `[memory]` (profile_memory=True)                       | memory    | kind 'record', component 'PyTorch', device 'CPU'/'CUDA:0', size_bytes <- Bytes (negative: a free), allocated/reserved_bytes <- Total Allocated/Reserved; Addr -> extra |
| X cat Trace (pid "Spans"), other i, M                    | (skipped) | profiler bookkeeping (counted in meta["skipped"]) |

Header: deviceProperties / distributedInfo / versions -> run_meta rows (dotted keys); meta["device"] = the
GPU name (deviceProperties, the device the kernels ran on); Unit.rank = distributedInfo.rank.

Time: `ts`/`dur` are µs (integers or decimals) -> int64 ns exactly. Newer traces write `ts` relative to
`baseTimeNanoseconds` (top-level key): ts_ns = baseTimeNanoseconds + ts*1000 (HTA's rule). A trace whose
first `ts` exceeds 1e17 is taken to be in ns already (1e17 µs would be the year 5138; Unix-epoch ns today is
~1.7e18). The rule picked is recorded in meta["time_unit"].
"""

from __future__ import annotations

import functools
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadTraceError
from . import _chrome_json as cj
from .base import Unit, read_head

if TYPE_CHECKING:  # pragma: no cover
    from ..store import RankWriter

KERNEL_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
RANGE_CAT = "cuda_profiler_range"
SKIP_CATS = {"trace"}
FLUSH_ROWS = 64 * 1024
NS_THRESHOLD = 10**17  # a first ts above this is ns, not µs

# kernel name -> coarse class; first match wins (lower-cased name)
_KERNEL_CLASSES: list[tuple[str, re.Pattern[str]]] = [
    ("nccl", re.compile(r"nccl")),
    ("attention", re.compile(r"flash|fmha|attention|attn|sdpa")),
    ("conv", re.compile(r"conv|winograd|implicit_gemm|implicit_convolve|fft2d|fprop|dgrad|wgrad")),
    ("gemm", re.compile(r"(?<!fb)gemm|gemv|matmul|cutlass|cublas|xmma|wgmma|\bmma")),
    ("norm", re.compile(r"norm")),
    ("softmax", re.compile(r"softmax")),
    ("reduce", re.compile(r"reduce|reduction|triton_red|triton_per|_sum_|argmax|argmin|cumsum|scan")),
    ("index", re.compile(r"index|gather|scatter|embedding|take_|put_|permute_\dd_lengths|lengths")),
    ("copy", re.compile(r"copy|cat_|catarray|transpose|permute|nchwtonhwc|nhwctonchw|memcpy")),
    ("elementwise", re.compile(r"elementwise|pointwise|triton_poi|unrolled|vectorized|distribution_|fill_|dropout")),
]
_FLOP_OPS = {"add": 1, "mul": 1, "fma": 2}


@functools.lru_cache(maxsize=65536)
def kernel_class(name: str | None, cat: str | None = None) -> str:
    """A coarse class for a GPU kernel (gemm, conv, attention, elementwise, reduce, norm, softmax, index,
    copy, nccl, memcpy, memset, other), from its category and mangled name."""
    c = (cat or "").lower()
    if "memcpy" in c:
        return "memcpy"
    if "memset" in c:
        return "memset"
    low = (name or "").lower()
    for label, pat in _KERNEL_CLASSES:
        if pat.search(low):
            return label
    return "other"


def _flops(metrics: dict[str, float]) -> float | None:
    """FLOPs from CUPTI SASS thread-instruction counters: add + mul + 2 x fma over fp64/fp32/fp16."""
    total = 0.0
    seen = False
    for prec in ("d", "f", "h"):
        for op, w in _FLOP_OPS.items():
            v = metrics.get(f"smsp__sass_thread_inst_executed_op_{prec}{op}_pred_on.sum")
            if v is not None:
                total += w * v
                seen = True
    return total if seen else None


# ---------------------------------------------------------------------------------------------------
# claim


_DIST_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d+)')


def looks_like_kineto(path: Path) -> bool:
    name = path.name.lower()
    if not (name.endswith(".json") or name.endswith(".json.gz")):
        return False
    head = read_head(path, 1 << 16)
    if head.startswith(cj.UTF8_BOM):
        head = head[len(cj.UTF8_BOM) :]
    if head.lstrip()[:1] != b"{":
        return False
    return b'"traceEvents"' in head or b'"schemaVersion"' in head or b'"deviceProperties"' in head


def _rank_from_head(path: Path) -> int | None:
    """distributedInfo.rank from the first bytes, or (plain files only: cheap) the last ones."""
    m = _DIST_RANK.search(read_head(path, 1 << 16))
    if m is None and not path.name.lower().endswith(".gz"):
        m = _DIST_RANK.search(cj.tail_bytes(cj.sniff(path, 16)))
    return int(m.group(1)) if m else None


class KinetoParser:
    name = "kineto"
    description = "PyTorch Kineto / torch.profiler trace (.json / .json.gz), or a folder of them (one per rank)"

    def claim(self, path: Path) -> list[Unit] | None:
        if path.is_file():
            return [Unit(self.name, str(path), _rank_from_head(path))] if looks_like_kineto(path) else None
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.is_file() and looks_like_kineto(p))
            if not files:
                return None
            ranks = [_rank_from_head(p) for p in files]
            if len(set(ranks)) != len(ranks):  # missing or repeated ranks: let ingest number them
                ranks = [None] * len(files)
            return [Unit(self.name, str(p), r) for p, r in zip(files, ranks, strict=True)]
        return None

    def parse(self, unit: Unit, out: RankWriter) -> dict[str, Any]:
        return parse_kineto(Path(unit.path), out)


PARSERS = [KinetoParser()]


# ---------------------------------------------------------------------------------------------------
# parse


class _Cols:
    """Column lists for one table, flushed to the writer every FLUSH_ROWS rows."""

    def __init__(self, out: Any, table: str, names: list[str]) -> None:
        self.out, self.table, self.names = out, table, names
        self.rows: list[tuple[Any, ...]] = []
        self.total = 0

    def add(self, *values: Any) -> None:
        self.rows.append(values)
        if len(self.rows) >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            import pyarrow as pa

            from ..schema import arrow_schema

            sch = arrow_schema(self.table)
            cols = zip(*self.rows, strict=True)
            self.out.write(self.table, pa.table({k: pa.array(c, sch.field(k).type) for k, c in zip(self.names, cols, strict=True)}))
            self.total += len(self.rows)
            self.rows = []


def _flatten(prefix: str, v: Any, out: list[tuple[str, str]]) -> None:
    if isinstance(v, dict):
        for k, x in v.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), x, out)
    elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
        for i, x in enumerate(v):
            _flatten(f"{prefix}.{i}", x, out)
    else:
        out.append((prefix, cj.text(v) or ""))


def _header(sn: cj.Sniff) -> dict[str, Any]:
    h = cj.read_header(sn)
    if "baseTimeNanoseconds" not in h or "distributedInfo" not in h:
        # some writers put these after traceEvents; look at the end (gzip: decompresses to the end, C speed)
        tail = cj.tail_bytes(sn)
        m = re.search(rb'"baseTimeNanoseconds"\s*:\s*(\d+)', tail)
        if m and "baseTimeNanoseconds" not in h:
            h["baseTimeNanoseconds"] = int(m.group(1))
        m = _DIST_RANK.search(tail)
        if m and "distributedInfo" not in h:
            h["distributedInfo"] = {"rank": int(m.group(1))}
    return h


def parse_kineto(path: Path, out: RankWriter) -> dict[str, Any]:
    path = Path(path)
    sn = cj.sniff(path)
    if sn.root is None:
        raise BadTraceError(path, "empty file (no JSON at all); the profiler may have failed before writing")
    if sn.root != "object" or not sn.trace_events:
        raise BadTraceError(
            path,
            'expected a Kineto/torch.profiler trace: a JSON object with a "traceEvents" array '
            f"(found {'a JSON array' if sn.root == 'array' else 'something else'} at the top level)",
        )
    cj.check_complete(sn)
    header = _header(sn)
    bg = cj.BackgroundWriter(out)
    tmp = tempfile.TemporaryDirectory(prefix="traceql-kineto-")
    try:
        meta = _parse_events(sn, header, bg, tmp.name)
    finally:
        try:
            bg.close()
        finally:
            tmp.cleanup()
    return meta


def _parse_events(sn: cj.Sniff, header: dict[str, Any], out: Any, tmp: str) -> dict[str, Any]:
    import pyarrow as pa

    warnings: list[str] = []
    base = cj.to_int(header.get("baseTimeNanoseconds"))
    unit = {"scale": None, "base": 0}  # decided on the first event with a ts
    scale, offset = 1000, 0
    text, to_int, us_to_ns = cj.text, cj.to_int, cj.us_to_ns  # locals: this loop runs per event

    host = _Cols(out, "host_ops", ["name", "cat", "pid", "tid", "ts_ns", "dur_ns", "correlation_id", "seq_num",
                                   "input_shapes", "input_dtypes", "extra"])  # fmt: skip
    kern = _Cols(out, "kernels", ["device_id", "name", "op_type", "task_type", "is_comm", "stream_id", "connection_id",
                                  "ts_ns", "dur_ns", "block_dim", "hbm_read_bytes", "hbm_write_bytes", "flops",
                                  "metrics", "extra"])  # fmt: skip
    ctr = _Cols(out, "counters", ["track", "channel", "metric", "unit", "name", "ts_ns", "value"])
    mem = _Cols(out, "memory", ["kind", "component", "device", "ts_ns", "size_bytes", "allocated_bytes",
                                "reserved_bytes", "extra"])  # fmt: skip
    flows = _FlowEnds(tmp)
    steps: dict[int, list[int]] = {}
    procs: dict[Any, str] = {}
    skipped: dict[str, int] = {}
    devices: dict[int, int] = {}
    n_ranges = 0
    host_canon = {"correlation", "External id", "Sequence number", "Input Dims", "Input type"}
    kern_canon = {"stream", "device", "correlation"}

    for ev in cj.iter_events(sn):
        ph = ev.get("ph")
        ts = ev.get("ts")
        if unit["scale"] is None and ts is not None and ph != "M":
            first = cj.num(ts) or 0.0
            if abs(first) > NS_THRESHOLD:
                unit.update(scale=1, base=0)
            elif base and abs(first) < 1e14:
                unit.update(scale=1000, base=base)
            else:
                unit.update(scale=1000, base=0)
            scale, offset = unit["scale"], unit["base"]  # type: ignore[assignment]
        t0 = us_to_ns(ts, scale)
        if t0 is not None:
            t0 += offset
        cat = text(ev.get("cat"))
        args = ev.get("args")
        if type(args) is not dict:
            args = {}
        if ph == "X":
            lcat = cat.lower() if cat else ""
            pid = to_int(ev.get("pid"))
            if lcat in SKIP_CATS or pid is None:
                skipped[cat or "?"] = skipped.get(cat or "?", 0) + 1
                continue
            name = text(ev.get("name"))
            dur = us_to_ns(ev.get("dur"), scale)
            if lcat in KERNEL_CATS or lcat == RANGE_CAT:
                grid = args.get("grid")
                block_dim = None
                if type(grid) is list and grid and all(type(g) is int for g in grid):
                    block_dim = 1
                    for g in grid:
                        block_dim *= g
                dev = to_int(args.get("device"))
                if dev is None and lcat != RANGE_CAT:
                    dev = pid
                if dev is not None:
                    devices[dev] = devices.get(dev, 0) + 1
                metrics = None
                hbm_r = hbm_w = flops = None
                extra = [(str(k), text(v)) for k, v in args.items() if k not in kern_canon]
                if lcat == RANGE_CAT:
                    n_ranges += 1
                    metrics = {str(k): float(v) for k, v in args.items() if cj.num(v) is not None and not isinstance(v, str)}
                    extra = [(k, v) for k, v in extra if k not in metrics]
                    hbm_r = to_int(args.get("dram__bytes_read.sum"))
                    hbm_w = to_int(args.get("dram__bytes_write.sum"))
                    flops = _flops(metrics)
                kclass = kernel_class(name, cat)
                kern.add(
                    dev, name, kclass, cat, kclass == "nccl", to_int(args.get("stream")) if lcat != RANGE_CAT else None,
                    to_int(args.get("correlation")), t0, dur, block_dim, hbm_r, hbm_w, flops,
                    list(metrics.items()) if metrics is not None else None, extra,
                )  # fmt: skip
                continue
            corr = args.get("correlation", args.get("External id"))
            host.add(
                name, cat, pid, to_int(ev.get("tid")), t0, dur, to_int(corr),
                to_int(args.get("Sequence number")), text(args.get("Input Dims")), text(args.get("Input type")),
                [(str(k), text(v)) for k, v in args.items() if k not in host_canon],
            )  # fmt: skip
            if name and t0 is not None and name.startswith("ProfilerStep#"):
                step = to_int(name.split("#", 1)[1])
                if step is not None:
                    end = t0 + (dur or 0)
                    if step in steps:
                        s0, d0 = steps[step]
                        t0, end = min(s0, t0), max(s0 + d0, end)
                    steps[step] = [t0, end - t0]
        elif ph in ("s", "f", "t"):
            flows.add(cat, text(ev.get("name")), text(ev.get("id")), ph,
                      to_int(ev.get("pid")), to_int(ev.get("tid")), t0)  # fmt: skip
        elif ph == "C":
            track = procs.get(ev.get("pid"), text(ev.get("pid")) or "")
            name = text(ev.get("name")) or ""
            for k, v in args.items():
                val = cj.num(v)
                if val is None or isinstance(v, str):
                    continue
                m = re.fullmatch(r"(.*?)\s*\(([^)]*)\)", str(k))
                ctr.add(track, "", (m.group(1) if m else str(k)), (m.group(2) if m else "raw"), name, t0, val)
        elif ph == "M":
            if ev.get("name") == "process_name" and isinstance(args.get("name"), str):
                procs[ev.get("pid")] = args["name"]
        elif ph == "i" and ev.get("name") == "[memory]" and args:
            dev_type, dev_id = to_int(args.get("Device Type")), to_int(args.get("Device Id"))
            mem.add(
                "record", "PyTorch", _device_label(dev_type, dev_id), t0, to_int(args.get("Bytes")),
                to_int(args.get("Total Allocated")), to_int(args.get("Total Reserved")),
                [(str(k), text(v)) for k, v in args.items() if k not in _MEM_CANON],
            )  # fmt: skip
        else:
            skipped[f"ph={ph}"] = skipped.get(f"ph={ph}", 0) + 1

    for c in (host, kern, ctr, mem):
        c.flush()
    n_flows = flows.finish(out, warnings)
    if steps:
        items = sorted(steps.items())
        out.write(
            "steps",
            pa.table(
                {
                    "step": pa.array([s for s, _ in items], pa.int64()),
                    "ts_ns": pa.array([w[0] for _, w in items], pa.int64()),
                    "dur_ns": pa.array([w[1] for _, w in items], pa.int64()),
                    "source": pa.array([sn.path.name] * len(items), pa.string()),
                }
            ),
        )
    run_meta: list[tuple[str, str]] = []
    for k, v in header.items():
        _flatten(k, v, run_meta)
    if run_meta:
        out.write("run_meta", pa.table({"key": [k for k, _ in run_meta], "value": [v for _, v in run_meta]}))

    meta: dict[str, Any] = {
        "warnings": warnings,
        "reader": "ijson",
        "time_unit": _time_rule(unit, base),
        "rows": {"host_ops": host.total, "kernels": kern.total, "counters": ctr.total, "flows": n_flows,
                 "steps": len(steps), "memory": mem.total},
        "step_windows": {s: w for s, w in sorted(steps.items())},
    }  # fmt: skip
    device = _device_name(header, devices)
    if device:
        meta["device"] = device
    dist = header.get("distributedInfo")
    if isinstance(dist, dict) and cj.to_int(dist.get("rank")) is not None:
        meta["rank"] = cj.to_int(dist.get("rank"))
    meta["pmu"] = (
        f"{n_ranges} cuda_profiler_range events (per-kernel CUPTI counters in kernels.metrics)"
        if n_ranges
        else "none: no cuda_profiler_range events (CUPTI range counters absent)"
    )
    if skipped:
        meta["skipped"] = skipped
    if host.total + kern.total + ctr.total + n_flows + mem.total == 0:
        raise BadTraceError(sn.path, "no trace events found (traceEvents is empty)")
    return meta


_MEM_CANON = {"Bytes", "Total Allocated", "Total Reserved"}
_DEVICE_TYPES = {0: "CPU", 1: "CUDA", 20: "PrivateUse1"}  # c10::DeviceType codes in [memory] events


def _device_label(dev_type: int | None, dev_id: int | None) -> str | None:
    """[memory] Device Type/Id -> 'CPU', 'CUDA:0' (the 'NPU:0' style of torch_npu's memory files)."""
    if dev_type is None:
        return None
    name = _DEVICE_TYPES.get(dev_type, f"type{dev_type}")
    return name if dev_id is None or dev_id < 0 else f"{name}:{dev_id}"


def _time_rule(unit: dict[str, Any], base: int | None) -> str:
    if unit["scale"] == 1:
        return "ns (first ts > 1e17)"
    if unit["base"]:
        return f"us relative to baseTimeNanoseconds={base}"
    return "us (Unix epoch)" if base is None else "us (absolute; baseTimeNanoseconds ignored: ts already epoch-like)"


def _device_name(header: dict[str, Any], devices: dict[int, int]) -> str | None:
    props = header.get("deviceProperties")
    if not isinstance(props, list) or not props:
        return None
    by_id = {cj.to_int(p.get("id")): p.get("name") for p in props if isinstance(p, dict)}
    if devices:
        dev = max(devices, key=lambda d: devices[d])
        if by_id.get(dev):
            return str(by_id[dev])
    names = {n for n in by_id.values() if n}
    return str(next(iter(names))) if len(names) == 1 else None


class _FlowEnds:
    """Flow ends spilled to a temporary Parquet file and paired at the end in DuckDB (cj.pair_flows)."""

    def __init__(self, tmp: str) -> None:
        self.tmp = tmp
        self.spill = cj.Spill(tmp, "flows")
        self.rows: list[tuple[Any, ...]] = []

    def add(self, *row: Any) -> None:
        self.rows.append(row)
        if len(self.rows) >= FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self.rows:
            cols = list(zip(*self.rows, strict=True))
            s, i = pa.string(), pa.int64()
            types = (s, s, s, s, i, i, i)
            self.spill.add(pa.table({n: pa.array(c, t) for n, c, t in zip(cj.FLOW_ENDS, cols, types, strict=True)}))
            self.rows = []

    def finish(self, out: Any, warnings: list[str]) -> int:
        import pyarrow as pa
        import pyarrow.compute as pc

        self._flush()
        path = self.spill.close()
        if path is None:
            return 0
        n = unpaired = 0
        for b in cj.pair_flows(path, self.tmp):
            unpaired += pc.sum(pc.or_(pc.is_null(b.column("src_ts_ns")), pc.is_null(b.column("dst_ts_ns")))).as_py() or 0
            out.write("flows", pa.Table.from_batches([b]))
            n += b.num_rows
        if unpaired:
            warnings.append(f"{unpaired} flow events have no partner (kept with the missing end null)")
        return n
