"""`traceql export`: Chrome JSON and Perfetto protobuf exports of a run, cross-rank clock alignment.

Expected values never come from traceql.export: they are read from the store's Parquet files with pyarrow
directly (kernels, comm_ops, counters, steps), from the planted dump (the clock offset, planted.EXPECTED's
findings), or from the real dumps' own clocks. The exports are decoded with json (parse_float=Decimal, exact)
and with the perfetto package's protos; the Chrome file is re-ingested by traceql's Kineto reader.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import planted
import pytest
from conftest import DB_LEVEL1, LEVEL0, LEVEL1, real

from traceql.store import Store
from traceql.synth import write_torch_npu_dump

ingest = importlib.import_module("traceql.ingest").ingest

OFFSET_NS = 3_250_000_123  # planted: rank 1's clock runs 3.25 s ahead of rank 0's
PHASES_EVERY_VIEWER = {"X", "I", "C", "M", "s", "t", "f"}


def _parquet(store: Path, run: str, table: str) -> list[dict[str, Any]]:
    """A canonical table of a run, read straight from the store's Parquet files (not through traceql)."""
    import pyarrow.parquet as pq

    from traceql.store import Store

    # the run's directory as the manifest names it (runs/<run>.<generation>/), then its Parquet files directly
    files = sorted((Store(store).run_path(run) / table).glob("*.parquet"))
    rows: list[dict[str, Any]] = []
    for f in files:
        rows += pq.read_table(f).to_pylist()
    return rows


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two ingested 2-rank hbm_wait clusters: one as planted, one whose rank 1 was written with its clock
    OFFSET_NS ahead (the same scenario, rank 1's dump from a copy with base_ns + OFFSET_NS)."""
    root = tmp_path_factory.mktemp("export")
    aligned = planted.build("hbm_wait")
    write_torch_npu_dump(aligned, root / "a", aic_metrics="Memory")
    shifted = planted.build("hbm_wait")
    shifted.base_ns += OFFSET_NS
    write_torch_npu_dump(shifted, root / "b", aic_metrics="Memory")
    (root / "off").mkdir()
    shutil.copytree(root / "a" / "rank0_ascend_pt", root / "off" / "rank0_ascend_pt")
    shutil.copytree(root / "b" / "rank1_ascend_pt", root / "off" / "rank1_ascend_pt")
    st = root / "store"
    ingest(root / "a", Store(st), name="aligned", workers=1)
    ingest(root / "off", Store(st), name="off", workers=1)
    return {"store": st, "root": root}


def _chrome(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"), parse_float=Decimal)


def _abs_ns(doc: dict[str, Any], ts: Decimal) -> int:
    v = Decimal(doc["baseTimeNanoseconds"]) + ts * 1000
    assert v == v.to_integral_value()
    return int(v)


# ---- clock alignment ----------------------------------------------------------------------------------------
def test_planted_clock_offset_recovered_within_one_collective(stores: dict[str, Path]) -> None:
    from traceql import clock_align

    rows = {r["rank"]: r for r in clock_align.offsets(stores["store"], "off")}
    comm = [r for r in _parquet(stores["store"], "off", "comm_ops") if r["rank"] == 1 and r["dur_ns"]]
    one_collective = min(r["dur_ns"] for r in comm)
    assert rows[0]["ref_rank"] == 0 and rows[0]["offset_ns"] == 0 and not rows[0]["applied"]
    assert abs(rows[1]["offset_ns"] - OFFSET_NS) <= one_collective
    assert rows[1]["applied"] and rows[1]["n_matched"] == planted.STEPS


def test_aligned_synthetic_clocks_give_no_offset(stores: dict[str, Path]) -> None:
    from traceql import clock_align

    rows = clock_align.offsets(stores["store"], "aligned")
    assert [r["applied"] for r in rows] == [False, False]
    assert all(r["offset_ns"] == 0 for r in rows)  # planted: every member ends at the same ns


@pytest.mark.real
@pytest.mark.parametrize("dump", [LEVEL1, LEVEL0, DB_LEVEL1], ids=["text-level1", "text-level0", "db-level1"])
def test_real_dumps_offsets_near_zero(dump: Path, tmp_path: Path) -> None:
    """Real 2-rank torch_npu dumps from one synchronised node: the offset is far below one collective."""
    from traceql import clock_align

    ingest(real(dump), Store(tmp_path / "s"), name="real", workers=1)
    rows = {r["rank"]: r for r in clock_align.offsets(tmp_path / "s", "real")}
    assert rows[1]["n_matched"] > 0
    assert abs(rows[1]["offset_ns"]) < 100_000  # < 0.1 ms (measured ~7-14 us) vs collectives of ~2.4 ms
    assert not rows[1]["applied"]


def test_query_clock_offsets_cli(stores: dict[str, Path], cli: Any) -> None:
    r = cli("query", "clock_offsets", "--store", stores["store"], "--run", "off", "--format", "json")
    assert r.code == 0, r
    got = {x["rank"]: x for x in json.loads(r.out)}
    assert got[1]["applied"] is True and abs(got[1]["offset_ns"] - OFFSET_NS) < 10_000_000


# ---- Chrome JSON --------------------------------------------------------------------------------------------
def test_chrome_phases_exact_ts_and_round_trip(stores: dict[str, Path], tmp_path: Path, cli: Any) -> None:
    st = stores["store"]
    out = tmp_path / "job.json"
    r = cli("export", "--store", st, "--run", "aligned", "--format", "chrome", "-o", out, "--no-findings")
    assert r.code == 0, r
    assert "wrote" in r.err and r.out == ""
    text = out.read_text(encoding="utf-8")
    doc = _chrome(out)
    evs = doc["traceEvents"]
    assert {e["ph"] for e in evs} <= PHASES_EVERY_VIEWER
    assert {"X", "C", "M", "s", "f"} <= {e["ph"] for e in evs}
    # every ts/dur is decimal text with exactly three decimals (integer ns, never a rounded double)
    for m in re.finditer(r'"(ts|dur)":(-?[0-9.eE+]+)', text):
        assert re.fullmatch(r"-?\d+\.\d{3}", m.group(2)), m.group(0)
    kern = [e for e in evs if e["ph"] == "X" and e.get("cat") == "kernel"]
    for e in kern:
        assert _abs_ns(doc, e["ts"]) == int(e["args"]["ts_ns"])  # the exact ns kept as an argument
    # the same kernels as the store (read from Parquet), start and duration to the ns
    want = sorted((r["rank"], r["ts_ns"], r["dur_ns"], r["name"]) for r in _parquet(st, "aligned", "kernels"))
    got = sorted((int(e["pid"]), _abs_ns(doc, e["ts"]), int(e["dur"] * 1000), e["name"]) for e in kern)
    assert got == want
    # ... and through traceql's own Kineto reader: same kernel count, same timestamps
    st2 = Store(tmp_path / "rt")
    ingest(out, st2, name="rt", workers=1)
    back = _parquet(tmp_path / "rt", "rt", "kernels")
    assert len(back) == len(want)
    assert sorted((r["ts_ns"], r["dur_ns"], r["name"]) for r in back) == sorted(w[1:] for w in want)


def test_chrome_one_rank_round_trip_keeps_rank_and_applies_offset(
    stores: dict[str, Path], tmp_path: Path, cli: Any
) -> None:
    st = stores["store"]
    out = tmp_path / "r1.json"
    r = cli("export", "--store", st, "--run", "off", "--rank", "1", "-o", out, "--no-findings")
    assert r.code == 0, r
    assert "applied" in r.err and "+3.250000123 s" in r.err
    ingest(out, Store(tmp_path / "rt"), name="rt", workers=1)
    back = _parquet(tmp_path / "rt", "rt", "kernels")
    orig = [k for k in _parquet(st, "off", "kernels") if k["rank"] == 1]
    assert {b["rank"] for b in back} == {1}  # distributedInfo.rank
    # on rank 0's clock: the stored times minus the planted offset (recovered exactly: both end together)
    assert sorted(b["ts_ns"] for b in back) == sorted(k["ts_ns"] - OFFSET_NS for k in orig)
    # --no-clock-align: as recorded
    out2 = tmp_path / "r1raw.json"
    assert (
        cli(
            "export",
            "--store",
            st,
            "--run",
            "off",
            "--rank",
            "1",
            "-o",
            out2,
            "--no-findings",
            "--no-clock-align",
        ).code
        == 0
    )
    doc = _chrome(out2)
    assert sorted(_abs_ns(doc, e["ts"]) for e in doc["traceEvents"] if e.get("cat") == "kernel") == sorted(
        k["ts_ns"] for k in orig
    )


def test_chrome_findings_track_never_overlaps(stores: dict[str, Path], tmp_path: Path, cli: Any) -> None:
    out = tmp_path / "f.json"
    assert (
        cli("export", "--store", stores["store"], "--run", "off", "-o", out, "--device", "ascend910b").code
        == 0
    )
    doc = _chrome(out)
    evs = doc["traceEvents"]
    names = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"
    }
    fx = [e for e in evs if e["ph"] == "X" and e.get("cat") == "traceql.finding"]
    assert fx
    by_thread: dict[Any, list[Any]] = {}
    for e in fx:
        assert names[(e["pid"], e["tid"])].startswith("traceql: findings")  # their own threads
        assert {"message", "saving", "query", "window_basis"} <= set(e["args"])
        by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_thread.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
    # no finding thread holds anything else
    ftids = {k for k, v in names.items() if v.startswith("traceql: findings")}
    assert all(
        e.get("cat") == "traceql.finding" for e in evs if e["ph"] == "X" and (e["pid"], e["tid"]) in ftids
    )


def test_steps_slice_is_the_step_window(stores: dict[str, Path], tmp_path: Path, cli: Any) -> None:
    st = stores["store"]
    out = tmp_path / "s.json"
    assert (
        cli(
            "export",
            "--store",
            st,
            "--run",
            "aligned",
            "--rank",
            "1",
            "--steps",
            "2",
            "-o",
            out,
            "--no-findings",
        ).code
        == 0
    )
    doc = _chrome(out)
    step = next(
        s
        for s in _parquet(st, "aligned", "steps")
        if s["rank"] == 1 and s["step"] == 2 and s["ts_ns"] is not None
    )
    lo, hi = step["ts_ns"], step["ts_ns"] + step["dur_ns"]
    want = sorted(
        k["ts_ns"] for k in _parquet(st, "aligned", "kernels") if k["rank"] == 1 and lo <= k["ts_ns"] < hi
    )
    got = sorted(_abs_ns(doc, e["ts"]) for e in doc["traceEvents"] if e.get("cat") == "kernel")
    assert got == want and want
    assert {e["pid"] for e in doc["traceEvents"]} == {1}


def test_wait_state_tiles_the_steps_and_names_the_planted_wait(
    stores: dict[str, Path], tmp_path: Path, cli: Any
) -> None:
    """hbm_wait as planted: rank 0 waits in each all-reduce while rank 1 runs element-wise kernels at 93% of peak
    HBM bandwidth. Expected values from the Parquet steps (the step windows tile each rank's run) and comm_ops
    (the planted wait)."""
    st = stores["store"]
    out = tmp_path / "w.json"
    assert (
        cli(
            "export", "--store", st, "--run", "aligned", "-o", out, "--no-findings", "--device", "ascend910b"
        ).code
        == 0
    )
    doc = _chrome(out)
    ws = [e for e in doc["traceEvents"] if e.get("cat") == "traceql.wait_state"]
    allowed = {
        "computing",
        "compute (HBM-saturated)",
        "transit",
        "waiting on a peer",
        "waiting on an HBM-saturated peer",
        "waiting (sync, or ranks not in the dump)",
        "idle",
        "host",
    }
    assert {e["name"] for e in ws} <= allowed
    steps = [s for s in _parquet(st, "aligned", "steps") if s["ts_ns"] is not None]
    for rank in (0, 1):
        mine = sorted((e["ts"], e["dur"]) for e in ws if e["pid"] == rank)
        assert all(
            a[0] + a[1] == b[0] for a, b in zip(mine, mine[1:], strict=False)
        )  # contiguous, no overlap
        assert sum(int(d * 1000) for _, d in mine) == sum(s["dur_ns"] for s in steps if s["rank"] == rank)
    waits = sum(r["wait_ns"] for r in _parquet(st, "aligned", "comm_ops") if r["rank"] == 0 and r["wait_ns"])
    got = sum(
        int(e["dur"] * 1000) for e in ws if e["pid"] == 0 and e["name"] == "waiting on an HBM-saturated peer"
    )
    assert got == waits
    assert any(e["name"] == "compute (HBM-saturated)" for e in ws if e["pid"] == 1)


# ---- Perfetto protobuf --------------------------------------------------------------------------------------
def _decode(path: Path) -> Any:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    t = pb.Trace()
    t.ParseFromString(path.read_bytes())
    return pb, t


def test_perfetto_decodes_to_the_store(stores: dict[str, Path], tmp_path: Path, cli: Any) -> None:
    pytest.importorskip(
        "perfetto", reason="the .pftrace export needs the export extra: pip install -e '.[export]'"
    )
    st = stores["store"]
    out = tmp_path / "job.pftrace"
    r = cli("export", "--store", st, "--run", "off", "-o", out, "--device", "ascend910b")
    assert r.code == 0, r

    def read(path: Path) -> tuple[Any, ...]:
        pb, trace = _decode(path)
        tracks = {
            p.track_descriptor.uuid: p.track_descriptor
            for p in trace.packet
            if p.HasField("track_descriptor")
        }
        proc = {u: d.process.pid - 1 for u, d in tracks.items() if d.HasField("process")}
        rank_of = {u: proc[d.parent_uuid] for u, d in tracks.items() if d.parent_uuid in proc}
        name_of = {u: d.name for u, d in tracks.items()}
        assert sorted(d.process.process_name for d in tracks.values() if d.HasField("process")) == [
            "rank 0",
            "rank 1",
        ]
        assert {"Stream 2", "traceql: findings", "traceql: wait state"} <= set(name_of.values())

        begins: dict[str, list[tuple[int, int, str]]] = {}
        counters: dict[tuple[int, str], dict[int, float]] = {}
        stack: dict[int, list[int]] = {}
        slices: list[tuple[int, str, int, int, str]] = []  # rank, track, start, end, name
        for p in trace.packet:
            if not p.HasField("track_event"):
                continue
            ev = p.track_event
            if ev.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
                stack.setdefault(ev.track_uuid, []).append(len(slices))
                slices.append((rank_of[ev.track_uuid], name_of[ev.track_uuid], p.timestamp, -1, ev.name))
            elif ev.type == pb.TrackEvent.TYPE_SLICE_END:
                i = stack[ev.track_uuid].pop()  # well nested: every end closes the innermost open slice
                rk, tr, t0, _, nm = slices[i]
                assert p.timestamp >= t0
                slices[i] = (rk, tr, t0, p.timestamp, nm)
            elif ev.type == pb.TrackEvent.TYPE_COUNTER:
                counters.setdefault((rank_of[ev.track_uuid], name_of[ev.track_uuid]), {})[p.timestamp] = (
                    ev.double_counter_value
                )
        assert all(not s for s in stack.values()) and all(s[3] >= 0 for s in slices)
        for s in slices:
            begins.setdefault(s[1], []).append((s[0], s[2], s[3] - s[2]))

        return pb, tracks, rank_of, name_of, slices, counters, begins

    pb, tracks, rank_of, name_of, slices, counters, begins = read(out)
    # kernels: every stored kernel, rank 1 moved onto rank 0's clock by the planted offset
    kern = sorted(
        (k["rank"], k["ts_ns"] - (OFFSET_NS if k["rank"] == 1 else 0), k["dur_ns"])
        for k in _parquet(st, "off", "kernels")
    )
    got = sorted(x for tr, xs in begins.items() if tr.startswith("Stream ") for x in xs)
    assert got == kern

    # counter values: HBM % of peak from the sampled counters, recomputed from the Parquet counters
    hbm: dict[tuple[int, int], float] = {}
    for c in _parquet(st, "off", "counters"):
        if c["track"] == "HBM" and c["metric"] in ("read_bw", "write_bw"):
            hbm[(c["rank"], c["ts_ns"])] = hbm.get((c["rank"], c["ts_ns"]), 0.0) + c["value"]
    tr_name = next(
        n for (_, n) in counters if n.startswith("traceql: HBM bandwidth, % of peak (measured: sampled")
    )
    assert "period 1 ms" in tr_name  # planted.build samples HBM every 1 ms
    for rank in (0, 1):
        series = counters[(rank, tr_name)]
        ts_sorted = sorted(t for (r, t) in hbm if r == rank)
        want = {
            t - (OFFSET_NS if rank == 1 else 0): hbm[(rank, t)] / planted.PEAK * 100 for t in ts_sorted[:-1]
        }
        assert set(series) == set(want)  # the last sample holds for no time (_helpers.sql _hbm_windows)
        assert all(abs(series[t] - want[t]) < 1e-4 for t in want)
    modeled = [n for (_, n) in counters if "modeled lower bound" in n]
    assert modeled and not any("modeled" in n for n in {tr_name})  # modeled on its own track

    # finding slices: the planted problems (planted.EXPECTED), named by check id, on the aligned run (the
    # offset run's findings are the same: test_findings_on_offset_clocks_equal_the_aligned_run)
    out2 = tmp_path / "aligned.pftrace"
    assert cli("export", "--store", st, "--run", "aligned", "-o", out2, "--device", "ascend910b").code == 0
    slices = read(out2)[4]
    fnames = {s[4] for s in slices if s[1].startswith("traceql: findings")}
    assert planted.EXPECTED["hbm_wait"] <= fnames <= planted.EXPECTED["hbm_wait"] | {"top_hbm_ops"}
    # slow_rank on the waiting rank 0: its wait for rank 1 in each all-reduce = the planted wait (comm_ops.wait_ns)
    waits = sorted(
        r["wait_ns"] for r in _parquet(st, "aligned", "comm_ops") if r["rank"] == 0 and r["wait_ns"]
    )
    got_w = sorted(s[3] - s[2] for s in slices if s[4] == "slow_rank" and s[0] == 0)
    assert got_w == waits
    # on the late rank 1: its lateness over the same collectives, on the aligned clock
    late = sorted(s[3] - s[2] for s in slices if s[4] == "slow_rank" and s[0] == 1)
    assert late == waits


def test_perfetto_slice_has_args_and_flows(stores: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip(
        "perfetto", reason="the .pftrace export needs the export extra: pip install -e '.[export]'"
    )
    from traceql.export import export

    out = tmp_path / "a.pftrace"
    export(stores["store"], "aligned", out, with_findings=False)
    pb, trace = _decode(out)
    evs = [
        p.track_event
        for p in trace.packet
        if p.HasField("track_event") and p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN
    ]
    k = next(e for e in evs if "kernel" in e.categories)
    assert {"ts_ns", "op_type", "task_type"} <= {a.name for a in k.debug_annotations}
    outs = {f for e in evs for f in e.flow_ids}
    ins = {f for e in evs for f in e.terminating_flow_ids}
    assert outs and outs & ins  # host launch -> device task arrows


def test_perfetto_trace_processor_loads_it(stores: dict[str, Path], tmp_path: Path) -> None:
    """Perfetto's own importer, when a trace_processor_shell binary is available (TRACEQL_TRACE_PROCESSOR or on
    PATH). The perfetto package downloads that binary at run time; no registry ships it, so offline it skips."""
    import os

    binary = os.environ.get("TRACEQL_TRACE_PROCESSOR") or shutil.which("trace_processor_shell")
    if not binary:
        pytest.skip(
            "no trace_processor_shell binary (not in PyPI/Debian/npm; the perfetto package downloads it)"
        )
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    from traceql.export import export

    out = tmp_path / "a.pftrace"
    export(stores["store"], "aligned", out, with_findings=False)
    tp = TraceProcessor(trace=str(out), config=TraceProcessorConfig(bin_path=binary))
    try:
        n = next(iter(tp.query("SELECT count(*) AS n FROM slice WHERE category = 'kernel'"))).n
        assert n == len(_parquet(stores["store"], "aligned", "kernels"))
        errs = next(
            iter(
                tp.query(
                    "SELECT coalesce(sum(value), 0) AS n FROM stats WHERE severity = 'error' AND source = 'analysis'"
                )
            )
        ).n
        assert errs == 0
    finally:
        tp.close()


def test_l2_hit_rate_track_where_the_dump_has_it(tmp_path: Path) -> None:
    """An L2Cache-group dump: the per-task L2 hit rate track carries kernels.l2_hit_rate (read from Parquet)."""
    from traceql.export import export
    from traceql.synth import MiB, Scenario

    sc = Scenario(n_ranks=1)
    r0 = sc.rank(0)
    r0.add_step(1, start_ns=0, dur_ns=5_000_000)
    for i, (hits, misses) in enumerate(((75, 25), (10, 90))):
        r0.add_op(
            f"Add_{i}",
            "Add",
            start_ns=1_000_000 + i * 1_500_000,
            dur_ns=1_000_000,
            task_type="AI_CORE",
            hbm_read_bytes=4 * MiB,
            hbm_write_bytes=MiB,
            l2_read_hits=hits,
            l2_read_misses=misses,
            l2_write_hits=0,
            l2_write_misses=0,
        )
    write_torch_npu_dump(sc, tmp_path / "d", aic_metrics="L2Cache")
    ingest(tmp_path / "d", Store(tmp_path / "s"), name="l2", workers=1)
    want = {
        k["ts_ns"]: 100 * k["l2_hit_rate"]
        for k in _parquet(tmp_path / "s", "l2", "kernels")
        if k["l2_hit_rate"] is not None
    }
    assert len(want) == 2
    out = tmp_path / "l2.json"
    export(tmp_path / "s", "l2", out, fmt="chrome", with_findings=False)
    doc = _chrome(out)
    got = {
        _abs_ns(doc, e["ts"]): float(e["args"]["value"])
        for e in doc["traceEvents"]
        if e["ph"] == "C" and e["name"].startswith("traceql: L2 hit rate")
    }
    assert got.keys() == want.keys() and all(abs(got[t] - want[t]) < 1e-6 for t in want)


# ---- hostile names ------------------------------------------------------------------------------------------
HOSTILE = [
    'q"uote\\back',
    "</script><script>alert(1)</script>",
    "new\nline\r\ttab",
    "ctl\x00\x01\x1b[31m\x7f",
    "\u2028sep\u2029",
    '{"ph":"X"}',
    "<img src=x onerror=alert(1)>&amp;",
]


def test_hostile_names_stay_inert(tmp_path: Path, cli: Any) -> None:
    pytest.importorskip(
        "perfetto", reason="the .pftrace export needs the export extra: pip install -e '.[export]'"
    )
    evs = []
    for i, name in enumerate(HOSTILE):
        evs.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": name,
                "pid": 0,
                "tid": 7,
                "ts": 1000 + 10 * i,
                "dur": 2,
                "args": {"stream": 7, "correlation": i + 1, "device": 0, name: name},
            }
        )
        evs.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": name,
                "pid": 100,
                "tid": 100,
                "ts": 999 + 10 * i,
                "dur": 5,
                "args": {"External id": i + 1},
            }
        )
    src = tmp_path / "hostile.pt.trace.json"
    src.write_text(json.dumps({"schemaVersion": 1, "traceEvents": evs}), encoding="utf-8")
    ingest(src, Store(tmp_path / "s"), name="h", workers=1)
    out = tmp_path / "h.json"
    assert cli("export", "--store", tmp_path / "s", "--run", "h", "-o", out, "--no-findings").code == 0, (
        "export failed"
    )
    raw = out.read_bytes()
    assert b"</script" not in raw.lower() and b"<img" not in raw
    assert all(b >= 0x20 or b == 0x0A for b in raw)  # no raw control characters; newlines only between events
    assert "\u2028" not in raw.decode("utf-8")
    doc = _chrome(out)
    assert sorted(e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel") == sorted(HOSTILE)
    assert sorted(e["name"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op") == sorted(HOSTILE)
    pf = tmp_path / "h.pftrace"
    assert cli("export", "--store", tmp_path / "s", "--run", "h", "-o", pf, "--no-findings").code == 0
    r = cli(
        "export", "--store", tmp_path / "s", "--run", "h", "-o", "-", "--format", "chrome", "--no-findings"
    )
    assert r.code == 0, r
    assert (
        json.loads(r.out, parse_float=Decimal)["traceEvents"] == doc["traceEvents"]
    )  # -o -: the same events on stdout
    pb, trace = _decode(pf)
    names = [
        p.track_event.name
        for p in trace.packet
        if p.HasField("track_event")
        and p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN
        and set(p.track_event.categories) & {"kernel", "cpu_op"}
    ]
    assert sorted(names) == sorted(HOSTILE * 2)


# ---- CLI ------------------------------------------------------------------------------------------------------
def test_cli_help_and_bad_input(stores: dict[str, Path], cli: Any, tmp_path: Path) -> None:
    pytest.importorskip(
        "perfetto", reason="the .pftrace export needs the export extra: pip install -e '.[export]'"
    )
    r = cli("export", "--help")
    assert r.code == 0 and "traceql export --run job" in r.out
    st = stores["store"]
    for args, code, msg in [
        (["--steps", "x-y"], 1, "--steps 'x-y'"),
        (["--steps", "9"], 1, "has no step 9"),
        (["--rank", "7"], 1, "has no rank 7"),
        (["--format", "svg"], 2, "--format"),
        (["-o", str(tmp_path / "nodir" / "x.json")], 1, "no such directory"),
    ]:
        r = cli("export", "--store", st, "--run", "aligned", "--no-findings", *args)
        assert r.code == code, (args, r)
        assert msg in r.err, (args, r)
        if code == 1:
            assert len(r.err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("**/.x.json.tmp-*"))


def test_failed_export_leaves_no_file(
    stores: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from traceql import export as ex
    from traceql.errors import TraceQLError

    def boom(*a: Any, **k: Any) -> Any:
        raise TraceQLError("boom")

    monkeypatch.setattr(ex._timeline_rows, "counter_families", boom)
    out = tmp_path / "x.json"
    with pytest.raises(TraceQLError):
        ex.export(stores["store"], "aligned", out, fmt="chrome", with_findings=False)
    assert list(tmp_path.iterdir()) == []


def test_findings_on_offset_clocks_equal_the_aligned_run(stores: dict[str, Path]) -> None:
    """Wait attribution compares arrivals on aligned clocks (_helpers.sql _comm_events' clock_offset_ns): rank 1
    written 3.25 s ahead gives the same findings, waits and verdict as the same job on one clock (without the
    alignment its lateness would be 3.25 s, more than a step: implausible, and slow_rank would not fire)."""
    from traceql import findings

    st = stores["store"]
    a = findings.evaluate(st, "aligned", device="ascend910b")
    o = findings.evaluate(st, "off", device="ascend910b")
    assert sorted(f.id for f in o.fired) == sorted(f.id for f in a.fired) and "slow_rank" in {
        f.id for f in o.fired
    }
    assert o.verdict["headline"] == a.verdict["headline"]
    for fid in ("comm_waits_on_memory", "slow_rank"):
        assert o.finding(fid).saving["value"] == pytest.approx(a.finding(fid).saving["value"], abs=1e-6), fid
