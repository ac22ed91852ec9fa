"""torch_npu text export (parsers/torch_npu.py) over the real dumps, tiny synthetic CSVs and bad inputs.

Expected numbers are worked out by hand in the comments, or counted/summed independently from the files with
Python's csv/json modules inside the test (said where), never copied from the parser's output.
"""

from __future__ import annotations

import csv
import json
import sys
import types
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DB_LEVEL1, LEVEL0, LEVEL1, MSI, SHARED, real

RANK0 = LEVEL1 / "rank0_ascend_pt"
OUT0 = RANK0 / "ASCEND_PROFILER_OUTPUT"
R2023 = MSI / "server/src/test/test_data/test_rank_0"
ARITH = SHARED / "Ascend__msprof-analyze/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv"

pytestmark = pytest.mark.real


# --------------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------------
def _ingest(path: Path, store: Path, name: str) -> dict[str, Any]:
    from traceql.ingest import ingest

    return ingest(path, store, name=name, workers=1)


def _q(store: Path, sql: str) -> list[dict[str, Any]]:
    from traceql._duck import arrow_table
    from traceql.engine import connect
    from traceql.store import Store

    return arrow_table(connect(Store(store)).sql(sql)).to_pylist()


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _us_ns(text: str) -> int:
    return int((Decimal(text.strip()) * 1000).to_integral_value())


@pytest.fixture(scope="module")
def level1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("l1") / "store"
    _ingest(real(LEVEL1), store, "l1")
    return store


# --------------------------------------------------------------------------------------------------------
# claim / detection
# --------------------------------------------------------------------------------------------------------
def test_claim_folders_files_and_ranks() -> None:
    from traceql.parsers import detect
    from traceql.parsers.torch_npu import TorchNpuTextParser

    p = TorchNpuTextParser()
    (u,) = p.claim(real(RANK0)) or []
    assert (u.parser, u.rank) == ("torch_npu_text", 0)  # profiler_info_0.json rank_id 0
    (u,) = p.claim(OUT0) or []  # the output folder itself: rank from ../profiler_info_0.json
    assert u.rank == 0
    (u,) = p.claim(OUT0 / "kernel_details.csv") or []
    assert u.rank is None
    assert p.claim(LEVEL1) is None  # a cluster folder is split by base.detect, not claimed whole
    assert p.claim(real(DB_LEVEL1 / "rank0_ascend_pt")) is None  # db-only export: torch_npu_db's
    assert p.claim(OUT0 / "profiler_info_0.json") is None
    units = detect(LEVEL1)
    assert [(x.parser, x.rank) for x in units] == [("torch_npu_text", 0), ("torch_npu_text", 1)]


def test_claim_kernel_details_by_header_under_another_name(tmp_path: Path) -> None:
    from traceql.parsers.torch_npu import TorchNpuTextParser

    f = tmp_path / "kernels_rank3.csv"
    f.write_text(
        "Name,Type,Accelerator Core,Start Time(us),Duration(us)\nA,B,AI_CORE,1.5,2\n", encoding="utf-8"
    )
    assert TorchNpuTextParser().claim(f)
    g = tmp_path / "other.csv"
    g.write_text("a,b\n1,2\n", encoding="utf-8")
    assert TorchNpuTextParser().claim(g) is None


