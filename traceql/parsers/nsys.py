"""Nsight Systems SQLite export (`nsys export --type sqlite report.nsys-rep`) -> canonical tables.

Claims a `.sqlite` / `.db` file whose tables include CUPTI_ACTIVITY_KIND_KERNEL or NVTX_EVENTS together with
nsys's META_DATA_EXPORT (the export's own bookkeeping, which no other profiler writes). One unit per process
that ran kernels (a process is a rank: torch.distributed launches one per GPU), ranks numbered in order of
the lowest CUDA device each process used.

| nsys table                                  | canonical | notes |
|---------------------------------------------|-----------|-------|
| CUPTI_ACTIVITY_KIND_KERNEL                  | kernels   | task_type 'kernel'; name = demangledName (StringIds), op_type = kineto.kernel_class(name), is_comm for NCCL kernels; block_dim = gridX*gridY*gridZ; connection_id = correlationId; grid, block, registers, shared memory, shortName -> extra |
| CUPTI_ACTIVITY_KIND_MEMCPY                  | kernels   | task_type 'gpu_memcpy', name 'Memcpy DtoD (Device -> Device)' as Kineto names it; bytes, copyKind, srcKind, dstKind -> extra |
| CUPTI_ACTIVITY_KIND_MEMSET                  | kernels   | task_type 'gpu_memset', name 'Memset (Device)'; bytes, value -> extra |
| CUPTI_ACTIVITY_KIND_RUNTIME                 | host_ops  | cat 'cuda_runtime', name from StringIds, correlation_id = correlationId, pid/tid from globalTid |
| NVTX_EVENTS push/pop and start/end ranges   | host_ops  | cat 'nvtx', name = text (or its StringIds textId); domainId -> extra |
| NVTX ranges named `ProfilerStep#N` / `step N` | steps   | STEP_RE; also kept in host_ops |
| GPU_METRICS + TARGET_INFO_GPU_METRICS       | counters  | every metric of the rank's GPU: track 'GPU_METRICS', metric/unit split from `Name [unit]`, value as written; DRAM / GPU Memory Read/Write Bandwidth `[Throughput %]` also -> track 'HBM' read_bw / write_bw bytes/s = percent / 100 x TARGET_INFO_GPU.memoryBandwidth (nsys's own peak for the device, so utilisation vs that peak is the counter's percent): sampled, the period being the gap between samples |
| TARGET_INFO_GPU                             | run_meta  | nsys.gpu.<id>.<column>; meta["device"] = the rank's GPU name (peaks preset) |
| META_DATA_EXPORT, TARGET_INFO_SESSION_START_TIME | run_meta | export version, session start |

Time: nsys writes every timestamp on the target's session clock (ns); TARGET_INFO_SESSION_START_TIME gives
that clock's value at capture start (systemClockNs) and the UTC epoch then (utcEpochNs), so ts_ns = t -
systemClockNs + utcEpochNs, exact integers. Without that table the times are kept as written (and the
timestamps_not_epoch_ns check says so).

Not read: OS runtime (OSRT_API), CUDA graphs (CUDA_GRAPH_NODE_EVENTS), UVM page faults, CPU sampling, NIC /
InfiniBand metrics, cuDNN/cuBLAS API ranges, synchronization (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION), NVTX marks
(instant events) and NVTX payloads.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadTraceError
from ._sqlite import SqliteDb, looks_like_sqlite, q
from .base import Unit

if TYPE_CHECKING:  # pragma: no cover
    import sqlite3

    from ..rank_writer import RankWriter

WHAT = "an Nsight Systems SQLite export (nsys export --type sqlite) with CUPTI_ACTIVITY_KIND_KERNEL"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
CHUNK = 64 * 1024
PID_MASK = ~0xFFFFFF  # globalTid = (vm << 56) | (pid << 24) | tid: the low 24 bits are the thread
# nsys ENUM_NSYS_EVENT_TYPE ids of NVTX ranges (push/pop, start/end; the domain variants too)
NVTX_RANGE_TYPES = (59, 60, 70, 71)
STEP_RE = re.compile(r"^\s*(?:ProfilerStep#|step[\s_#:=-]*)(\d+)\s*$", re.IGNORECASE)
HBM_METRIC_RE = re.compile(r"^(?:DRAM|GPU Memory|VRAM) (Read|Write) Bandwidth \[Throughput %\]$")
_METRIC_UNIT = re.compile(r"^(.*?)\s*\[([^\]]*)\]$")


def looks_like_nsys(path: Path) -> bool:
    """An SQLite file with nsys's export bookkeeping and a CUDA or NVTX table (cheap: sqlite_master only)."""
    import sqlite3
    import urllib.parse

    if not path.is_file() or path.suffix.lower() not in (".sqlite", ".db") or not looks_like_sqlite(path):
        return False
    try:  # immutable: a sniff never creates a -shm/-wal file beside the user's export
        uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True)
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return "META_DATA_EXPORT" in names and bool({KERNEL, NVTX} & names)


