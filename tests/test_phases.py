"""Steps and phases from any marker (queries/phases.sql).

Synthetic serving traces come from traceql.synth.serving with their truth (each step's marker, kind, batch,
tokens, window and kernel time, set by the writer); the shared SGLang trace is checked against a json pass over
the raw .json.gz written here (markers by name, kernels launched inside the marker by correlation).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED, TRACELENS

import traceql
from traceql import queries
from traceql.synth import serving
from traceql.synth.serving import Phase, sglang_marker, vllm_marker

SGLANG = TRACELENS / "inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz"


def _phases(trace: Path, store: Path, **params: Any) -> list[dict[str, Any]]:
    traceql.ingest(trace, store=store, name="r", workers=1)
    return queries.run("phases", store, run_id="r", params=params).to_pylist()


def test_sglang_and_vllm_markers_give_labelled_windows(tmp_path: Path) -> None:
    steps = [
        Phase(sglang_marker("prefill", 4, 4096), "prefill", kernels=6, kernel_us=80, batch=4, tokens=4096),
        Phase(sglang_marker("decode", 4, 4), "decode", kernels=3, kernel_us=20, batch=4, tokens=4),
        Phase(vllm_marker(520, 2, 8), "mixed", kernels=5, batch=10, tokens=520, context=2, generation=8),
        Phase(vllm_marker(16, 0, 16), "decode", kernels=2, batch=16, tokens=16, context=0, generation=16),
        Phase("execute_model", "unknown", kernels=2),
    ]
    truth = serving.write_serving_trace(tmp_path / "t.json", steps)
    rows = _phases(tmp_path / "t.json", tmp_path / "s")
    assert len(rows) == len(truth.phases)
    for got, want in zip(rows, truth.phases, strict=True):
        assert got["marker"] == want["marker"] and got["kind"] == want["kind"]
        assert (got["batch_size"], got["tokens"]) == (want["batch"], want["tokens"])
        assert (got["context_reqs"], got["generation_reqs"]) == (want["context"], want["generation"])
        assert got["win_start"] == want["host_start_ns"]
        # the device runs behind the host: the window reaches the end of the work launched inside the marker
        assert got["win_end"] == max(want["host_end_ns"], want["device_end_ns"])
        assert got["kernel_ns"] == want["kernel_ns"]
    assert [r["source"] for r in rows] == ["sglang", "sglang"] + ["execute_context_generation"] * 2 + [
        "vllm_execute_model"
    ]


def test_no_marker_is_one_window_labelled_so(tmp_path: Path) -> None:
    truth = serving.write_serving_trace(tmp_path / "t.json", [Phase(None, "unknown", kernels=5)] * 3)
    rows = _phases(tmp_path / "t.json", tmp_path / "s")
    assert len(rows) == 1 and rows[0]["source"] == "none" and rows[0]["marker"] is None
    assert rows[0]["kernels"] == truth.kernels and rows[0]["kernel_ns"] == truth.kernel_ns
    assert rows[0]["win_start"] == truth.phases[0]["device_start_ns"]
    assert rows[0]["win_end"] == truth.phases[-1]["device_end_ns"]


def test_a_user_regex_replaces_the_built_in_markers(tmp_path: Path) -> None:
    steps = [
        Phase("my_step_1", "unknown"),
        Phase(sglang_marker("decode", 2, 2), "decode"),
        Phase("my_step_2", "unknown"),
    ]
    truth = serving.write_serving_trace(tmp_path / "t.json", steps)
    rows = _phases(tmp_path / "t.json", tmp_path / "s", step_marker=r"^my_step_\d+$")
    assert [r["marker"] for r in rows] == ["my_step_1", "my_step_2"]
    assert all(r["source"] == "step_marker" for r in rows)
    assert [r["kernel_ns"] for r in rows] == [truth.phases[0]["kernel_ns"], truth.phases[2]["kernel_ns"]]


def test_the_shared_sglang_trace_is_one_prefill_window(tmp_path: Path) -> None:
    if not SGLANG.exists():
        pytest.skip(f"shared trace absent: {SGLANG}")
    with gzip.open(SGLANG, "rt") as fh:
        ev = json.load(fh)["traceEvents"]
    marks = [e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith(("step[", "execute_"))]
    outer = max(marks, key=lambda e: e["dur"])
    # launches inside the outer marker (host ts in its range), and the kernels with their correlation
    lo, hi = outer["ts"], outer["ts"] + outer["dur"]
    corr = {e["args"]["correlation"] for e in ev if e.get("cat") == "cuda_runtime" and lo <= e["ts"] < hi
            and "correlation" in e.get("args", {})}  # fmt: skip
    ks = [
        e
        for e in ev
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["args"].get("correlation") in corr
    ]
    rows = _phases(SGLANG, tmp_path / "s")
    assert len(rows) == 1
    r = rows[0]
    assert r["kind"] == "prefill" and r["batch_size"] == 15 and r["tokens"] == 15360
    assert r["marker"] == outer["name"] and "step[EXTEND bs=15 toks=15360]" in r["inner_markers"]
    assert r["kernels"] == len(ks)
    assert r["kernel_ns"] == pytest.approx(sum(e["dur"] for e in ks) * 1000, abs=len(ks))


# every shared Kineto trace (HTA's test data and TraceLens'); those without a step marker must never print
# "per step" (or "/step") anywhere in the findings, as a table or markdown
KINETO = sorted(
    p
    for d in ("facebookresearch__HolisticTraceAnalysis/tests/data", "AMD-AGI__TraceLens/tests/traces")
    for p in (SHARED / d).rglob("*.json.gz")
)
PER_STEP = re.compile(r"per step|/step\b|per rank-step", re.IGNORECASE)


def _has_profiler_step(path: Path) -> bool:
    with gzip.open(path, "rt") as fh:
        return any(str(e.get("name", "")).startswith("ProfilerStep#") for e in json.load(fh)["traceEvents"])


@pytest.mark.parametrize("trace", KINETO, ids=lambda p: p.name[:40])
def test_no_step_marker_never_says_per_step(cli, tmp_path: Path, trace: Path) -> None:  # type: ignore[no-untyped-def]
    if _has_profiler_step(trace):
        pytest.skip("has ProfilerStep markers: per-step numbers are real steps there")
    store = tmp_path / "s"
    r = cli("ingest", str(trace), "--store", store, "--name", "r", "-q", "-j", "1", "--no-check")
    assert r.code == 0, r
    for fmt in ("table", "markdown"):
        r = cli("findings", "--run", "r", "--store", store, "--all", "--format", fmt)
        assert r.code == 0, r
        hits = PER_STEP.findall(r.out + r.err)
        assert not hits, (fmt, hits, [ln for ln in (r.out + r.err).splitlines() if PER_STEP.search(ln)][:3])


def test_per_phase_verdicts_from_known_phases(tmp_path: Path) -> None:
    """Prefill steps keep the device busy (long kernels back to back), decode steps leave it mostly idle (short
    kernels far apart): each kind gets its own call, with the numbers the writer's truth gives."""
    from traceql.findings import evaluate

    pre = Phase(
        sglang_marker("prefill", 8, 8192), "prefill", kernels=8, kernel_us=400, gap_us=1, batch=8, tokens=8192
    )
    dec = Phase(
        sglang_marker("decode", 8, 8), "decode", kernels=3, kernel_us=10, gap_us=150, batch=8, tokens=8
    )
    truth = serving.write_serving_trace(tmp_path / "t.json", [pre, dec, dec, pre, dec])
    traceql.ingest(tmp_path / "t.json", store=tmp_path / "s", name="r", workers=1)
    v = evaluate(tmp_path / "s", "r").verdict
    kinds = {k["kind"]: k for k in v["phases"]}
    assert set(kinds) == {"prefill", "decode"}
    for kind, n in (("prefill", 2), ("decode", 3)):
        ph = [p for p in truth.phases if p["kind"] == kind]
        window = sum(max(p["host_end_ns"], p["device_end_ns"]) - p["host_start_ns"] for p in ph)
        busy = sum(p["kernel_ns"] for p in ph)  # one stream, no overlap: busy = kernel time
        k = kinds[kind]
        assert k["windows"] == n and k["batch_size"] == 8
        assert k["busy_share"] == pytest.approx(busy / window)
        assert k["mean_window_ms"] == pytest.approx(window / n / 1e6)
    assert kinds["decode"]["call"].startswith("host/idle") and kinds["decode"]["busy_share"] < 0.5
    assert kinds["prefill"]["busy_share"] > 0.5 and "no measured HBM bytes" in kinds["prefill"]["call"]
    assert "per phase: prefill (2 window(s), batch 8, tokens 8192" in v["headline"]


