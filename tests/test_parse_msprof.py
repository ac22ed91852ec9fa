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


# --------------------------------------------------------------------------------------------------------
# the msprof sample (traceql.synth.msprof_writer) through traceql.ingest
# --------------------------------------------------------------------------------------------------------
import csv as pycsv  # noqa: E402  (the reference reader for expected values)
import shutil  # noqa: E402
from decimal import Decimal  # noqa: E402

FILE_TS = "20250109074803"


def ingest_run(*args, **kwargs):  # type: ignore[no-untyped-def]
    """traceql.ingest(...). Called through the submodule: once `traceql.ingest` (the module) has been imported,
    it shadows the package-level function of the same name."""
    from traceql.ingest import ingest

    return ingest(*args, **kwargs)


def _mpo(prof: Path) -> Path:
    return prof / "mindstudio_profiler_output"


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(pycsv.DictReader(fh))


def _ns(us_text: str) -> int:
    return int(Decimal(us_text.strip()) * 1000)


def _num(cell: str) -> float | None:
    return None if cell.strip() in ("N/A", "") else float(cell)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from traceql.synth.msprof_writer import make_msprof_sample

    return make_msprof_sample(tmp_path_factory.mktemp("msprof"))


@pytest.fixture(scope="module")
def con(sample: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    import traceql

    store = tmp_path_factory.mktemp("store")
    info = ingest_run(sample, store=store, name="ms")
    assert info["format"] == "msprof_text"
    return traceql.connect(store)


def _q(con, sql: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    return con.sql(sql).fetchall()


def test_sample_is_deterministic_small_and_named_like_msprof(sample: Path, tmp_path: Path) -> None:
    from traceql.synth.msprof_writer import make_msprof_sample

    again = make_msprof_sample(tmp_path)
    files = sorted(p.relative_to(sample) for p in sample.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert all((sample / f).read_bytes() == (again / f).read_bytes() for f in files)
    assert sum((sample / f).stat().st_size for f in files) < 200_000
    assert sample.name.startswith("PROF_000001_") and (sample / "device_0").is_dir()
    names = {f.name for f in files}
    for mod in ("op_summary", "op_statistic", "api_statistic", "task_time", "hbm", "npu_mem", "memory_record",
                "operator_memory", "npu_module_mem", "l2_cache", "communication_statistic"):  # fmt: skip
        assert f"{mod}_{FILE_TS}.csv" in names
    assert f"msprof_{FILE_TS}.json" in names
    head = (_mpo(sample) / f"op_summary_{FILE_TS}.csv").read_text().splitlines()
    assert head[0].startswith(
        "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us)"
    )
    assert "Block Num,Mix Block Num" in head[0] and "aic_main_mem_read_bw(GB/s)" in head[0]
    assert "\t," in head[1] and '"""32,3,224,224"""' in head[1]  # trailing TAB, literal-quoted shapes


def test_sample_json_is_a_chrome_array_with_string_ts(sample: Path) -> None:
    import json

    ev = json.loads((_mpo(sample) / f"msprof_{FILE_TS}.json").read_text())
    assert isinstance(ev, list)
    procs = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert {"CANN", "Ascend Hardware", "Communication", "HBM", "NPU MEM", "AI Core Freq"} <= procs
    assert all(isinstance(e["ts"], str) and len(e["ts"].split(".")[1]) == 3 for e in ev if "ts" in e)
    # every compute task of op_summary is on the Ascend Hardware track at the same start
    ops = _read(_mpo(sample) / f"op_summary_{FILE_TS}.csv")
    hw = {(e["name"], e["ts"]) for e in ev if e["ph"] == "X" and e["pid"] == 3170820512}
    assert {(r["Op Name"], r["Task Start Time(us)"].strip()) for r in ops if r["Task Type"] != "HCCL"} == hw


def test_kernels_match_op_summary(sample: Path, con) -> None:  # type: ignore[no-untyped-def]
    ops = _read(_mpo(sample) / f"op_summary_{FILE_TS}.csv")
    rows = _q(
        con,
        "SELECT name, op_type, task_type, device_id, stream_id, task_id, ts_ns, dur_ns, wait_ns, block_dim, "
        "mix_block_dim, input_shapes, output_shapes, is_comm, model_id FROM kernels ORDER BY ts_ns",
    )
    assert (
        len(rows) == len(ops) == 27
    )  # task_time (same tasks) and the JSON's hardware track add no duplicates
    ops.sort(key=lambda r: _ns(r["Task Start Time(us)"]))
    for r, o in zip(rows, ops, strict=True):
        assert r[0] == o["Op Name"] and r[1] == o["OP Type"] and r[2] == o["Task Type"]
        assert r[3] == 0
        assert r[4] == (None if o["Stream ID"] == "N/A" else int(o["Stream ID"]))
        assert r[6] == _ns(o["Task Start Time(us)"])  # exact: Decimal of the text minus its TAB
        assert r[7] == _ns(o["Task Duration(us)"]) and r[8] == _ns(o["Task Wait Time(us)"])
        assert r[9] == int(o["Block Num"])
        assert r[10] == (None if o["Mix Block Num"] == "N/A" else int(o["Mix Block Num"]))
        assert r[11] == (None if o["Input Shapes"] == "N/A" else o["Input Shapes"].replace('"', ""))
        assert '"' not in (r[12] or "")
        assert r[13] == (o["Task Type"] == "HCCL")
        assert r[14] == 4294967295
    first = rows[0]
    assert first[6] == 1736408883704652111 and first[11] == "32,3,224,224"  # read by eye from the CSV


def test_kernels_pmu_bytes_recomputed_with_csv_module(sample: Path, con) -> None:  # type: ignore[no-untyped-def]
    """hbm/ub/l2 bytes = sum over aic/aiv of bw(GB/s) x that side's core time(µs) x 1000, per row."""
    ops = _read(_mpo(sample) / f"op_summary_{FILE_TS}.csv")
    got = {
        (r[0], r[1]): r[2:]
        for r in _q(
            con,
            "SELECT task_id, ts_ns, hbm_read_bytes, hbm_write_bytes, ub_read_bytes, l2_write_bytes, aicore_time_ns, "
            "aiv_time_ns, cardinality(metrics) FROM kernels",
        )
    }

    def side_bytes(o: dict[str, str], metric: str) -> int | None:
        parts = []
        for prefix, tcol in (("aic_", "aicore_time(us)"), ("aiv_", "aiv_time(us)")):
            bw, t = _num(o[prefix + metric]), _num(o[tcol])
            if bw is not None and t is not None:
                parts.append(bw * t * 1000)
        return round(sum(parts)) if parts else None

    checked = 0
    for o in ops:
        key = (None if o["Task ID"] == "N/A" else int(o["Task ID"]), _ns(o["Task Start Time(us)"]))
        hbm_r, hbm_w, ub_r, l2_w, t_aic, t_aiv, n_metrics = got[key]
        for value, metric in ((hbm_r, "main_mem_read_bw(GB/s)"), (hbm_w, "main_mem_write_bw(GB/s)"),
                              (ub_r, "ub_read_bw(GB/s)"), (l2_w, "l2_write_bw(GB/s)")):  # fmt: skip
            want = side_bytes(o, metric)
            assert (value is None) == (want is None)
            if want is not None:
                assert abs(value - want) <= 1, (o["Op Name"], metric, value, want)
                checked += 1
        assert t_aic == (None if o["aicore_time(us)"] == "N/A" else _ns(o["aicore_time(us)"]))
        assert n_metrics == (0 if o["Task Type"] in ("AI_CPU", "HCCL") else 20)
    assert checked == 4 * 21  # 21 AI Core/Vector/MIX rows x 4 byte columns
    # a MatMul (cube only) by hand: aic read 194.649 GB/s x 335.808 µs x 1000 = 65_364_691.392 -> 65_364_691
    mm = _q(con, "SELECT hbm_read_bytes FROM kernels WHERE task_id = 11052")[0][0]
    assert mm == 65_364_691


def test_l2_hit_rate_joined_from_l2_cache(sample: Path, con) -> None:  # type: ignore[no-untyped-def]
    l2 = {
        (int(r["Stream Id"]), int(r["Task Id"])): _num(r["Hit Rate"])
        for r in _read(_mpo(sample) / f"l2_cache_{FILE_TS}.csv")
    }
    rows = _q(
        con, "SELECT stream_id, task_id, l2_hit_rate FROM kernels WHERE task_type NOT IN ('HCCL', 'AI_CPU')"
    )
    assert len(rows) == len(l2) == 21
    assert all(h == l2[(s, t)] for s, t, h in rows)
    assert any(h is None for *_, h in rows) and any(h is not None for *_, h in rows)  # N/A rows stay null
    assert _q(con, "SELECT count(*), count(hit_rate) FROM l2_cache")[0] == (
        21,
        sum(v is not None for v in l2.values()),
    )


def test_memory_kb_to_bytes(con) -> None:  # type: ignore[no-untyped-def]
    # memory_record first APP row: Total Allocated 2048 KB, Total Reserved 4096 KB (msprof KB, not MB)
    rec = _q(
        con, "SELECT allocated_bytes, reserved_bytes FROM memory WHERE kind = 'record' ORDER BY ts_ns LIMIT 1"
    )
    assert rec == [(2_097_152, 4_194_304)]
    mod = dict(_q(con, "SELECT component, reserved_bytes FROM memory WHERE kind = 'module'"))
    assert mod["APP"] == 2_097_152 and mod["HCCL"] == 262144 * 1024 and mod["SLOG"] == 0
    assert mod["IDEDD"] is None  # -1 = only the release was seen: not a size
    assert _q(con, "SELECT extra['Total Reserved(KB)'] FROM memory WHERE component = 'IDEDD'") == [("-1",)]
    ops = _q(
        con,
        "SELECT size_bytes, ts_ns, dur_ns, release_ts_ns FROM memory WHERE kind = 'op' ORDER BY size_bytes",
    )
    assert ops[0][0] == -4096 * 1024 and ops[0][2] is None and ops[0][3] is None
    assert ops[-1][0] == 16384 * 1024
    assert all(r[3] == r[1] + r[2] for r in ops[1:])


def test_npu_mem_rows_in_bytes(sample: Path, con) -> None:  # type: ignore[no-untyped-def]
    src = _read(_mpo(sample) / f"npu_mem_{FILE_TS}.csv")
    got = _q(con, "SELECT component, ts_ns, allocated_bytes FROM memory WHERE kind = 'npu_mem'")
    want = []
    for r in src:
        label = {"app": "APP", "device": "Device"}[r["event"]]
        for kind, col in (("DDR", "ddr(KB)"), ("HBM", "hbm(KB)"), ("Memory", "memory(KB)")):
            want.append((f"{label}/{kind}", _ns(r["timestamp(us)"]), int(r[col]) * 1024))
    assert sorted(got) == sorted(want) and len(want) == 3 * len(src)


def test_npu_mem_counters_when_no_json(sample: Path, tmp_path: Path) -> None:
    import traceql

    prof = tmp_path / sample.name
    shutil.copytree(sample, prof)
    (_mpo(prof) / f"msprof_{FILE_TS}.json").unlink()
    ingest_run(prof, store=tmp_path / "st")
    con = traceql.connect(tmp_path / "st")
    src = _read(_mpo(prof) / f"npu_mem_{FILE_TS}.csv")
    rows = _q(
        con,
        "SELECT channel, ts_ns, value FROM counters WHERE track = 'NPU MEM' AND metric = 'hbm_used' AND unit = 'bytes'",
    )
    want = {
        (
            "APP" if r["event"] == "app" else "Device",
            _ns(r["timestamp(us)"]),
            float(int(r["hbm(KB)"]) * 1024),
        )
        for r in src
    }
    assert set(rows) == want and len(rows) == len(src)
    assert _q(con, "SELECT count(*) FROM counters WHERE track = 'NPU MEM'") == [(3 * len(src),)]


def test_op_stats_and_hbm_summary(sample: Path, con) -> None:  # type: ignore[no-untyped-def]
    st = _read(_mpo(sample) / f"op_statistic_{FILE_TS}.csv")
    got = {
        r[0]: r[1:]
        for r in _q(con, "SELECT name, count, total_ns, ratio FROM op_stats WHERE source = 'op_statistic'")
    }
    assert len(got) == len(st) == 8
    for r in st:
        assert got[r["OP Type"]] == (
            int(r["Count"]),
            _ns(r["Total Time(us)"]),
            pytest.approx(float(r["Ratio(%)"]) / 100),
        )
    assert _q(
        con, "SELECT count(*) FROM op_stats WHERE source = 'api_statistic' AND extra['Device_id'] = 'host'"
    ) == [(6,)]
    comm = _q(con, "SELECT name, count, ratio FROM op_stats WHERE source = 'communication_statistic'")
    assert comm == [("hcom_allReduce_", 3, 1.0)]
    hbm = _read(_mpo(sample) / f"hbm_{FILE_TS}.csv")
    meta = dict(_q(con, "SELECT key, value FROM run_meta WHERE key LIKE 'msprof.hbm.%'"))
    assert len(meta) == 2 * len(hbm) == 4
    for r in hbm:
        assert int(meta[f"msprof.hbm.0.{r['Metric']}.read_bps"]) == int(Decimal(r["Read(MB/s)"]) * 1_000_000)
    assert _q(con, "SELECT value FROM run_meta WHERE key = 'traceql.aic_metrics'") == [("Memory",)]


def _one_csv_run(tmp_path: Path, text: str, name: str = f"op_summary_{FILE_TS}.csv") -> list[tuple]:
    import traceql

    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    info = ingest_run(p, store=tmp_path / "st")
    assert info["format"] == "msprof_text"
    return _q(
        traceql.connect(tmp_path / "st"),
        "SELECT name, block_dim, mix_block_dim, ts_ns, device_id FROM kernels ORDER BY ts_ns",
    )


def test_single_op_summary_csv_and_block_num_vs_block_dim(sample: Path, tmp_path: Path) -> None:
    text = (_mpo(sample) / f"op_summary_{FILE_TS}.csv").read_text()
    old_text = text.replace("Block Num,Mix Block Num", "Block Dim,Mix Block Dim", 1)  # pre-2026 names
    assert old_text != text
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    new = _one_csv_run(tmp_path / "new", text)
    old = _one_csv_run(tmp_path / "old", old_text)
    assert len(new) == 27 and new == old
    ops = _read(_mpo(sample) / f"op_summary_{FILE_TS}.csv")
    assert sorted(r[1] for r in new) == sorted(int(o["Block Num"]) for o in ops)
    assert {r[1] for r in new} == {0, 24, 32, 40, 48}
    assert {r[2] for r in new} == {0, 48, None}  # Mix Block Num: 48 on the MIX_AIC op, N/A on HCCL


def test_op_summary_alone_named_otherwise_and_without_device_column(tmp_path: Path) -> None:
    rows = _one_csv_run(
        tmp_path,
        "Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Dim\n"
        "a,Add,AI_VECTOR_CORE,1736408883704643.212\t,1.5,0,8\n",
        name="ops.csv",
    )
    assert rows == [("a", 8, None, 1736408883704643212, None)]


def test_op_summary_with_thousands_of_extra_columns_is_read_in_bounded_time(tmp_path: Path) -> None:
    """Issue 47's fuzz case: thousands of unknown header columns (snake_case names read as PMU metrics). Each
    was its own SQL expression, in `extra` and three times over in the count of unparsed cells, and DuckDB's
    optimizer (superlinear in their number) took ~16 CPU-s on 3,000 columns and minutes on 5,000; as lambdas
    and one unnest they are one expression each. The subprocess limit is far above the fixed cost and far
    below the old one. Expected values by hand: wide<i> holds i; 'N/A' and '' cells are no value; the text
    'busy' in aic_mac_ratio is kept in extra and counted as one unparsed cell."""
    import subprocess
    import sys

    n = 5000
    head = "Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),aic_mac_ratio,"
    head += ",".join(f"wide{i}" for i in range(n))
    rows = [
        "a,Add,AI_CORE,10,1.5,0.5," + ",".join(str(i) for i in range(n)),
        "b,Mul,AI_CORE,20,2.5,busy," + ",".join("N/A" if i % 2 else "" for i in range(n)),
    ]
    csv_path = tmp_path / f"op_summary_{FILE_TS}.csv"
    csv_path.write_text("\n".join([head, *rows]) + "\n", encoding="utf-8")
    code = (
        "import traceql; from traceql.ingest import ingest\n"
        f"info = ingest({str(csv_path)!r}, store={str(tmp_path / 'st')!r})\n"
        "print([w for w in info['warnings'] if 'not a number' in w])\n"
        f"con = traceql.connect({str(tmp_path / 'st')!r})\n"
        "for r in con.sql('SELECT name, metrics, extra FROM kernels ORDER BY ts_ns').fetchall():\n"
        "    print(r[0], len(r[1]), r[1].get('wide0'), r[1].get('wide4999'), r[2])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    warned, *kernels = out.stdout.splitlines()
    assert kernels == ["a 5001 0.0 4999.0 {}", "b 0 None None {'aic_mac_ratio': 'busy'}"]
    assert (
        "column 'aic_mac_ratio': 1 cell(s) not a number, stored as NULL (first at line 3: 'busy')" in warned
    )


def test_slices_are_parts_of_one_table(sample: Path, tmp_path: Path) -> None:

    prof = tmp_path / sample.name
    shutil.copytree(sample, prof)
    src = _mpo(prof) / f"op_summary_{FILE_TS}.csv"
    lines = src.read_text().splitlines(keepends=True)
    (_mpo(prof) / f"op_summary_slice_0_{FILE_TS}.csv").write_text("".join(lines[:11]))
    (_mpo(prof) / f"op_summary_slice_1_{FILE_TS}.csv").write_text(lines[0] + "".join(lines[11:]))
    src.unlink()
    info = ingest_run(prof, store=tmp_path / "st")
    assert info["rows"]["kernels"] == 27


def test_split_name() -> None:
    from traceql.parsers.msprof import split_name

    assert split_name("op_summary_20250109074803.csv") == ("op_summary", 0, "csv")
    assert split_name("op_summary_slice_2_20250109074803.csv") == ("op_summary", 2, "csv")
    assert split_name("op_summary_0_1.csv") == ("op_summary", 0, "csv")
    assert split_name("npu_module_mem_20250109074803.csv") == ("npu_module_mem", 0, "csv")
    assert split_name("l2_cache_20250109074803.csv") == ("l2_cache", 0, "csv")
    assert split_name("msprof_20250109074803.json") == ("msprof", 0, "json")
    assert split_name("msprof_tx_20250109074803.json") == ("msprof_tx", 0, "json")
    assert split_name("README.txt") is None


def test_task_time_gives_kernels_when_op_summary_is_absent(sample: Path, tmp_path: Path) -> None:
    import traceql

    prof = tmp_path / sample.name
    shutil.copytree(sample, prof)
    (_mpo(prof) / f"op_summary_{FILE_TS}.csv").unlink()
    ingest_run(prof, store=tmp_path / "st")
    tt = _read(_mpo(prof) / f"task_time_{FILE_TS}.csv")
    rows = _q(
        traceql.connect(tmp_path / "st"),
        "SELECT name, ts_ns, dur_ns, task_type FROM kernels WHERE stream_id = 2 OR is_comm ORDER BY ts_ns",
    )
    want = sorted(
        (r["kernel_name"], _ns(r["task_start(us)"]), _ns(r["task_time(us)"]), r["kernel_type"]) for r in tt
    )
    assert sorted(rows, key=lambda r: r[1]) == sorted(want, key=lambda r: r[1])


def test_claims(sample: Path, tmp_path: Path) -> None:
    from traceql.parsers import detect
    from traceql.parsers.msprof import MsprofTextParser

    p = MsprofTextParser()
    assert [u.parser for u in detect(sample)] == ["msprof_text"]
    assert p.claim(_mpo(sample)) and p.claim(_mpo(sample) / f"op_summary_{FILE_TS}.csv")
    assert p.claim(_mpo(sample) / f"npu_mem_{FILE_TS}.csv") is None
    db_only = tmp_path / "PROF_000002_20250109074803123_ABC"
    db_only.mkdir()
    (db_only / "msprof_20250109074803.db").write_bytes(b"SQLite format 3\x00")
    (db_only / "device_0").mkdir()
    assert p.claim(db_only) is None  # left to msprof_db


def test_older_layout_device_summary_folders(sample: Path, tmp_path: Path) -> None:
    """PROF_*/device_{id}/summary (CANN <= 6.x): one unit per device; device id from the folder."""
    import traceql

    prof = tmp_path / "PROF_000003_20230101000000000_OLD"
    text = (_mpo(sample) / f"op_summary_{FILE_TS}.csv").read_text()
    lines = text.splitlines()
    no_dev = "\n".join(line.split(",", 1)[1] for line in lines) + "\n"  # drop the Device_id column
    for dev in (0, 1):
        (prof / f"device_{dev}" / "summary").mkdir(parents=True)
        (prof / f"device_{dev}" / "summary" / f"op_summary_{dev}_1.csv").write_text(no_dev)
    info = ingest_run(prof, store=tmp_path / "st")
    assert info["ranks_count"] == 2
    got = _q(
        traceql.connect(tmp_path / "st"),
        "SELECT rank, device_id, count(*) FROM kernels GROUP BY ALL ORDER BY rank",
    )
    assert got == [(0, 0, 27), (1, 1, 27)]


# --------------------------------------------------------------------------------------------------------
# bad inputs through the CLI: exit 1, one line naming the file
# --------------------------------------------------------------------------------------------------------
def _bad_folder(tmp_path: Path, sample: Path, op_summary: bytes) -> Path:
    prof = tmp_path / sample.name
    shutil.copytree(sample, prof)
    (_mpo(prof) / f"op_summary_{FILE_TS}.csv").write_bytes(op_summary)
    return prof


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"Device_id,Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us)\n", "no data rows"),
        (b"Device_id,Op Name,OP Type\n0,a,Add\n", "missing required column"),
        (b"Device_id,Op Name,\xff\xfeTask Start Time(us),Task Duration(us)\n0,a,1,2\n", "not UTF-8"),
        (b"Device_id,Op Name,Task Start Time(us),Task Duration(us)\n0,a\xff\xfe,1,2\n", "malformed CSV"),
    ],
)
def test_bad_op_summary_in_folder(cli, sample: Path, tmp_path: Path, content: bytes, message: str) -> None:  # type: ignore[no-untyped-def]
    prof = _bad_folder(tmp_path, sample, content)
    r = cli("ingest", prof, "--store", tmp_path / "st", "-q")
    assert r.code == 1, r
    assert f"op_summary_{FILE_TS}.csv" in r.err and message in r.err
    assert "Traceback" not in r.err


def test_bad_single_op_summary_csv(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "op_summary_1.csv"
    p.write_text("Device_id,Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us)\n")
    r = cli("ingest", p, "--store", tmp_path / "st", "-q")
    assert r.code == 1 and "op_summary_1.csv" in r.err and "no data rows" in r.err, r


def test_bad_secondary_csv_is_named(cli, sample: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    prof = tmp_path / sample.name
    shutil.copytree(sample, prof)
    (_mpo(prof) / f"memory_record_{FILE_TS}.csv").write_text("Device_id,Foo\n0,1\n")
    r = cli("ingest", prof, "--store", tmp_path / "st", "-q")
    assert r.code == 1 and f"memory_record_{FILE_TS}.csv" in r.err and "Component" in r.err, r


def test_cli_ingest_sample(cli, sample: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("ingest", sample, "--store", tmp_path / "st", "-q", "--name", "ms")
    assert r.code == 0, r
    assert "msprof_text" in r.out and "kernels 27" in r.out


def test_msprof_json_through_trace_view(sample: Path, con) -> None:  # type: ignore[no-untyped-def]
    """The JSON adds host ops, counters and collectives, but no second copy of the op_summary kernels."""
    import json

    pytest.importorskip(
        "traceql.parsers.trace_view", reason="the shared chrome-trace reader is not written yet"
    )
    ev = json.loads((_mpo(sample) / f"msprof_{FILE_TS}.json").read_text())
    cann_x = sum(1 for e in ev if e["ph"] == "X" and e["pid"] == 3170820320)
    hbm_c = sum(1 for e in ev if e["ph"] == "C" and e["pid"] == 3170820640)
    mem_c = sum(1 for e in ev if e["ph"] == "C" and e["pid"] == 3170820704)
    assert _q(con, "SELECT count(*) FROM kernels") == [(27,)]
    assert _q(con, "SELECT count(*) FROM host_ops") == [(cann_x,)]
    assert _q(con, "SELECT count(*) FROM counters WHERE track = 'HBM'") == [(hbm_c,)]
    # NPU MEM counters come from the JSON only (npu_mem_*.csv goes to `memory` then): no duplicates
    assert _q(con, "SELECT count(*) FROM counters WHERE track = 'NPU MEM'") == [(mem_c,)]
    # the msprof track is called `Communication` (torch_npu: `HCCL`): its 3 allReduce ops are collectives
    assert _q(con, "SELECT count(*) FROM comm_ops") == [(3,)]


def test_npu_mem_csv_counters_equal_the_json_counters(sample: Path, con, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Without the JSON, npu_mem_*.csv yields the same NPU MEM series trace_view reads from the JSON."""
    import traceql

    pytest.importorskip(
        "traceql.parsers.trace_view", reason="the shared chrome-trace reader is not written yet"
    )
    prof = tmp_path / sample.name
    shutil.copytree(sample, prof)
    (_mpo(prof) / f"msprof_{FILE_TS}.json").unlink()
    ingest_run(prof, store=tmp_path / "st")
    sql = (
        "SELECT channel, metric, unit, name, ts_ns, value FROM counters WHERE track = 'NPU MEM' ORDER BY ALL"
    )
    from_csv = _q(traceql.connect(tmp_path / "st"), sql)
    assert from_csv == _q(con, sql) and len(from_csv) == 36


def test_empty_side_files_are_skipped_with_a_warning(sample: Path, tmp_path: Path) -> None:
    prof = tmp_path / sample.name
    shutil.copytree(sample, prof)
    for name in (f"npu_mem_{FILE_TS}.csv", f"msprof_{FILE_TS}.json"):
        (_mpo(prof) / name).write_bytes(b"")
    info = ingest_run(prof, store=tmp_path / "st")
    assert info["rows"]["kernels"] == 27 and "counters" not in info["rows"]
    assert sum("empty file, skipped" in w for w in info["warnings"]) == 2