class NsysParser:
    name = "nsys"
    description = "Nsight Systems SQLite export (nsys export --type sqlite)"

    def claim(self, path: Path) -> list[Unit] | None:
        if not looks_like_nsys(path):
            return None
        with SqliteDb(path, WHAT) as db:
            procs = _processes(db)
        if not procs:
            return [Unit(self.name, str(path), 0, (("pid", ""),))]
        return [Unit(self.name, str(path), i, (("pid", str(gp)),)) for i, (gp, _dev) in enumerate(procs)]

    def parse(self, unit: Unit, out: RankWriter) -> dict[str, Any]:
        with SqliteDb(Path(unit.path), WHAT) as db:
            return parse_nsys(db, dict(unit.options).get("pid", ""), out)


def _processes(db: SqliteDb) -> list[tuple[int, int]]:
    """(globalPid, lowest device) of each process that ran kernels, ordered by device then pid."""
    if not db.has(KERNEL, "globalPid", "deviceId"):
        return []
    rows = db.rows(f"SELECT globalPid, min(deviceId) FROM {KERNEL} WHERE globalPid IS NOT NULL GROUP BY 1")
    return sorted(((int(p), int(d)) for p, d in rows), key=lambda r: (r[1], r[0]))


class Clock:
    """Session clock -> Unix epoch ns (module docstring)."""

    def __init__(self, db: SqliteDb) -> None:
        self.offset = 0
        self.rule = "session clock as written (no TARGET_INFO_SESSION_START_TIME)"
        if db.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs", "systemClockNs"):
            r = db.rows("SELECT utcEpochNs, systemClockNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
            if r and r[0][0] is not None and r[0][1] is not None:
                self.offset = int(r[0][0]) - int(r[0][1])
                self.rule = f"session clock + (utcEpochNs - systemClockNs) = {self.offset}"

    def sql(self, col: str) -> str:
        return f"({col} + {self.offset})"


def parse_nsys(db: SqliteDb, pid: str, out: RankWriter) -> dict[str, Any]:
    if KERNEL not in db.schema and NVTX not in db.schema:
        raise BadTraceError(db.path, f"neither {KERNEL} nor {NVTX}; expected {WHAT}")
    clock = Clock(db)
    gpid = int(pid) if pid else None
    devices = _devices_of(db, gpid)
    warnings: list[str] = []
    rows = {
        "kernels": _write_kernels(db, clock, gpid, out)
        + _write_copies(db, clock, gpid, out, MEMCPY)
        + _write_copies(db, clock, gpid, out, MEMSET),
        "host_ops": _write_runtime(db, clock, gpid, out),
    }
    nvtx, steps = _write_nvtx(db, clock, gpid, out)
    rows["host_ops"] += nvtx
    rows["steps"] = steps
    gpus = _gpu_info(db)
    if any(
        g.get("cuDevice") is not None and g.get("id") is not None and g["cuDevice"] != g["id"]
        for g in gpus.values()
    ):
        # kernels' deviceId is matched to cuDevice; which id space CUPTI's deviceId uses under a remapping
        # (CUDA_VISIBLE_DEVICES) is not documented in the sources read, so say it rather than trust it silently
        warnings.append(f"{db.path.name}: TARGET_INFO_GPU id and cuDevice differ: GPU names and GPU_METRICS are "
                        "matched to kernels by cuDevice, a mapping not verified on a real export")  # fmt: skip
    rows["counters"] = _write_gpu_metrics(db, clock, devices, gpus, out, warnings)
    meta_rows = _run_meta(db, gpus, clock)
    out.write("run_meta", {"key": [k for k, _ in meta_rows], "value": [v for _, v in meta_rows]})
    rows["run_meta"] = len(meta_rows)
    if rows["kernels"] == 0 and rows["host_ops"] == 0:
        raise BadTraceError(db.path, "no kernels, CUDA API calls or NVTX ranges for this process; " + WHAT)
    meta: dict[str, Any] = {"rows": rows, "warnings": warnings, "time_unit": clock.rule, "export": "nsys"}
    names = [gpus[d]["name"] for d in devices if d in gpus and gpus[d].get("name")]
    if names:
        meta["device"] = str(names[0])
    elif devices:
        warnings.append(
            f"{db.path.name}: no TARGET_INFO_GPU row for CUDA device(s) {devices}: GPU name unknown, "
            "pass --device for the peaks"
        )
    return meta


def _devices_of(db: SqliteDb, gpid: int | None) -> list[int]:
    if not db.has(KERNEL, "deviceId"):
        return []
    where = "" if gpid is None else f"WHERE globalPid = {gpid}"
    return [int(r[0]) for r in db.rows(f"SELECT DISTINCT deviceId FROM {KERNEL} {where} ORDER BY 1")]


def _pid_filter(db: SqliteDb, table: str, gpid: int | None, col: str = "globalPid") -> str:
    if gpid is None:
        return ""
    if col == "globalTid":
        return f" AND (t.globalTid & {PID_MASK}) = {gpid}"
    return f" AND t.{q(col)} = {gpid}" if db.has(table, col) else ""


def _string(db: SqliteDb, col: str) -> str:
    """The StringIds value of an id column (nsys's string table; 'StringIds' since export 2.x)."""
    return f"(SELECT s.value FROM StringIds s WHERE s.id = {col})" if "StringIds" in db.schema else "NULL"


def _enum(db: SqliteDb, table: str, col: str, field: str = "name") -> str:
    return f"(SELECT e.{field} FROM {table} e WHERE e.id = {col})" if db.has(table, "id", field) else "NULL"


def _chunks(db: SqliteDb, sql: str) -> Iterator[list[tuple[Any, ...]]]:
    with db.errors():
        cur: sqlite3.Cursor = db.conn.execute(sql)
        while True:
            batch = cur.fetchmany(CHUNK)
            if not batch:
                return
            yield batch


def _col(db: SqliteDb, table: str, col: str, alias: str = "t") -> str:
    return f"{alias}.{q(col)}" if db.has(table, col) else "NULL"


_K_EXTRA = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread", "staticSharedMemory",
            "dynamicSharedMemory", "localMemoryTotal", "contextId", "graphId", "graphNodeId")  # fmt: skip


