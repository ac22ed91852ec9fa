"""traceql.synth: the synthetic torch_npu dumps are read back with plain csv/json (not traceql's parsers) and
checked against numbers computed by hand in the comments; then the committed samples are checked for size
and drift, and (when the parsers exist) ingested."""

from __future__ import annotations

import csv
import hashlib
import json
import random
from decimal import Decimal
from pathlib import Path

import pytest

from traceql.synth import (
    BASE_NS,
    MiB,
    Scenario,
    article_scenario,
    derive_hbm_counters,
    large_trace_view,
    write_cluster,
    write_torch_npu_dump,
)
from traceql.synth._text import dur_text, us_text

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
OUT = "ASCEND_PROFILER_OUTPUT"


# ---- helpers: independent readers -------------------------------------------------------------------------
def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def us_to_ns(text: str) -> int:
    return int(Decimal(text.strip()) * 1000)


def trace(path: Path) -> list[dict]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, list), "trace_view.json must be a JSON array"
    return data


def process_names(events: list[dict]) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}


def one_op_scenario(**op_kw: object) -> Scenario:
    """1 rank, HBM sampled every 1 ms on 4 channels, one step [0, 5 ms)."""
    sc = Scenario(n_ranks=1, hbm_period_ns=1_000_000, hbm_channels=4)
    r0 = sc.rank(0)
    r0.add_step(1, start_ns=0, dur_ns=5_000_000)
    kw = {
        "start_ns": 1_000_000,
        "dur_ns": 1_000_000,
        "task_type": "AI_VECTOR_CORE",
        "hbm_read_bytes": 4 * MiB,
        "hbm_write_bytes": 4 * MiB,
        "input_shapes": ("8,4096,4096",),
        "input_dtypes": ("FLOAT16",),
        "input_formats": ("ND",),
        "output_shapes": ("8,4096,4096",),
        "output_dtypes": ("FLOAT16",),
        "output_formats": ("ND",),
    }
    kw.update(op_kw)
    r0.add_op("Tanh_1", "Tanh", **kw)  # type: ignore[arg-type]
    return sc


# ---- time text ---------------------------------------------------------------------------------------------
def test_us_text_is_exact():
    assert us_text(1736408883704643212) == "1736408883704643.212"
    assert us_text(BASE_NS) == "1736408883000000.000"
    assert dur_text(53741) == "53.741" and dur_text(6540) == "6.54" and dur_text(2000) == "2.0"
    rng = random.Random(7)
    for _ in range(2000):  # a double cannot hold these; the text must
        ns = BASE_NS + rng.randrange(10**12)
        assert int(Decimal(us_text(ns)) * 1000) == ns
        d = rng.randrange(10**9)
        assert int(Decimal(dur_text(d)) * 1000) == d


# ---- kernel_details.csv ------------------------------------------------------------------------------------
def test_memory_group_kernel_details(tmp_path: Path):
    write_torch_npu_dump(one_op_scenario(), tmp_path, aic_metrics="Memory")
    path = tmp_path / "rank0_ascend_pt" / OUT / "kernel_details.csv"
    raw = path.read_bytes()
    assert raw.count(b"\r\n") == 2 and b"\n" not in raw.replace(b"\r\n", b"")  # CRLF like the real file
    assert b'"""8,4096,4096"""' in raw  # shape cell holds literal quotes
    rows = read_csv(path)
    assert len(rows) == 1
    row = rows[0]
    assert list(row)[:3] == ["Step Id", "Model ID", "Task ID"]
    assert "aic_main_mem_read_bw(GB/s)" in row and "aiv_ub_write_bw(GB/s)" in row and "Block Dim" in row
    assert row["Start Time(us)"] == "1736408883001000.000\t"  # trailing TAB kept
    assert us_to_ns(row["Start Time(us)"]) == BASE_NS + 1_000_000
    assert row["Input Shapes"] == '"8,4096,4096"'
    assert row["Step Id"] == "1" and row["Accelerator Core"] == "AI_VECTOR_CORE"
    # vector op: aic side is zero; aiv: 4 MiB over 1000 us = 4194304 B / 1e-3 s = 4.194304 GB/s (GB = 1e9)
    assert row["aicore_time(us)"] == "0.0" and row["aic_main_mem_read_bw(GB/s)"] == "0.0"
    assert row["aiv_time(us)"] == "1000.0"
    assert float(row["aiv_main_mem_read_bw(GB/s)"]) == pytest.approx(4.194304, rel=1e-12)
    nbytes = float(row["aiv_main_mem_read_bw(GB/s)"]) * 1e9 * float(row["aiv_time(us)"]) * 1e-6
    assert round(nbytes) == 4 * MiB
    assert row["aiv_total_cycles"] == str(1000 * 1800)  # 1000 us at 1800 MHz


