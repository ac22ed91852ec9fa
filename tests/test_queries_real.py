"""Queries over the real dumps in ../shared/real_traces (skipped when absent, or when no parser claims a dump yet).

The level1 text job (2 ranks of an 8-NPU ResNet/AlexNet data-parallel run on Ascend910B) is checked against
the profiler's own numbers, read here independently from step_trace_time.csv and communication.json.
"""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from conftest import DB_LEVEL1, LEVEL0, LEVEL1, MSI, SHARED, real

from traceql import queries

pytestmark = pytest.mark.real

_ARROW_TO_DUCK = {
    "int32": "INTEGER",
    "int64": "BIGINT",
    "double": "DOUBLE",
    "string": "VARCHAR",
    "large_string": "VARCHAR",
    "string_view": "VARCHAR",
    "bool": "BOOLEAN",
}
DUMPS = {
    "text-level1": LEVEL1,
    "text-level0": LEVEL0,
    "db-level1": DB_LEVEL1,
    "rank0-2023": MSI / "server/src/test/test_data/test_rank_0",
    "cluster-output": MSI / "server/src/test/test_data/cluster_analysis_output",
    "msprof-db": MSI / "server/src/test/test_data/full_db/msprof_0.db",
    "compute-advice-kernels": SHARED
    / "Ascend__msprof-analyze/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv",
    "timeline-advice-trace": SHARED
    / "Ascend__msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json",
    "hta-alexnet": SHARED / "facebookresearch__HolisticTraceAnalysis/tests/data/critical_path/alexnet",
}
_INGESTED: dict[str, Path] = {}


def ingested(tmp_path_factory: pytest.TempPathFactory, key: str) -> Path:
    """The store holding dump `key` as run `key`, ingested once per session; skip when no parser claims it."""
    from traceql.errors import UnknownFormatError
    from traceql.ingest import ingest

    path = real(DUMPS[key])
    if key not in _INGESTED:
        root = tmp_path_factory.mktemp(f"real-{key}") / "store"
        try:
            ingest(path, store=root, name=key, workers=1)
        except UnknownFormatError as e:
            pytest.skip(f"no parser claims {path} yet: {e}")
        _INGESTED[key] = root
    return _INGESTED[key]


@pytest.fixture(scope="module")
def level1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("traceql.parsers.torch_npu")
    return ingested(tmp_path_factory, "text-level1")


def _us_ns(text: str) -> int:
    return int((Decimal(text.strip()) * 1000).to_integral_value())


def _step_trace(rank: int) -> dict[str, int]:
    """step_trace_time.csv of one level1 rank, µs text -> ns (exact)."""
    f = LEVEL1 / f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv"
    with open(f, newline="", encoding="utf-8") as fh:
        (row,) = list(csv.DictReader(fh))
    return {k: _us_ns(v) for k, v in row.items() if k != "Step"} | {"Step": int(row["Step"])}


# ---- every query runs on every real dump that ingests --------------------------------------------------------
@pytest.mark.parametrize("key", list(DUMPS))
def test_every_query_runs_on_real_dumps(tmp_path_factory: pytest.TempPathFactory, key: str) -> None:
    """Through one analysis session, as findings and report run them: the session stores the run's derived
    tables once, so each query reads them (computing them from the raw tables in every query instead is
    tests/test_derive.py's comparison, not repeated here)."""
    from traceql.analysis import Analysis

    root = ingested(tmp_path_factory, key)
    with Analysis(root, key, device="ascend910b") as a:
        for spec in queries.list_queries():
            params = {p.name: "MatMulV2" for p in spec.params if p.required}
            t = a.query(spec.name, params)
            got = [(f.name, _ARROW_TO_DUCK.get(str(f.type), str(f.type))) for f in t.schema]
            assert got == [(c.name, c.type) for c in spec.columns], spec.name


# ---- level1: step_breakdown reproduces step_trace_time.csv ------------------------------------------------
def test_step_breakdown_matches_step_trace_time(level1: Path) -> None:
    rows = {r["rank"]: r for r in queries.run("step_breakdown", level1).to_pylist()}
    assert set(rows) == {0, 1}
    for rank, r in rows.items():
        st = _step_trace(rank)
        assert r["step"] == st["Step"] == 50
        # the profiler's numbers, carried through the store unchanged
        assert r["profiler_computing_ns"] == st["Computing"]
        assert r["profiler_comm_not_overlapped_ns"] == st["Communication(Not Overlapped)"]
        assert r["profiler_free_ns"] == st["Free"]
        assert r["profiler_preparing_ns"] == st["Preparing"]
        # recomputed from the kernels and communication ops: within 0.1% (or 1 µs) of the profiler's
        for ours, theirs in [
            ("computing_ns", "Computing"),
            ("comm_ns", "Communication"),
            ("comm_not_overlapped_ns", "Communication(Not Overlapped)"),
            ("overlapped_ns", "Overlapped"),
            ("free_ns", "Free"),
            ("preparing_ns", "Preparing"),
        ]:
            assert r[ours] == pytest.approx(st[theirs], rel=1e-3, abs=1000), (rank, ours)
        step_time = st["Computing"] + st["Communication(Not Overlapped)"] + st["Free"]
        assert r["wall_ns"] == pytest.approx(step_time, rel=1e-4)
        assert r["wall_ns"] == r["computing_ns"] + r["comm_not_overlapped_ns"] + r["free_ns"]


