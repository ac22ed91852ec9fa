"""Kineto / torch.profiler traces: mapping checked against the HTA sample traces and small synthetic ones.

Expected values come from an independent `json.load` of the same gzip file in the test, or are written by
hand for the synthetic traces.
"""

from __future__ import annotations

import gzip
import importlib
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import HTA, real

import traceql
from traceql.errors import BadTraceError
from traceql.parsers import detect
from traceql.parsers.kineto import kernel_class, parse_kineto
from traceql.rank_writer import RankWriter

ingest = importlib.import_module("traceql.ingest").ingest  # see test_parse_trace_view.py

ALEXNET = HTA / "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
CUPTI = HTA / "cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"
RANK0 = HTA / "trace_filter/sampled_rank-0.json.gz"
RANK1 = HTA / "trace_filter/sampled_rank-1.json.gz"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_profiler_range"}


def _load(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _one(con: Any, sql: str) -> Any:
    rows = con.execute(sql).fetchall()
    assert len(rows) == 1, rows
    return rows[0][0] if len(rows[0]) == 1 else rows[0]


@pytest.mark.parametrize("path", [ALEXNET, CUPTI, RANK0, RANK1], ids=["alexnet", "cupti", "rank0", "rank1"])
def test_hta_traces_row_counts(path: Path, tmp_path: Path) -> None:
    path = real(path)
    evs = _load(path)["traceEvents"]
    store = tmp_path / "s"
    ingest(path, store=store, name="k")
    con = traceql.connect(store)
    x = [e for e in evs if e.get("ph") == "X"]
    dev = [e for e in x if e.get("cat") in DEVICE_CATS]
    host = [e for e in x if e.get("cat") not in DEVICE_CATS and e.get("cat") != "Trace"]
    assert _one(con, "SELECT count(*) FROM kernels") == len(dev)
    assert _one(con, "SELECT count(*) FROM host_ops") == len(host)
    assert dict(con.execute("SELECT task_type, count(*) FROM kernels GROUP BY 1").fetchall()) == dict(
        Counter(e["cat"] for e in dev)
    )
    f_keys = Counter((e["cat"], str(e["id"])) for e in evs if e.get("ph") == "f")
    s_keys = {(e["cat"], str(e["id"])) for e in evs if e.get("ph") == "s"}
    assert _one(con, "SELECT count(*) FROM flows") == sum(f_keys.values()) + len(s_keys - set(f_keys))
    steps = sorted(
        (int(e["name"].split("#")[1]), e["ts"] * 1000, e["dur"] * 1000)
        for e in x
        if e["name"].startswith("ProfilerStep#")
    )
    assert con.execute("SELECT step, ts_ns, dur_ns FROM steps ORDER BY step").fetchall() == steps


def test_kernel_columns_from_args(tmp_path: Path) -> None:
    path = real(RANK0)
    evs = _load(path)["traceEvents"]
    store = tmp_path / "s"
    ingest(path, store=store)
    con = traceql.connect(store)
    k = next(e for e in evs if e.get("cat") == "kernel")
    a = k["args"]
    row = _one(
        con,
        f"SELECT device_id, stream_id, connection_id, block_dim, task_type, ts_ns, dur_ns, extra['registers per thread'], "
        f"extra['grid'] FROM kernels WHERE connection_id = {a['correlation']} AND task_type = 'kernel'",
    )
    assert row == (a["device"], a["stream"], a["correlation"], math.prod(a["grid"]), "kernel",
                   k["ts"] * 1000, int(k["dur"] * 1000), str(a["registers per thread"]), "[2400,1,1]")  # fmt: skip
    # NCCL kernels (10 ncclKernel_SendRecv in this trace, counted with json.load) are communication
    nccl = sum(1 for e in evs if e.get("cat") == "kernel" and "nccl" in e["name"].lower())
    assert nccl == 10
    assert _one(con, "SELECT count(*) FROM kernels WHERE is_comm") == nccl
    assert _one(con, "SELECT DISTINCT op_type FROM kernels WHERE is_comm") == "nccl"
    # host op: correlation from args.correlation (cuda_runtime) or External id (cpu_op); dims as JSON text
    op = next(e for e in evs if e.get("cat") == "user_annotation" and "Input Dims" in e.get("args", {}))
    row = _one(
        con,
        f"SELECT correlation_id, input_shapes, input_dtypes FROM host_ops WHERE name = '{op['name']}' AND ts_ns = {op['ts'] * 1000}",
    )
    assert row == (op["args"]["External id"], json.dumps(op["args"]["Input Dims"], separators=(",", ":")),
                   json.dumps(op["args"]["Input type"], separators=(",", ":")))  # fmt: skip


def test_folder_of_ranks_device_and_run_meta(tmp_path: Path) -> None:
    folder = real(RANK0).parent
    store = tmp_path / "s"
    info = ingest(folder, store=store, name="tf")
    con = traceql.connect(store)
    assert info["ranks"] == [0, 1]  # distributedInfo.rank of each file
    assert con.execute("SELECT DISTINCT rank FROM kernels ORDER BY 1").fetchall() == [(0,), (1,)]
    assert (
        _one(con, "SELECT value FROM run_meta WHERE rank = 1 AND key = 'distributedInfo.world_size'") == "128"
    )
    # alexnet has deviceProperties: the name of the GPU its kernels ran on (device 0)
    store2 = tmp_path / "s2"
    info = ingest(real(ALEXNET), store=store2)
    assert info["device"] == "NVIDIA A100-PG509-200"
    con2 = traceql.connect(store2)
    assert (
        _one(con2, "SELECT value FROM run_meta WHERE key = 'deviceProperties.0.name'")
        == "NVIDIA A100-PG509-200"
    )


def test_cupti_profiler_ranges_become_per_kernel_metrics(tmp_path: Path) -> None:
    path = real(CUPTI)
    ranges = [e for e in _load(path)["traceEvents"] if e.get("cat") == "cuda_profiler_range"]
    assert len(ranges) == 77
    w = RankWriter(tmp_path, "r", 0)
    meta = parse_kineto(path, w)
    w.close()
    assert meta["pmu"].startswith("77 cuda_profiler_range") and meta["device"] == "NVIDIA A100-PG509-200"
    assert meta["rank"] == 0  # distributedInfo is written after traceEvents in this file
    import duckdb

    rows = duckdb.sql(
        f"SELECT name, ts_ns, metrics, flops FROM read_parquet('{tmp_path}/kernels/*.parquet') ORDER BY ts_ns"
    ).fetchall()
    assert len(rows) == 77
    by_ts = {e["ts"] * 1000: e for e in ranges}
    for name, ts, metrics, flops in rows:
        a = by_ts[ts]["args"]
        assert name == by_ts[ts]["name"] and metrics == {k: float(v) for k, v in a.items()}
        # FLOPs written out from the counter definitions: add + mul + 2 x fma, per precision
        want = sum(a[f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum"] * w
                   for p in "dfh" for op, w in (("add", 1), ("mul", 1), ("fma", 2)))  # fmt: skip
        assert flops == want


def test_no_profiler_ranges_is_said_in_meta(tmp_path: Path) -> None:
    meta = parse_kineto(real(ALEXNET), RankWriter(tmp_path, "r", 0))
    assert meta["pmu"].startswith("none")


@pytest.mark.parametrize(
    ("name", "cat", "want"),
    [
        ("ampere_sgemm_32x32_sliced1x4_tn", "kernel", "gemm"),
        ("void xmma_new::gemm::kernel<xmma_new::implicit_gemm::fprop::Params>", "kernel", "conv"),
        ("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int)", "kernel", "index"),
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)", "kernel", "nccl"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
            "kernel",
            "elementwise",
        ),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>", "kernel", "reduce"),
        ("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", "memcpy"),
        ("Memset (Device)", "gpu_memset", "memset"),
        ("my_custom_kernel", "kernel", "other"),
    ],
)
def test_kernel_class(name: str, cat: str, want: str) -> None:
    assert kernel_class(name, cat) == want