# --------------------------------------------------------------------------------------------------------
# level1 (Jan 2025, PipeUtilization, 2 ranks): one run, every table
# --------------------------------------------------------------------------------------------------------
def test_level1_is_one_run_with_ranks_0_and_1(level1: Path) -> None:
    from traceql.store import Store

    info = Store(level1).run("l1")
    assert info["ranks"] == [0, 1]
    assert info["format"] == "torch_npu_text"
    per_rank = _q(level1, "SELECT rank, count(*) AS n FROM kernels GROUP BY rank ORDER BY rank")
    # rows counted with csv.DictReader (independent of DuckDB): 191 per rank (wc -l = 192 with the header)
    expected = [
        len(_csv_rows(LEVEL1 / f"rank{r}_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
        for r in (0, 1)
    ]
    assert expected == [191, 191]
    assert [r["n"] for r in per_rank] == expected


def test_level1_kernel_values(level1: Path) -> None:
    rows = _q(level1, "SELECT * FROM kernels WHERE rank = 0 AND name = 'trans_TransData_0'")
    (k,) = rows
    # the first data row, verbatim: 50,4294967295,11051,2,trans_TransData_0,TransData,dynamic,AI_VECTOR_CORE,
    # 1736408883704643.212<TAB>,53.741,0,32,0,NO,"""32,3,224,224""",FLOAT,NCHW,"""32,1,224,224,8""",...
    assert k["ts_ns"] == 1736408883704643212  # trailing TAB stripped, exact (no double rounding)
    assert k["dur_ns"] == 53741 and k["wait_ns"] == 0
    assert (k["step"], k["model_id"], k["task_id"], k["stream_id"]) == (50, 4294967295, 11051, 2)
    assert (k["op_type"], k["task_type"], k["op_state"], k["is_comm"]) == (
        "TransData",
        "AI_VECTOR_CORE",
        "dynamic",
        False,
    )
    assert (k["block_dim"], k["mix_block_dim"]) == (32, 0)
    assert k["input_shapes"] == "32,3,224,224" and k["output_shapes"] == "32,1,224,224,8"
    assert (k["input_dtypes"], k["input_formats"], k["output_formats"]) == ("FLOAT", "NCHW", "NC1HWC0")
    assert k["context_id"] is None  # N/A
    assert k["aiv_time_ns"] == 50522  # aiv_time(us) 50.522
    assert k["mte2_ratio"] == 0.552 and k["mte3_ratio"] == 0.667  # aiv side (aic side is 0.0)
    assert k["vec_ratio"] == 0.186 and k["scalar_ratio"] == 0.086  # max(aic 0.0, aiv 0.086)
    assert k["hbm_read_bytes"] is None  # PipeUtilization measures no bytes
    m = dict(k["metrics"])
    assert (
        m["aiv_time(us)"] == 50.522 and m["aiv_total_cycles"] == 2910056.0 and m["cube_utilization(%)"] == 0.0
    )
    assert dict(k["extra"]) == {"HF32 Eligible": "NO"}


def test_level1_kernel_totals_match_the_csv(level1: Path) -> None:
    src = _csv_rows(OUT0 / "kernel_details.csv")
    total_ns = sum(_us_ns(r["Duration(us)"]) for r in src)  # exact decimal sum, computed here
    hccl = sum(r["Accelerator Core"] == "HCCL" for r in src)  # 4 (grep -c HCCL)
    (got,) = _q(
        level1,
        "SELECT sum(dur_ns) AS d, count(*) FILTER (is_comm) AS c, count(ts_ns) AS t FROM kernels WHERE rank = 0",
    )
    assert got["d"] == total_ns
    assert got["c"] == hccl == 4
    assert got["t"] == len(src)  # every start time parsed


def test_level1_steps(level1: Path) -> None:
    (s,) = _q(level1, "SELECT * FROM steps WHERE rank = 0")
    # step_trace_time.csv: 50,8873.756000000001,101963.203,4028.6750000000175,105991.87800000001,
    #                      25744.050000000003,136581.0,0,101963.203,17902.5
    assert s["step"] == 50 and s["source"] == "step_trace_time"
    assert s["computing_ns"] == 8873756 and s["comm_not_overlapped_ns"] == 101963203
    assert s["overlapped_ns"] == 4028675 and s["comm_ns"] == 105991878 and s["free_ns"] == 25744050
    assert s["stage_ns"] == 136581000 and s["bubble_ns"] == 0 and s["preparing_ns"] == 17902500
    if s["ts_ns"] is None:  # no step window from trace_view: computing + not-overlapped comm + free
        assert s["dur_ns"] == 8873756 + 101963203 + 25744050


def test_level1_communication(level1: Path) -> None:
    ops = _q(level1, "SELECT * FROM comm_ops WHERE rank = 0 AND source = 'communication.json' ORDER BY ts_ns")
    assert len(ops) == 4  # 4 hcom_allReduce ops in step50 (plus 'Total Op Info', which is no op)
    o = ops[0]
    # "Start Timestamp(us)": 1736408883732241.5, "Elapse Time(ms)": 79.08952021875, "Transit Time(ms)": 0.23918478124999998
    assert o["ts_ns"] == 1736408883732241500 and o["dur_ns"] == 79089520
    assert (
        o["transit_ns"] == 239185
        and o["wait_ns"] == 5646633
        and o["sync_ns"] == 5615692
        and o["idle_ns"] == 73203703
    )
    assert (o["name"], o["op_type"], o["kind"], o["step"]) == (
        "hcom_allReduce__586_0_1",
        "allreduce",
        "collective",
        50,
    )
    assert o["group_name"] == "17522688603477080586"
    # HCCS 28.647232 MB = 12 x 2.064384 + 2 x 1.937312 (its packet distribution), decimal MB -> 28647232 B.
    # SDMA repeats HCCS (SDMA = HCCS + PCIE + SIO), so it is not added again.
    assert o["bytes"] == 12 * 2064384 + 2 * 1937312 == 28647232
    bw = _q(level1, "SELECT * FROM comm_bandwidth WHERE rank = 0 ORDER BY name, transport")
    assert len(bw) == 10  # (4 ops + Total Op Info) x (HCCS, SDMA); all-zero RDMA/PCIE/SIO entries are skipped
    first = [r for r in bw if r["name"] == "hcom_allReduce__586_0_1" and r["transport"] == "HCCS"][0]
    assert first["bandwidth_bps"] == 15.7676e9 and first["transit_ns"] == 1816836
    assert dict(first["packet_sizes"]) == {"2064384": 12.0, "1937312": 2.0}
    assert first["large_packet_ratio"] == 0.0


def test_level1_communication_matrix(level1: Path) -> None:
    data = json.loads((OUT0 / "communication_matrix.json").read_text())
    links = sum(
        len(v) for step in data.values() for kind in step.values() for v in kind.values()
    )  # counted here
    assert links == 48
    rows = _q(level1, "SELECT * FROM comm_matrix WHERE rank = 0")
    assert len(rows) == links
    (r,) = [x for x in rows if x["name"] == "allreduce-total" and x["src_rank"] == 0 and x["dst_rank"] == 1]
    # "0-1": {"Transport Type": "HCCS", "Transit Size(MB)": 61.210623999999996, "Transit Time(ms)": 3.88393759375,
    #         "Bandwidth(GB/s)": 15.7599}
    assert (r["transport"], r["bytes"], r["transit_ns"], r["bandwidth_bps"]) == (
        "HCCS",
        61210624,
        3883938,
        15.7599e9,
    )
    assert r["op_name"] is None  # summary rows name their op per link; the total has none
    (t,) = [x for x in rows if x["name"] == "allreduce-bottom3" and x["src_rank"] == 0 and x["dst_rank"] == 1]
    assert t["op_name"] == "hcom_allReduce__586_0_1"


def test_level1_memory(level1: Path) -> None:
    counts = {
        r["kind"]: r["n"]
        for r in _q(level1, "SELECT kind, count(*) AS n FROM memory WHERE rank = 0 GROUP BY kind")
    }
    assert counts == {
        "record": len(_csv_rows(OUT0 / "memory_record.csv")),
        "op": len(_csv_rows(OUT0 / "operator_memory.csv")),
        "module": len(_csv_rows(OUT0 / "npu_module_mem.csv")),
    }
    (rec,) = _q(level1, "SELECT * FROM memory WHERE rank = 0 AND kind = 'record' ORDER BY ts_ns LIMIT 1")
    # APP,1736408883573957.920<TAB>,,2109.6015625,,,NPU:0 -> 2109.6015625 MiB = 2109*2^20 + 77/128*2^20 B
    assert rec["ts_ns"] == 1736408883573957920 and rec["reserved_bytes"] == 2211446784 + 630784
    assert rec["allocated_bytes"] is None and rec["component"] == "APP" and rec["device"] == "NPU:0"
    (op,) = _q(level1, "SELECT * FROM memory WHERE rank = 0 AND kind = 'op' AND ts_ns = 1736408883694624810")
    # aten::empty_strided,18816.5,1736408883694624.810<TAB>,,,,,954.3701171875,1452.0,954.3701171875,,,,897357296,NPU:0
    assert op["size_bytes"] == 18816 * 1024 + 512 and op["release_ts_ns"] is None and op["dur_ns"] is None
    assert (
        op["reserved_bytes"] == 1452 * 2**20 and op["allocated_bytes"] == 954 * 2**20 + 388_096
    )  # .3701171875 MiB
    assert dict(op["extra"]) == {"Stream Ptr": "897357296"}


def test_level1_l2_cache_op_stats_and_meta(level1: Path) -> None:
    l2 = _q(level1, "SELECT * FROM l2_cache WHERE rank = 0")
    assert len(l2) == 179 and all(r["hit_rate"] is None for r in l2)  # every Hit Rate is N/A on this A2
    assert [r for r in l2 if r["task_id"] == 11052][0]["victim_rate"] == 0.23264
    stats = {
        r["source"]: r
        for r in _q(
            level1,
            "SELECT source, count(*) AS n, sum(total_ns) AS t, sum(ratio) AS ratio FROM op_stats WHERE rank = 0 GROUP BY source",
        )
    }
    op_stat = _csv_rows(OUT0 / "op_statistic.csv")
    assert stats["op_statistic"]["n"] == len(op_stat) == 33
    assert stats["op_statistic"]["t"] == sum(_us_ns(r["Total Time(us)"]) for r in op_stat)
    assert stats["op_statistic"]["ratio"] == pytest.approx(sum(float(r["Ratio(%)"]) for r in op_stat) / 100)
    assert stats["api_statistic"]["n"] == len(_csv_rows(OUT0 / "api_statistic.csv")) == 57
    # operator_details has multi-line Call Stack cells: 859 records (not `wc -l` lines)
    assert stats["operator_details"]["n"] == len(_csv_rows(OUT0 / "operator_details.csv")) == 859
    meta = {r["key"]: r["value"] for r in _q(level1, "SELECT key, value FROM run_meta WHERE rank = 0")}
    assert meta["config.experimental_config._aic_metrics"] == "ACL_AICORE_PIPE_UTILIZATION"
    assert meta["traceql.aic_metrics"] == "PipeUtilization"
    assert meta["rank_id"] == "0" and meta["config.common_config.record_shapes"] == "true"
    assert meta["end_info.collectionTimeEnd"] == "1736408884023552840"
    assert "ENV_VARIABLES.ASCEND_LAUNCH_BLOCKING" in meta  # from profiler_metadata.json


# --------------------------------------------------------------------------------------------------------
# level0, 2023 (MemoryL0), ArithmeticUtilization single CSV
# --------------------------------------------------------------------------------------------------------
def test_level0_kernels_without_op_info(tmp_path: Path) -> None:
    store = tmp_path / "s"
    info = _ingest(real(LEVEL0 / "rank1_ascend_pt"), store, "l0")
    assert info["ranks"] == [1]
    rows = _q(store, "SELECT * FROM kernels")
    src = _csv_rows(LEVEL0 / "rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    assert len(rows) == len(src) == 191
    assert all(r["op_type"] is None for r in rows)  # Type is N/A throughout at Level0
    assert sum(r["is_comm"] for r in rows) == sum(r["Accelerator Core"] == "HCCL" for r in src) == 4
    assert all(r["metrics"] in (None, []) or not dict(r["metrics"]) for r in rows)  # no PMU block
    assert info["meta"]["1"]["aic_metrics"] == "AiCoreNone"


def test_2023_rank_memoryl0(tmp_path: Path) -> None:
    store = tmp_path / "s"
    info = _ingest(real(R2023), store, "r23")
    assert info["ranks"] == [0] and info["meta"]["0"]["aic_metrics"] == "MemoryL0"
    all_rows = _q(store, "SELECT * FROM kernels ORDER BY ts_ns")
    assert len(all_rows) == len(_csv_rows(R2023 / "ASCEND_PROFILER_OUTPUT/kernel_details.csv")) == 21
    rows = {r["name"]: r for r in reversed(all_rows)}  # first occurrence of each name
    z = rows["ZerosLike"]
    # 2,4294967295,2451,16,ZerosLike,ZerosLike,AI_CORE,1695115378713661,496.8508,0,48,0,NO,"""232138240""",...
    assert z["ts_ns"] == 1695115378713661000 and z["dur_ns"] == 496851  # 496.8508 µs, rounded to the ns
    assert z["op_state"] is None and z["block_dim"] == 48 and z["input_shapes"] == "232138240"
    assert z["aicore_time_ns"] == 982720 and dict(z["metrics"])["aic_l0a_read_bw(GB/s)"] == 0.0
    h = rows["hcom_broadcast__483_0"]
    assert h["ts_ns"] == 1695115378715400200 and h["is_comm"] and h["stream_id"] is None
    (s,) = _q(store, "SELECT * FROM steps")
    assert s["step"] == 2 and s["preparing_ns"] is None  # 2023: no Preparing column
    # 2023 memory_record (no Total Active): PTA,1695115378714622.8,4599.74072265625,8664.0,NPU:0
    (m,) = _q(
        store, "SELECT * FROM memory WHERE kind = 'record' AND component = 'PTA' ORDER BY ts_ns LIMIT 1"
    )
    assert (
        m["ts_ns"] == 1695115378714622800 and m["allocated_bytes"] == 4599 * 2**20 + 776_704
    )  # .74072265625 MiB
    assert m["active_bytes"] is None
    data = json.loads((R2023 / "ASCEND_PROFILER_OUTPUT/communication.json").read_text())
    n_ops = sum(
        1 for st in data.values() for kind in st.values() for k in kind if k != "Total Op Info"
    )  # counted here
    assert _q(store, "SELECT count(*) AS n FROM comm_ops")[0]["n"] == n_ops
    (send,) = _q(store, "SELECT * FROM comm_ops WHERE name = 'hcom_send__822_0'")
    # RDMA "Transit Size(MB)": 20.97152 -> 20971520 B = exactly 20 MiB: HCCL's MB is 10^6 bytes
    assert send["bytes"] == 20 * 2**20 and send["kind"] == "p2p" and send["op_type"] == "send"


def test_single_arithmetic_utilization_csv(tmp_path: Path) -> None:
    store = tmp_path / "s"
    info = _ingest(real(ARITH), store, "arith")
    assert info["format"] == "torch_npu_text" and info["meta"]["0"]["aic_metrics"] == "ArithmeticUtilization"
    src = _csv_rows(ARITH)
    (got,) = _q(store, "SELECT count(*) AS n, sum(flops) AS f, count(flops) AS nf FROM kernels")
    assert got["n"] == len(src) == 591
    fops = ("aic_cube_fops", "aic_vector_fops", "aiv_cube_fops", "aiv_vector_fops")

    def row_flops(r: dict[str, str]) -> float | None:
        vals = [float(r[c]) for c in fops if r[c] not in ("N/A", "")]
        return sum(vals) if vals else None

    expected = [f for f in map(row_flops, src) if f is not None]  # summed here with the csv module
    assert got["nf"] == len(expected) and got["f"] == pytest.approx(sum(expected))
    (z,) = _q(store, "SELECT * FROM kernels WHERE name = 'ZerosLike46'")
    assert z["flops"] == 137176320.0  # aiv_vector_fops; the other three are 0
    assert z["ts_ns"] == 1699529622790614800 and z["op_state"] is None
    # (traceql.role, the folder the rank came from, is the RL role label of issue 45: not this test's subject)
    assert _q(store, "SELECT key, value FROM run_meta WHERE key <> 'traceql.role'") == [
        {"key": "traceql.aic_metrics", "value": "ArithmeticUtilization"}
    ]


# --------------------------------------------------------------------------------------------------------
# synthetic kernel_details: Memory / MemoryAccess / L2Cache groups, Block Num, Device_id
# --------------------------------------------------------------------------------------------------------
def _kernels_of(tmp_path: Path, text: str) -> list[dict[str, Any]]:
    f = tmp_path / "kernel_details.csv"
    f.write_text(text, encoding="utf-8")
    store = tmp_path / "s"
    _ingest(f, store, "k")
    return _q(store, "SELECT * FROM kernels ORDER BY ts_ns")


def test_synthetic_memory_group_hbm_bytes(tmp_path: Path) -> None:
    rows = _kernels_of(
        tmp_path,
        "Step Id,Device_id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),"
        "Duration(us),Wait Time(us),Block Num,Mix Block Num,HF32 Eligible,Input Shapes,Context ID,"
        "aicore_time(us),aic_total_cycles,aic_main_mem_read_bw(GB/s),aic_main_mem_write_bw(GB/s),aic_l2_read_bw(GB/s),"
        "aiv_time(us),aiv_total_cycles,aiv_main_mem_read_bw(GB/s),aiv_main_mem_write_bw(GB/s),aiv_ub_read_bw(GB/s)\n"
        '7,3,1,10,2,mm,MatMul,static,MIX_AIC,1736408883704643.212\t,30,1.5,24,12,NO,"""8,8;8""",0,'
        "10,18000,100,25,40,20,36000,50,N/A,5\n"
        '7,3,1,11,2,add,Add,dynamic,AI_VECTOR_CORE,1736408883704700.000\t,5,0,8,0,NO,"""4""",N/A,'
        "0,0,0,0,0,4,7200,200,10,N/A\n",
    )
    mm, add = rows
    assert mm["ts_ns"] == 1736408883704643212 and mm["device_id"] == 3 and mm["step"] == 7
    assert (mm["block_dim"], mm["mix_block_dim"]) == (24, 12)  # Block Num / Mix Block Num (2026 names)
    assert mm["input_shapes"] == "8,8;8" and mm["context_id"] == "0"
    # read: aic 100 GB/s x 10 µs = 1e11 x 1e-5 = 1,000,000 B; aiv 50 GB/s x 20 µs = 1,000,000 B
    assert mm["hbm_read_bytes"] == 2_000_000
    # write: aic 25 GB/s x 10 µs = 250,000 B; aiv N/A (not measured) adds nothing
    assert mm["hbm_write_bytes"] == 250_000
    assert mm["l2_read_bytes"] == 400_000  # aic 40 GB/s x 10 µs
    assert mm["ub_read_bytes"] == 100_000  # aiv 5 GB/s x 20 µs
    # add: aic side 0 GB/s; aiv 200 GB/s x 4 µs = 800,000 B read, 10 GB/s x 4 µs = 40,000 B written
    assert add["hbm_read_bytes"] == 800_000 and add["hbm_write_bytes"] == 40_000
    assert dict(add["metrics"])["aiv_main_mem_read_bw(GB/s)"] == 200.0


def test_synthetic_memory_access_and_l2cache(tmp_path: Path) -> None:
    rows = _kernels_of(
        tmp_path,
        "Name,Type,Accelerator Core,Start Time(us),Duration(us),aicore_time(us),aic_read_main_memory_datas(KB),"
        "aic_write_main_memory_datas(KB),aiv_time(us),aiv_READ_MAIN_MEMORY_DATAS(KB),aiv_GM_to_UB_datas(KB),"
        "aic_write_cache_hit,aic_write_cache_miss_allocate,aic_r0_read_cache_hit,aic_r0_read_cache_miss_allocate,"
        "aic_r1_read_cache_hit,aic_r1_read_cache_miss_allocate\n"
        "mm,MatMul,MIX_AIC,100.000\t,3,2,1000,16,2,24,8,30,10,40,10,10,10\n",
    )
    (k,) = rows
    assert k["hbm_read_bytes"] == (1000 + 24) * 1024  # KB counters, case-insensitive names, both sides
    assert k["hbm_write_bytes"] == 16 * 1024
    assert k["l2_hit_rate"] == pytest.approx(80 / 110)  # hits 30+40+10, misses 10+10+10
    assert dict(k["metrics"])["aiv_GM_to_UB_datas(KB)"] == 8.0


def test_l2_cache_csv_fills_kernel_hit_rate_when_pmu_has_none(tmp_path: Path) -> None:
    out = tmp_path / "dump" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "kernel_details.csv").write_text(
        "Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us)\n"
        "5,2,a,A,AI_CORE,1.0,1\n6,2,b,B,AI_CORE,2.0,1\n7,2,c,C,AI_CORE,3.0,1\n",
        encoding="utf-8",
    )
    # task 6 appears twice (ambiguous: not joined); task 7 is N/A
    (out / "l2_cache.csv").write_text(
        "Stream Id,Task Id,Hit Rate,Victim Rate,Op Name\n2,5,0.75,0.1,a\n2,6,0.5,0,b\n2,6,0.4,0,b\n2,7,N/A,0,c\n",
        encoding="utf-8",
    )
    store = tmp_path / "s"
    _ingest(tmp_path / "dump", store, "d")
    got = {r["name"]: r["l2_hit_rate"] for r in _q(store, "SELECT name, l2_hit_rate FROM kernels")}
    assert got == {"a": 0.75, "b": None, "c": None}


def test_npu_module_mem_minus_one_is_kept_verbatim_not_as_bytes(tmp_path: Path) -> None:
    out = tmp_path / "dump" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "npu_module_mem.csv").write_text(
        "Device_id,Component,Timestamp(us),Total Reserved(MB),Device\n0,SLOG,1.5\t,-1,NPU:0\n0,APP,2.5\t,1.5,NPU:0\n",
        encoding="utf-8",
    )
    store = tmp_path / "s"
    _ingest(tmp_path / "dump", store, "d")
    rows = {r["component"]: r for r in _q(store, "SELECT * FROM memory")}
    assert (
        rows["SLOG"]["reserved_bytes"] is None and dict(rows["SLOG"]["extra"])["Total Reserved(MB)"] == "-1"
    )
    assert rows["APP"]["reserved_bytes"] == 3 * 2**19 and rows["APP"]["ts_ns"] == 2500  # 1.5 MiB


# --------------------------------------------------------------------------------------------------------
# trace_view hand-off (a stand-in module: parsers/trace_view.py is written separately)
# --------------------------------------------------------------------------------------------------------
def _fake_trace_view(monkeypatch: pytest.MonkeyPatch, windows: dict[int, list[int]]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def parse_trace_view(
        path: Path, out: Any, *, kernels: bool, comm_ops: bool, write_steps: bool
    ) -> dict[str, Any]:
        calls.append(
            {"path": Path(path).name, "kernels": kernels, "comm_ops": comm_ops, "write_steps": write_steps}
        )
        return {"step_windows": windows, "device": "Ascend910B", "warnings": ["tv warning"]}

    mod = types.ModuleType("traceql.parsers.trace_view")
    mod.parse_trace_view = parse_trace_view  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "traceql.parsers.trace_view", mod)
    return calls


def test_trace_view_flags_and_step_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_trace_view(monkeypatch, {50: [1_000, 2_000]})
    store = tmp_path / "s"
    info = _ingest(real(RANK0), store, "r0")
    # kernel_details.csv and communication.json exist: trace_view must not write kernels/comm_ops; steps are ours
    assert calls == [{"path": "trace_view.json", "kernels": False, "comm_ops": False, "write_steps": False}]
    (s,) = _q(store, "SELECT * FROM steps")
    assert (s["ts_ns"], s["dur_ns"], s["computing_ns"]) == (1_000, 2_000, 8873756)
    assert info["device"] == "Ascend910B" and "tv warning" in info["warnings"]


def test_trace_view_windows_become_steps_without_step_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_trace_view(monkeypatch, {3: [10, 20], 4: [30, 40]})
    out = tmp_path / "dump" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "trace_view.json").write_text("[]", encoding="utf-8")
    (out / "l2_cache.csv").write_text(
        "Stream Id,Task Id,Hit Rate,Victim Rate,Op Name\n2,5,0.5,0.1,a\n", encoding="utf-8"
    )
    store = tmp_path / "s"
    _ingest(tmp_path / "dump", store, "d")
    assert calls[0]["kernels"] is True and calls[0]["comm_ops"] is True  # nothing else provides them
    steps = _q(store, "SELECT step, ts_ns, dur_ns, source FROM steps ORDER BY step")
    assert steps == [
        {"step": 3, "ts_ns": 10, "dur_ns": 20, "source": "trace_view"},
        {"step": 4, "ts_ns": 30, "dur_ns": 40, "source": "trace_view"},
    ]