def _write_kernels(db: SqliteDb, clock: Clock, gpid: int | None, out: RankWriter) -> int:
    from .kineto import kernel_class

    if not db.has(KERNEL, "start", "end"):
        return 0
    extra_cols = [c for c in _K_EXTRA if db.has(KERNEL, c)]
    name = _string(db, "t.demangledName") if db.has(KERNEL, "demangledName") else "NULL"
    short = _string(db, "t.shortName") if db.has(KERNEL, "shortName") else "NULL"
    sql = (
        f"SELECT {_col(db, KERNEL, 'deviceId')}, {name}, {short}, {_col(db, KERNEL, 'streamId')}, "
        f'{_col(db, KERNEL, "correlationId")}, {clock.sql("t.start")}, t."end" - t.start'
        + "".join(f", t.{q(c)}" for c in extra_cols)
        + f" FROM {KERNEL} t WHERE 1=1{_pid_filter(db, KERNEL, gpid)} ORDER BY t.start"
    )
    n = 0
    for batch in _chunks(db, sql):
        cols: dict[str, list[Any]] = {k: [] for k in _KCOLS}
        for r in batch:
            nm = r[1] if r[1] is not None else r[2]
            cls = kernel_class(nm, "kernel")
            grid = [g for g in r[7:10] if g is not None] if "gridX" in extra_cols else []
            extra = [(c, str(v)) for c, v in zip(extra_cols, r[7:], strict=True) if v is not None]
            if r[2] is not None:
                extra.append(("shortName", str(r[2])))
            _add(cols, r[0], nm, cls, "kernel", cls == "nccl", r[3], r[4], r[5], r[6], _prod(grid), extra)
        out.write("kernels", cols, apart_by="stream_id")
        n += len(batch)
    return n