def test_memory_access_group_and_renamed_columns(tmp_path: Path):
    sc = one_op_scenario(task_type="MIX_AIC")
    write_torch_npu_dump(sc, tmp_path, aic_metrics="MemoryAccess", block_col="Block Num", device_id_col=True)
    rows = read_csv(tmp_path / "rank0_ascend_pt" / OUT / "kernel_details.csv")
    head = list(rows[0])
    assert head[:4] == ["Step Id", "Device_id", "Model ID", "Task ID"]
    assert "Block Num" in head and "Mix Block Num" in head and "Block Dim" not in head
    # the msprof op_summary header names (aic_ block, then aiv_ block)
    assert head[head.index("aicore_time(us)") : head.index("aiv_time(us)")] == [
        "aicore_time(us)",
        "aic_total_cycles",
        "aic_read_main_memory_datas(KB)",
        "aic_write_main_memory_datas(KB)",
        "aic_GM_to_L1_datas(KB)",
        "aic_L0C_to_L1_datas(KB)",
        "aic_L0C_to_GM_datas(KB)",
        "aic_GM_to_UB_datas(KB)",
        "aic_UB_to_GM_datas(KB)",
    ]
    row = rows[0]
    # MIX task: half the traffic on each core: 4 MiB / 2 / 1024 = 2048 KB read per core
    assert float(row["aic_read_main_memory_datas(KB)"]) == 2048.0
    assert float(row["aiv_read_main_memory_datas(KB)"]) == 2048.0
    assert float(row["aiv_write_main_memory_datas(KB)"]) == 2048.0
    assert row["Context ID"] == "0"
    info = json.loads((tmp_path / "rank0_ascend_pt" / "profiler_info_0.json").read_text())
    assert info["config"]["experimental_config"]["_aic_metrics"] == "ACL_AICORE_MEMORY_ACCESS"


def test_l2cache_group_and_l2_cache_csv(tmp_path: Path):
    sc = one_op_scenario(l2_read_hits=300, l2_read_misses=101, l2_write_hits=7, l2_write_misses=3)
    write_torch_npu_dump(sc, tmp_path, aic_metrics="L2Cache", l2_cache=True)
    out = tmp_path / "rank0_ascend_pt" / OUT
    row = read_csv(out / "kernel_details.csv")[0]
    # vector op: everything on aiv; r0 gets half (floored), r1 the rest
    assert [
        row[f"aiv_{c}"]
        for c in (
            "write_cache_hit",
            "write_cache_miss_allocate",
            "r0_read_cache_hit",
            "r0_read_cache_miss_allocate",
            "r1_read_cache_hit",
            "r1_read_cache_miss_allocate",
        )
    ] == ["7", "3", "150", "50", "150", "51"]
    assert float(row["aic_r0_read_cache_hit"]) == 0
    (l2,) = read_csv(out / "l2_cache.csv")
    assert list(l2) == ["Stream Id", "Task Id", "Hit Rate", "Victim Rate", "Op Name"]
    assert float(l2["Hit Rate"]) == pytest.approx(300 / 401, abs=1e-6) and l2["Op Name"] == "Tanh_1"


def test_pipe_utilization_header_matches_real_dump(tmp_path: Path):
    write_torch_npu_dump(one_op_scenario(task_type="AI_CORE"), tmp_path)
    head = (tmp_path / "rank0_ascend_pt" / OUT / "kernel_details.csv").read_text().splitlines()[0]
    # copied from real_traces/.../level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv
    assert head == (
        "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
        "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
        "Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),aic_total_cycles,"
        "aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,"
        "aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),"
        "aiv_total_cycles,aiv_vec_time(us),aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),"
        "aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)"
    )


