"""Golden tests: tiny stores built from canonical rows so every answer is known by construction.

Expected values are computed by hand in the comments next to them (never copied from the query's output).
Units: times in ns (MS = 1e6 ns, US = 1e3 ns), bytes, bandwidth bytes/s.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from _canon import MS, US, MiB, build_store

from traceql import queries
from traceql.analysis import Analysis

PEAK = 1e12  # a round HBM peak (bytes/s) for the timeline tests


def rows(table: Any) -> list[dict[str, Any]]:
    return table.to_pylist()


def by(table: Any, *keys: str) -> dict[Any, dict[str, Any]]:
    out = {}
    for r in rows(table):
        k = tuple(r[x] for x in keys)
        out[k if len(k) > 1 else k[0]] = r
    return out


def approx(x: float, rel: float = 1e-9, abs_: float = 1e-6) -> Any:
    return pytest.approx(x, rel=rel, abs=abs_)


def kernel(
    name: str, t0: int, t1: int, *, util: float | None = None, peak: float = PEAK, **kw: Any
) -> dict[str, Any]:
    """A compute kernel on [t0, t1); util: PMU bytes making it run at util x peak (half read, half write)."""
    d: dict[str, Any] = {
        "name": name,
        "op_type": kw.pop("op_type", name),
        "ts_ns": t0,
        "dur_ns": t1 - t0,
        "is_comm": False,
        "task_type": "AI_CORE",
        "step": kw.pop("step", 1),
    }
    if util is not None:
        b = round(util * peak * (t1 - t0) / 1e9)
        d.update(hbm_read_bytes=b // 2, hbm_write_bytes=b - b // 2)
    d.update(kw)
    return d


def hccl(name: str, t0: int, t1: int, **kw: Any) -> dict[str, Any]:
    return dict(
        name=name,
        op_type="hcom_allReduce_",
        ts_ns=t0,
        dur_ns=t1 - t0,
        is_comm=True,
        task_type="HCCL",
        step=kw.pop("step", 1),
        **kw,
    )


def allreduce(
    t0: int, t1: int, transit: int, group: str = "g1", name: str = "hcom_allReduce__1_0_1"
) -> dict[str, Any]:
    return {
        "name": name,
        "op_type": "allreduce",
        "group_name": group,
        "kind": "collective",
        "ts_ns": t0,
        "dur_ns": t1 - t0,
        "transit_ns": transit,
        "step": 1,
        "source": "communication.json",
    }


# ---- op_hbm_bytes: pmu and modeled bytes, shares, achieved bandwidth vs the article's Ascend 910 peak -------
@pytest.fixture(scope="module")
def bytes_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bytes") / "store"
    r0 = {
        "kernels": [
            # Tanh reads 4 MiB and writes 4 MiB in 10 us, twice (PMU bytes)
            kernel("Tanh", 0, 10 * US, hbm_read_bytes=4 * MiB, hbm_write_bytes=4 * MiB),
            kernel("Tanh", 20 * US, 30 * US, hbm_read_bytes=4 * MiB, hbm_write_bytes=4 * MiB),
            # MatMul without PMU bytes: modeled from shapes: 2 fp16 inputs 1024x1024 (2 MiB each), fp16 output
            kernel(
                "MatMul",
                40 * US,
                48 * US,
                input_shapes="1024,1024;1024,1024",
                input_dtypes="FLOAT16;FLOAT16",
                output_shapes="1024,1024",
                output_dtypes="FLOAT16",
            ),
            # Add with both: PMU 16 KiB read + 4 KiB written; modeled 2 x 1024 fp32 in (8 KiB), 1024 fp32 out (4 KiB)
            kernel(
                "Add",
                50 * US,
                51 * US,
                hbm_read_bytes=16384,
                hbm_write_bytes=4096,
                input_shapes="1024;1024",
                input_dtypes="FLOAT",
                output_shapes="1024",
                output_dtypes="FLOAT",
            ),
            # Cast with no usable source (unknown shape)
            kernel(
                "Cast",
                60 * US,
                61 * US,
                input_shapes="N/A",
                input_dtypes="FLOAT",
                output_shapes="N/A",
                output_dtypes="FLOAT16",
            ),
        ]
    }
    build_store(root, "bytes", {0: r0}, device="Ascend910")
    return root


def test_op_hbm_bytes_by_construction(bytes_store: Path) -> None:
    t = queries.run("op_hbm_bytes", bytes_store, params={"top_n": 10})
    got = by(t, "name")
    peak = 1.23e12  # Ascend 910, the article's table: detected from runs.device = "Ascend910"
    tanh_b = 2 * (4 + 4) * MiB  # 16 MiB = 16777216
    mm_r, mm_w = 2 * (1024 * 1024 * 2), 1024 * 1024 * 2  # 4 MiB read, 2 MiB written
    add_b = 16384 + 4096
    total = tanh_b + (mm_r + mm_w) + add_b
    assert [r["name"] for r in rows(t)] == ["Tanh", "MatMul", "Add", "Cast"]  # by bytes, unknown last
    tanh = got["Tanh"]
    assert (tanh["calls"], tanh["calls_with_bytes"], tanh["dur_ns"]) == (2, 2, 20 * US)
    assert (tanh["hbm_read_bytes"], tanh["hbm_write_bytes"], tanh["hbm_bytes"]) == (8 * MiB, 8 * MiB, tanh_b)
    assert tanh["hbm_bytes_source"] == "pmu" and tanh["pmu_bytes"] == tanh_b and tanh["modeled_bytes"] is None
    assert tanh["achieved_bw_bps"] == approx(16777216 / 20e-6)  # 838.8608 GB/s
    assert tanh["bw_utilization"] == approx(838.8608e9 / peak)  # 0.682
    assert tanh["share"] == approx(tanh_b / total)
    assert tanh["hbm_gb"] == approx(tanh_b / 1e9)
    mm = got["MatMul"]
    assert (mm["hbm_read_bytes"], mm["hbm_write_bytes"], mm["hbm_bytes_source"]) == (mm_r, mm_w, "modeled")
    assert mm["achieved_bw_bps"] == approx(6 * MiB / 8e-6)  # 786.432 GB/s
    assert mm["modeled_bytes"] == 6 * MiB and mm["pmu_bytes"] is None
    add = got["Add"]
    assert add["hbm_bytes_source"] == "pmu" and add["hbm_bytes"] == add_b
    assert add["modeled_bytes"] == 8192 + 4096
    assert add["measured_over_modeled"] == approx(20480 / 12288)  # > 1: re-reads
    cast = got["Cast"]
    assert cast["hbm_bytes"] is None and cast["hbm_bytes_source"] is None and cast["calls_with_bytes"] == 0
    meta = t.schema.metadata
    assert b"ascend910" in meta[b"traceql.peaks_note"]


def test_op_hbm_bytes_top_n_and_override(bytes_store: Path) -> None:
    t = queries.run("op_hbm_bytes", bytes_store, params={"top_n": "1"}, peaks={"peak_hbm_bps": 1e12})
    (r,) = rows(t)
    assert r["name"] == "Tanh" and r["bw_utilization"] == approx(838.8608e9 / 1e12)
    t = queries.run("op_hbm_bytes", bytes_store, device="h200")
    assert by(t, "name")["Tanh"]["bw_utilization"] == approx(838.8608e9 / 4.8e12)


def test_top_ops_and_op_calls(bytes_store: Path) -> None:
    t = queries.run("top_ops", bytes_store)
    got = by(t, "op")
    total = 20 * US + 8 * US + 1 * US + 1 * US  # all kernel time
    assert got["Tanh"]["calls"] == 2 and got["Tanh"]["total_ns"] == 20 * US
    assert got["Tanh"]["share"] == approx(20 / 30) and total == 30 * US
    assert got["MatMul"]["avg_ns"] == approx(8 * US)
    calls = rows(queries.run("op_calls", bytes_store, params={"op": "Tanh"}))
    assert [c["ts_ns"] for c in calls] == [0, 20 * US]
    assert all(c["hbm_bytes"] == 8 * MiB and c["hbm_bytes_source"] == "pmu" for c in calls)
    assert calls[0]["achieved_bw_bps"] == approx(8 * MiB / 10e-6)


# ---- sampled bytes: HBM counters apportioned to the kernels in each window by overlap time ------------------
@pytest.fixture(scope="module")
def sampled_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sampled") / "store"

    def c(channel: str, metric: str, ts: int, v: float) -> dict[str, Any]:
        return {
            "track": "HBM",
            "channel": channel,
            "metric": metric,
            "unit": "bytes/s",
            "ts_ns": ts,
            "value": v,
        }

    counters = [
        # channel 0 read: 100 GB/s on [0,1ms), 300 GB/s on [1ms,2ms); the last sample (2 ms) holds no time
        c("0", "read_bw", 0, 100e9),
        c("0", "read_bw", 1 * MS, 300e9),
        c("0", "read_bw", 2 * MS, 0.0),
        # channel 1 read: 100 GB/s on [0,2ms)
        c("1", "read_bw", 0, 100e9),
        c("1", "read_bw", 2 * MS, 0.0),
        # channel 0 write: 50 GB/s on [0,2ms)
        c("0", "write_bw", 0, 50e9),
        c("0", "write_bw", 2 * MS, 0.0),
    ]
    kernels = [
        kernel("A", 0, MS // 2),  # [0, 0.5ms)
        kernel("B", MS // 4, 3 * MS // 2),  # [0.25, 1.5ms)
        kernel("C", 3 * MS // 2, 3 * MS),  # [1.5, 3ms): half of it after the last sample
        # after the counters end: falls back to modeled (1024 fp32 in and out: 4096 + 4096 bytes)
        kernel(
            "D",
            5 * MS,
            6 * MS,
            input_shapes="1024",
            input_dtypes="FLOAT",
            output_shapes="1024",
            output_dtypes="FLOAT",
        ),
    ]
    build_store(root, "sampled", {0: {"kernels": kernels, "counters": counters}})
    return root


def test_sampled_bytes_apportioned_by_overlap(sampled_store: Path) -> None:

    con = Analysis(sampled_store, "sampled").con
    try:
        kb = {
            n: (r, w, c, p)
            for n, r, w, c, p in con.execute(
                "SELECT name, sampled_read, sampled_write, counter_coverage, sample_period_ns FROM kernel_bytes"
            ).fetchall()
        }
    finally:
        con.close()
    # Device read = 200 GB/s on [0,1ms) and 400 GB/s on [1,2ms); write 50 GB/s on [0,2ms).
    # Window 1 [0,1ms): 200e6 read + 50e6 write bytes; overlaps A 0.5 ms, B 0.75 ms -> shares 0.4 / 0.6.
    # Window 2 [1,2ms): 400e6 read + 50e6 write; overlaps B 0.5 ms, C 0.5 ms -> 0.5 / 0.5.
    exp = {
        "A": (0.4 * 200e6, 0.4 * 50e6),  # 80e6 read, 20e6 written
        "B": (0.6 * 200e6 + 0.5 * 400e6, 0.6 * 50e6 + 0.5 * 50e6),  # 320e6, 55e6
        "C": (0.5 * 400e6, 0.5 * 50e6),  # 200e6, 25e6
    }
    for name, (r, w) in exp.items():
        assert kb[name][:2] == (round(r), round(w)), name
    # conservation: every window byte went to some kernel (700e6 in all)
    assert sum(kb[n][0] + kb[n][1] for n in "ABC") == 700_000_000
    # the sampling period: median gap of the three series' samples (1, 1, 2, 2 ms) = 1.5 ms. A kernel's share is
    # its own traffic only when the period is at most twice its duration: A (0.5 ms) is unresolved, B (1.25 ms)
    # and C (1.5 ms, half of it after the last sample: outside the counters' span) are not graded the same way
    assert kb["A"][3] == 1_500_000 and kb["A"][2] == "unresolved" and kb["B"][2] == "resolved"
    assert kb["C"][2] == "outside" and kb["D"][2] == "outside"
    t = queries.run("op_hbm_bytes", sampled_store, peaks={"peak_hbm_bps": PEAK})
    got = by(t, "name")
    assert got["B"]["hbm_bytes_source"] == "sampled"
    assert got["B"]["hbm_read_bytes"] == 320_000_000 and got["B"]["hbm_write_bytes"] == 55_000_000
    assert got["A"]["hbm_bytes_source"] is None and got["C"]["hbm_bytes_source"] is None  # no shapes to model
    assert got["D"]["hbm_bytes_source"] == "modeled" and got["D"]["hbm_bytes"] == 8192
    assert got["B"]["achieved_bw_bps"] == approx(375e6 / 1.25e-3)  # 300 GB/s


# ---- hbm_utilization: time-weighted over the window and over compute time, fractions above/below lines ------
@pytest.fixture(scope="module")
def util_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("util") / "store"
    r0 = {
        "kernels": [
            kernel("X", 0, 4 * MS, util=0.9),  # 90% for 4 ms: 3.6e9 bytes
            kernel("Y", 4 * MS, 6 * MS, util=0.5, stream_id=1),  # 50% for 2 ms: 1e9 bytes
            kernel("Z", 5 * MS, 6 * MS, util=0.4, stream_id=2),  # 40% for 1 ms on another stream: 0.4e9 bytes
        ],
        "steps": [{"step": 1, "ts_ns": 0, "dur_ns": 10 * MS, "source": "test"}],  # 4 ms idle at the end
    }
    build_store(root, "util", {0: r0})
    return root


def test_hbm_utilization_by_construction(util_store: Path) -> None:
    t = queries.run("hbm_utilization", util_store, peaks={"peak_hbm_bps": PEAK})
    got = by(t, "scope", "rank", "step")
    assert [r["scope"] for r in rows(t)] == ["run", "rank", "step"]
    for key in [("run", None, None), ("rank", 0, None), ("step", 0, 1)]:
        r = got[key]
        assert r["window_ns"] == 10 * MS and r["busy_ns"] == 6 * MS
        assert r["hbm_bytes"] == 5_000_000_000  # 3.6e9 + 1e9 + 0.4e9
        assert r["utilization"] == approx(5e9 / 10e-3 / PEAK)  # 0.5 over the whole window
        assert r["busy_utilization"] == approx(5e9 / 6e-3 / PEAK)  # 0.8333 while computing
        assert r["max_utilization"] == approx(0.9)  # [0,4ms) and [5,6ms) (0.5 + 0.4)
        assert r["frac_busy_saturated"] == approx(5 / 6)  # 5 of 6 ms at >= 80%
        assert r["frac_busy_low"] == approx(1 / 6)  # [4,5ms) at 50% < 70%
        assert r["frac_window_saturated"] == approx(5 / 10)
        assert r["verdict"] == "hbm-bound" and r["hbm_bytes_source"] == "pmu"
    # a stricter line flips the verdict: 0.8333 < 0.9 and >= 0.7 -> borderline
    t = queries.run(
        "hbm_utilization", util_store, params={"sat_threshold": 0.9}, peaks={"peak_hbm_bps": PEAK}
    )
    assert rows(t)[0]["verdict"] == "borderline"
    # without a peak: utilisation and verdict are null, never guessed
    t = queries.run("hbm_utilization", util_store)
    assert rows(t)[0]["utilization"] is None and rows(t)[0]["verdict"] is None


def test_hbm_timeline_bins(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ks = [
        kernel("K1", 0, 4 * US, hbm_read_bytes=4000, hbm_write_bytes=0),  # 1 byte/ns on [0,4us)
        kernel(
            "K2", 2 * US, 6 * US, hbm_read_bytes=0, hbm_write_bytes=8000, stream_id=2
        ),  # 2 bytes/ns on [2,6us)
    ]
    build_store(root, "tl", {0: {"kernels": ks}})
    t = queries.run("hbm_timeline", root, params={"bin_ns": 2 * US}, peaks={"peak_hbm_bps": 2e9})
    r = rows(t)
    assert [x["bin"] for x in r] == [0, 1, 2]
    # bin 0 [0,2us): half of K1 = 2000 read; bin 1: 2000 read + 4000 written; bin 2: 4000 written
    assert [(x["read_bytes"], x["write_bytes"]) for x in r] == [(2000, 0), (2000, 4000), (0, 4000)]
    assert [x["bw_bps"] for x in r] == [approx(1e9), approx(3e9), approx(2e9)]
    assert r[1]["utilization"] == approx(1.5)
    assert r[1]["top_op"] == "K2" and r[1]["top_op_share"] == approx(4000 / 6000)
    assert r[1]["top_ops"] == "K2 67%, K1 33%"
    assert [x["kernel_ns"] for x in r] == [2000, 4000, 2000]
    assert [x["t_ms"] for x in r] == [0.0, 0.002, 0.004]


# ---- wait_attribution: the article's story (memory) vs a truly communication-bound run ----------------------
def _two_rank_run(mem: bool) -> dict[int, dict[str, list[dict[str, Any]]]]:
    step = [{"step": 1, "ts_ns": 0, "dur_ns": 11 * MS, "source": "test"}]
    if mem:
        # rank 1 computes at 95% HBM for 6 ms while rank 0 (1 ms of light compute) waits in the all-reduce
        r0k, r0c = [kernel("Add", 0, 1 * MS, util=0.1)], allreduce(1 * MS, 10 * MS, transit=2 * MS)
        r1k, r1c = [kernel("Tanh", 0, 6 * MS, util=0.95)], allreduce(6 * MS, 10 * MS, transit=2 * MS)
    else:
        # same shape, but rank 1 computes at 30% HBM and the all-reduce spends its time moving data
        r0k, r0c = [kernel("Add", 0, 1 * MS, util=0.1)], allreduce(1 * MS, 10 * MS, transit=8 * MS)
        r1k, r1c = [kernel("Mul", 0, 2 * MS, util=0.3)], allreduce(2 * MS, 10 * MS, transit=7_500_000)
    out = {}
    for rank, ks, co in [(0, r0k, r0c), (1, r1k, r1c)]:
        out[rank] = {
            "kernels": [*ks, hccl("hcom_allReduce__1_0_1", co["ts_ns"], co["ts_ns"] + co["dur_ns"])],
            "comm_ops": [co],
            "steps": step,
        }
    return out


@pytest.fixture(scope="module")
def story_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("story") / "store"
    st = build_store(root, "memory-case", _two_rank_run(True))
    build_store(root, "comm-case", _two_rank_run(False), store=st)
    return root


PARTS = [
    "compute_hbm_saturated_ns",
    "compute_other_ns",
    "comm_transit_ns",
    "comm_wait_peer_hbm_ns",
    "comm_wait_other_ns",
    "comm_unsplit_ns",
    "idle_ns",
    "host_ns",
]


def _parts(r: dict[str, Any]) -> tuple[int, ...]:
    return tuple(r[p] for p in PARTS)


def test_wait_attribution_memory_bound(story_store: Path) -> None:
    t = queries.run(
        "wait_attribution",
        story_store,
        run_id="memory-case",
        peaks={"peak_hbm_bps": PEAK},
        params={"baseline_step_ns": 7 * MS},
    )
    got = by(t, "scope", "rank")
    # rank 0: compute 1 ms at 10% (other); all-reduce [1,10ms): waits [1,6ms) for rank 1, which computes at 95%
    # the whole time -> 5 ms waiting on an HBM-saturated peer; the rest [6,10ms) = 4 ms of which the profiler's
    # transit 2 ms moves data and 2 ms is other waiting; [10,11ms) after the last device op is host.
    assert _parts(got[("rank", 0)]) == (0, 1 * MS, 2 * MS, 5 * MS, 2 * MS, 0, 0, 1 * MS)
    # rank 1: 6 ms saturated compute; it arrives last, so no peer wait: 2 ms transit + 2 ms other; 1 ms host.
    assert _parts(got[("rank", 1)]) == (6 * MS, 0, 2 * MS, 0, 2 * MS, 0, 0, 1 * MS)
    run = got[("run", None)]
    assert _parts(run) == (6 * MS, 1 * MS, 4 * MS, 5 * MS, 4 * MS, 0, 0, 2 * MS)
    assert run["wall_ns"] == 22 * MS == sum(_parts(run))
    assert run["memory_share"] == approx(11 / 22) and run["communication_share"] == approx(8 / 22)
    assert run["verdict"] == "memory-bound"
    assert got[("rank", 0)]["verdict"] == "memory-bound"  # 5/11 memory > 4/11 communication
    assert run["compute_fraction"] == approx(7 / 22)  # the scaling-efficiency estimate
    assert run["compute_hbm_utilization"] == approx((0.1 * 1 + 0.95 * 6) / 7)
    assert run["scaling_vs_baseline"] == approx(7 / 11)  # baseline 7 ms step vs 11 ms
    assert "waiting on HBM-saturated peers 23%" in run["verdict_reason"]


def test_wait_attribution_communication_bound(story_store: Path) -> None:
    t = queries.run("wait_attribution", story_store, run_id="comm-case", peaks={"peak_hbm_bps": PEAK})
    got = by(t, "scope", "rank")
    # rank 0: 1 ms compute; waits [1,2ms) for rank 1 computing at 30% (not saturated) -> other waiting 1 ms;
    # rest [2,10ms) = 8 ms, transit 8 ms -> all transit; 1 ms host.
    assert _parts(got[("rank", 0)]) == (0, 1 * MS, 8 * MS, 0, 1 * MS, 0, 0, 1 * MS)
    # rank 1: 2 ms compute at 30%; arrives last; rest 8 ms with transit 7.5 ms -> 0.5 ms other; 1 ms host.
    assert _parts(got[("rank", 1)]) == (0, 2 * MS, 7_500_000, 0, 500_000, 0, 0, 1 * MS)
    run = got[("run", None)]
    assert run["communication_share"] == approx(17 / 22) and run["memory_share"] == 0
    assert run["verdict"] == "communication-bound"
    assert run["scaling_vs_baseline"] is None


def test_wait_attribution_rank_filter_keeps_peer_attribution(story_store: Path) -> None:
    # --rank filters result rows only: rank 0's wait is still attributed to rank 1's saturated compute
    t = queries.run(
        "wait_attribution", story_store, run_id="memory-case", rank=0, peaks={"peak_hbm_bps": PEAK}
    )
    assert {r["rank"] for r in rows(t)} == {0}
    assert by(t, "scope")["rank"]["comm_wait_peer_hbm_ns"] == 5 * MS


def test_wait_attribution_without_peak_never_saturates(story_store: Path) -> None:
    t = queries.run("wait_attribution", story_store, run_id="memory-case")
    run = by(t, "scope")["run"]
    assert run["compute_hbm_saturated_ns"] == 0 and run["comm_wait_peer_hbm_ns"] == 0
    assert "HBM peak unknown" in run["verdict_reason"]


def test_comm_skew(story_store: Path) -> None:
    t = queries.run("comm_skew", story_store, run_id="memory-case", peaks={"peak_hbm_bps": PEAK})
    got = by(t, "rank")
    assert got[0]["peer_wait_ns"] == 5 * MS and got[0]["last_rank"] == 1
    assert got[0]["last_rank_hbm_saturated_frac"] == approx(1.0) and got[0]["matched"]
    assert got[1]["arrival_skew_ns"] == 5 * MS and got[1]["peer_wait_ns"] == 0
    assert got[0]["ordinal"] == got[1]["ordinal"] == 1 and got[0]["comm_source"] == "comm_ops"


def test_idle_vs_host_and_kernel_windows(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ks = [kernel("A", 2 * MS, 4 * MS), kernel("B", 6 * MS, 8 * MS)]
    st = build_store(
        root, "with-steps", {0: {"kernels": ks, "steps": [{"step": 1, "ts_ns": 0, "dur_ns": 10 * MS}]}}
    )
    build_store(root, "no-steps", {0: {"kernels": ks}}, store=st)
    t = by(queries.run("wait_attribution", root, run_id="with-steps"), "scope")["run"]
    # step [0,10ms): compute 4 ms, idle [4,6ms) between device ops, host [0,2) + [8,10) = 4 ms
    assert (t["compute_other_ns"], t["idle_ns"], t["host_ns"], t["wall_ns"]) == (
        4 * MS,
        2 * MS,
        4 * MS,
        10 * MS,
    )
    assert t["verdict"] == "host/idle-bound"  # 6 ms idle/host > 4 ms compute
    t = by(queries.run("wait_attribution", root, run_id="no-steps"), "scope")["run"]
    # no step times: the window is first kernel start to last kernel end [2,8ms)
    assert (t["compute_other_ns"], t["idle_ns"], t["host_ns"], t["wall_ns"]) == (4 * MS, 2 * MS, 0, 6 * MS)
    assert t["verdict"] == "compute-bound"


# ---- step_breakdown: unions over streams, overlap, free, profiler numbers beside ------------------------------
def test_step_breakdown_by_construction(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ks = [
        kernel("c1", 0, 4 * MS, stream_id=1),
        kernel("c2", 2 * MS, 6 * MS, stream_id=2),  # overlaps c1: the union counts once
        hccl("hcom_allReduce__1", 5 * MS, 9 * MS),  # comm from kernels (no comm_ops for this rank)
        kernel("c3", 10 * MS, 11 * MS),
    ]
    prof = {
        "step": 1,
        "dur_ns": 11 * MS,
        "computing_ns": 7 * MS,
        "comm_not_overlapped_ns": 3 * MS,
        "overlapped_ns": 1 * MS,
        "comm_ns": 4 * MS,
        "free_ns": 1 * MS,
        "preparing_ns": 123,
        "source": "step_trace_time.csv",
    }
    build_store(root, "sb", {0: {"kernels": ks, "steps": [prof]}})
    (r,) = rows(queries.run("step_breakdown", root))
    # computing = [0,6) u [10,11) = 7 ms; comm [5,9) = 4 ms, of which [5,6) overlapped; free [9,10) = 1 ms
    assert r["window_source"] == "kernels"  # steps row has no start time
    assert (r["wall_ns"], r["computing_ns"], r["comm_ns"]) == (11 * MS, 7 * MS, 4 * MS)
    assert (r["comm_not_overlapped_ns"], r["overlapped_ns"], r["free_ns"]) == (3 * MS, 1 * MS, 1 * MS)
    assert r["wall_ns"] == r["computing_ns"] + r["comm_not_overlapped_ns"] + r["free_ns"]
    assert (r["preparing_ns"], r["tail_ns"]) == (0, 0)
    assert r["profiler_computing_ns"] == 7 * MS and r["profiler_preparing_ns"] == 123
    assert r["computing_ratio"] == approx(7 / 11)


# ---- ub_l2_rates ------------------------------------------------------------------------------------------
def test_ub_l2_rates_by_construction(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ks = [
        # Norm: 2 calls of 10 us moving 120e6 UB bytes each -> 12 TB/s = 75% of the article's 16 TB/s UB peak
        kernel(
            "Norm",
            0,
            10 * US,
            ub_read_bytes=80_000_000,
            ub_write_bytes=40_000_000,
            l2_hit_rate=0.9,
            l2_read_bytes=1_000_000,
            l2_write_bytes=0,
        ),
        kernel(
            "Norm",
            20 * US,
            30 * US,
            ub_read_bytes=80_000_000,
            ub_write_bytes=40_000_000,
            l2_hit_rate=0.5,
            l2_read_bytes=3_000_000,
        ),
        # Gemm: 160e6 UB bytes in 20 us -> 8 TB/s = 50%; its hit rate only in the l2_cache table (0.2)
        kernel(
            "Gemm",
            40 * US,
            60 * US,
            ub_read_bytes=160_000_000,
            l2_read_bytes=2_000_000,
            stream_id=2,
            task_id=7,
        ),
        kernel("Relu", 60 * US, 65 * US),  # no metrics
        hccl("hcom_x", 70 * US, 80 * US),  # communication: left out
    ]
    l2 = [
        {"stream_id": 2, "task_id": 7, "op_name": "Gemm", "hit_rate": 0.2},
        {"stream_id": 2, "task_id": 8, "op_name": "X", "hit_rate": None},
    ]
    build_store(root, "ub", {0: {"kernels": ks, "l2_cache": l2}}, device="Ascend910")
    t = queries.run("ub_l2_rates", root)
    got = by(t, "scope", "name")
    ov = got[("overall", None)]
    assert rows(t)[0]["scope"] == "overall"
    assert ov["calls"] == 4 and ov["dur_ns"] == 45 * US and ov["ub_bytes"] == 400_000_000
    assert ov["ub_bw_bps"] == approx(400e6 / 40e-6)  # 10 TB/s over the 40 us that have UB data
    assert ov["ub_utilization"] == approx(10e12 / 16e12)
    # traffic-weighted (L2 bytes): (0.9 x 1e6 + 0.5 x 3e6 + 0.2 x 2e6) / 6e6
    assert (
        ov["l2_hit_rate"] == approx(2.8 / 6) and ov["l2_weight"] == "l2_bytes" and ov["l2_source"] == "mixed"
    )
    norm = got[("op", "Norm")]
    assert norm["ub_utilization"] == approx(0.75) and norm["l2_hit_rate"] == approx(2.4 / 4)
    assert norm["l2_source"] == "pmu" and norm["reason"] is None
    gemm = got[("op", "Gemm")]
    assert (
        gemm["ub_utilization"] == approx(0.5)
        and gemm["l2_hit_rate"] == approx(0.2)
        and gemm["l2_source"] == "l2_cache"
    )
    relu = got[("op", "Relu")]
    assert relu["ub_utilization"] is None and relu["l2_hit_rate"] is None
    assert relu["reason"] == "no UB metrics for this operator; no L2 hit rate for this operator"
    assert ("op", "hcom_x") not in got


def test_ub_l2_rates_missing_metrics_say_why(bytes_store: Path) -> None:
    t = queries.run("ub_l2_rates", bytes_store)
    ov = by(t, "scope")["overall"]
    assert ov["ub_utilization"] is None and ov["l2_hit_rate"] is None
    assert (
        "no UB bandwidth metrics in the dump" in ov["reason"]
        and "no L2 hit rates in the dump" in ov["reason"]
    )


# ---- layout_transforms and roofline -----------------------------------------------------------------------
def test_layout_transforms_by_construction(tmp_path: Path) -> None:
    root = tmp_path / "store"
    td = {
        "op_type": "TransData",
        "input_shapes": "32,3,224,224",
        "input_dtypes": "FLOAT",
        "input_formats": "NCHW",
        "output_shapes": "32,1,224,224,8",
        "output_dtypes": "FLOAT",
        "output_formats": "NC1HWC0",
    }
    ks = [
        kernel("trans_TransData_0", 0, 3 * US, **td),
        kernel("trans_TransData_1", 10 * US, 13 * US, **td),
        kernel("MatMul", 20 * US, 24 * US),
    ]
    build_store(root, "lt", {0: {"kernels": ks}})
    (r,) = rows(queries.run("layout_transforms", root))
    per_call = 32 * 3 * 224 * 224 * 4 + 32 * 1 * 224 * 224 * 8 * 4  # 19267584 + 51380224 bytes (modeled)
    assert (r["op_type"], r["src_format"], r["dst_format"], r["calls"], r["dur_ns"]) == (
        "TransData",
        "NCHW",
        "NC1HWC0",
        2,
        6 * US,
    )
    assert r["share_of_compute"] == approx(6 / 10)
    assert r["hbm_bytes"] == 2 * per_call and r["hbm_bytes_source"] == "modeled"
    assert r["example_output_shape"] == "32,1,224,224,8"


def test_roofline_by_construction(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ks = [
        # [64,128] x [128,256] fp16: K = sqrt(64*128 * 128*256 / (64*256)) = 128; FLOPs = 2*64*256*128
        kernel(
            "mm",
            0,
            1 * US,
            op_type="MatMulV2",
            input_shapes="64,128;128,256",
            input_dtypes="FLOAT16",
            output_shapes="64,256",
            output_dtypes="FLOAT16",
        ),
        # batched [8,64,128] x [8,128,256]: batch(B) = 8 -> K = 128; FLOPs = 2*8*64*256*128
        kernel(
            "bmm",
            2 * US,
            3 * US,
            op_type="BatchMatMul",
            input_shapes="8,64,128;8,128,256",
            input_dtypes="FLOAT16",
            output_shapes="8,64,256",
            output_dtypes="FLOAT16",
        ),
        # element-wise: one FLOP per output element
        kernel(
            "tanh",
            4 * US,
            5 * US,
            op_type="Tanh",
            input_shapes="1024,1024",
            input_dtypes="FLOAT",
            output_shapes="1024,1024",
            output_dtypes="FLOAT",
        ),
        kernel(
            "measured", 6 * US, 7 * US, op_type="Conv2D", flops=1e9, hbm_read_bytes=1000, hbm_write_bytes=0
        ),
    ]
    build_store(root, "rf", {0: {"kernels": ks}}, device="Ascend910")
    got = by(queries.run("roofline", root), "name")
    mm = got["mm"]
    mm_bytes = (64 * 128 + 128 * 256 + 64 * 256) * 2  # modeled: inputs + output, fp16
    assert mm["flops"] == approx(2 * 64 * 256 * 128) and mm["flops_source"] == "modeled"
    assert mm["hbm_bytes"] == mm_bytes and mm["arithmetic_intensity"] == approx(2 * 64 * 256 * 128 / mm_bytes)
    ridge = 256e12 / 1.23e12  # Ascend 910: 256 TFLOPS fp16 / 1.23 TB/s
    assert mm["ridge_point"] == approx(ridge)  # 36.6 FLOP/byte < 208: left of the ridge
    # three classes (issue 42): 114,688 B in 1 us = 9.3% of the 1.23 TB/s roof, 4.19 TFLOP/s = 1.6% of the 256 TFLOP/s
    # roof: below both 80% lines, so latency-bound by the model (not memory-bound for being left of the ridge)
    assert mm["bound"] == "latency" and mm["bound_grade"] == "modeled"
    assert mm["achieved_flops_per_s"] == approx(2 * 64 * 256 * 128 / 1e-6)
    assert got["bmm"]["flops"] == approx(2 * 8 * 64 * 256 * 128)
    assert got["tanh"]["flops"] == approx(1024 * 1024)
    meas = got["measured"]
    assert meas["flops_source"] == "pmu" and meas["arithmetic_intensity"] == approx(1e6)
    assert meas["bound"] == "compute" and meas["flops_utilization"] == approx(1e9 / 1e-6 / 256e12)


# ---- modeled-bytes helper: dtype sizes and shape parsing --------------------------------------------------------
@pytest.mark.parametrize(
    "shapes,dtypes,expected",
    [
        ("1024,1024", "FLOAT16", 1024 * 1024 * 2),
        ("2,3;4", "DT_BF16;INT64", 2 * 3 * 2 + 4 * 8),
        ("2,3;4", "float", (6 + 4) * 4),  # one dtype for every input
        ("2,3;", "INT32", (6 + 1) * 4),  # an empty shape is a scalar
        ("2,-1", "FLOAT", None),  # dynamic dim: unknown, not a partial sum
        ("2,3", "MYSTERY", None),
        ("N/A", "FLOAT", None),
        ("1,2,3", "c10::Half", 12),
    ],
)
def test_tensors_bytes_macro(tmp_path: Path, shapes: str, dtypes: str, expected: int | None) -> None:
    import duckdb

    con = duckdb.connect()
    for text in queries.helper_sql():
        for stmt in duckdb.extract_statements(text):
            if "AS TABLE" not in stmt.query:  # the scalar macros only (table macros need the views)
                con.execute(stmt.query)
    got = con.execute("SELECT _tensors_bytes($s, $d)", {"s": shapes, "d": dtypes}).fetchone()[0]
    assert got == expected or (expected is not None and math.isclose(got, expected))
