"""A synthetic Nsight Systems SQLite export with known contents (the parsers.nsys tests' exact answers).

The tables and column names are those of a real `nsys export --type sqlite` (export schema 3.25, Nsight
Systems 2026.2.1, the shared h100_2gpu_1s.sqlite), reduced to the columns traceql reads plus the NOT NULL
ones; TARGET_INFO_GPU / GPU_METRICS / TARGET_INFO_GPU_METRICS follow the columns public nsys-analysis scripts
query (id, name, memoryBandwidth, cuDevice; typeId, metricId, metricName; timestamp, value). Times are on the
session clock: `session_clock_ns` is that clock at capture start and `utc_epoch_ns` the epoch then.

    from traceql.synth.nsys_writer import NsysExport, write_nsys_sqlite
    x = NsysExport()
    x.kernel(device=0, pid=111, start=1_000, dur=500, name="ampere_sgemm_128x64_nn", grid=(4, 2, 1))
    x.nvtx(pid=111, start=900, dur=2_000, text="ProfilerStep#3")
    x.gpu(device=0, name="NVIDIA H100 80GB HBM3", memory_bandwidth=3_352_320_000_000)
    x.dram(device=0, start=1_000, period=100_000, read_pct=[50, 25], write_pct=[10, 0])
    write_nsys_sqlite(x, "report.sqlite")
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VM = 1 << 56  # nsys globalPid/Tid carry the VM id in the top byte; the real export has vm 1 (281474976710656)
SESSION_CLOCK_NS = 35_255_823_190
UTC_EPOCH_NS = 1_779_630_014_975_716_426
DRAM_METRICS = {1: "DRAM Read Bandwidth [Throughput %]", 2: "DRAM Write Bandwidth [Throughput %]",
                3: "SMs Active [Throughput %]"}  # fmt: skip
METRIC_TYPE = 0x100  # typeId = METRIC_TYPE | gpu id (the low byte is the GPU, nsys docs)


def global_pid(pid: int) -> int:
    return VM | (pid << 24)


def global_tid(pid: int, tid: int) -> int:
    return global_pid(pid) | tid


@dataclass
class NsysExport:
    session_clock_ns: int = SESSION_CLOCK_NS
    utc_epoch_ns: int | None = UTC_EPOCH_NS
    kernels: list[tuple[Any, ...]] = field(default_factory=list)
    memcpys: list[tuple[Any, ...]] = field(default_factory=list)
    runtime: list[tuple[Any, ...]] = field(default_factory=list)
    ranges: list[tuple[Any, ...]] = field(default_factory=list)
    gpus: list[tuple[Any, ...]] = field(default_factory=list)
    metrics: list[tuple[int, int, int, int]] = field(default_factory=list)
    strings: dict[str, int] = field(default_factory=dict)

    def sid(self, s: str) -> int:
        return self.strings.setdefault(s, len(self.strings) + 1)

    def kernel(self, device: int, pid: int, start: int, dur: int, name: str, grid: tuple[int, int, int] = (1, 1, 1),
               stream: int = 7, correlation: int | None = None) -> None:  # fmt: skip
        """A kernel at session-clock offset `start` (ns after capture start)."""
        t0 = self.session_clock_ns + start
        self.kernels.append(
            (t0, t0 + dur, device, stream, correlation, global_pid(pid), self.sid(name), *grid)
        )

    def memcpy(self, device: int, pid: int, start: int, dur: int, nbytes: int, copy_kind: int = 1) -> None:
        """copy_kind: ENUM_CUDA_MEMCPY_OPER id (1 HtoD, 2 DtoH, 8 DtoD); src pinned (1), dst device (2)."""
        t0 = self.session_clock_ns + start
        self.memcpys.append((t0, t0 + dur, device, 7, None, global_pid(pid), nbytes, copy_kind, 1, 2))

    def api(self, pid: int, tid: int, start: int, dur: int, name: str, correlation: int) -> None:
        t0 = self.session_clock_ns + start
        self.runtime.append((t0, t0 + dur, 0, global_tid(pid, tid), correlation, self.sid(name), 0))

    def nvtx(self, pid: int, start: int, dur: int, text: str, tid: int = 1) -> None:
        t0 = self.session_clock_ns + start
        self.ranges.append((t0, t0 + dur, 59, text, global_tid(pid, tid), 0))

    def gpu(self, device: int, name: str, memory_bandwidth: int, gpu_id: int | None = None) -> None:
        self.gpus.append((device if gpu_id is None else gpu_id, name, memory_bandwidth, device))

    def dram(self, device: int, start: int, period: int, read_pct: list[int], write_pct: list[int]) -> None:
        """DRAM read/write throughput samples (integer percent, as nsys stores them) every `period` ns."""
        for i, (r, w) in enumerate(zip(read_pct, write_pct, strict=True)):
            ts = self.session_clock_ns + start + i * period
            self.metrics += [(ts, METRIC_TYPE | device, 1, r), (ts, METRIC_TYPE | device, 2, w),
                             (ts, METRIC_TYPE | device, 3, 100)]  # fmt: skip


_DDL = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT, systemClockNs INTEGER);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
  gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, shortName INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL,
  copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT,
  globalTid INTEGER, domainId INTEGER, textId INTEGER);
CREATE TABLE TARGET_INFO_GPU (id INTEGER NOT NULL, name TEXT, memoryBandwidth INTEGER, cuDevice INTEGER);
CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL, typeName TEXT NOT NULL,
  metricId INTEGER NOT NULL, metricName TEXT NOT NULL);
CREATE TABLE GPU_METRICS (timestamp INTEGER, typeId INTEGER NOT NULL, metricId INTEGER NOT NULL,
  value INTEGER NOT NULL);
"""


def write_nsys_sqlite(x: NsysExport, path: str | Path) -> Path:
    """Write `x` as an nsys SQLite export at `path` (overwritten)."""
    p = Path(path)
    p.unlink(missing_ok=True)
    con = sqlite3.connect(p)
    try:
        con.executescript(_DDL)
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in x.strings.items()])
        con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
                        [("EXPORT_SCHEMA_VERSION", "3.25.0"), ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems")])  # fmt: skip
        if x.utc_epoch_ns is not None:
            con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '', ?)",
                        (x.utc_epoch_ns, x.session_clock_ns))  # fmt: skip
        con.executemany("INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?, ?, ?)",
                        [(1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"), (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
                         (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device")])  # fmt: skip
        con.executemany("INSERT INTO ENUM_CUDA_MEM_KIND VALUES (?, ?, ?)",
                        [(1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"), (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device")])  # fmt: skip
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [(*k, k[6]) for k in x.kernels],
        )
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,?,?,?,?,?,?,?)", x.memcpys)
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?)", x.runtime)
        con.executemany("INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?,NULL)", x.ranges)
        con.executemany("INSERT INTO TARGET_INFO_GPU VALUES (?,?,?,?)", x.gpus)
        types = sorted({m[1] for m in x.metrics})
        con.executemany(
            "INSERT INTO TARGET_INFO_GPU_METRICS VALUES (?, ?, 'GH100', ?, ?)",
            [(t, t, mid, name) for t in types for mid, name in DRAM_METRICS.items()],
        )
        con.executemany("INSERT INTO GPU_METRICS VALUES (?,?,?,?)", x.metrics)
        con.commit()
    finally:
        con.close()
    return p