# ---- HBM counters ------------------------------------------------------------------------------------------
def hbm_by_ts(events: list[dict]) -> dict[str, dict[str, float]]:
    """ts -> {"HBM 0/Read": MB/s, ...}"""
    names = process_names(events)
    out: dict[str, dict[str, float]] = {}
    for e in events:
        if e["ph"] == "C" and names.get(e["pid"]) == "HBM":
            (val,) = e["args"].values()
            out.setdefault(e["ts"], {})[e["name"]] = val
    return out


def test_hbm_counters_agree_with_op_bytes(tmp_path: Path):
    write_torch_npu_dump(one_op_scenario(), tmp_path, aic_metrics="Memory")
    ev = trace(tmp_path / "rank0_ascend_pt" / OUT / "trace_view.json")
    hbm = hbm_by_ts(ev)
    # windows [0,1) [1,2) ... [4,5) ms; the op fills [1 ms, 2 ms): 4 MiB read + 4 MiB write in 1 ms
    assert sorted(hbm) == [us_text(BASE_NS + k * 1_000_000) for k in range(5)]
    busy = hbm[us_text(BASE_NS + 1_000_000)]
    for ch in range(4):  # 4194304 B / 1 ms = 4194.304 MB/s over 4 channels = 1048.576 MB/s each
        assert busy[f"HBM {ch}/Read"] == pytest.approx(1048.576)
        assert busy[f"HBM {ch}/Write"] == pytest.approx(1048.576)
    assert sum(busy.values()) == pytest.approx(8388.608)  # 8 MiB/ms = 8.388608 GB/s
    for k in (0, 2, 3, 4):
        assert all(v == 0.0 for v in hbm[us_text(BASE_NS + k * 1_000_000)].values())
    assert all(isinstance(e["ts"], str) and len(e["ts"].split(".")[1]) == 3 for e in ev if "ts" in e)


def test_counter_window_split_by_hand():
    # 4 MiB read over [0.5 ms, 2.5 ms), 1 ms windows: 1/4, 1/2, 1/4 of the bytes
    s = derive_hbm_counters([(500_000, 2_000_000, 4 * MiB, 0)], 1_000_000, 4, end_ns=3_000_000)
    assert [x.ts_ns for x in s.samples] == [0, 1_000_000, 2_000_000]
    assert [x.read_bps for x in s.samples] == pytest.approx([1 * MiB * 1000, 2 * MiB * 1000, 1 * MiB * 1000])
    assert s.channel_mbps(s.samples[1])[0] == pytest.approx(524.288)  # 2 MiB/ms / 4 channels in MB/s
    e = derive_hbm_counters([(500_000, 2_000_000, 4 * MiB, 0)], 1_000_000, 4, end_ns=3_000_000, stamp="end")
    assert [x.ts_ns for x in e.samples] == [1_000_000, 2_000_000, 3_000_000]


def test_article_sample_counters_sum_to_kernel_and_copy_bytes(tmp_path: Path):
    """Over the whole timeline, sum(counter MB/s x 1 ms) == bytes of kernels (bw x time) + H2D copies."""
    write_torch_npu_dump(article_scenario(2, steps=2), tmp_path, aic_metrics="Memory")
    for r in (0, 1):
        out = tmp_path / f"rank{r}_ascend_pt" / OUT
        kernel_bytes = 0.0
        for row in read_csv(out / "kernel_details.csv"):
            if row["Accelerator Core"] == "HCCL":
                continue
            for core, t in (("aic", "aicore_time(us)"), ("aiv", "aiv_time(us)")):
                secs = float(row[t]) * 1e-6
                for d in ("read", "write"):
                    kernel_bytes += float(row[f"{core}_main_mem_{d}_bw(GB/s)"]) * 1e9 * secs
        ev = trace(out / "trace_view.json")
        copies = sum(e["args"]["size(B)"] for e in ev if e["ph"] == "X" and e["name"] == "MEMCPY_ASYNC")
        assert copies == 2 * 4 * MiB  # one 4 MiB batch per step
        counter_bytes = sum(sum(v.values()) * 1e6 * 1e-3 for v in hbm_by_ts(ev).values())
        assert counter_bytes == pytest.approx(kernel_bytes + copies, rel=1e-9)


