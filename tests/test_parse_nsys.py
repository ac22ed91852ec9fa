"""Nsight Systems SQLite exports (parsers.nsys).

Where expected numbers come from (never from traceql's output):
- "sqlite3:" a plain query with Python's sqlite3 over the shared real export, inside the test;
- "hand:" the synthetic export's values worked out in the comment (traceql.synth.nsys_writer writes exactly
  what the test tells it).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SHARED, real
from traceql.synth.nsys_writer import (
    SESSION_CLOCK_NS,
    UTC_EPOCH_NS,
    NsysExport,
    global_pid,
    write_nsys_sqlite,
)

NSYS = SHARED / "GindaChen__nsys-ai/tests/fixtures/h100_2gpu_1s.sqlite"


def _ingest(path: Path, store: Path, name: str = "r") -> dict[str, Any]:
    from traceql.ingest import ingest

    return ingest(path, store, name=name, workers=1)


def _q(store: Path, sql: str) -> list[tuple[Any, ...]]:
    from traceql.engine import connect
    from traceql.store import Store

    return connect(Store(store)).execute(sql).fetchall()


def _sq(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


# ---- the shared real export --------------------------------------------------------------------------
def test_real_export_kernels_time_and_nvtx_equal_sqlite(store: Path) -> None:
    db = real(NSYS)
    _ingest(db, store)
    # sqlite3: per process (= rank, ordered by its device), kernel count and summed end - start
    want = _sq(db, "SELECT globalPid, min(deviceId), count(*), sum(\"end\" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                   "GROUP BY 1 ORDER BY 2, 1")  # fmt: skip
    got = _q(
        store,
        "SELECT rank, count(*), sum(dur_ns) FROM kernels WHERE task_type = 'kernel' GROUP BY 1 ORDER BY 1",
    )
    assert [(r, n, t) for r, n, t in got] == [(i, w[2], w[3]) for i, w in enumerate(want)]
    assert sum(w[2] for w in want) == 3442  # the count
    # sqlite3: NVTX push/pop ranges (eventType 59) with an end, and memcpy / memset / runtime counts
    nvtx = _sq(db, 'SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59 AND "end" IS NOT NULL')[0][0]
    assert nvtx == 16782
    assert _q(store, "SELECT count(*) FROM host_ops WHERE cat = 'nvtx'")[0][0] == nvtx
    for table, task in (
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "gpu_memcpy"),
        ("CUPTI_ACTIVITY_KIND_MEMSET", "gpu_memset"),
    ):
        n, t = _sq(db, f'SELECT count(*), sum("end" - start) FROM {table}')[0]
        assert _q(store, f"SELECT count(*), sum(dur_ns) FROM kernels WHERE task_type = '{task}'")[0] == (n, t)
    n_api = _sq(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0]
    assert _q(store, "SELECT count(*) FROM host_ops WHERE cat = 'cuda_runtime'")[0][0] == n_api


def test_real_export_times_are_epoch_ns(store: Path) -> None:
    db = real(NSYS)
    _ingest(db, store)
    # sqlite3: first kernel start on the session clock, moved to the epoch by the session start row
    first, utc, clock = _sq(db, "SELECT (SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL), utcEpochNs, systemClockNs "
                                "FROM TARGET_INFO_SESSION_START_TIME")[0]  # fmt: skip
    assert _q(store, "SELECT min(ts_ns) FROM kernels WHERE task_type = 'kernel'")[0][0] == first - clock + utc
    # sqlite3: copies per direction (ENUM_CUDA_MEMCPY_OPER 1 HtoD, 2 DtoH, 8 DtoD) -> the name's direction word
    want = dict(_sq(db, "SELECT copyKind, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1"))
    got = dict(
        _q(
            store,
            "SELECT split_part(name, ' ', 2), count(*) FROM kernels WHERE task_type = 'gpu_memcpy' GROUP BY 1",
        )
    )
    assert got == {"HtoD": want.get(1), "DtoH": want.get(2), "DtoD": want.get(8)}


# ---- a synthetic export with known answers -----------------------------------------------------------
def _synthetic(tmp_path: Path) -> Path:
    x = NsysExport()
    # two processes (ranks), one GPU each; pid 200 on device 1 is rank 1
    x.kernel(
        device=0,
        pid=100,
        start=1_000_000,
        dur=400_000,
        name="ampere_sgemm_128x64_nn",
        grid=(4, 2, 3),
        correlation=11,
    )
    x.kernel(device=0, pid=100, start=2_000_000, dur=100_000, name="ncclDevKernel_AllReduce_Sum_f32_RING_LL")
    x.kernel(device=1, pid=200, start=1_500_000, dur=700_000, name="vectorized_elementwise_kernel")
    x.memcpy(device=0, pid=100, start=500_000, dur=50_000, nbytes=4096, copy_kind=1)
    x.api(pid=100, tid=7, start=900_000, dur=20_000, name="cudaLaunchKernel_v7000", correlation=11)
    x.nvtx(pid=100, start=800_000, dur=3_000_000, text="ProfilerStep#3")
    x.nvtx(pid=100, start=850_000, dur=100_000, text="aten::mm")
    x.nvtx(pid=200, start=800_000, dur=2_000_000, text="step 3")
    x.gpu(device=0, name="NVIDIA H100 80GB HBM3", memory_bandwidth=3_352_320_000_000)
    x.gpu(device=1, name="NVIDIA H100 80GB HBM3", memory_bandwidth=3_352_320_000_000)
    x.dram(device=0, start=1_000_000, period=100_000, read_pct=[50, 25, 0], write_pct=[10, 0, 5])
    return write_nsys_sqlite(x, tmp_path / "report.sqlite")


def test_synthetic_export_maps_every_table(tmp_path: Path, store: Path) -> None:
    _ingest(_synthetic(tmp_path), store)
    off = UTC_EPOCH_NS  # hand: a time `start` after the session start is UTC_EPOCH_NS + start
    rows = _q(store, "SELECT rank, name, op_type, task_type, is_comm, block_dim, connection_id, ts_ns, dur_ns "
                     "FROM kernels ORDER BY rank, ts_ns")  # fmt: skip
    assert rows == [
        (
            0,
            "Memcpy HtoD (Pinned -> Device)",
            "memcpy",
            "gpu_memcpy",
            False,
            None,
            None,
            off + 500_000,
            50_000,
        ),
        (0, "ampere_sgemm_128x64_nn", "gemm", "kernel", False, 24, 11, off + 1_000_000, 400_000),  # 4*2*3
        (
            0,
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "nccl",
            "kernel",
            True,
            1,
            None,
            off + 2_000_000,
            100_000,
        ),
        (
            1,
            "vectorized_elementwise_kernel",
            "elementwise",
            "kernel",
            False,
            1,
            None,
            off + 1_500_000,
            700_000,
        ),
    ]
    assert _q(store, "SELECT extra['bytes'] FROM kernels WHERE task_type = 'gpu_memcpy'") == [("4096",)]
    # hand: globalTid = 1<<56 | pid<<24 | tid -> pid 100, tid 7
    assert _q(
        store, "SELECT rank, name, cat, pid, tid, correlation_id FROM host_ops WHERE cat = 'cuda_runtime'"
    ) == [(0, "cudaLaunchKernel_v7000", "cuda_runtime", 100, 7, 11)]
    assert _q(store, "SELECT rank, step, ts_ns, dur_ns FROM steps ORDER BY rank") == [
        (0, 3, off + 800_000, 3_000_000),
        (1, 3, off + 800_000, 2_000_000),
    ]
    assert _q(store, "SELECT count(*) FROM host_ops WHERE cat = 'nvtx'")[0][0] == 3
    assert _q(store, "SELECT device FROM runs") == [("NVIDIA H100 80GB HBM3",)]
    assert global_pid(100) == (1 << 56) | (100 << 24)


def test_synthetic_gpu_metrics_are_sampled_hbm_bandwidth(tmp_path: Path, store: Path) -> None:
    _ingest(_synthetic(tmp_path), store)
    off = UTC_EPOCH_NS
    # hand: read 50% / 25% / 0% and write 10% / 0% / 5% of 3,352,320,000,000 B/s, every 100 us from +1 ms
    got = _q(
        store,
        "SELECT metric, ts_ns, value FROM counters WHERE track = 'HBM' AND rank = 0 ORDER BY metric, ts_ns",
    )
    peak = 3_352_320_000_000
    assert got == [
        ("read_bw", off + 1_000_000, peak * 0.5), ("read_bw", off + 1_100_000, peak * 0.25),
        ("read_bw", off + 1_200_000, 0.0),
        ("write_bw", off + 1_000_000, peak * 0.1), ("write_bw", off + 1_100_000, 0.0),
        ("write_bw", off + 1_200_000, peak * 0.05),
    ]  # fmt: skip
    assert _q(store, "SELECT DISTINCT unit FROM counters WHERE track = 'HBM'") == [("bytes/s",)]
    # every metric kept as written, percent unit split from the name
    assert _q(store, "SELECT count(*), min(unit) FROM counters WHERE track = 'GPU_METRICS' AND rank = 0")[
        0
    ] == (9, "Throughput %")
    assert _q(store, "SELECT count(*) FROM counters WHERE rank = 1") == [(0,)]  # rank 1's GPU had no samples


def test_synthetic_hbm_utilization_graded_sampled_with_period(tmp_path: Path, store: Path, cli: Any) -> None:
    _ingest(_synthetic(tmp_path), store)
    r = cli("query", "hbm_utilization", "--store", str(store), "--rank", "0", "--format", "json")
    assert r.code == 0, r
    rows = json.loads(r.out)
    assert rows and {row["evidence"] for row in rows} == {"sampled"}
    assert {row["sample_period_ns"] for row in rows} == {100_000}  # hand: the samples' spacing


def test_no_session_start_keeps_the_session_clock_and_says_so(tmp_path: Path, store: Path) -> None:
    x = NsysExport(utc_epoch_ns=None)
    x.kernel(device=0, pid=1, start=10, dur=5, name="k")
    info = _ingest(write_nsys_sqlite(x, tmp_path / "a.sqlite"), store)
    assert _q(store, "SELECT ts_ns FROM kernels") == [(SESSION_CLOCK_NS + 10,)]
    assert "session clock as written" in json.dumps(info, default=str)


def test_not_nsys_sqlite_is_not_claimed(tmp_path: Path) -> None:
    from traceql.parsers.nsys import looks_like_nsys

    p = tmp_path / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER)")
    con.close()
    assert not looks_like_nsys(p)  # no META_DATA_EXPORT: not an nsys export


@pytest.mark.parametrize("bad", [b"", b"SQLite format 3\x00" + b"\x00" * 10])
def test_damaged_export_one_line_error(tmp_path: Path, cli: Any, bad: bytes) -> None:
    p = tmp_path / "report.sqlite"
    p.write_bytes(bad)
    r = cli("ingest", str(p), "--store", str(tmp_path / "s"))
    assert r.code == 1 and "report.sqlite" in r.err and "Traceback" not in r.err


def test_real_export_findings_give_gpu_advice(store: Path, cli: Any) -> None:
    _ingest(real(NSYS), store, "nsys")
    # JSON: the table view shows the short headline, and this export (no step markers) is a "cannot tell" whose
    # capture advice is in the full verdict and the findings
    r = cli("findings", "--store", str(store), "--run", "nsys", "--device", "h100-sxm", "--format", "json")
    assert r.code == 0, r
    assert "Nsight Compute" in r.out and "torch_npu" not in r.out  # the GPU capture advice, not Ascend's
