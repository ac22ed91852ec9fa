"""No modeled per-operator bandwidth above the run's HBM peak reaches any output (issue 42), on the real dumps:
op_hbm_bytes' byte columns, the roofline's points, op_bounds and the top_hbm_ops finding. The bound is the peak
itself (by hand: a figure above 1x the peak is not physics), and `traceql check`'s modeled_above_peak must list
exactly the calls op_hbm_bytes left out (the same peak on both sides)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import DB_LEVEL1, LEVEL0, LEVEL1, SHARED, real

from traceql.analysis import Analysis
from traceql.checks import run_checks
from traceql.findings import evaluate
from traceql.ingest import ingest

DUMPS = {
    "level1": LEVEL1,
    "db_level1": DB_LEVEL1,
    "level0": LEVEL0,
    "h100": SHARED / "AMD-AGI__TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
}

pytestmark = pytest.mark.real


@pytest.mark.parametrize("key", sorted(DUMPS))
def test_no_modeled_bandwidth_above_the_peak(tmp_path: Path, key: str) -> None:
    ingest(real(DUMPS[key]), tmp_path / "s", name=key, workers=1)
    with Analysis(tmp_path / "s", key) as s:
        peak = s.peaks.get("peak_hbm_bps") if isinstance(s.peaks, dict) else None
        ops = s.query("op_hbm_bytes", {"top_n": 100000}).to_pylist()
        roof = s.query("roofline", {"top_n": 100000}).to_pylist()
        bounds = s.query("op_bounds", {"top_n": 100000}).to_pylist()
    for r in ops + roof:
        if r.get("hbm_bytes_source") in ("modeled", "mixed") and r.get("bw_utilization") is not None:
            assert r["bw_utilization"] <= 1.0 + 1e-9, r
    for r in bounds:
        assert r["bw_utilization"] is None or r["bw_utilization"] <= 1.0 + 1e-9, r
    rep = json.loads(evaluate(tmp_path / "s", key).to_json())
    for f in rep["findings"]:
        for t in f["top_ops"]:
            if t.get("hbm_bytes_source") in ("modeled", "mixed") and t.get("bw_utilization") is not None:
                assert t["bw_utilization"] <= 1.0 + 1e-9, (f["id"], t)
    left_out = sum(r["calls"] - r["calls_with_bytes"] for r in ops if r.get("model_holds") is False)
    checked = {c["name"]: c for c in run_checks(tmp_path / "s", key)}
    if peak is not None or any(r.get("model_holds") is not None for r in ops):
        assert checked["modeled_above_peak"]["failures"] == left_out