def test_article_story_rank1_saturated_rank0_waits(tmp_path: Path):
    write_torch_npu_dump(article_scenario(2, steps=1), tmp_path, aic_metrics="Memory")
    peak_mbps = 1.6e12 / 1e6
    util = {}
    for r in (0, 1):
        hbm = hbm_by_ts(trace(tmp_path / f"rank{r}_ascend_pt" / OUT / "trace_view.json"))
        util[r] = sorted((sum(v.values()) / peak_mbps for v in hbm.values()), reverse=True)
    # rank 1 streams 5 unfused LayerNorm passes per layer at 93% of 1.6 TB/s: >= 4 whole 1 ms windows above 90%
    assert sum(u > 0.9 for u in util[1]) >= 4 and util[1][0] <= 0.93 + 1e-9
    assert sum(u > 0.9 for u in util[1]) > sum(u > 0.9 for u in util[0])
    comm = {
        r: json.loads((tmp_path / f"rank{r}_ascend_pt" / OUT / "communication.json").read_text())
        for r in (0, 1)
    }
    ops = {r: comm[r]["step1"]["collective"]["hcom_allReduce__586_0_1@17522688603477080586"] for r in (0, 1)}
    # rank 0 waits for rank 1's 4 extra LayerNorm passes x 2 layers, each 512 MiB at 1.488e12 B/s
    # (= 360.800 us, rounded to the ns) + 2 us gap: 8 x 362.8 us = 2.9024 ms
    assert ops[0]["Communication Time Info"]["Wait Time(ms)"] == pytest.approx(2.9024)
    assert ops[1]["Communication Time Info"]["Wait Time(ms)"] == 0
    for r in (0, 1):
        t = ops[r]["Communication Time Info"]
        assert t["Elapse Time(ms)"] == pytest.approx(
            t["Transit Time(ms)"] + t["Wait Time(ms)"] + t["Idle Time(ms)"]
        )
        bw = ops[r]["Communication Bandwidth Info"]
        assert bw["HCCS"]["Transit Size(MB)"] == pytest.approx(48 * MiB / 1e6)  # MB = 1e6 B
        assert bw["SDMA"]["Transit Size(MB)"] == bw["HCCS"]["Transit Size(MB)"]  # SDMA = HCCS + PCIE + SIO
        assert bw["HCCS"]["Bandwidth(GB/s)"] == pytest.approx(32.0)  # 48 MiB over 48 MiB/32e9 s
        assert bw["RDMA"]["Transit Size(MB)"] == 0
    exact = {
        r: json.loads(
            (tmp_path / f"rank{r}_ascend_pt" / OUT / "communication.json").read_text(), parse_float=Decimal
        )
        for r in (0, 1)
    }  # a double cannot hold the start us exactly
    start = {
        r: exact[r]["step1"]["collective"]["hcom_allReduce__586_0_1@17522688603477080586"][
            "Communication Time Info"
        ]["Start Timestamp(us)"]
        for r in (0, 1)
    }
    assert start[1] - start[0] == Decimal("2902.400")  # rank 1 arrives 2.9024 ms later
    matrix = json.loads((tmp_path / "rank1_ascend_pt" / OUT / "communication_matrix.json").read_text())
    links = matrix["step1"]["collective"]["allreduce-top1@17522688603477080586"]
    assert links["1-0"]["Transport Type"] == "HCCS" and links["1-0"]["Op Name"] == "hcom_allReduce__586_0_1"


def test_trace_view_shapes(tmp_path: Path):
    write_torch_npu_dump(article_scenario(2, steps=1), tmp_path, aic_metrics="Memory")
    ev = trace(tmp_path / "rank1_ascend_pt" / OUT / "trace_view.json")
    names = process_names(ev)
    assert set(names.values()) >= {
        "Python",
        "CANN",
        "Ascend Hardware",
        "HCCL",
        "HBM",
        "LLC",
        "NPU MEM",
        "Overlap Analysis",
    }
    by_name = {v: k for k, v in names.items()}
    # device pid = (host pid << 10) | (sort index << 5) | device id, as in the real dump (3170822561 for rank 1)
    assert by_name["Ascend Hardware"] == (3096506 << 10) | (13 << 5) | 1 == 3170822561
    assert isinstance(ev, list) and all(isinstance(e.get("dur", 0), (int, float)) for e in ev)
    steps = [e for e in ev if e["ph"] == "X" and e["name"].startswith("ProfilerStep#")]
    assert [e["name"] for e in steps] == ["ProfilerStep#1"] and names[steps[0]["pid"]] == "Python"
    flows = {}
    for e in ev:
        if e["ph"] in "sf":
            flows.setdefault((e["cat"], str(e["id"])), {})[e["ph"]] = e
    assert flows and all(set(v) == {"s", "f"} for v in flows.values())
    for (cat, _), v in flows.items():  # flows go forward in time, host -> device
        assert Decimal(v["s"]["ts"]) <= Decimal(v["f"]["ts"])
        assert names[v["f"]["pid"]] in ("Ascend Hardware", "HCCL")
        assert cat in ("async_npu", "HostToDevice")
    hccl = [e for e in ev if e["ph"] == "X" and names[e["pid"]] == "HCCL" and e["tid"] == 0]
    assert [e["name"] for e in hccl] == ["hcom_allReduce__586_0_1"]


