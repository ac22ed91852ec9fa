"""One peak per run: `traceql runs` shows the device every analysis of the run uses and where it came from, and
`traceql check` judges kernels against that same peak (expected values by hand: the 910B preset's 1.6 TB/s,
inferred from the dump's AI_VECTOR_CORE tasks; the level1 dump names no device)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import LEVEL1, real

from traceql.ingest import ingest


@pytest.mark.real
def test_runs_shows_the_resolved_device_and_check_uses_it(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    ingest(real(LEVEL1), tmp_path / "s", name="l1", workers=1)
    r = cli("runs", "--store", tmp_path / "s", "--format", "json")
    assert r.code == 0, r.err
    dev = json.loads(r.out)["l1"]["device_resolved"]
    assert dev["preset"] == "ascend910b" and dev["peaks"]["peak_hbm_bps"] == 1.6e12
    assert "inferred" in dev["source"]
    t = cli("runs", "--store", tmp_path / "s")
    assert "ascend910b (inferred)" in t.out
    c = cli("check", "--store", tmp_path / "s", "--run", "l1", "--format", "json")
    rows = json.loads(c.out)["l1"]
    mod = next(x for x in rows if x["name"] == "modeled_above_peak")
    # every listed kernel is above 1.0x of the 1.6 TB/s peak; with the old 10 TB/s fallback none of them was
    assert mod["failures"] > 0
    assert all(s["times_peak"] > 1.0 for s in mod["sample"])
    assert mod["bound"] == "ascend910b peak 1.60 TB/s"  # the preset inferred (the dump names no device)
