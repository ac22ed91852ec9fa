"""PyTorch Kineto / torch.profiler Chrome traces (`{"traceEvents": [...], ...}`, .json or .json.gz).

Two readers, the same rows: the DuckDB reader (`_kineto_duck`, ~5x faster) runs first and gives up, before
anything reaches the store, on what it cannot reproduce exactly (its docstring lists the rules); then this
module's ijson loop reads the file (exact numbers: µs with decimals arrive as Decimal), one pass, bounded
memory. meta["reader"] says which ran and why ijson did. TRACEQL_KINETO_READER=ijson|duckdb forces one
(benchmarks, tests; duckdb raises instead of falling back).

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
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _owned
from ..errors import BadTraceError
from . import _chrome_json as cj
from .base import Unit, check_rank, read_head

if TYPE_CHECKING:  # pragma: no cover
    from ..rank_writer import RankWriter

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
    (
        "elementwise",
        re.compile(r"elementwise|pointwise|triton_poi|unrolled|vectorized|distribution_|fill_|dropout"),
    ),
]
FLOP_OPS = {"add": 1, "mul": 1, "fma": 2}


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
        for op, w in FLOP_OPS.items():
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
    return check_rank(int(m.group(1)), path, "distributedInfo.rank") if m else None


class KinetoParser:
    name = "kineto"
    description = (
        "PyTorch Kineto / torch.profiler trace (.json / .json.gz), or a folder of them (one per rank)"
    )

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

    def __init__(self, out: Any, table: str, names: tuple[str, ...], tally: Tally) -> None:
        self.out, self.table, self.names, self.tally = out, table, names, tally
        self.rows: list[tuple[Any, ...]] = []

    def add(self, *values: Any) -> None:
        self.rows.append(values)
        if len(self.rows) >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            import pyarrow as pa

            self.out.write(
                self.table,
                pa.table(dict(zip(self.names, columns(self.table, self.names, self.rows), strict=True))),
            )
            self.tally.rows[self.table] = self.tally.rows.get(self.table, 0) + len(self.rows)
            self.rows = []


def columns(table: str, names: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[Any]:
    """Row tuples -> one Arrow array per name, typed as the store's `table` columns."""
    import pyarrow as pa

    from ..schema import arrow_schema

    sch = arrow_schema(table)
    cols = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    return [pa.array(c, sch.field(k).type) for k, c in zip(names, cols, strict=True)]


HOST_COLS = ("name", "cat", "pid", "tid", "ts_ns", "dur_ns", "correlation_id", "seq_num", "input_shapes",
             "input_dtypes", "extra")  # fmt: skip
KERNEL_COLS = ("device_id", "name", "op_type", "task_type", "is_comm", "stream_id", "connection_id", "ts_ns",
               "dur_ns", "block_dim", "hbm_read_bytes", "hbm_write_bytes", "flops", "metrics", "extra")  # fmt: skip
COUNTER_COLS = ("track", "channel", "metric", "unit", "name", "ts_ns", "value")
MEMORY_COLS = (
    "kind",
    "component",
    "device",
    "ts_ns",
    "size_bytes",
    "allocated_bytes",
    "reserved_bytes",
    "extra",
)
_HOST_CANON = {"correlation", "External id", "Sequence number", "Input Dims", "Input type"}
_KERN_CANON = {"stream", "device", "correlation"}
_UNIT_KEY = re.compile(r"(.*?)\s*\(([^)]*)\)")