def test_cli_step_marker_option(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    steps = [Phase("my_step_1", "unknown", kernels=3), Phase("my_step_2", "unknown", kernels=3)]
    serving.write_serving_trace(tmp_path / "t.json", steps)
    store = tmp_path / "s"
    assert (
        cli("ingest", str(tmp_path / "t.json"), "--store", store, "--name", "r", "-q", "--no-check").code == 0
    )
    r = cli("findings", "--run", "r", "--store", store, "--format", "json", "--step-marker", r"^my_step_\d+$")
    assert r.code == 0, r
    v = json.loads(r.out)["verdict"]
    assert [k["windows"] for k in v["phases"]] == [2] and "per phase: unknown (2 window(s)" in v["headline"]
    r = cli("findings", "--run", "r", "--store", store, "--format", "json")  # built-in markers: none here
    assert r.code == 0 and "phases" not in json.loads(r.out)["verdict"]
    r = cli("findings", "--run", "r", "--store", store, "--step-marker", "(")
    assert r.code == 1 and len(r.err.strip().splitlines()) == 1 and "phases" in r.err


DB = SHARED / "Ascend__msinsight/server/src/test/test_data/full_db/msprof_0.db"


def test_torch_npu_mstx_ranges_mark_the_phases(tmp_path: Path) -> None:
    """vLLM-Ascend-style mstx ranges written into a copy of the real msprof DB export (its own MSTX_EVENTS rows
    carry no step names): each range becomes a window with source mstx and its phase from the message."""
    if not DB.exists():
        pytest.skip(f"shared DB absent: {DB}")
    import shutil
    import sqlite3

    db = tmp_path / "msprof_0.db"
    shutil.copy(DB, db)
    with sqlite3.connect(db) as con:
        lo, hi = con.execute("SELECT min(startNs), max(endNs) FROM TASK").fetchone()
    mid = (lo + hi) // 2
    ranges = [(vllm_marker(2048, 2, 0), lo - 1_000_000, mid), (vllm_marker(32, 0, 32), mid + 1, hi + 1)]
    serving.add_mstx_ranges(db, ranges)
    rows = _phases(db, tmp_path / "s")
    assert [r["source"] for r in rows] == ["mstx", "mstx"]
    assert [(r["kind"], r["batch_size"], r["tokens"]) for r in rows] == [
        ("prefill", 2, 2048),
        ("decode", 32, 32),
    ]
    assert [r["win_start"] for r in rows] == [lo - 1_000_000, mid + 1]
    assert all(r["win_end"] >= e for r, (_, _, e) in zip(rows, ranges, strict=True))


def test_report_without_step_marker_never_says_per_step(tmp_path: Path) -> None:
    """The HTML report of a trace without step markers: no "per step" in its text or its charts' titles."""
    from traceql.report.render import write_report

    serving.write_serving_trace(tmp_path / "t.json", [Phase(None, "unknown", kernels=5, gap_us=300)] * 2)
    traceql.ingest(tmp_path / "t.json", store=tmp_path / "s", name="r", workers=1)
    html = write_report(tmp_path / "r.html", tmp_path / "s", "r").read_text()
    assert not re.findall(r"per step|of a step|ms/step", html, re.IGNORECASE)


def test_compare_without_step_markers_never_says_per_step(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    for name, gap in (("a", 300.0), ("b", 100.0)):
        serving.write_serving_trace(
            tmp_path / f"{name}.json", [Phase(None, "unknown", kernels=5, gap_us=gap)] * 2
        )
        assert cli("ingest", str(tmp_path / f"{name}.json"), "--store", store, "--name", name, "-q").code == 0
    for fmt in ("table", "markdown"):
        r = cli("compare", "a", "b", "--store", store, "--format", fmt)
        assert r.code in (0, 1), r
        assert not PER_STEP.findall(r.out), [ln for ln in r.out.splitlines() if PER_STEP.search(ln)][:3]
        assert "neither run has a step marker" in r.out