# ---- repetition (render once, replay) -----------------------------------------------------------------------
def test_repeat_shifts_time_steps_and_ids(tmp_path: Path):
    sc = article_scenario(2, steps=2, step_ns=20_000_000)
    one = tmp_path / "one"
    three = tmp_path / "three"
    write_torch_npu_dump(sc, one, aic_metrics="Memory")
    write_torch_npu_dump(sc, three, aic_metrics="Memory", repeat=3)
    a = read_csv(one / "rank1_ascend_pt" / OUT / "kernel_details.csv")
    b = read_csv(three / "rank1_ascend_pt" / OUT / "kernel_details.csv")
    assert len(b) == 3 * len(a)
    for k in range(3):  # repetition k: +k seconds, step ids advanced by 2 per repetition
        for ra, rb in zip(a, b[k * len(a) : (k + 1) * len(a)], strict=True):
            assert us_to_ns(rb["Start Time(us)"]) - us_to_ns(ra["Start Time(us)"]) == k * 1_000_000_000
            assert int(rb["Step Id"]) == int(ra["Step Id"]) + 2 * k
            assert (
                rb["Name"] == ra["Name"]
                and rb["aiv_main_mem_read_bw(GB/s)"] == ra["aiv_main_mem_read_bw(GB/s)"]
            )
    ev = trace(three / "rank1_ascend_pt" / OUT / "trace_view.json")
    assert [e["name"] for e in ev if e["name"].startswith("ProfilerStep#")] == [
        f"ProfilerStep#{i}" for i in range(1, 7)
    ]
    sids = [e["id"] for e in ev if e["ph"] == "s"]
    assert len(sids) == len(set(map(str, sids)))  # flow ids stay unique across repetitions
    comm = json.loads((three / "rank1_ascend_pt" / OUT / "communication.json").read_text())
    assert list(comm) == [f"step{i}" for i in range(1, 7)]
    steps = read_csv(three / "rank1_ascend_pt" / OUT / "step_trace_time.csv")
    assert [r["Step"] for r in steps] == [str(i) for i in range(1, 7)]


def test_repeat_rejects_patterns_longer_than_a_second(tmp_path: Path):
    sc = one_op_scenario(start_ns=1_500_000_000)
    with pytest.raises(ValueError, match="period"):
        write_torch_npu_dump(sc, tmp_path, repeat=2)


def test_large_trace_view_is_valid_and_deterministic(tmp_path: Path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    info = large_trace_view(a, 3_000_000, seed=3)
    large_trace_view(b, 3_000_000, seed=3)
    assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()
    assert info["bytes"] == a.stat().st_size >= 3_000_000
    ev = trace(a)
    phases = {p: sum(e["ph"] == p for e in ev) / len(ev) for p in "XCsfM"}
    assert 0.45 < phases["X"] < 0.75 and 0.2 < phases["C"] < 0.45 and phases["s"] == phases["f"] > 0
    assert all(isinstance(e["ts"], str) for e in ev if "ts" in e)
    assert any(e["name"] == "HBM 0/Read" for e in ev) and any(e["name"].startswith("LLC 0") for e in ev)


def test_write_cluster_size_and_shape(tmp_path: Path):
    info = write_cluster(tmp_path, 2, 4_000_000, seed=0)
    assert info["repetitions"] >= 1
    for r in (0, 1):
        out = tmp_path / f"rank{r}_ascend_pt" / OUT
        size = sum(p.stat().st_size for p in out.iterdir())
        assert size >= 4_000_000
        rows = read_csv(out / "kernel_details.csv")
        steps = sorted({int(x["Step Id"]) for x in rows})
        assert steps == list(range(1, len(steps) + 1))
        trace(out / "trace_view.json")


# ---- committed samples ----------------------------------------------------------------------------------------
def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["torch_npu_2rank", "msprof", "kineto_cpu"])
def test_samples_are_small(name: str):
    folder = SAMPLES / name
    if not folder.exists():
        pytest.skip(f"{folder} not generated")
    size = sum(len(b) for b in _files(folder).values())
    assert 0 < size < 500 * 1024