# ---- level1: wait_attribution adds up to the step time --------------------------------------------------------
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


def test_wait_attribution_adds_up_to_step_time(level1: Path) -> None:
    from traceql import engine

    t = queries.run("wait_attribution", level1, device="ascend910b").to_pylist()
    con = engine.connect(level1)
    step_ns = dict(con.execute("SELECT rank, dur_ns FROM steps").fetchall())
    con.close()
    steps = [r for r in t if r["scope"] == "step"]
    assert {r["rank"] for r in steps} == {0, 1}
    for r in steps:
        total = sum(r[p] for p in PARTS)
        # the seven parts tile the step window: the ingested step time (host ProfilerStep span)
        assert total == pytest.approx(step_ns[r["rank"]], rel=0.01)
        assert r["wall_ns"] == step_ns[r["rank"]]
        # without the host part, the device span = the profiler's step (Computing + Comm(Not Overlapped) + Free)
        st = _step_trace(r["rank"])
        device = total - r["host_ns"]
        assert device == pytest.approx(
            st["Computing"] + st["Communication(Not Overlapped)"] + st["Free"], rel=0.01
        )
        assert r["compute_hbm_saturated_ns"] + r["compute_other_ns"] == pytest.approx(
            st["Computing"], rel=0.01
        )
    run = next(r for r in t if r["scope"] == "run")
    # 2 of 8 ranks profiled: the all-reduces mostly wait (HCCL idle) for ranks outside the dump; HBM counters every
    # 20 ms cannot resolve 17 us kernels, so there is no compute-time utilisation, only the counters' grade
    assert run["verdict"] == "communication-bound" and (run["ranks_captured"], run["job_ranks"]) == (2, 8)
    assert run["comm_wait_peer_hbm_ns"] == 0 and run["compute_hbm_utilization"] is None
    assert run["hbm_evidence"] == "sampled" and run["comm_wait_missing_ranks_ns"] > 0


def test_comm_skew_matches_communication_json(level1: Path) -> None:
    """Rank 0's first all-reduce waits for rank 1: the start-time difference in communication.json."""
    starts = {}
    for rank in (0, 1):
        d = json.loads(
            (LEVEL1 / f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json").read_text()
        )
        ops: dict[str, Any] = d["step50"]["collective"]
        key = next(k for k in ops if k.startswith("hcom_allReduce__586_0_1@"))
        starts[rank] = _us_ns(str(ops[key]["Communication Time Info"]["Start Timestamp(us)"]))
    rows = queries.run("comm_skew", level1, device="ascend910b").to_pylist()
    first = {r["rank"]: r for r in rows if r["name"] == "hcom_allReduce__586_0_1"}
    assert first[0]["peer_wait_ns"] == pytest.approx(starts[1] - starts[0], abs=1000)  # 5.6077 ms
    assert first[0]["last_rank"] == 1 and first[1]["peer_wait_ns"] == 0
    assert all(r["matched"] and r["n_ranks"] == 2 for r in rows)


def test_level1_hbm_bytes_are_not_sampled_per_kernel(level1: Path) -> None:
    """The dump has no per-op HBM bytes (PipeUtilization) and HBM counters every 20 ms: far too coarse for its
    kernels (median 17.5 us), so no kernel is credited with a share of a sample; shapes give modeled bytes."""
    t = queries.run("op_hbm_bytes", level1, params={"top_n": 200}, device="ascend910b").to_pylist()
    sources = {r["hbm_bytes_source"] for r in t}
    assert "sampled" not in sources and "pmu" not in sources and "modeled" in sources
    assert abs(sum(r["share"] for r in t if r["share"] is not None) - 1.0) < 1e-9
    lt = queries.run("layout_transforms", level1).to_pylist()
    assert lt[0]["op_type"] == "TransData" and {lt[0]["src_format"], lt[0]["dst_format"]} <= {
        "NCHW",
        "NC1HWC0",
        "FRACTAL_Z",
        "NC1HWC0:1",
    }
    ub = queries.run("ub_l2_rates", level1).to_pylist()
    assert (
        ub[0]["scope"] == "overall"
        and ub[0]["ub_utilization"] is None
        and "no UB bandwidth metrics" in ub[0]["reason"]
    )
