"""Graph capture vs replay: a trace whose device work the profiler did not record never gets an "idle" verdict.

Synthetic traces come from traceql.synth.serving (their truth: how many launches went into the graph); the
shared vLLM capture trace's counts are checked against a json pass over the raw .json.gz written here.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import TRACELENS

import traceql
from traceql.findings import evaluate
from traceql.synth import serving

VLLM_DIR = TRACELENS / "inference/vllm_decode_full"
VLLM = VLLM_DIR / "capture_traces/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"


def _report(trace: Path, store: Path):  # type: ignore[no-untyped-def]
    traceql.ingest(trace, store=store, name="r", workers=1)
    return evaluate(store, "r")


def test_a_capture_is_not_idle(tmp_path: Path) -> None:
    truth = serving.write_capture_trace(tmp_path / "cap.json", captured=40, ran=3)
    rep = _report(tmp_path / "cap.json", tmp_path / "s")
    v = rep.verdict
    assert v["bound"] is None and v["confidence"] == "cannot tell"
    assert "idle-bound" not in v["headline"] and "device work not recorded" in v["headline"]
    assert "40 of 43 kernel launches went into the graph" in v["headline"]
    assert v["graph_capture"]["kernels"] == truth.kernels == 3
    # the idle-time checks stand down, saying why
    for fid in ("free_time", "prefetch_overlap"):
        f = rep.finding(fid)
        assert not f.fired and "device timeline is incomplete" in f.message


def test_replays_without_kernels_are_not_idle(tmp_path: Path) -> None:
    serving.write_replay_trace(tmp_path / "rep.json", replays=5)
    v = _report(tmp_path / "rep.json", tmp_path / "s").verdict
    assert v["bound"] is None and "5 graph launches have no kernels" in v["headline"]
    assert "idle-bound" not in v["headline"]


def test_an_ordinary_serving_trace_is_judged_as_before(tmp_path: Path) -> None:
    serving.write_serving_trace(
        tmp_path / "t.json",
        [serving.Phase(serving.sglang_marker("decode", 8, 8), "decode", batch=8, tokens=8)],
    )
    v = _report(tmp_path / "t.json", tmp_path / "s").verdict
    assert "graph_capture" not in v and v["bound"] is not None


def _raw_counts(path: Path) -> tuple[int, int, int]:
    """Launch calls, launch calls whose correlation has a kernel, kernel events: straight from the raw file."""
    with gzip.open(path, "rt") as fh:
        ev = json.load(fh)["traceEvents"]
    kcorr = {e["args"].get("correlation") for e in ev if e.get("cat") == "kernel"}
    launches = [e for e in ev if e.get("cat") == "cuda_runtime" and "LaunchKernel" in e.get("name", "")]
    ran = sum(1 for e in launches if e["args"].get("correlation") in kcorr)
    kernels = sum(1 for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    return len(launches), ran, kernels


def test_the_shared_vllm_capture_trace(tmp_path: Path) -> None:
    if not VLLM.exists():
        pytest.skip(f"shared trace absent: {VLLM}")
    launches, ran, kernels = _raw_counts(VLLM)
    v = _report(VLLM, tmp_path / "s").verdict
    assert v["bound"] is None and "idle" not in v["headline"].split("not idle")[0]
    assert "capture_32_FULL" in v["headline"]
    assert f"{launches - ran} of {launches} kernel launches" in v["headline"]
    assert v["graph_capture"]["kernels"] == kernels
    # TraceLens' replay beside it, summarised from the raw file
    with gzip.open(VLLM_DIR / "graph_execution.json.gz", "rt") as fh:
        ks = [e for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X"]
    beside = v["graph_capture"]["beside"]
    assert beside["kernels"] == len(ks) and beside["kernel_ms"] == pytest.approx(
        sum(e["dur"] for e in ks) / 1e3
    )
    assert "graph_execution.json.gz" in v["headline"]