def test_samples_match_a_fresh_generation(tmp_path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(["--out", str(tmp_path)])
    for name in ("torch_npu_2rank", "msprof"):
        if not (tmp_path / name).exists():
            continue  # the msprof writer is not there yet
        assert _files(tmp_path / name) == _files(SAMPLES / name), (
            f"sample_traces/{name} is stale: rerun make_samples.py"
        )


def test_ingest_two_rank_sample(tmp_path: Path):
    pytest.importorskip("traceql.parsers.torch_npu")
    from traceql.engine import connect
    from traceql.ingest import ingest
    from traceql.store import Store

    sc = article_scenario(2, steps=3, slow_ranks=(1,))  # what make_samples.py writes
    sc.finalize()
    st = Store(tmp_path / "store")
    info = ingest(SAMPLES / "torch_npu_2rank", st, name="s2", workers=1)
    assert info["run_id"] == "s2"
    con = connect(st)
    for rt in sc.ranks:
        n, rd, wr = con.execute(
            f"SELECT count(*), sum(hbm_read_bytes), sum(hbm_write_bytes) FROM kernels "
            f"WHERE rank = {rt.rank} AND task_type <> 'HCCL'"
        ).fetchall()[0]
        assert n == len(rt.ops)
        assert rd == sum(o.hbm_read_bytes for o in rt.ops) and wr == sum(o.hbm_write_bytes for o in rt.ops)
        (nc,) = con.execute(f"SELECT count(*) FROM comm_ops WHERE rank = {rt.rank}").fetchall()[0]
        assert nc == len(rt.comms) == 3
        waits = [
            w
            for (w,) in con.execute(
                f"SELECT wait_ns FROM comm_ops WHERE rank = {rt.rank} ORDER BY ts_ns"
            ).fetchall()
        ]
        assert waits == [c.wait_ns for c in rt.comms]
        (ns,) = con.execute(f"SELECT count(*) FROM steps WHERE rank = {rt.rank}").fetchall()[0]
        assert ns == 3


def test_ingest_counters_from_sample(tmp_path: Path):
    pytest.importorskip("traceql.parsers.torch_npu")
    pytest.importorskip("traceql.parsers.trace_view")
    from traceql.engine import connect
    from traceql.ingest import ingest
    from traceql.store import Store

    st = Store(tmp_path / "store")
    ingest(SAMPLES / "torch_npu_2rank", st, name="s2", workers=1)
    con = connect(st)
    sc = article_scenario(2, steps=3, slow_ranks=(1,))
    for r in (0, 1):
        series = sc.hbm_counters(r)
        got = con.execute(
            f"SELECT ts_ns, sum(value) FROM counters WHERE rank = {r} AND track = 'HBM' "
            "AND metric = 'read_bw' GROUP BY ts_ns ORDER BY ts_ns"
        ).fetchall()
        assert len(got) == len(series.samples)
        for (ts, v), s in zip(got, series.samples, strict=True):
            assert ts == sc.base_ns + s.ts_ns and v == pytest.approx(s.read_bps, rel=1e-9)
    # every task (kernel, copy, collective) has a torch_to_npu and a HostToDevice flow and two host events
    # (its cpu_op and its CANN launch); plus one ProfilerStep#N per step
    tasks = {0: 45 + 3 + 3, 1: 69 + 3 + 3}  # rank 0: 15 ops/step fused, rank 1: 23 ops/step unfused; x3 steps
    for r, n in tasks.items():
        (nf,) = con.execute(f"SELECT count(*) FROM flows WHERE rank = {r}").fetchall()[0]
        (nh,) = con.execute(f"SELECT count(*) FROM host_ops WHERE rank = {r}").fetchall()[0]
        assert (nf, nh) == (2 * n, 2 * n + 3)