_KCOLS = ("device_id", "name", "op_type", "task_type", "is_comm", "stream_id", "connection_id", "ts_ns", "dur_ns",
          "block_dim", "extra")  # fmt: skip


def _add(cols: dict[str, list[Any]], *values: Any) -> None:
    for k, v in zip(_KCOLS, values, strict=True):
        cols[k].append(v)


def _prod(xs: list[int]) -> int | None:
    if not xs:
        return None
    p = 1
    for x in xs:
        p *= int(x)
    return p


_COPY_KIND = re.compile(r"CUDA_MEMCPY_KIND_(?:UVM_)?([A-Z]+)")


def _write_copies(db: SqliteDb, clock: Clock, gpid: int | None, out: RankWriter, table: str) -> int:
    """memcpy / memset rows, named as Kineto names them ('Memcpy HtoD (Pinned -> Device)', 'Memset (Device)')."""
    from .kineto import kernel_class

    if not db.has(table, "start", "end"):
        return 0
    memcpy = table == MEMCPY
    kinds = ("copyKind", "srcKind", "dstKind") if memcpy else ("memKind",)
    enum_cols = []
    for k in kinds:
        if db.has(table, k):
            enum_cols.append(_enum(db, "ENUM_CUDA_MEMCPY_OPER" if k == "copyKind" else "ENUM_CUDA_MEM_KIND",
                                   f"t.{q(k)}", "name" if k == "copyKind" else "label"))  # fmt: skip
        else:
            enum_cols.append("NULL")
    sql = (
        f"SELECT {_col(db, table, 'deviceId')}, {_col(db, table, 'streamId')}, {_col(db, table, 'correlationId')}, "
        f"{clock.sql('t.start')}, t.\"end\" - t.start, {_col(db, table, 'bytes')}, "
        f"{_col(db, table, 'value') if not memcpy else 'NULL'}, " + ", ".join(enum_cols)
        + f" FROM {table} t WHERE 1=1{_pid_filter(db, table, gpid)} ORDER BY t.start"
    )  # fmt: skip
    n = 0
    for batch in _chunks(db, sql):
        cols: dict[str, list[Any]] = {k: [] for k in _KCOLS}
        for r in batch:
            extra = [("bytes", str(r[5]))] if r[5] is not None else []
            if memcpy:
                m = _COPY_KIND.fullmatch(str(r[7] or ""))
                direction = m.group(1).replace("TO", "to") if m else "?"
                nm = f"Memcpy {direction} ({r[8] or '?'} -> {r[9] or '?'})"
                extra += [(k, str(v)) for k, v in zip(kinds, r[7:10], strict=True) if v is not None]
            else:
                nm = f"Memset ({r[7] or '?'})"
                extra += [("value", str(r[6]))] if r[6] is not None else []
            task = "gpu_memcpy" if memcpy else "gpu_memset"
            _add(cols, r[0], nm, kernel_class(nm, task), task, False, r[1], r[2], r[3], r[4], None, extra)
        out.write("kernels", cols, apart_by="stream_id")
        n += len(batch)
    return n


_HCOLS = ("name", "cat", "pid", "tid", "ts_ns", "dur_ns", "correlation_id", "extra")


def _host_batch(batch: list[tuple[Any, ...]], cat: str) -> dict[str, list[Any]]:
    """host_ops columns of rows (name, globalTid, ts, dur, correlation, extra...)."""
    cols: dict[str, list[Any]] = {k: [] for k in _HCOLS}
    for r in batch:
        gtid = r[1]
        cols["name"].append(r[0])
        cols["cat"].append(cat)
        cols["pid"].append(None if gtid is None else (int(gtid) >> 24) & 0xFFFFFFFF)
        cols["tid"].append(None if gtid is None else int(gtid) & 0xFFFFFF)
        cols["ts_ns"].append(r[2])
        cols["dur_ns"].append(r[3])
        cols["correlation_id"].append(r[4])
        cols["extra"].append([(k, str(v)) for k, v in r[5] if v is not None] if len(r) > 5 else [])
    return cols