# ---- time rules on small synthetic traces (expected ns written by hand) ---------------------------------


def _trace(tmp_path: Path, obj: str, name: str = "t.pt.trace.json") -> Path:
    p = tmp_path / name
    p.write_text(obj, encoding="utf-8")
    return p


def _kernel_ts(tmp_path: Path, path: Path) -> list[tuple[int, int]]:
    import duckdb

    w = RankWriter(tmp_path / "w", "r", 0)
    parse_kineto(path, w)
    w.close(sort=False)
    return duckdb.sql(f"SELECT ts_ns, dur_ns FROM read_parquet('{tmp_path}/w/kernels/*.parquet')").fetchall()


EV = '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %s, "dur": %s, "args": {"stream": 7}}'


def test_decimal_ts_relative_to_base_time_is_exact(tmp_path: Path) -> None:
    p = _trace(tmp_path, '{"schemaVersion": 1, "baseTimeNanoseconds": 1743521598000000000, "traceEvents": [%s]}'
               % (EV % ("198093488368.463", "425.453")))  # fmt: skip
    # 1743521598000000000 + 198093488368463 ns; 425.453 µs = 425453 ns
    assert _kernel_ts(tmp_path, p) == [(1743521598000000000 + 198093488368463, 425453)]


def test_base_time_written_after_trace_events_is_found(tmp_path: Path) -> None:
    p = _trace(tmp_path, '{"traceEvents": [%s], "traceName": "x", "baseTimeNanoseconds": 1751410836000000000}'
               % (EV % ("3569824056354.781", "1.5")))  # fmt: skip
    assert _kernel_ts(tmp_path, p) == [(1751410836000000000 + 3569824056354781, 1500)]