@dataclass
class Tally:
    """What both readers collect besides the rows they write, for `_finish`."""

    base: int | None  # baseTimeNanoseconds
    unit: dict[str, Any] = field(
        default_factory=lambda: {"scale": None, "base": 0}
    )  # decided on the first ts
    rows: dict[str, int] = field(default_factory=dict)
    steps: dict[int, list[int]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    devices: dict[int, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    n_ranges: int = 0
    n_flows: int = 0

    def decide(self, first: float) -> None:
        """The time unit, from the first non-M event's ts (see the module docstring)."""
        if abs(first) > NS_THRESHOLD:
            self.unit.update(scale=1, base=0)
        elif self.base and abs(first) < 1e14:
            self.unit.update(scale=1000, base=self.base)
        else:
            self.unit.update(scale=1000, base=0)

    def add_step(self, name: str, t0: int, dur: int | None) -> None:
        step = cj.to_int(name.split("#", 1)[1])
        if step is None:
            return
        end = t0 + (dur or 0)
        if step in self.steps:  # the same step twice (another thread): the union
            s0, d0 = self.steps[step]
            t0, end = min(s0, t0), max(s0 + d0, end)
        self.steps[step] = [t0, end - t0]


def device_row(
    args: dict[str, Any],
    name: str | None,
    cat: str | None,
    lcat: str,
    pid: int | None,
    t0: int | None,
    dur: int | None,
) -> tuple[tuple[Any, ...], int | None]:
    """One kernels row (KERNEL_COLS) of a kernel / memcpy / memset / cuda_profiler_range event, and its device."""
    text, to_int = cj.text, cj.to_int
    grid = args.get("grid")
    block_dim = None
    if type(grid) is list and grid and all(type(g) is int for g in grid):
        block_dim = 1
        for g in grid:
            block_dim *= g
    dev = to_int(args.get("device"))
    if dev is None and lcat != RANGE_CAT:
        dev = pid
    metrics = None
    hbm_r = hbm_w = flops = None
    extra = [(str(k), text(v)) for k, v in args.items() if k not in _KERN_CANON]
    if lcat == RANGE_CAT:
        metrics = {
            str(k): float(v) for k, v in args.items() if cj.num(v) is not None and not isinstance(v, str)
        }
        extra = [(k, v) for k, v in extra if k not in metrics]
        hbm_r = to_int(args.get("dram__bytes_read.sum"))
        hbm_w = to_int(args.get("dram__bytes_write.sum"))
        flops = _flops(metrics)
    kclass = kernel_class(name, cat)
    row = (
        dev, name, kclass, cat, kclass == "nccl", to_int(args.get("stream")) if lcat != RANGE_CAT else None,
        to_int(args.get("correlation")), t0, dur, block_dim, hbm_r, hbm_w, flops,
        list(metrics.items()) if metrics is not None else None, extra,
    )  # fmt: skip
    return row, dev


def counter_rows(track: str, name: str, t0: int | None, args: dict[str, Any]) -> list[tuple[Any, ...]]:
    """counters rows (COUNTER_COLS) of a C event: one per numeric arg, `name (unit)` keys split."""
    out = []
    for k, v in args.items():
        val = cj.num(v)
        if val is None or isinstance(v, str):
            continue
        m = _UNIT_KEY.fullmatch(str(k))
        out.append((track, "", (m.group(1) if m else str(k)), (m.group(2) if m else "raw"), name, t0, val))
    return out


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
    if "baseTimeNanoseconds" not in h or "distributedInfo" not in h or "deviceProperties" not in h:
        # some writers put these after traceEvents; look at the end (gzip: decompresses to the end, C speed)
        tail = cj.tail_bytes(sn)
        m = re.search(rb'"baseTimeNanoseconds"\s*:\s*(\d+)', tail)
        if m and "baseTimeNanoseconds" not in h:
            h["baseTimeNanoseconds"] = int(m.group(1))
        m = _DIST_RANK.search(tail)
        if m and "distributedInfo" not in h:
            h["distributedInfo"] = {"rank": int(m.group(1))}
        if "deviceProperties" not in h:
            props = _tail_value(tail, b"deviceProperties")
            if isinstance(props, list):  # the GPU's name and memory (traces written by a harness put it last)
                h["deviceProperties"] = props
    return h


def _tail_value(tail: bytes, key: bytes) -> Any:
    """The JSON value of a top-level `key` written after traceEvents, decoded from the file's last bytes; None
    when the key is absent or its value is cut by the start of the tail."""
    at = tail.rfind(b'"' + key + b'"')
    if at < 0:
        return None
    m = re.compile(rb"\s*:\s*").match(tail, at + len(key) + 2)
    if m is None:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(tail[m.end() :].decode("utf-8", "replace"))
    except ValueError:
        return None
    return value


def _reader() -> str:
    """TRACEQL_KINETO_READER: auto (DuckDB, ijson where it gives up), ijson, or duckdb (no fallback: tests)."""
    r = os.environ.get("TRACEQL_KINETO_READER", "auto").strip().lower() or "auto"
    if r not in ("auto", "ijson", "duckdb"):
        raise ValueError(f"TRACEQL_KINETO_READER={r!r}: expected auto, ijson or duckdb")
    return r


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
    reader = _reader()
    why = None
    if reader != "ijson":
        from ._kineto_duck import GiveUp

        try:
            return _finish(sn, header, out, _read_staged(sn, header, out), "duckdb")
        except GiveUp as e:
            if reader == "duckdb":
                raise
            why = str(e)
    tally = _read_with(sn, header, out, _parse_events)
    return _finish(sn, header, out, tally, f"ijson (DuckDB reader gave up: {why})" if why else "ijson")


def _read_with(sn: cj.Sniff, header: dict[str, Any], out: Any, read: Any) -> Tally:
    """read(sn, header, writer, tmp) with Parquet encoding on a background thread and a private temp dir."""
    bg = cj.BackgroundWriter(out)
    tmp = _owned.TempDir("kineto")
    try:
        tally: Tally = read(sn, header, bg, tmp.name)
    finally:
        try:
            bg.close()
        finally:
            tmp.cleanup()
    return tally


def _read_staged(sn: cj.Sniff, header: dict[str, Any], out: RankWriter) -> Tally:
    """The DuckDB reader into a private RankWriter beside `out`, whose files `out` adopts only on success:
    the reader may give up after writing rows, and the ijson reader then writes them all again."""
    import shutil

    from ..rank_writer import RankWriter
    from ._kineto_duck import read

    out.run_dir.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".kineto-stage-", dir=out.run_dir))  # same filesystem: rename
    private = RankWriter(stage, out.run_id, out.rank, tag=out.tag)
    try:
        try:
            tally = _read_with(sn, header, private, read)
        finally:
            private.close()  # also sorts any file whose rows did not arrive in time order
        for table, rels in private.files.items():
            for rel in rels:
                if (out.run_dir / rel).exists():
                    raise FileExistsError(f"{out.run_dir / rel} already written")
                (out.run_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                os.replace(stage / rel, out.run_dir / rel)
                out.files.setdefault(table, []).append(rel)
            out.rows[table] = out.rows.get(table, 0) + private.rows.get(table, 0)
        out.file_rows.update(private.file_rows)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return tally


def _parse_events(sn: cj.Sniff, header: dict[str, Any], out: Any, tmp: str) -> Tally:
    tally = Tally(base=cj.to_int(header.get("baseTimeNanoseconds")))
    unit, skipped, devices = tally.unit, tally.skipped, tally.devices
    # the trace's time unit and origin, decided on the first timed event (Tally.decide)
    scale: Any = 1000
    offset: Any = 0
    text, to_int, us_to_ns = cj.text, cj.to_int, cj.us_to_ns  # locals: this loop runs per event

    host = _Cols(out, "host_ops", HOST_COLS, tally)
    kern = _Cols(out, "kernels", KERNEL_COLS, tally)
    ctr = _Cols(out, "counters", COUNTER_COLS, tally)
    mem = _Cols(out, "memory", MEMORY_COLS, tally)
    flows = FlowEnds(tmp)
    procs: dict[Any, str] = {}

    for ev in cj.iter_events(sn):
        ph = ev.get("ph")
        ts = ev.get("ts")
        if unit["scale"] is None and ts is not None and ph != "M":
            tally.decide(cj.num(ts) or 0.0)
            scale, offset = unit["scale"], unit["base"]
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
            if pid is None and lcat not in SKIP_CATS:
                pid = cj.int_field(ev.get("pid"), sn.path, "pid")  # a pid past int64 is refused, not dropped
            if lcat in SKIP_CATS or pid is None:
                skipped[cat or "?"] = skipped.get(cat or "?", 0) + 1
                continue
            name = text(ev.get("name"))
            dur = us_to_ns(ev.get("dur"), scale)
            if lcat in KERNEL_CATS or lcat == RANGE_CAT:
                row, dev = device_row(args, name, cat, lcat, pid, t0, dur)
                if dev is not None:
                    devices[dev] = devices.get(dev, 0) + 1
                if lcat == RANGE_CAT:
                    tally.n_ranges += 1
                kern.add(*row)
                continue
            corr = args.get("correlation", args.get("External id"))
            host.add(
                name, cat, pid, cj.int_field(ev.get("tid"), sn.path, "tid"), t0, dur, to_int(corr),
                to_int(args.get("Sequence number")), text(args.get("Input Dims")), text(args.get("Input type")),
                [(str(k), text(v)) for k, v in args.items() if k not in _HOST_CANON],
            )  # fmt: skip
            if name and t0 is not None and name.startswith("ProfilerStep#"):
                tally.add_step(name, t0, dur)
        elif ph in ("s", "f", "t"):
            flows.add(cat, text(ev.get("name")), text(ev.get("id")), ph,
                      to_int(ev.get("pid")), to_int(ev.get("tid")), t0)  # fmt: skip
        elif ph == "C":
            track = procs.get(ev.get("pid"), text(ev.get("pid")) or "")
            for row in counter_rows(track, text(ev.get("name")) or "", t0, args):
                ctr.add(*row)
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
    tally.n_flows = flows.finish(out, tally.warnings)
    return tally


def _finish(sn: cj.Sniff, header: dict[str, Any], out: Any, tally: Tally, reader: str) -> dict[str, Any]:
    """steps and run_meta rows, and the unit's metadata, from what a reader collected."""
    import pyarrow as pa

    steps = tally.steps
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
    rows = {t: tally.rows.get(t, 0) for t in ("host_ops", "kernels", "counters")}
    rows.update(flows=tally.n_flows, steps=len(steps), memory=tally.rows.get("memory", 0))
    meta: dict[str, Any] = {
        "warnings": tally.warnings,
        "reader": reader,
        "time_unit": _time_rule(tally.unit, tally.base),
        "rows": rows,
        "step_windows": dict(sorted(steps.items())),
    }
    device = _device_name(header, tally.devices)
    if device:
        meta["device"] = device
    dist = header.get("distributedInfo")
    if isinstance(dist, dict) and cj.to_int(dist.get("rank")) is not None:
        meta["rank"] = cj.to_int(dist.get("rank"))
    meta["pmu"] = (
        f"{tally.n_ranges} cuda_profiler_range events (per-kernel CUPTI counters in kernels.metrics)"
        if tally.n_ranges
        else "none: no cuda_profiler_range events (CUPTI range counters absent)"
    )
    if tally.skipped:
        meta["skipped"] = tally.skipped
    if sum(rows.values()) - len(steps) == 0:
        raise BadTraceError(sn.path, "no trace events found (traceEvents is empty)")
    return meta


_MEM_CANON = {"Bytes", "Total Allocated", "Total Reserved"}
DEVICE_TYPES = {0: "CPU", 1: "CUDA", 20: "PrivateUse1"}  # c10::DeviceType codes in [memory] events


def _device_label(dev_type: int | None, dev_id: int | None) -> str | None:
    """[memory] Device Type/Id -> 'CPU', 'CUDA:0' (the 'NPU:0' style of torch_npu's memory files)."""
    if dev_type is None:
        return None
    name = DEVICE_TYPES.get(dev_type, f"type{dev_type}")
    return name if dev_id is None or dev_id < 0 else f"{name}:{dev_id}"


def _time_rule(unit: dict[str, Any], base: int | None) -> str:
    if unit["scale"] == 1:
        return "ns (first ts > 1e17)"
    if unit["base"]:
        return f"us relative to baseTimeNanoseconds={base}"
    return (
        "us (Unix epoch)"
        if base is None
        else "us (absolute; baseTimeNanoseconds ignored: ts already epoch-like)"
    )


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


class FlowEnds:
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
            self.spill.add(
                pa.table({n: pa.array(c, t) for n, c, t in zip(cj.FLOW_ENDS, cols, types, strict=True)})
            )
            self.rows = []

    def finish(self, out: Any, warnings: list[str]) -> int:
        import pyarrow as pa
        import pyarrow.compute as pc

        self._flush()
        path = self.spill.close()
        if path is None:
            return 0
        n = unpaired = 0
        for b in cj.pair_flows(path):
            unpaired += (
                pc.sum(pc.or_(pc.is_null(b.column("src_ts_ns")), pc.is_null(b.column("dst_ts_ns")))).as_py()
                or 0
            )
            out.write("flows", pa.Table.from_batches([b]))
            n += b.num_rows
        if unpaired:
            warnings.append(f"{unpaired} flow events have no partner (kept with the missing end null)")
        return n
