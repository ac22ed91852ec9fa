"""msprof text output (PROF_*/mindstudio_profiler_output) and the shared PMU-column derivation (_pmu.py).

Expected numbers are computed by hand in the comments (or independently with Python's csv module where
said), never copied from the parser's output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LEVEL1, real


# --------------------------------------------------------------------------------------------------------
# _pmu: PMU columns -> typed kernel columns, on tiny hand-written CSVs
# --------------------------------------------------------------------------------------------------------
def _pmu_rows(tmp_path: Path, text: str, name: str = "k.csv") -> tuple[list[dict], list[str]]:
    from traceql.parsers._csv import CsvFile
    from traceql.parsers._pmu import pmu_exprs

    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    csv = CsvFile(p)
    exprs, consumed = pmu_exprs(csv)
    rows = [r for b in csv.select(exprs) for r in b.to_pylist()]
    return rows, consumed


def test_pmu_pipe_utilization_a2_ratios_are_max_over_sides(tmp_path: Path) -> None:
    rows, consumed = _pmu_rows(
        tmp_path,
        "Op Name,Task Duration(us),aicore_time(us),aic_total_cycles,aic_mac_ratio,aic_scalar_ratio,aic_mte2_ratio,"
        "aiv_time(us),aiv_total_cycles,aiv_vec_ratio,aiv_scalar_ratio,aiv_mte2_ratio,aiv_mte3_ratio,cube_utilization(%)\n"
        "mm,10,9.5,1000,0.8,0.05,0.3,4.25,500,0.1,0.2,0.6,0.4,75\n"
        "hccl,10,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A\n",
    )
    r = rows[0]
    assert r["mac_ratio"] == 0.8  # only aic has mac
    assert r["vec_ratio"] == 0.1  # only aiv has vec
    assert r["scalar_ratio"] == 0.2  # max(0.05, 0.2)
    assert r["mte2_ratio"] == 0.6  # max(0.3, 0.6)
    assert r["mte3_ratio"] == 0.4
    assert r["aicore_time_ns"] == 9500 and r["aiv_time_ns"] == 4250
    assert r["hbm_read_bytes"] is None and r["l2_hit_rate"] is None and r["flops"] is None
    assert dict(r["metrics"])["cube_utilization(%)"] == 75.0
    assert "Op Name" not in consumed and "Task Duration(us)" not in consumed
    assert len(consumed) == 12  # 5 aic + 6 aiv + cube_utilization
    # N/A row: every derived column null and an empty metrics map
    assert rows[1]["mac_ratio"] is None and rows[1]["aicore_time_ns"] is None
    assert not rows[1]["metrics"]


def test_pmu_memory_group_bytes_from_bandwidth_times_core_time(tmp_path: Path) -> None:
    rows, _ = _pmu_rows(
        tmp_path,
        "Name,Duration(us),aicore_time(us),aic_main_mem_read_bw(GB/s),aic_main_mem_write_bw(GB/s),aic_l2_read_bw(GB/s),"
        "aic_l2_write_bw(GB/s),aiv_time(us),aiv_ub_read_bw(GB/s),aiv_ub_write_bw(GB/s),aiv_main_mem_read_bw(GB/s),"
        "aiv_main_mem_write_bw(GB/s)\n"
        "op,20,10,100,50,200,20,8,300,150,25,N/A\n",
    )
    r = rows[0]
    # GB/s x µs = 1e9 B/s x 1e-6 s = 1e3 bytes per (GB/s·µs)
    assert r["hbm_read_bytes"] == 100 * 10 * 1000 + 25 * 8 * 1000  # 1_200_000
    assert r["hbm_write_bytes"] == 50 * 10 * 1000  # aiv write is N/A: the aic part alone
    assert r["l2_read_bytes"] == 2_000_000 and r["l2_write_bytes"] == 200_000
    assert r["ub_read_bytes"] == 300 * 8 * 1000 and r["ub_write_bytes"] == 150 * 8 * 1000


def test_pmu_core_time_falls_back_to_task_duration(tmp_path: Path) -> None:
    rows, _ = _pmu_rows(
        tmp_path,
        "Op Name,Task Duration(us),aicore_time(us),aic_main_mem_read_bw(GB/s)\nop,12.5,N/A,4\n",
    )
    assert rows[0]["hbm_read_bytes"] == 4 * 12.5 * 1000  # 50_000


@pytest.mark.parametrize(
    "cols",
    [
        # doc casing (MSPROF-DOC) and code casing (MSPROF-AICM), both prefixed
        "aic_read_main_memory_datas(KB),aic_write_main_memory_datas(KB),aic_GM_to_L1_datas(KB),aiv_read_main_memory_datas(KB),aiv_write_main_memory_datas(KB),aiv_GM_to_UB_datas(KB)",
        "aic_read_main_memory_datas(KB),aic_write_main_memory_datas(KB),aic_gm_to_l1_datas(KB),aiv_read_main_memory_datas(KB),aiv_write_main_memory_datas(KB),aiv_gm_to_ub_datas(KB)",
        "AIC_READ_MAIN_MEMORY_DATAS(KB),aic_write_main_memory_datas(kb),aic_gm_to_l1_datas(KB),aiv_read_main_memory_datas(KB),aiv_write_main_memory_datas(KB),aiv_gm_to_ub_datas(KB)",
    ],
)
def test_pmu_memory_access_kb_counters(tmp_path: Path, cols: str) -> None:
    rows, consumed = _pmu_rows(
        tmp_path,
        f"Op Name,Task Duration(us),aicore_time(us),aiv_time(us),{cols}\nop,5,5,5,2048,100,7,1.5,N/A,3\n",
    )
    assert rows[0]["hbm_read_bytes"] == (2048 + 1.5) * 1024  # 2098688
    assert rows[0]["hbm_write_bytes"] == 100 * 1024  # aiv write N/A
    assert len(consumed) == 8
    assert dict(rows[0]["metrics"])[cols.split(",")[2]] == 7.0


def test_pmu_memory_access_unprefixed_2048_kb(tmp_path: Path) -> None:
    rows, _ = _pmu_rows(
        tmp_path,
        "Op Name,Task Duration(us),aicore_time(us),total_cycles,read_main_memory_datas(KB),write_main_memory_datas(KB),GM_to_UB_datas(KB)\n"
        "op,5,5,100,2048,0.5,1\n",
    )
    assert rows[0]["hbm_read_bytes"] == 2_097_152  # 2048 x 1024
    assert rows[0]["hbm_write_bytes"] == 512


def test_pmu_older_chip_unprefixed_names(tmp_path: Path) -> None:
    rows, consumed = _pmu_rows(
        tmp_path,
        "Op Name,Task Duration(us),aicore_time(us),total_cycles,vec_ratio,mac_ratio,scalar_ratio,mte2_ratio,mte3_ratio,"
        "main_mem_read_bw(GB/s),ub_read_bw(GB/s),l2_write_bw\n"
        "op,3,2.5,900,0.25,0.5,0.125,0.75,0.0625,8,16,4\n",
    )
    r = rows[0]
    assert (r["vec_ratio"], r["mac_ratio"], r["scalar_ratio"], r["mte2_ratio"], r["mte3_ratio"]) == (
        0.25,
        0.5,
        0.125,
        0.75,
        0.0625,
    )
    assert r["hbm_read_bytes"] == 8 * 2.5 * 1000  # 20_000
    assert r["ub_read_bytes"] == 16 * 2.5 * 1000  # 40_000
    assert r["l2_write_bytes"] == 4 * 2.5 * 1000  # the doc spells it without (GB/s)
    assert r["aicore_time_ns"] == 2500 and r["aiv_time_ns"] is None
    assert len(consumed) == 10


def test_pmu_memory_ub_group_sums_parts(tmp_path: Path) -> None:
    rows, _ = _pmu_rows(
        tmp_path,
        "Op Name,Task Duration(us),aiv_time(us),aiv_ub_read_bw_mte(GB/s),aiv_ub_write_bw_mte(GB/s),aiv_ub_read_bw_vector(GB/s),"
        "aiv_ub_write_bw_vector(GB/s),aiv_ub_read_bw_scalar(GB/s),aiv_ub_write_bw_scalar(GB/s)\n"
        "op,2,2,1,2,3,4,5,6\n",
    )
    assert rows[0]["ub_read_bytes"] == (1 + 3 + 5) * 2 * 1000
    assert rows[0]["ub_write_bytes"] == (2 + 4 + 6) * 2 * 1000


def test_pmu_l2cache_hit_rate(tmp_path: Path) -> None:
    rows, _ = _pmu_rows(
        tmp_path,
        "Op Name,aicore_time(us),aic_write_cache_hit,aic_write_cache_miss_allocate,aic_r0_read_cache_hit,"
        "aic_r0_read_cache_miss_allocate,aic_r1_read_cache_hit,aic_r1_read_cache_miss_allocate,aiv_time(us),"
        "aiv_write_cache_hit,aiv_write_cache_miss_allocate,aiv_r0_read_cache_hit,aiv_r0_read_cache_miss_allocate,"
        "aiv_r1_read_cache_hit,aiv_r1_read_cache_miss_allocate\n"
        "a,1,10,5,20,5,30,5,1,40,10,0,0,0,0\n"
        "b,1,0,0,0,0,0,0,1,0,0,0,0,0,0\n",
    )
    # hits 10+20+30+40 = 100, misses 5+5+5+10 = 25 -> 100/125
    assert rows[0]["l2_hit_rate"] == pytest.approx(0.8)
    assert rows[1]["l2_hit_rate"] is None  # 0/0


def test_pmu_l2cache_hit_rate_950_names(tmp_path: Path) -> None:
    rows, _ = _pmu_rows(
        tmp_path,
        "Op Name,aicore_time(us),aic_read_local_l2_hit,aic_read_local_l2_miss,aic_read_local_l2_victim,"
        "aic_write_local_l2_hit,aic_write_local_l2_miss,aic_write_local_l2_victim\n"
        "a,1,30,10,99,10,0,99\n",
    )
    assert rows[0]["l2_hit_rate"] == pytest.approx(40 / 50)  # victims are not misses


def test_pmu_arithmetic_flops(tmp_path: Path) -> None:
    rows, _ = _pmu_rows(
        tmp_path,
        "Op Name,aicore_time(us),aic_total_cycles,aic_mac_fp16_ratio,aic_mac_int8_ratio,aic_cube_fops,aic_vector_fops,"
        "aiv_time(us),aiv_total_cycles,aiv_vec_fp32_ratio,aiv_vec_fp16_ratio,aiv_vec_int32_ratio,aiv_vec_misc_ratio,"
        "aiv_cube_fops,aiv_vector_fops\n"
        "z,0,0,0,0,1000,24,587.05,52130051,0,0,0.0822,0,0,137176320\n",
    )
    assert rows[0]["flops"] == 1000 + 24 + 0 + 137176320
    assert rows[0]["mac_ratio"] is None  # ArithmeticUtilization has no plain mac_ratio


def test_pmu_no_metric_columns(tmp_path: Path) -> None:
    rows, consumed = _pmu_rows(tmp_path, "Device_id,Op Name,Task Duration(us)\n0,a,1\n")
    assert consumed == []
    assert all(v is None for k, v in rows[0].items())


def test_pmu_real_pipe_utilization_kernel_details() -> None:
    """First row of the real level1 kernel_details.csv, values read by eye from the file (TransData)."""
    from traceql.parsers._csv import CsvFile
    from traceql.parsers._pmu import pmu_exprs

    f = real(LEVEL1 / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    csv = CsvFile(f)
    exprs, consumed = pmu_exprs(csv, dur_cols=("Duration(us)",))
    r = next(iter(csv.select(exprs))).to_pylist()[0]
    # aiv_vec_ratio 0.186, aiv_scalar_ratio 0.086, aic_* 0.0, aiv_mte2_ratio 0.552, aiv_mte3_ratio 0.667
    assert (r["vec_ratio"], r["scalar_ratio"], r["mte2_ratio"], r["mte3_ratio"]) == (
        0.186,
        0.086,
        0.552,
        0.667,
    )
    assert r["mac_ratio"] == 0.0 and r["aiv_time_ns"] == 50522
    assert consumed[0] == "aicore_time(us)" and consumed[-1] == "cube_utilization(%)"
    assert len(consumed) == 46 - 21  # header has 46 columns, the first 21 are base columns
