"""torch_npu trace_view.json / msprof msprof_*.json (Chrome trace, bare event array) -> canonical tables.

Used two ways: `parse_trace_view(...)` is called by the torch_npu folder parser (which turns kernels/comm_ops
off when kernel_details.csv / communication.json give richer versions of them), and the standalone parser
`trace_view` claims such a file given on its own.

Event mapping (formats.md §3; tracks are named by `M` process_name events, pids are synthetic):

| track (process_name)       | ph  | table       | notes |
|----------------------------|-----|-------------|-------|
| Python (host pid) / other  | X   | host_ops    | cat as written; seq_num <- `Sequence number`, correlation_id <- `correlation_id` (enqueue/dequeue), input_shapes/dtypes <- `Input Dims`/`Input type` (the `\\r\\n` separators removed), other args -> extra |
| CANN                       | X   | host_ops    | cat 'cann', level <- args.level, correlation_id <- args.connection_id |
| Ascend Hardware            | X   | kernels     | when kernels=True. task_type <- `Task Type`, stream_id <- tid (`Stream N`), task_id, model_id, connection_id, context_id <- `Subtask Id` (null when 4294967295); is_comm null (the HCCL tasks of the comm stream are not marked in this file: kernel_details.csv has them) |
| HCCL / Communication, `Group <g> Communication` thread | X | comm_ops | when comm_ops=True. op_type from the name (hcom_allReduce__586_0_1 -> allreduce), kind collective/p2p, group_name <g> (tid 0 when there are no thread names), bytes = its data plane tasks over links (not LOCAL), as communication.json counts them; transit/wait/sync/idle null (communication.json has them) |
| HCCL, `Plane <k>` threads  | X   | comm_matrix, comm_bandwidth | when comm_ops=True. These tasks duplicate the Ascend Hardware tasks of the HCCL stream (same ts/stream/task id), so they are not written as kernels again. Data tasks (size(Byte) > 0) are aggregated per enclosing group op like torch_npu's communication*.json (checked equal on the level1 sample): per (src rank, dst rank, link) -> comm_matrix, per link -> comm_bandwidth, plus an SDMA row = the sum of the HCCS/PCIE/SIO links (as communication.json writes it); link = LOCAL for ON_CHIP/self copies, else `link type` (HCCS, PCIE, SIO) or `transport type` (RDMA); `dst rank` 4294967295 (local) -> src rank; transit = sum of task durations |
| Overlap Analysis           | X   | (skipped)   | derived by the profiler from the kernels; its totals are step_trace_time.csv, which the folder parser reads |
| any (HBM, LLC, NPU MEM...) | C   | counters    | see `_counter_spec` for names, units and conversions |
| any                        | s/f | flows       | paired on (cat, id): one row per `f` (an `s` can fan out to several tasks) plus unpaired ends; flow_id is text |
| Python                     | X ProfilerStep#N | steps | when write_steps=True; always returned as meta["step_windows"] |

Readers (see _chrome_json): DuckDB for plain files with string `ts` (the torch_npu form), ijson otherwise
(gzip, object root, numeric `ts` anywhere: the pre-scan probes every chunk). Both produce the same
intermediate Arrow batches (one row per event, args as key/value lists), which `_Emitter` classifies by
track and maps column-wise, so the two cannot disagree (a test checks they give identical tables).

Pipeline on the fast path, 2 cores: DuckDB parses in a background thread from the start while this thread
byte-scans the file for M events (track names can sit anywhere, often at the end); then this thread maps
batches in Arrow and a third thread encodes Parquet. Flows and `(%)` counters wait for the end of the file
in temporary Parquet and are finished in DuckDB, so memory does not grow with the file. Measured on a
synthetic mix (benchmarks/bench_trace_json.py): ~150 MB/s at 1-4 GB, peak RSS 0.5-0.65 GB, flat.

Time order, as the store wants each file: a real trace_view is not in it. Each counter process's samples are,
in blocks that interleave, so counters go to one part per track (RankWriter apart_by). The host process's
events come in end-time order (a call after the calls it made), out of start-time order by less than one write:
RankWriter's reorder window holds each write until the next one shows which rows nothing later precedes, and
writes those sorted; rows that come later than it can place go to a late part, and once the events are read the
emitter seals host_ops, so that part's external sort runs in a background thread beside the end-of-file steps
(flow pairing, comm ops) instead of after them.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _owned, progress
from ..errors import BadTraceError
from . import _chrome_json as cj
from .base import Unit, read_head

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from ..rank_writer import RankWriter

KERNEL_TRACKS = ("Ascend Hardware", "Task Scheduler")
COMM_TRACKS = ("HCCL", "Communication")
CANN_TRACKS = ("CANN",)
SKIP_TRACKS = ("Overlap Analysis",)
NO_CONTEXT = "4294967295"  # Subtask Id meaning "no sub-task"

# Destinations of the intermediate rows (small ints: cheap to produce in SQL and to compare in Arrow).
DEST = {"host": 1, "cann": 2, "kernel": 3, "comm": 4, "plane": 5, "counter": 6, "flow": 7}
# args that feed canonical columns, per destination; every other arg goes to `extra` verbatim
CANON_ARGS = {
    "host": ("Sequence number", "Input Dims", "Input type", "correlation_id"),
    "cann": ("level", "connection_id"),
    "kernel": ("Task Type", "Task Id", "Model Id", "connection_id", "Subtask Id"),
}
WITH_ARGS = ("host", "cann", "kernel", "plane", "counter")

# Events per batch out of DuckDB. Small enough that the batches in flight (DuckDB's result chunks gathered into
# one Arrow batch, the prefetch queue, the one being mapped) stay a fixed, small part of memory: at 128k the
# peak RSS grew with the trace (0.25 GB 485-540 MB, 4 GB 610-690 MB); at 32k it was 465-485 MB at 0.25 and
# 1 GB and <= 540 MB at 4 GB, at the same speed (per-batch overhead is small at 32k rows). See
# benchmarks/README.md for the peak with the other bounds (jemalloc pool, flow pairing passes) added.
BATCH_ROWS = 32 * 1024
# Rows per write to the store (= its Parquet row groups). Each table and file part holds up to this many rows
# until written, and the writer thread queues up to four such writes: at 128k that was ~60-130 MB of the peak,
# filled within the first second, after which a 4 GB trace still crept 60-90 MB higher than a 0.25 GB one (peak
# RSS 398-412 vs 485-493 MB, max/min 1.20-1.22); at 32k: 340-350 vs 357-378 MB (1.05-1.08), same speed, and
# `findings --all` on the 1 GB store within noise (3.06 vs 3.22 s warm).
WRITE_ROWS = 32 * 1024
PREFETCH = 4  # DuckDB batches parsed ahead while batches are mapped
# ... and while this thread pre-scans the file for track names, before any batch can be mapped. The scan takes
# ~0.7 s a GB (bytes.find holds the GIL), time in which DuckDB parses ~14 batches at its rate on this
# machine: with only PREFETCH of them allowed, it stood idle for most of the scan of a 1 GB file. The queue is
# drained to PREFETCH as mapping starts. The bytes bound keeps the scan from setting the ingest's peak: the
# memory those batches held stays with the process (allocator and DuckDB buffers) for the rest of the parse.
# Device-task batches are ~8 MB each: 16 of them took a 4 GB device-task trace's peak RSS to ~500 MB against
# ~340 MB at 0.25 GB (max/min 1.45). Within 48 MB the scan no longer sets the peak: 350 / 395 / 419 MB at
# 0.25 / 1 / 4 GB, with the ingest-time checks bounded too (measured 2026-12-04).
SCAN_PREFETCH = 16
SCAN_PREFETCH_BYTES = 48 << 20


def _inter_schema() -> pa.Schema:
    """The intermediate row both readers produce (one per event); args as parallel key/value lists (X, C)."""
    import pyarrow as pa

    s = pa.string()
    return pa.schema(
        [
            ("ph", s), ("name", s), ("cat", s), ("pid", pa.int64()), ("tid", pa.int64()),
            ("ts_ns", pa.int64()), ("dur_ns", pa.int64()), ("fid", s), ("k", pa.list_(s)), ("vals", pa.list_(s)),
        ]
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------------
# Pre-scan: process/thread names (M events may sit anywhere in the file, often at the end)


@dataclass
class Tracks:
    process: dict[int, str] = field(default_factory=dict)  # pid -> process_name
    thread: dict[tuple[int, int], str] = field(default_factory=dict)  # (pid, tid) -> thread_name
    labels: dict[int, str] = field(default_factory=dict)  # pid -> process_labels
    numeric_ts: bool = False  # a numeric `ts` was seen somewhere (the DuckDB path would not be exact)

    def pids(self, names: tuple[str, ...]) -> list[int]:
        return [p for p, n in self.process.items() if n in names]

    def group_tids(self) -> dict[int, list[int]]:
        """HCCL pid -> tids of its 'Group <g> Communication' threads (tid 0 when no thread names)."""
        out: dict[int, list[int]] = {}
        for pid in self.pids(COMM_TRACKS):
            named = {t: n for (p, t), n in self.thread.items() if p == pid}
            out[pid] = [t for t, n in named.items() if n.startswith("Group")] if named else [0]
        return out

    def group_name(self, pid: int, tid: int) -> str | None:
        n = self.thread.get((pid, tid))
        if n is None:
            return None
        m = re.fullmatch(r"Group (.+?) Communication", n)
        return m.group(1) if m else n

    def track(self, pid: Any) -> str | None:
        p = cj.to_int(pid)
        return None if p is None else self.process.get(p)


_NUM_TS = re.compile(rb'"ts"\s*:\s*-?\d')
_PROBE = 1 << 14


def scan_tracks(sn: cj.Sniff) -> Tracks:
    """Process/thread names from the M events, in one byte-search pass over the file.

    Riding on the same read, a few KB of every 8 MiB chunk are checked for a numeric `ts`: the DuckDB path
    reads `ts` as text, which is exact only for string timestamps, so a file that switches to numeric ones
    somewhere is read with ijson instead (`Tracks.numeric_ts`).
    """
    tr = Tracks()

    def probe(chunk: bytes) -> None:
        if not tr.numeric_ts and (
            _NUM_TS.search(chunk, 0, _PROBE) or _NUM_TS.search(chunk, max(0, len(chunk) - _PROBE))
        ):
            tr.numeric_ts = True

    # thread names / labels are written next to their process name (the same M-event block)
    for ev in cj.scan_objects(sn, b"process_name", near=(b"thread_name", b"process_labels"), probe=probe):
        if ev.get("ph") != "M":
            continue
        pid, tid = cj.to_int(ev.get("pid")), cj.to_int(ev.get("tid"))
        raw_args = ev.get("args")
        args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
        if pid is None:
            continue
        if ev.get("name") == "process_name" and isinstance(args.get("name"), str):
            tr.process[pid] = args["name"]
        elif ev.get("name") == "thread_name" and tid is not None and isinstance(args.get("name"), str):
            tr.thread[(pid, tid)] = args["name"]
        elif ev.get("name") == "process_labels" and isinstance(args.get("labels"), str):
            tr.labels[pid] = args["labels"]
    return tr


# ---------------------------------------------------------------------------------------------------
# Reader 1: DuckDB over a bare array of string-ts events


def _fast_sql(sn: cj.Sniff, path: Path | None = None) -> str:
    """One pass over the file; needs nothing from the pre-scan, so DuckDB starts while it runs.

    DuckDB's streaming query runs on one core, so it does only what needs the JSON (parse, args as key and
    value lists) and hands over text; the int/ns conversions run in Arrow on the consuming thread
    (`_typed`), which balances the two cores (measured: DuckDB 1.53 -> 1.21 CPU-s per 250 MB, Arrow +0.20).
    No CASE around id/args: only flow events carry `id` and flows carry no `args`.
    """
    columns = {
        "ph": "VARCHAR", "name": "VARCHAR", "cat": "VARCHAR", "pid": "VARCHAR", "tid": "VARCHAR",
        "ts": "VARCHAR", "dur": "VARCHAR", "id": "VARCHAR", "args": "JSON",
    }  # fmt: skip
    return f"""
    SELECT ph, name, cat, pid, tid, ts, dur, id AS fid, json_keys(args) AS k, json_extract_string(args, '$.*') AS vals
    FROM {cj.duck_source(path or sn.path, columns)}
    WHERE ph IN ('X', 'C', 's', 'f', 't')"""


def _typed(b: pa.RecordBatch, path: Path) -> pa.RecordBatch:
    """A DuckDB text batch -> the intermediate schema (exact ns, int ids; an id past int64 refused)."""
    import pyarrow as pa

    pid, tid = cj.ints(b.column("pid")), cj.ints(b.column("tid"))
    cj.check_int_column(b.column("pid"), pid, path, "pid")
    cj.check_int_column(b.column("tid"), tid, path, "tid")
    cols = {
        "ph": b.column("ph"), "name": b.column("name"), "cat": b.column("cat"),
        "pid": pid, "tid": tid,
        "ts_ns": cj.ts_text_to_ns(b.column("ts")), "dur_ns": cj.dur_text_to_ns(b.column("dur")),
        "fid": b.column("fid"), "k": b.column("k"), "vals": b.column("vals"),
    }  # fmt: skip
    return pa.RecordBatch.from_pydict(cols, schema=_inter_schema())


def _ijson_batches(sn: cj.Sniff) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    schema = _inter_schema()
    names = schema.names
    cols: dict[str, list[Any]] = {n: [] for n in names}
    n = 0
    for ev in cj.iter_events(sn):
        ph = ev.get("ph")
        if ph not in ("X", "C", "s", "f", "t"):
            continue
        args = ev.get("args")
        k = vals = None
        if ph in ("X", "C") and isinstance(args, dict):
            k = [str(x) for x in args]
            vals = [cj.text(x) for x in args.values()]
        dur = ev.get("dur")
        row = (
            ph, cj.text(ev.get("name")), cj.text(ev.get("cat")), cj.int_field(ev.get("pid"), sn.path, "pid"),
            cj.int_field(ev.get("tid"), sn.path, "tid"),
            cj.us_to_ns(ev.get("ts")), cj.us_to_ns(dur) if dur is not None else None,
            cj.text(ev.get("id")) if ph in ("s", "f", "t") else None, k, vals,
        )  # fmt: skip
        for name, val in zip(names, row, strict=True):
            cols[name].append(val)
        n += 1
        if n >= BATCH_ROWS:
            yield pa.RecordBatch.from_pydict(cols, schema=schema)
            cols = {c: [] for c in names}
            n = 0
    if n:
        yield pa.RecordBatch.from_pydict(cols, schema=schema)


# ---------------------------------------------------------------------------------------------------
# Intermediate batches -> canonical tables


def _counter_spec(track: str, name: str, key: str) -> tuple[str, str, str, float, bool] | None:
    """(channel, metric, unit, factor, is_percent) for one counter series, None to drop the entry.

    Known Ascend counters (formats.md §3) are converted to base units; anything else is kept with the unit
    parsed from the arg key (`Foo(MB/s)` -> 'MB/s') and its value as written.
    """
    if key == "acc_id":
        return None  # Acc PMU: the channel of its sibling `value`, not a series of its own
    m_unit = re.fullmatch(r"(.*?)\s*\(([^)]*)\)", key)
    unit_written = m_unit.group(2) if m_unit else ""
    if track == "HBM":
        m = re.fullmatch(r"HBM\s*(\S+)/(Read|Write)", name)
        if m and unit_written == "MB/s":
            return m.group(1), m.group(2).lower() + "_bw", "bytes/s", 1e6, False
    if track == "LLC":
        m = re.fullmatch(r"LLC\s*(\S+)\s+(Read|Write)/(.+)", name)
        if m:
            rw = m.group(2).lower()
            if unit_written == "MB/s":
                return m.group(1), rw + "_bw", "bytes/s", 1e6, False
            if unit_written == "%":
                return m.group(1), rw + "_hit_rate", "ratio", 1.0, True
    if track == "NPU MEM" and key == "KB":
        scope, _, mem = name.partition("/")
        return scope, (mem or scope).lower() + "_used", "bytes", 1024.0, False
    if track == "AI Core Freq" and key == "MHz":
        return "", "freq", "MHz", 1.0, False
    if track == "Acc PMU" and key == "value":
        return "", name, "raw", 1.0, False  # channel filled from acc_id
    if track == "Stars Soc Info":
        return "", re.sub(r"\W+", "_", name.strip()).lower(), "level", 1.0, False
    if track == "QoS" and key == "value":
        return name.removeprefix("QoS").strip(), "value", "raw", 1.0, False
    metric = re.sub(r"\W+", "_", (m_unit.group(1) if m_unit else key).strip()).strip("_").lower() or "value"
    return "", metric, unit_written or "raw", 1.0, unit_written == "%"


@dataclass
class _Emitter:
    out: RankWriter
    tr: Tracks
    source: str
    tmp: str = ""  # a private temporary directory (spills)
    warnings: list[str] = field(default_factory=list)
    comm_parts: list[Any] = field(default_factory=list)
    plane_parts: list[Any] = field(default_factory=list)
    _flows: Any = None  # cj.Spill of flow ends, paired at the end
    _pct: Any = None  # cj.Spill of `(%)` counter samples, scaled at the end
    step_windows: dict[int, list[int]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    _specs: dict[str, Any] = field(default_factory=dict)
    _track_codes: Any = None
    _rows: Any = None  # cj.RowGroups (set in __post_init__)

    def __post_init__(self) -> None:
        self._rows = cj.RowGroups(self.out, WRITE_ROWS, self.counts)

    def _write(
        self, table: str, cols: Any, part: str = "", apart_by: str | None = None, reorder: bool = False
    ) -> None:
        """Queue rows for `table` (a file part of it, and apart_by, reorder: see RankWriter.write)."""
        self._rows.add(table, cols, part, apart_by, reorder)

    def _flush(self) -> None:
        self._rows.flush()

    def _track(self, pid: Any) -> Any:
        """pid -> process name, column-wise."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not self.tr.process:
            return pa.nulls(len(pid), pa.string())
        keys = pa.array(list(self.tr.process), pa.int64())
        names = pa.array(list(self.tr.process.values()), pa.string())
        return names.take(pc.index_in(pid, value_set=keys))

    # -- per destination ----------------------------------------------------------------------------
    def host(self, b: Any, cann: bool) -> None:
        import pyarrow.compute as pc

        kv = cj.ArgsKV(b.column("k"), b.column("vals"))
        dest = "cann" if cann else "host"
        cols: dict[str, Any] = {
            "name": b.column("name"), "pid": b.column("pid"), "tid": b.column("tid"),
            "ts_ns": b.column("ts_ns"), "dur_ns": b.column("dur_ns"), "extra": kv.extra(CANON_ARGS[dest]),
        }  # fmt: skip
        if cann:
            cols["cat"] = cj.const("cann", b.num_rows)
            cols["level"] = kv.get("level")
            cols["correlation_id"] = cj.ints(kv.get("connection_id"))
        else:
            cat = b.column("cat")
            cols["cat"] = pc.coalesce(cat, self._track(b.column("pid"))) if cat.null_count else cat
            cols["seq_num"] = cj.ints(kv.get("Sequence number"))
            cols["input_shapes"] = pc.replace_substring(kv.get("Input Dims"), "\r\n", "")
            cols["input_dtypes"] = pc.replace_substring(kv.get("Input type"), "\r\n", "")
            cols["correlation_id"] = cj.ints(kv.get("correlation_id"))
            self._steps(b)
        # CANN events interleave with the device events in the file while the host process's events come as one
        # block: each is in time order, the two together are not, so they go to two files (RankWriter parts).
        # The host process's events come in end-time order (a parent after its children): RankWriter's reorder
        # window writes them in start-time order as they come, with a late part for what it cannot place
        self._write("host_ops", cols, "cann" if cann else "", reorder=not cann)

    def _steps(self, b: Any) -> None:
        import pyarrow.compute as pc

        mask = pc.fill_null(pc.starts_with(b.column("name"), "ProfilerStep#"), False)
        if not pc.any(mask).as_py():
            return
        for r in b.filter(mask).select(["name", "ts_ns", "dur_ns"]).to_pylist():
            step = cj.to_int(r["name"].split("#", 1)[1])
            if step is None or r["ts_ns"] is None:
                continue
            end = r["ts_ns"] + (r["dur_ns"] or 0)
            if step in self.step_windows:  # the same step seen twice (another thread): take the union
                t0, d0 = self.step_windows[step]
                start, end = min(t0, r["ts_ns"]), max(t0 + d0, end)
            else:
                start = r["ts_ns"]
            self.step_windows[step] = [start, end - start]

    def kernels(self, b: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        kv = cj.ArgsKV(b.column("k"), b.column("vals"))
        ctx = kv.get("Subtask Id")
        self._write(
            "kernels",
            {
                "name": b.column("name"),
                "task_type": kv.get("Task Type"),
                "task_id": cj.ints(kv.get("Task Id")),
                "model_id": cj.ints(kv.get("Model Id")),
                "connection_id": cj.ints(kv.get("connection_id")),
                "context_id": pc.if_else(pc.equal(ctx, NO_CONTEXT), pa.scalar(None, pa.string()), ctx),
                "stream_id": b.column("tid"),
                "ts_ns": b.column("ts_ns"),
                "dur_ns": b.column("dur_ns"),
                "extra": kv.extra(CANON_ARGS["kernel"]),
            },
        )

    def counters(self, b: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        kv = cj.ArgsKV(b.column("k"), b.column("vals"))
        keys, vals, parents = kv.keys, kv.vals, kv.parents
        if len(keys) == 0:
            return
        one = kv.width == 1  # one arg per sample (HBM, NPU MEM...): entries are rows, no take by parent
        track = pc.fill_null(
            self._track(b.column("pid")) if one else self._track(b.column("pid")).take(parents), ""
        )
        name = pc.fill_null(b.column("name") if one else b.column("name").take(parents), "")
        combo = pc.binary_join_element_wise(track, name, keys, "\x1f")
        enc = pc.dictionary_encode(combo)
        idx = enc.indices
        specs = []
        for s in enc.dictionary.to_pylist():
            if s not in self._specs:
                self._specs[s] = _counter_spec(*s.split("\x1f"))
            specs.append(self._specs[s] or ("", "", "", 1.0, False))
        keep_d = pa.array([self._specs[s] is not None for s in enc.dictionary.to_pylist()])
        chan_d, metric_d, unit_d, factor_d, pct_d = (
            pa.array([sp[i] for sp in specs], t)
            for i, t in enumerate((pa.string(), pa.string(), pa.string(), pa.float64(), pa.bool_()))
        )
        channel = chan_d.take(idx)
        is_acc = pc.equal(keys, "acc_id")  # Acc PMU: {"value": v, "acc_id": n} -> channel n
        if pc.any(is_acc).as_py():
            pos = pc.index_in(parents, value_set=parents.filter(is_acc))
            channel = pc.coalesce(vals.filter(is_acc).take(pos), channel)
        t = pa.table(
            {
                "track": track, "channel": channel, "metric": metric_d.take(idx), "unit": unit_d.take(idx),
                "name": name, "ts_ns": b.column("ts_ns") if one else b.column("ts_ns").take(parents),
                "value": pc.multiply(cj.floats(vals), factor_d.take(idx)),
            }
        )  # fmt: skip
        keep = keep_d.take(idx)
        pct = pc.and_(keep, pct_d.take(idx))
        if pc.any(pct).as_py():
            if self._pct is None:
                self._pct = cj.Spill(self.tmp, "percent_counters")
            self._pct.add(t.filter(pct).append_column("key", keys.filter(pct)))
            keep = pc.and_(keep, pc.invert(pct))
        # each counter process's samples are in time order, its blocks interleaved with the other processes'
        # (a real level1 trace_view: 7 tracks, ~130 switches): parts by track instead of the post-write sort
        kept = t if keep.null_count == 0 and pc.all(keep).as_py() else t.filter(keep)
        self._write("counters", kept, apart_by="track")

    def flows(self, b: Any) -> None:
        """Spilled until the end: an s and its f may be anywhere in the file."""
        import pyarrow as pa

        if self._flows is None:
            self._flows = cj.Spill(self.tmp, "flows")
        self._flows.add(pa.Table.from_batches([b.select(list(cj.FLOW_ENDS))]))

    def comm(self, b: Any) -> None:
        self.comm_parts.append(b.select(["name", "pid", "tid", "ts_ns", "dur_ns"]))

    def plane(self, b: Any) -> None:
        """Keep a plane's data tasks (size > 0, with a time) until the end of the file: notify record/wait tasks
        move no bytes, and which group op a task belongs to depends on its own time only (see _finish_comm),
        so dropping the others here changes no assignment and halves what is held."""
        import pyarrow as pa
        import pyarrow.compute as pc

        kv = cj.ArgsKV(b.column("k"), b.column("vals"))
        t = pa.table(
            {
                "pid": b.column("pid"),
                "ts_ns": b.column("ts_ns"),
                "dur_ns": b.column("dur_ns"),
                "src": cj.ints(kv.get("src rank")),
                "dst": cj.ints(kv.get("dst rank")),
                "size": cj.floats(kv.get("size(Byte)")),
                "transport": kv.get("transport type"),
                "link": kv.get("link type"),
            }
        )  # fmt: skip
        data = pc.and_(pc.fill_null(pc.greater(t.column("size"), 0.0), False), pc.is_valid(t.column("ts_ns")))
        self.plane_parts.append(t.filter(data))

    _COLS = {
        "host": ["name", "cat", "pid", "tid", "ts_ns", "dur_ns", "k", "vals"],
        "cann": ["name", "pid", "tid", "ts_ns", "dur_ns", "k", "vals"],
        "kernel": ["name", "tid", "ts_ns", "dur_ns", "k", "vals"],
        "counter": ["name", "pid", "ts_ns", "k", "vals"],
        "flow": ["cat", "name", "fid", "ph", "pid", "tid", "ts_ns"],
        "comm": ["name", "pid", "tid", "ts_ns", "dur_ns"],
        "plane": ["pid", "ts_ns", "dur_ns", "k", "vals"],
    }

    def classify(self, b: Any) -> Any:
        """Destination code per event (DEST values; null = not mapped), from ph, the track of pid and,
        on HCCL tracks, whether tid is a 'Group ... Communication' thread."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self._track_codes is None:
            codes = {}
            for pid, name in self.tr.process.items():
                if name in KERNEL_TRACKS:
                    codes[pid] = DEST["kernel"]
                elif name in CANN_TRACKS:
                    codes[pid] = DEST["cann"]
                elif name in COMM_TRACKS:
                    codes[pid] = DEST["plane"]  # group threads are picked out below
                elif name in SKIP_TRACKS:
                    codes[pid] = 0
            self._track_codes = (pa.array(list(codes), pa.int64()), pa.array(list(codes.values()), pa.int8()))
        pids, codes = self._track_codes
        ph, pid = b.column("ph"), b.column("pid")
        x = pc.fill_null(pc.take(codes, pc.index_in(pid, value_set=pids)), DEST["host"])  # unknown pid: host
        for gpid, tids in self.tr.group_tids().items():
            is_group = pc.and_(
                pc.equal(pid, gpid), pc.is_in(b.column("tid"), value_set=pa.array(tids, pa.int64()))
            )
            x = pc.if_else(pc.fill_null(is_group, False), pa.scalar(DEST["comm"], pa.int8()), x)
        x = pc.if_else(pc.equal(x, 0), pa.scalar(None, pa.int8()), x)
        dest = pc.if_else(pc.equal(ph, "X"), x, pa.scalar(None, pa.int8()))
        dest = pc.if_else(pc.equal(ph, "C"), pa.scalar(DEST["counter"], pa.int8()), dest)
        is_flow = pc.is_in(ph, value_set=pa.array(["s", "f", "t"]))
        return pc.if_else(is_flow, pa.scalar(DEST["flow"], pa.int8()), dest)

    def batch(self, b: Any, dests: set[str]) -> None:
        """Split one intermediate batch by destination (selecting each one's columns before filtering)."""
        import pyarrow.compute as pc

        dest = self.classify(b)
        present = set(pc.unique(dest).to_pylist())
        for name, code in DEST.items():
            if code not in present or name not in dests:
                continue
            sub = b.select(self._COLS[name])
            if len(present) > 1:
                sub = sub.filter(pc.fill_null(pc.equal(dest, code), False))
            if name in ("host", "cann"):
                self.host(sub, cann=name == "cann")
            else:
                getattr(self, {"kernel": "kernels", "counter": "counters", "flow": "flows"}.get(name, name))(
                    sub
                )

    # -- pieces of one file parsed in worker processes (_parse_pieces) -------------------------------
    def piece_state(self) -> dict[str, Any]:
        """Flush this piece's rows and hand over what waits for the end of the whole file: the flow and
        `(%)` counter spills (paths), comm group ops and plane tasks, step windows, counts, warnings."""
        self._flush()
        return {
            "flows": str(p) if self._flows is not None and (p := self._flows.close()) else None,
            "pct": str(p) if self._pct is not None and (p := self._pct.close()) else None,
            "comm_parts": self.comm_parts, "plane_parts": self.plane_parts,
            "step_windows": self.step_windows, "counts": self.counts, "warnings": self.warnings,
        }  # fmt: skip

    def absorb(self, state: dict[str, Any]) -> None:
        """Take one piece's state (in file order of the pieces), as if its events had passed through here."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if state["flows"] is not None and self._flows is None:
            self._flows = cj.Spill(self.tmp, "flows")
        if state["pct"] is not None and self._pct is None:
            self._pct = cj.Spill(self.tmp, "percent_counters")
        for src, spill in ((state["flows"], self._flows), (state["pct"], self._pct)):
            if src is not None:  # re-spilled here in piece order: the end-of-file steps read one spill
                for b in pq.ParquetFile(src).iter_batches(batch_size=WRITE_ROWS):
                    spill.add(pa.Table.from_batches([b]))
        self.comm_parts += state["comm_parts"]
        self.plane_parts += state["plane_parts"]
        for step, (start, dur) in state["step_windows"].items():
            if step in self.step_windows:  # a step seen by two pieces: the union, as _steps does
                t0, d0 = self.step_windows[step]
                end = max(t0 + d0, start + dur)
                start = min(t0, start)
                dur = end - start
            self.step_windows[step] = [start, dur]
        for table, n in state["counts"].items():
            self.counts[table] = self.counts.get(table, 0) + n
        self.warnings += state["warnings"]

    # -- at the end ---------------------------------------------------------------------------------
    def finish(self, *, comm_ops: bool, write_steps: bool) -> None:
        self._flush()
        # the host ops and counter tracks are complete: the host ops' held rows are written and the sort of
        # what came out of time order (late host ops, counter tracks past APART_MAX) runs beside the steps below
        for table, part in (("host_ops", ""), ("host_ops", "cann"), ("counters", "")):
            self.out.seal(table, part)
        self._finish_percent()
        self._finish_flows()
        if comm_ops:
            self._finish_comm()
        if write_steps and self.step_windows:
            steps = sorted(self.step_windows.items())
            self.out.write(
                "steps",
                {
                    "step": [s for s, _ in steps],
                    "ts_ns": [w[0] for _, w in steps],
                    "dur_ns": [w[1] for _, w in steps],
                    "source": [self.source] * len(steps),
                },
            )
        self._flush()

    def _finish_percent(self) -> None:
        """`(%)` counters: torch_npu writes LLC `Hit Rate(%)` as a 0..1 fraction despite the label (level1
        sample: max 0.927, while the DB export of the same job family stores hitRate 71.7..88.5). Decided
        per series: if any sample exceeds 1 the series is in percent (divided by 100), else it is a ratio."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        from ._csv import path_lit

        path = self._pct.close() if self._pct is not None else None
        if path is None:
            return
        con = cj.spill_connection()
        try:
            pct = con.execute(
                f"SELECT track, name, key FROM read_parquet({path_lit(str(path))}) GROUP BY ALL HAVING max(value) > 1 ORDER BY ALL"
            ).fetchall()
        finally:
            con.close()
        for track, name, key in pct:
            self.warnings.append(
                f"counter {track} / {name} / {key} holds values above 1: read as percent, divided by 100"
            )
        in_percent = pa.array(
            ["\x1f".join((track or "", name or "", key or "")) for track, name, key in pct], pa.string()
        )
        # the spill in file order (= time order, as the profiler writes counters), scaled in Arrow: a file part of
        # its own (written after every other counter, these rows would unsort the main file), and bounded memory
        # (a DuckDB join and sort here lifted a 4 GB trace's peak RSS by ~0.1 GB)
        for b in pq.ParquetFile(path).iter_batches(batch_size=WRITE_ROWS):
            key = pc.binary_join_element_wise(
                pc.fill_null(b.column("track"), ""),
                pc.fill_null(b.column("name"), ""),
                pc.fill_null(b.column("key"), ""),
                "\x1f",
            )
            value = pc.if_else(
                pc.is_in(key, value_set=in_percent), pc.divide(b.column("value"), 100.0), b.column("value")
            )
            cols = {c: b.column(c) for c in ("track", "channel", "metric", "unit", "name", "ts_ns")}
            self._write("counters", {**cols, "value": value}, "pct")

    def _finish_flows(self) -> None:
        import pyarrow.compute as pc

        path = self._flows.close() if self._flows is not None else None
        if path is None:
            return
        unpaired = 0
        for b in cj.pair_flows(path, WRITE_ROWS):
            unpaired += (
                pc.sum(pc.or_(pc.is_null(b.column("src_ts_ns")), pc.is_null(b.column("dst_ts_ns")))).as_py()
                or 0
            )
            self._write("flows", b)
        if unpaired:
            self.warnings.append(f"{unpaired} flow events have no partner (kept with the missing end null)")

    def _finish_comm(self) -> None:
        """Group ops -> comm_ops; their plane tasks -> bytes, comm_matrix and comm_bandwidth."""
        import pyarrow as pa

        if not self.comm_parts:
            return
        ops = pa.concat_tables([pa.Table.from_batches([b]) for b in self.comm_parts]).to_pylist()
        self.comm_parts.clear()
        ops.sort(key=lambda o: (o["pid"], o["ts_ns"] or 0))
        planes = (
            pa.concat_tables(self.plane_parts).sort_by([("pid", "ascending"), ("ts_ns", "ascending")])
            if self.plane_parts
            else None
        )
        self.plane_parts.clear()
        nbytes, matrix, bw = _assign_plane_tasks(ops, planes)
        self._write_comm_ops(ops, nbytes)
        if matrix:
            self._write_comm_matrix(ops, matrix)
        bw = {key: val for key, val in bw.items() if key[1] != "LOCAL"}  # as communication.json: links only
        if bw:
            self._write_comm_bandwidth(ops, bw)

    def _write_comm_ops(self, ops: list[dict[str, Any]], nbytes: dict[int, float]) -> None:
        self.out.write(
            "comm_ops",
            {
                "name": [o["name"] for o in ops],
                "op_type": [_comm_op_type(o["name"]) for o in ops],
                "group_name": [self.tr.group_name(o["pid"], o["tid"]) for o in ops],
                "kind": [_comm_kind(_comm_op_type(o["name"])) for o in ops],
                "ts_ns": [o["ts_ns"] for o in ops],
                "dur_ns": [o["dur_ns"] for o in ops],
                "bytes": [int(nbytes[i]) if i in nbytes else None for i in range(len(ops))],
                "source": [self.source] * len(ops),
            },
        )
        self.counts["comm_ops"] = len(ops)

    def _write_comm_matrix(self, ops: list[dict[str, Any]], matrix: _Matrix) -> None:
        keys = sorted(matrix, key=lambda x: (x[0], str(x[1:])))
        self.out.write(
            "comm_matrix",
            {
                "name": [ops[x[0]]["name"] for x in keys],
                "op_name": [ops[x[0]]["name"] for x in keys],
                "group_name": [self.tr.group_name(ops[x[0]]["pid"], ops[x[0]]["tid"]) for x in keys],
                "src_rank": [_rank(x[1]) for x in keys],
                "dst_rank": [_rank(x[2]) for x in keys],
                "transport": [x[3] for x in keys],
                "bytes": [int(matrix[x][0]) for x in keys],
                "transit_ns": [int(matrix[x][1]) for x in keys],
                "bandwidth_bps": [
                    matrix[x][0] / (matrix[x][1] / 1e9) if matrix[x][1] else None for x in keys
                ],
            },
        )

    def _write_comm_bandwidth(self, ops: list[dict[str, Any]], bw: _Bandwidth) -> None:
        keys2 = sorted(bw, key=lambda x: (x[0], str(x[1])))
        self.out.write(
            "comm_bandwidth",
            {
                "name": [ops[x[0]]["name"] for x in keys2],
                "group_name": [self.tr.group_name(ops[x[0]]["pid"], ops[x[0]]["tid"]) for x in keys2],
                "transport": [x[1] for x in keys2],
                "bytes": [int(bw[x][0]) for x in keys2],
                "transit_ns": [int(bw[x][1]) for x in keys2],
                "bandwidth_bps": [bw[x][0] / (bw[x][1] / 1e9) if bw[x][1] else None for x in keys2],
            },
        )


# (op index, src, dst, transport) -> [bytes, ns]; (op index, transport) -> [bytes, ns]
_Matrix = dict[tuple[int, Any, Any, str], list[float]]
_Bandwidth = dict[tuple[int, str], list[float]]


def _assign_plane_tasks(
    ops: list[dict[str, Any]], planes: Any
) -> tuple[dict[int, float], _Matrix, _Bandwidth]:
    """(bytes per op index, matrix cells, bandwidth cells) of the plane tasks (an Arrow table sorted by pid and
    start, or None) over the group ops (sorted by pid and start). One loop, no call per task: the hot part."""
    # assign each plane task to the group op (same HCCL pid) whose [ts, ts+dur] contains its start;
    # only data tasks (size > 0) count: notify record/wait tasks move no bytes
    nbytes: dict[int, float] = {}
    matrix: _Matrix = {}
    bw: _Bandwidth = {}
    k = 0
    # The op a task belongs to is the first op (by pid, then start) whose end is not before the task's start,
    # if that op starts at or before it: k only moves forward over the sorted tasks. Row dicts one slice at a
    # time: all of them at once held ~0.6 KB a task (a 4 GB trace_view's 577k tasks: most of its peak RSS).
    for p in _rows_of(planes):
        ts = p["ts_ns"]
        if ts is None:
            continue
        while k < len(ops) and (ops[k]["pid"], (ops[k]["ts_ns"] or 0) + (ops[k]["dur_ns"] or 0)) < (
            p["pid"],
            ts,
        ):
            k += 1
        if k >= len(ops) or ops[k]["pid"] != p["pid"] or (ops[k]["ts_ns"] or 0) > ts:
            continue
        size = p["size"] or 0.0
        if size <= 0:
            continue
        dur = float(p["dur_ns"] or 0)
        src, dst = p["src"], p["dst"]
        if _rank(dst) is None:  # 4294967295: a local task (e.g. Reduce_Inline) on this rank
            dst = src
        transport = _transport(p["transport"], p["link"], src, dst)
        for cell in (
            matrix.setdefault((k, src, dst, transport), [0.0, 0.0]),
            bw.setdefault((k, transport), [0.0, 0.0]),
        ):
            cell[0] += size
            cell[1] += dur
        if transport != "LOCAL":
            nbytes[k] = nbytes.get(k, 0.0) + size
            # communication.json's SDMA row aggregates the HCCS/PCIE/SIO links
            if p["transport"] == "SDMA":
                cell = bw.setdefault((k, "SDMA"), [0.0, 0.0])
                cell[0] += size
                cell[1] += dur
    return nbytes, matrix, bw


def _rows_of(table: Any, slice_rows: int = 64 * 1024) -> Iterator[dict[str, Any]]:
    """The rows of an Arrow table (or None) as dicts, converted one slice at a time."""
    if table is None:
        return
    for batch in table.to_batches(max_chunksize=slice_rows):
        yield from batch.to_pylist()


def _transport(transport_type: str | None, link_type: str | None, src: Any, dst: Any) -> str:
    """The link a plane task used, named as communication(_matrix).json name it: LOCAL for on-chip/self
    copies, else the link type (HCCS, PCIE, SIO) or the transport type (RDMA...)."""
    if link_type == "ON_CHIP" or transport_type == "LOCAL" or (src is not None and src == dst):
        return "LOCAL"
    if link_type and link_type not in ("INVALID_TYPE", "") and transport_type != "RDMA":
        return link_type
    return transport_type or "UNKNOWN"


def _rank(r: int | None) -> int | None:
    """HCCL writes `dst rank` 4294967295 (uint32 -1) for a local task: stored as null."""
    return r if r is not None and 0 <= r < 2**31 - 1 else None


_P2P = {"send", "receive", "recv", "batchsendrecv", "sendrecv", "batchsend", "batchrecv"}


def _comm_op_type(name: str | None) -> str | None:
    """hcom_allReduce__586_0_1 -> allreduce; HcclAllGather -> allgather; else the leading letters, lower case."""
    if not name:
        return None
    m = re.match(r"(?i)(?:hcom_|hccl_?)?([A-Za-z]+)", name)
    return m.group(1).lower() if m else name.lower()


def _comm_kind(op_type: str | None) -> str | None:
    if op_type is None:
        return None
    return "p2p" if op_type in _P2P else "collective"


# ---------------------------------------------------------------------------------------------------
# Entry points


def parse_trace_view(
    path: Path, out: RankWriter, *, kernels: bool, comm_ops: bool, write_steps: bool
) -> dict[str, Any]:
    """Parse one trace_view.json / msprof_*.json into `out`. Returns metadata for the manifest:

    {"step_windows": {step: [ts_ns, dur_ns]}, "warnings": [...], "reader": "duckdb"|"ijson",
     "tracks": [process names], "rows": {table: n}} (+ "device_id" when a process label names the NPU).
    """
    path = Path(path)
    sn = cj.sniff(path)
    cj.require_root(sn, want="events")
    cj.check_complete(sn)
    dests = {"host", "cann", "counter", "flow"}
    if kernels:
        dests.add("kernel")
    if comm_ops:
        dests |= {"comm", "plane"}
    if _use_pieces(sn):
        meta = _parse_pieces(sn, out, dests, comm_ops=comm_ops, write_steps=write_steps)
        if meta is not None:
            return meta
    # DuckDB starts parsing on another core while this thread pre-scans for track names
    stream = (
        cj.DuckStream(
            cj.duck_connection(shared=True),
            path,
            _fast_sql(sn),
            BATCH_ROWS,
            prefetch=SCAN_PREFETCH,
            prefetch_bytes=SCAN_PREFETCH_BYTES,
        )
        if sn.fast_path
        else None
    )
    # progress through this file = DuckDB's own scan progress (it reads far ahead of its parse)
    shown = progress.Stream(path, stream.con.query_progress) if stream is not None else None
    try:
        with progress.uncounted():  # a regex pass over the whole file at GB/s: not the parse the bar shows
            tr = scan_tracks(sn)
    except BaseException:
        if stream is not None:
            stream.close()
        if shown is not None:
            shown.close(done=False)
        raise
    fast = stream is not None and not tr.numeric_ts
    if stream is not None:
        stream.set_prefetch(PREFETCH)
    if stream is not None and not fast:
        stream.close()
        shown.close(done=False)  # type: ignore[union-attr]
    bg = cj.BackgroundWriter(out)
    tmp = _owned.TempDir("tv")
    em = _Emitter(bg, tr, path.name, tmp.name)  # type: ignore[arg-type]
    n_events = 0
    try:
        try:
            for b in (_typed(x, sn.path) for x in stream) if fast else _ijson_batches(sn):  # type: ignore[union-attr]
                n_events += b.num_rows
                em.batch(b, dests)
        except cj.DuckReadError as e:
            if n_events:  # rows are already written: report, one line
                raise
            # nothing written yet: read the file with ijson instead, which either copes (memory) or
            # reports the same fault with its byte offset
            stream.close()  # type: ignore[union-attr]
            shown.close(done=False)  # type: ignore[union-attr]
            em.warnings.append(f"DuckDB reader failed before the first batch ({e.detail}); read with ijson")
            fast = False
            for b in _ijson_batches(sn):
                n_events += b.num_rows
                em.batch(b, dests)
        if stream is not None:
            stream.close()  # free the JSON reader's DuckDB buffers before the end-of-file steps allocate theirs
        em.finish(comm_ops=comm_ops, write_steps=write_steps)
    finally:
        if shown is not None:
            shown.close()
        if stream is not None:
            stream.close()
        try:
            bg.close()
        finally:
            tmp.cleanup()
    if n_events == 0 and not tr.process:
        raise BadTraceError(path, "no trace events found (an empty event array?)")
    return _meta(em, tr, "duckdb" if fast else "ijson")


def _meta(em: _Emitter, tr: Tracks, reader: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "step_windows": dict(sorted(em.step_windows.items())),
        "warnings": em.warnings,
        "reader": reader,
        "tracks": sorted(set(tr.process.values())),
        "rows": em.counts,
    }
    skipped = sorted(set(tr.process.values()) & set(SKIP_TRACKS))
    if skipped:
        meta["skipped_tracks"] = skipped
    for label in tr.labels.values():
        m = re.fullmatch(r"NPU\s*(\d+)", label.strip())
        if m:
            meta["device_id"] = int(m.group(1))
            break
    return meta


# ---------------------------------------------------------------------------------------------------
# One big file on every core: pieces of whole events parsed in worker processes

# Below this a file is read in this process: the pieces' end-of-file merge re-reads their spills and each
# worker has its own DuckDB and writer start-up.
PIECES_MIN_BYTES = 192 << 20
PIECE_MIN_BYTES = 96 << 20  # no piece smaller than this


def _use_pieces(sn: cj.Sniff) -> bool:
    import multiprocessing
    import os

    from ._json_pieces import cpu_workers

    # A pool worker parsing one unit of several already shares the cores with the other units. On 2 cores the
    # serial reader already keeps both busy (DuckDB's parse thread, the Arrow mapping, the Parquet writer):
    # measured on a 250 MB device-task trace_view, serial 5.9 CPU-s vs 2 pieces 7.7-8.3 CPU-s (each piece then fed
    # DuckDB through FIFOs and starts its own pipeline); with segment files instead of FIFOs (2026-12-05) 2 pieces
    # still lose on the real level1 trace_view tiled (1 GB: 11.2 s vs 9.6-10.3 serial), so pieces are the default
    # from 3 CPUs on only; TRACEQL_PARSE_WORKERS=N asks for N pieces anywhere.
    forced = os.environ.get("TRACEQL_PARSE_WORKERS", "").strip().isdigit()
    return (
        sn.fast_path
        and sn.size >= PIECES_MIN_BYTES
        and cpu_workers() >= (2 if forced else 3)
        and multiprocessing.parent_process() is None
    )


def _parse_pieces(
    sn: cj.Sniff, out: RankWriter, dests: set[str], *, comm_ops: bool, write_steps: bool
) -> dict[str, Any] | None:
    """Parse `sn`'s file as pieces of whole events in worker processes, each writing its own file parts (in
    file order, so time-ordered where the file is); the end-of-file steps (flow pairing, `(%)` counters, comm
    ops, steps) then run here over what the pieces handed back. None (nothing written) when the file cannot be
    cut or a piece fails: the caller reads it serially, which reports any fault of the file itself."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    from .. import _procs
    from ._json_pieces import cpu_workers, plan

    tr = scan_tracks(sn)
    if tr.numeric_ts:
        return None
    n = max(1, min(cpu_workers(), sn.size // PIECE_MIN_BYTES))
    ranges = plan(sn.path, sn.size, n)
    if len(ranges) < 2:
        return None
    tmp = _owned.TempDir("tvp")
    results: list[dict[str, Any]] = []
    try:
        jobs = [
            (str(sn.path), a, b, str(out.run_dir), out.run_id, out.rank, f"{out.tag}p{i}", tr, sorted(dests), tmp.name, i)
            for i, (a, b) in enumerate(ranges)
        ]  # fmt: skip
        # fork, as ingest's own pool: a spawned worker re-imports pyarrow and duckdb (+0.9 CPU-s each measured,
        # more than a 250 MB piece's gain on 2 cores); no DuckDB connection or writer thread exists here yet
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(
            len(jobs), mp_context=ctx, initializer=_procs.worker_init, initargs=(os.getpid(),)
        ) as ex:
            futs = [ex.submit(_piece, *job) for job in jobs]
            results = [f.result() for f in futs]
        if any("failed" in r for r in results):
            _drop_pieces(out, results)
            return None
        for r in results:  # adopt the pieces' files (closed and sorted by their workers)
            for table, rels in r["files"].items():
                out.files.setdefault(table, []).extend(rels)
            for table, rows in r["rows"].items():
                out.rows[table] = out.rows.get(table, 0) + rows
            out.file_rows.update(r["file_rows"])
        bg = cj.BackgroundWriter(out)
        try:
            em = _Emitter(bg, tr, sn.path.name, tmp.name)  # type: ignore[arg-type]
            for r in results:
                em.absorb(r)
            em.finish(comm_ops=comm_ops, write_steps=write_steps)
        finally:
            bg.close()
    except BaseException:
        _drop_pieces(out, results)
        raise
    finally:
        tmp.cleanup()
    if not sum(em.counts.values()) and not tr.process:
        raise BadTraceError(sn.path, "no trace events found (an empty event array?)")
    meta = _meta(em, tr, "duckdb")
    meta["pieces"] = len(ranges)
    return meta


def _drop_pieces(out: RankWriter, results: list[dict[str, Any]]) -> None:
    import contextlib

    for r in results:
        for table, rels in r.get("files", {}).items():
            for rel in rels:
                with contextlib.suppress(OSError):
                    (out.run_dir / rel).unlink()
                if rel in out.files.get(table, []):
                    out.files[table].remove(rel)


def _piece(
    path: str, start: int, end: int, run_dir: str, run_id: str, rank: int, tag: str, tr: Tracks,
    dests: list[str], tmp: str, i: int,
) -> dict[str, Any]:  # fmt: skip
    """Worker process: parse the events in bytes [start, end) of `path` into RankWriter parts tagged `tag`.
    Returns the rows/files written and the emitter's end-of-file state, or {"failed": why}."""
    import shutil

    from .._arrow_helpers import use_parse_memory_pool
    from ..rank_writer import RankWriter
    from ._json_pieces import RangeFeed

    use_parse_memory_pool()
    sn = cj.sniff(Path(path))
    writer = RankWriter(Path(run_dir), run_id, rank, tag=tag)
    ptmp = Path(tmp) / f"piece{i}"
    ptmp.mkdir()
    bg = cj.BackgroundWriter(writer)
    con = cj.duck_connection(1)  # one per piece, a cursor per segment
    feed = RangeFeed(sn, start, end, str(ptmp))
    wanted = set(dests)
    try:
        em = _Emitter(bg, tr, sn.path.name, str(ptmp))  # type: ignore[arg-type]
        for segment in iter(feed.segments.get, None):
            stream = cj.DuckStream(
                con.cursor(), Path(segment), _fast_sql(sn, Path(segment)), BATCH_ROWS, prefetch=PREFETCH
            )
            try:
                for b in stream:
                    em.batch(_typed(b, sn.path), wanted)
            finally:
                stream.close()
                feed.done(segment)
        feed.close()
        con.close()
        if feed.error is not None:
            raise feed.error
        state = em.piece_state()
        bg.close()
        writer.close()
    except Exception as e:  # noqa: BLE001 - the parent reads the file serially, which reports real faults
        feed.close()
        con.close()
        with contextlib.suppress(BaseException):
            bg.close()
        writer.abort()
        for rels in writer.files.values():
            for rel in rels:
                with contextlib.suppress(OSError):
                    (Path(run_dir) / rel).unlink()
        first = (str(e).strip().splitlines() or [""])[0][:200]
        shutil.rmtree(ptmp, ignore_errors=True)
        return {"failed": f"{type(e).__name__}: {first}"}
    return {"rows": writer.rows, "files": writer.files, "file_rows": writer.file_rows, **state}


_ASCEND_MARKERS = (
    b'"Ascend Hardware"',
    b"AscendCL@",
    b'"CANN"',
    b'"HCCL"',
    b'"Overlap Analysis"',
    b'"torch_to_npu"',
    b'"async_npu"',
)
_STRING_TS = re.compile(rb'"ts"\s*:\s*"\d+(\.\d+)?"')


def looks_like_trace_view(path: Path) -> bool:
    """Cheap sniff: a .json whose root is an array and that looks Ascend (name, string ts, track names)."""
    name = path.name.lower()
    if not (name.endswith(".json") or name.endswith(".json.gz")):
        return False
    head = read_head(path, 16384)
    if head.startswith(cj.UTF8_BOM):
        head = head[len(cj.UTF8_BOM) :]
    if head.lstrip()[:1] != b"[":
        return False
    if name == "trace_view.json" or re.fullmatch(r"msprof_.*\.json", name):
        return True
    return bool(_STRING_TS.search(head)) or any(m in head for m in _ASCEND_MARKERS)


class TraceViewParser:
    name = "trace_view"
    description = "torch_npu trace_view.json or msprof msprof_*.json (Chrome trace array) given on its own"

    def claim(self, path: Path) -> list[Unit] | None:
        if path.is_file() and looks_like_trace_view(path):
            return [Unit(self.name, str(path))]
        return None

    def parse(self, unit: Unit, out: RankWriter) -> dict[str, Any]:
        return parse_trace_view(Path(unit.path), out, kernels=True, comm_ops=True, write_steps=True)


PARSERS = [TraceViewParser()]
