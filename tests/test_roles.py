"""RL runs: a folder of per-role profiles ingests as one run whose ranks carry their role, and the verdict speaks
per role. The roles' device time comes from traceql.synth.serving's truth."""

from __future__ import annotations

from pathlib import Path

import pytest

import traceql
from traceql import queries
from traceql.findings import evaluate
from traceql.parsers.roles import role_of
from traceql.synth import serving
from traceql.synth.serving import Phase, sglang_marker


@pytest.mark.parametrize(
    "path,role",
    [
        ("/job/actor_update/rank0_ascend_pt", "actor_update"),
        ("/job/actor_compute_log_prob/localhost_1234_20250101_ascend_pt", "actor_compute_log_prob"),
        ("/job/rollout_replica_1/trace.pt.trace.json.gz", "rollout_replica_1"),
        ("/job/rollout/rank-3/trace.json", "rollout"),
        ("/job/ref/profiler_output/rank0/ASCEND_PROFILER_OUTPUT", "ref"),
        ("/rank0/1/PROF_000001", None),
    ],
)
def test_role_is_the_nearest_folder_a_profiler_did_not_make(path: str, role: str | None) -> None:
    assert role_of(path) == role


def _rl(root: Path) -> dict[str, serving.Truth]:
    (root / "actor_update").mkdir(parents=True)
    (root / "rollout").mkdir()
    return {
        "actor_update": serving.write_serving_trace(
            root / "actor_update/rank0.pt.trace.json",
            [Phase("train_step", "unknown", kernels=6, kernel_us=90)],
        ),
        "rollout": serving.write_serving_trace(
            root / "rollout/rank0.pt.trace.json",
            [Phase(sglang_marker("decode", 8, 8), "decode", kernels=3)] * 4,
        ),
    }


def test_an_rl_folder_is_one_run_spoken_of_per_role(tmp_path: Path) -> None:
    truth = _rl(tmp_path / "job")
    traceql.ingest(tmp_path / "job", store=tmp_path / "s", name="rl", workers=1)
    rows = {r["role"]: r for r in queries.run("roles", tmp_path / "s", run_id="rl").to_pylist()}
    assert set(rows) == {"actor_update", "rollout"}
    for role, t in truth.items():
        assert rows[role]["ranks"] == 1 and rows[role]["kernels"] == t.kernels
        assert rows[role]["kernel_ns"] == t.kernel_ns
    v = evaluate(tmp_path / "s", "rl").verdict
    assert [r["role"] for r in v["roles"]] == ["actor_update", "rollout"]
    most = max(truth, key=lambda r: truth[r].kernel_ns)
    assert (
        "per role: actor_update (1 rank(s) " in v["headline"]
        and f"the most device time is in {most}" in v["headline"]
    )


def test_a_single_trace_is_not_split_by_role(tmp_path: Path) -> None:
    serving.write_serving_trace(tmp_path / "t.json", [Phase(None, "unknown")])
    traceql.ingest(tmp_path / "t.json", store=tmp_path / "s", name="r", workers=1)
    assert "roles" not in evaluate(tmp_path / "s", "r").verdict