def test_absolute_us_and_ns_traces(tmp_path: Path) -> None:
    us = _trace(tmp_path, '{"traceEvents": [%s]}' % (EV % ("1695835535123456.789", "2")), "us.json")
    assert _kernel_ts(tmp_path / "us", us) == [(1695835535123456789, 2000)]
    ns = _trace(tmp_path, '{"traceEvents": [%s]}' % (EV % ("1695835535123456789", "2000")), "ns.json")
    assert _kernel_ts(tmp_path / "ns", ns) == [(1695835535123456789, 2000)]


def test_memory_events_become_memory_records(tmp_path: Path) -> None:
    """torch.profiler(profile_memory=True) writes allocator events as `i` events named [memory]."""
    import duckdb

    mem = (
        '{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": %d, '
        '"args": {"Total Reserved": %d, "Total Allocated": %d, "Bytes": %d, "Addr": 140737, "Device Id": %d, "Device Type": %d}}'
    )
    evs = [
        mem % (10, 0, 256, 256, -1, 0),
        mem % (20, 2097152, 1048576, 1048576, 0, 1),
        mem % (30, 2097152, 0, -1048576, 0, 1),
    ]
    p = _trace(tmp_path, '{"traceEvents": [' + ", ".join(evs) + "]}")
    w = RankWriter(tmp_path / "w", "r", 0)
    meta = parse_kineto(p, w)
    w.close(sort=False)
    assert meta["rows"]["memory"] == 3
    rows = duckdb.sql(
        f"SELECT kind, component, device, ts_ns, size_bytes, allocated_bytes, reserved_bytes, extra['Addr'] "
        f"FROM read_parquet('{tmp_path}/w/memory/*.parquet') ORDER BY ts_ns"
    ).fetchall()
    assert rows == [
        ("record", "PyTorch", "CPU", 10000, 256, 256, 0, "140737"),
        ("record", "PyTorch", "CUDA:0", 20000, 1048576, 1048576, 2097152, "140737"),
        ("record", "PyTorch", "CUDA:0", 30000, -1048576, 0, 2097152, "140737"),
    ]


# ---- claim and bad input -------------------------------------------------------------------------------


def test_kineto_is_claimed_and_trace_view_is_not(tmp_path: Path) -> None:
    assert [u.parser for u in detect(real(ALEXNET))] == ["kineto"]
    p = _trace(tmp_path, '{"schemaVersion": 1, "traceEvents": []}')
    assert [u.parser for u in detect(p)] == ["kineto"]


def test_truncated_gzip_kineto(tmp_path: Path) -> None:
    z = real(RANK0).read_bytes()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(z[: len(z) // 2])
    with pytest.raises(BadTraceError, match="truncated gzip") as ei:
        ingest(p, store=tmp_path / "s")
    assert "cut.json.gz" in str(ei.value)


def test_truncated_plain_kineto(tmp_path: Path) -> None:
    data = gzip.decompress(real(RANK0).read_bytes())
    p = tmp_path / "cut.json"
    p.write_bytes(data[:100000])
    with pytest.raises(BadTraceError, match="truncated JSON: the file ends at byte 100000"):
        ingest(p, store=tmp_path / "s")


def test_non_utf8_kineto(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(
        b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\xff", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}'
    )
    with pytest.raises(BadTraceError, match="not UTF-8"):
        ingest(p, store=tmp_path / "s")


@pytest.mark.parametrize(
    ("data", "want"),
    [
        (b"", "empty file"),
        (b'{"schemaVersion": 1, "deviceProperties": []}', 'with a "traceEvents" array'),
        (b'[{"ph": "X", "ts": 1}]', "found a JSON array"),
        (b'{"traceEvents": []}', "no trace events"),
    ],
)
def test_wrong_root_or_empty_kineto(tmp_path: Path, data: bytes, want: str) -> None:
    p = tmp_path / "x.json"
    p.write_bytes(data)
    with pytest.raises(BadTraceError, match=want):
        parse_kineto(p, RankWriter(tmp_path, "r", 0))