def _write_runtime(db: SqliteDb, clock: Clock, gpid: int | None, out: RankWriter) -> int:
    if not db.has(RUNTIME, "start", "end", "nameId"):
        return 0
    sql = (
        f"SELECT {_string(db, 't.nameId')}, {_col(db, RUNTIME, 'globalTid')}, {clock.sql('t.start')}, "
        f't."end" - t.start, {_col(db, RUNTIME, "correlationId")}, {_col(db, RUNTIME, "returnValue")} '
        f"FROM {RUNTIME} t WHERE 1=1{_pid_filter(db, RUNTIME, gpid, 'globalTid')} ORDER BY t.start"
    )
    n = 0
    for batch in _chunks(db, sql):
        rows = [(*r[:5], [("returnValue", r[5])]) for r in batch]
        out.write("host_ops", _host_batch(rows, "cuda_runtime"))
        n += len(batch)
    return n


def _write_nvtx(db: SqliteDb, clock: Clock, gpid: int | None, out: RankWriter) -> tuple[int, int]:
    """NVTX ranges -> host_ops (cat 'nvtx'); those named like steps (STEP_RE) -> steps too."""
    if not db.has(NVTX, "start", "end", "eventType"):
        return 0, 0
    text = _col(db, NVTX, "text")
    if db.has(NVTX, "textId"):
        text = f"coalesce({text}, {_string(db, 't.textId')})"
    types = ", ".join(str(t) for t in NVTX_RANGE_TYPES)
    sql = (
        f'SELECT {text}, {_col(db, NVTX, "globalTid")}, {clock.sql("t.start")}, t."end" - t.start, NULL, '
        f'{_col(db, NVTX, "domainId")} FROM {NVTX} t WHERE t.eventType IN ({types}) AND t."end" IS NOT NULL'
        f"{_pid_filter(db, NVTX, gpid, 'globalTid')} ORDER BY t.start"
    )
    n = 0
    steps: dict[int, tuple[int, int]] = {}
    for batch in _chunks(db, sql):
        rows = [(*r[:5], [("domainId", r[5])]) for r in batch]
        out.write("host_ops", _host_batch(rows, "nvtx"))
        n += len(batch)
        for r in batch:
            m = STEP_RE.match(r[0] or "")
            if m and r[2] is not None and r[3] is not None:
                s, t0, t1 = int(m.group(1)), int(r[2]), int(r[2]) + int(r[3])
                if s in steps:  # the same step on two threads: their union
                    t0, t1 = min(t0, steps[s][0]), max(t1, steps[s][1])
                steps[s] = (t0, t1)
    if steps:
        items = sorted(steps.items())
        out.write("steps", {"step": [s for s, _ in items], "ts_ns": [w[0] for _, w in items],
                            "dur_ns": [w[1] - w[0] for _, w in items],
                            "source": [f"{db.path.name}:NVTX_EVENTS"] * len(items)})  # fmt: skip
    return n, len(steps)


def _gpu_info(db: SqliteDb) -> dict[int, dict[str, Any]]:
    """TARGET_INFO_GPU rows by CUDA device id (cuDevice when the export has it, else id)."""
    if "TARGET_INFO_GPU" not in db.schema:
        return {}
    cols = db.cols("TARGET_INFO_GPU")
    key = "cuDevice" if "cuDevice" in cols else "id"
    out: dict[int, dict[str, Any]] = {}
    for r in db.rows(f"SELECT {', '.join(q(c) for c in cols)} FROM TARGET_INFO_GPU"):
        row = dict(zip(cols, r, strict=True))
        if row.get(key) is not None:
            out.setdefault(int(row[key]), row)
    return out