# --------------------------------------------------------------------------------------------------------
# bad input: one red line naming the file, exit 1
# --------------------------------------------------------------------------------------------------------
HEADER = "Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us)\n"


@pytest.mark.parametrize(
    "content, message",
    [
        (HEADER.encode(), "no data rows"),
        (b"", "empty file"),
        (b"Name,Type,Accelerator Core,Start Time(us)\nA,B,AI_CORE,1\n", "'Duration(us)'"),
        (b"Name,Ty\xffpe,Start Time(us),Duration(us)\nA,B,1,2\n", "not UTF-8"),
        (HEADER.encode() + b"1,2,3,4,n\xffme,T,AI_CORE,1.0,2,0\n", "kernel_details.csv"),
    ],
    ids=["header-only", "empty", "missing-column", "non-utf8-header", "non-utf8-row"],
)
def test_bad_kernel_details_cli(tmp_path: Path, cli, store: Path, content: bytes, message: str) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "kernel_details.csv"
    f.write_bytes(content)
    r = cli("ingest", f, "--store", store)
    assert r.code == 1, r
    assert "kernel_details.csv" in r.err and message in r.err, r
    assert "Traceback" not in r.err


def test_bad_kernel_details_inside_folder_names_the_file(tmp_path: Path) -> None:
    from traceql.errors import BadTraceError

    out = tmp_path / "dump" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "kernel_details.csv").write_text(HEADER, encoding="utf-8")
    with pytest.raises(BadTraceError, match=r"kernel_details\.csv: no data rows"):
        _ingest(tmp_path / "dump", tmp_path / "s", "d")


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("communication.json", "{not json", "invalid JSON"),
        ("communication.json", "[1, 2]", "keyed by step"),
        ("communication.json", '{"step1": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ("communication_matrix.json", '{"step1": {"collective": {"op@g": {"0x1": {}}}}}', "'src-dst'"),
        ("step_trace_time.csv", "Computing,Free\n1,2\n", "'Step'"),
        ("memory_record.csv", "", "empty file"),
    ],
)
def test_broken_optional_file_names_it(
    tmp_path: Path, cli, store: Path, name: str, content: str, message: str
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "dump" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "kernel_details.csv").write_text("Name,Start Time(us),Duration(us)\nA,1.0,2\n", encoding="utf-8")
    (out / name).write_text(content, encoding="utf-8")
    r = cli("ingest", tmp_path / "dump", "--store", store)
    assert r.code == 1, r
    assert name in r.err and message in r.err, r


def test_folder_without_known_files_is_not_claimed(tmp_path: Path) -> None:
    from traceql.parsers.torch_npu import TorchNpuTextParser

    (tmp_path / "ASCEND_PROFILER_OUTPUT").mkdir()
    (tmp_path / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db").write_bytes(b"")
    assert TorchNpuTextParser().claim(tmp_path) is None