def _write_gpu_metrics(
    db: SqliteDb,
    clock: Clock,
    devices: list[int],
    gpus: dict[int, dict[str, Any]],
    out: RankWriter,
    warnings: list[str],
) -> int:
    """GPU_METRICS samples of this rank's GPUs -> counters (module docstring)."""
    if not db.has("GPU_METRICS", "timestamp", "typeId", "metricId", "value"):
        return 0
    if not db.has("TARGET_INFO_GPU_METRICS", "typeId", "metricId", "metricName"):
        warnings.append(
            f"{db.path.name}: GPU_METRICS without TARGET_INFO_GPU_METRICS: metric names unknown, not read"
        )
        return 0
    # GPU_METRICS.typeId's low byte is the GPU id of TARGET_INFO_GPU (nsys docs); cuDevice maps it to CUDA's
    by_gpu_id = {int(g["id"]): dev for dev, g in gpus.items() if g.get("id") is not None}
    wanted = {gid for gid, dev in by_gpu_id.items() if dev in devices} if by_gpu_id else set(devices)
    if not wanted:
        return 0
    ids = ", ".join(str(g) for g in sorted(wanted))
    sql = (
        f"SELECT (m.typeId & 255), n.metricName, {clock.sql('m.timestamp')}, m.value FROM GPU_METRICS m "
        "JOIN TARGET_INFO_GPU_METRICS n ON n.typeId = m.typeId AND n.metricId = m.metricId "
        f"WHERE (m.typeId & 255) IN ({ids}) AND m.timestamp IS NOT NULL ORDER BY m.timestamp"
    )
    n = 0
    no_peak: set[int] = set()
    for batch in _chunks(db, sql):
        cols: dict[str, list[Any]] = {
            k: [] for k in ("track", "channel", "metric", "unit", "name", "ts_ns", "value")
        }
        for gid, name, ts, value in batch:
            um = _METRIC_UNIT.match(name or "")
            _counter(cols, "GPU_METRICS", str(gid), um.group(1) if um else name, um.group(2) if um else "raw",
                     name, ts, value)  # fmt: skip
            hm = HBM_METRIC_RE.match(name or "")
            if hm and value is not None:
                peak = gpus.get(by_gpu_id.get(gid, gid), {}).get("memoryBandwidth")
                if not peak:
                    no_peak.add(gid)
                    continue
                # percent of the device's peak DRAM bandwidth (nsys's own memoryBandwidth, bytes/s)
                bw = float(value) / 100.0 * float(peak)
                _counter(cols, "HBM", str(gid), f"{hm.group(1).lower()}_bw", "bytes/s", name, ts, bw)
        out.write("counters", cols, apart_by="track")
        n += len(cols["ts_ns"])
    if no_peak:
        warnings.append(
            f"{db.path.name}: GPU {sorted(no_peak)}: DRAM throughput samples but no TARGET_INFO_GPU.memoryBandwidth:"
            " kept as percent (track GPU_METRICS), not as HBM bytes/s"
        )
    return n


def _counter(cols: dict[str, list[Any]], *values: Any) -> None:
    for k, v in zip(("track", "channel", "metric", "unit", "name", "ts_ns", "value"), values, strict=True):
        cols[k].append(v)


_META_SKIP = {"EXPORT_HOST", "EXPORT_USER", "EXPORT_PRODUCT_NAME"}


def _run_meta(db: SqliteDb, gpus: dict[int, dict[str, Any]], clock: Clock) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = [("nsys.time_rule", clock.rule)]
    if db.has("META_DATA_EXPORT", "name", "value"):
        for k, v in db.rows("SELECT name, value FROM META_DATA_EXPORT"):
            # EXPORT_PARAM_* are paths on the exporting host; EXPORT_PRODUCT_NAME ('NVIDIA Nsight Systems') would
            # read as a device name to queries.detected_device_names
            if k and not str(k).startswith("EXPORT_PARAM_") and k not in _META_SKIP:
                rows.append((f"nsys.export.{k}", "" if v is None else str(v)))
    for dev, g in sorted(gpus.items()):
        rows.extend((f"nsys.gpu.{dev}.{k}", str(v)) for k, v in g.items() if v is not None)
    return rows


PARSERS = [NsysParser()]
