"""`traceql compare`: planted before/after pairs (tests/planted_compare.py, real torch_npu format) whose step-time,
byte and operator deltas are known by construction; incomparable pairs refused with exit 1; the gate's exit 3;
the real level0/level1 recordings of one job; the CLI's formats and errors.

Expected values come from the construction of the planted dumps (planted_compare.chain_ns / chain_bytes /
fused_ns: the generator's op durations and tensor bytes, computed by hand from the shapes), from the raw files
(step_trace_time.csv for the real runs) or by hand, never from traceql's own output.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import planted_compare as pc
import pytest
from _lazy import Lazy

from tests.conftest import LEVEL0, LEVEL1, real
from traceql.compare import compare

DEVICE = "ascend910b"
NOISE_A, NOISE_B = pc.NOISE_A, pc.NOISE_B  # host tail added to steps 1..3 (ns)
CLEAN, UNFUSED = "planted-clean", "planted-unfused_chain"  # planted_compare's clean job and unfused chain


@pytest.fixture(scope="session")
def cstore(planted_store: Path) -> Path:
    """The session's planted store (tests/conftest.py PLANTED_RUNS): planted_compare's dumps as runs chain,
    fused, chain_noisy (NOISE_A), clean_noisy (NOISE_B) and clean8 (8 ranks); its clean job and its unfused
    chain (clean=False, chain=True) are planted.py's clean and unfused_chain, byte for byte (CLEAN, UNFUSED);
    the Kineto CPU sample as kineto."""
    return planted_store


@pytest.fixture(scope="session")
def results(cstore: Path) -> Lazy[dict[str, Any]]:
    """Each pair compared once (findings included), when a test first reads it."""
    pairs = {
        "self": (CLEAN, CLEAN),
        "regress": (CLEAN, "chain"),
        "improve": ("chain", CLEAN),
        "fix": (UNFUSED, "fused"),
        "noisy_improve": ("chain_noisy", "clean_noisy"),
        "noisy_regress": ("clean_noisy", "chain_noisy"),
    }
    return Lazy(pairs, lambda k: compare(cstore, *pairs[k], device=DEVICE).to_dict())


def test_the_shared_clean_and_unfused_runs_are_planted_compares_dumps(tmp_path: Path) -> None:
    """CLEAN and UNFUSED come from tests/planted.py (the session's planted store); they stand for
    planted_compare's clean job and its unfused chain only because the two write the same files, byte for byte."""
    import planted

    for case, kw in (("clean", {}), ("unfused_chain", {"clean": False, "chain": True})):
        a = planted.write(case, tmp_path / "planted")
        b = pc.write(case, tmp_path / "compare", **kw)
        files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
        assert files and files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
        assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files), case


# ---- a run against itself -------------------------------------------------------------------------------------
def test_run_against_itself_is_neutral_with_every_delta_zero(results: Mapping[str, dict[str, Any]]) -> None:
    d = results["self"]
    assert d["comparability"]["comparable"] and d["verdict"]["verdict"] == "neutral"
    assert d["verdict"]["delta_ns"] == 0
    assert d["step"]["wall_ns"]["delta"] == 0
    assert all(p["delta"] == 0 for p in d["step"]["parts"].values())
    assert all(r["wall_ns"]["delta"] == 0 for r in d["ranks"])
    for t in d["traffic"]["totals"].values():
        # (collectives carry no HBM bytes of their own: no PMU bytes, no shapes, never a share of a counter sample)
        no_bytes = t["base"]["hbm_bytes_per_step"] is None and t["cand"]["hbm_bytes_per_step"] is None
        assert t["delta_kernels_per_step"] == 0 and (t["delta_hbm_bytes_per_step"] == 0 or no_bytes)
    assert all(r["delta"]["hbm_bytes_per_step"] in (0, None) for r in d["traffic"]["by_op_type"])
    assert any(r["delta"]["hbm_bytes_per_step"] == 0 for r in d["traffic"]["by_op_type"])
    cnt = d["operators"]["counts"]
    assert cnt["added"] == cnt["removed"] == cnt["changed"] == 0 and cnt["unchanged"] > 0
    assert d["findings"]["resolved"] == [] and d["findings"]["new"] == []


# ---- a planted regression: the unfused chain reintroduced ----------------------------------------------------
def test_planted_regression_is_reported_with_its_step_time(results: Mapping[str, dict[str, Any]]) -> None:
    d = results["regress"]
    v = d["verdict"]
    assert v["verdict"] == "regression"
    # by construction every step grows by the chain's kernels + their launch gaps; every step identical: sd 0
    assert v["delta_ns"] == pc.chain_ns() == 3_898_316
    assert v["base"]["mean"] == pc.clean_step_ns() and v["base"]["sd"] == 0 and v["base"]["n"] == pc.STEPS
    assert v["delta_rel"] == pytest.approx(pc.chain_ns() / pc.clean_step_ns())
    parts = d["step"]["parts"]
    compute = parts["compute_hbm_saturated_ns"]["delta"] + parts["compute_other_ns"]["delta"]
    assert compute == pc.chain_kernel_ns()  # the chain's kernels are compute
    assert parts["idle_ns"]["delta"] == 8 * pc.GAP_NS  # 8 launch gaps of 2 us
    assert parts["host_ns"]["delta"] == 0 and parts["comm_transit_ns"]["delta"] == 0
    assert [r["wall_ns"]["delta"] for r in d["ranks"]] == [pc.chain_ns()] * 2


def test_planted_regression_traffic_and_operators(results: Mapping[str, dict[str, Any]]) -> None:
    d = results["regress"]
    comp = d["traffic"]["totals"]["compute"]
    # PMU bytes of the chain = its tensors' bytes, per step of one rank; both sides measured (PMU)
    assert comp["delta_hbm_bytes_per_step"] == pc.chain_bytes()
    assert comp["delta_kernels_per_step"] == 8
    assert comp["base"]["grade"] == comp["cand"]["grade"] == comp["delta_grade"] == "measured"
    ops = d["operators"]
    assert ops["counts"]["added"] == 8 and ops["counts"]["removed"] == 0  # 4 types x 2 shapes
    assert {r["op_type"] for r in ops["added"]} == {"Conv2D", "BNTrainingReduce", "BNTrainingUpdate", "Relu"}
    assert sum(r["delta"]["dur_ns_per_step"] for r in ops["added"]) == pc.chain_kernel_ns()
    groups = {g["pattern"]: g for g in d["traffic"]["fused_groups"]}
    g = groups["Conv2D -> BNTrainingReduce -> BNTrainingUpdate -> Relu"]
    assert g["base"] is None and g["cand"]["chain_hbm_bytes_per_step"] == pc.chain_bytes()
    assert g["cand"]["occurrences_per_step"] == 2 and g["delta_grade"] == "measured"


def test_improvement_is_the_same_number_negated(results: Mapping[str, dict[str, Any]]) -> None:
    v = results["improve"]["verdict"]
    assert v["verdict"] == "improvement" and v["delta_ns"] == -pc.chain_ns()


def test_fix_resolves_the_fusion_finding(results: Mapping[str, dict[str, Any]]) -> None:
    d = results["fix"]
    assert d["verdict"]["verdict"] == "improvement"
    assert d["verdict"]["delta_ns"] == pytest.approx(pc.fused_ns() - pc.chain_ns(), abs=0)
    resolved = {x["id"]: x for x in d["findings"]["resolved"]}
    assert "operator_fusion" in resolved  # planted.EXPECTED: fires on the unfused chain
    assert resolved["operator_fusion"]["then"]["saving"]["value"] > 0
    assert not any(x["id"] == "operator_fusion" for x in d["findings"]["new"] + d["findings"]["persisting"])
    removed = {r["op_type"] for r in d["operators"]["removed"]}
    assert removed == {"Conv2D", "BNTrainingReduce", "BNTrainingUpdate", "Relu"}
    assert {r["op_type"] for r in d["operators"]["added"]} == {"FusedConvBnRelu"}


# ---- noise ------------------------------------------------------------------------------------------------------
def _sd(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def test_improvement_under_noise_is_never_a_regression(results: Mapping[str, dict[str, Any]]) -> None:
    v = results["noisy_improve"]["verdict"]
    base = [pc.clean_step_ns() + pc.chain_ns() + j for j in NOISE_A]  # by construction
    cand = [pc.clean_step_ns() + j for j in NOISE_B]
    assert v["base"]["sd"] == pytest.approx(_sd(base)) and v["cand"]["sd"] == pytest.approx(_sd(cand))
    assert v["delta_ns"] == pytest.approx(sum(cand) / 3 - sum(base) / 3)
    assert v["verdict"] in ("improvement", "inconclusive")
    assert v["verdict"] == "inconclusive"  # the spread (~4 ms sd, 3 steps) covers the 2.6 ms delta
    assert "spread covers" in v["why"]


def test_noise_covering_a_regression_is_inconclusive_and_does_not_trip_the_gate(
    cli: Any, cstore: Path, results: Mapping[str, dict[str, Any]]
) -> None:
    v = results["noisy_regress"]["verdict"]
    assert v["verdict"] == "inconclusive" and v["delta_rel"] > 0.05
    r = cli(
        "compare",
        "clean_noisy",
        "chain_noisy",
        "-s",
        cstore,
        "--gate",
        "5%",
        "--no-findings",
        "--device",
        DEVICE,
    )
    assert r.code == 0, r
    assert "not tripped" in r.out


# ---- the gate ---------------------------------------------------------------------------------------------------
def test_gate_trips_exit_3_on_the_planted_regression(cli: Any, cstore: Path) -> None:
    r = cli("compare", CLEAN, "chain", "-s", cstore, "--gate", "5%", "--no-findings", "--device", DEVICE)
    assert r.code == 3, r
    assert "--gate 5%" in r.err and "regressed 92.70%" in r.err
    r = cli("compare", "chain", CLEAN, "-s", cstore, "--gate", "5%", "--no-findings", "--device", DEVICE)
    assert r.code == 0, r
    r = cli("compare", CLEAN, "chain", "-s", cstore, "--gate", "200", "--no-findings", "--device", DEVICE)
    assert r.code == 0, r  # +93% is within a 200% gate


# ---- incomparable -----------------------------------------------------------------------------------------------
def test_two_ranks_vs_eight_is_not_comparable_exit_1(cli: Any, cstore: Path) -> None:
    r = cli("compare", CLEAN, "clean8", "-s", cstore, "--format", "json", "--no-findings", "--gate", "5%")
    assert r.code == 1, r  # not comparable: an error, never a gate result
    assert "not comparable because" in r.err and "rank count: base has 2 rank(s) and cand 8" in r.err
    assert sum(ln.startswith("error:") for ln in r.err.splitlines()) == 1 and "Traceback" not in r.err
    d = json.loads(r.out)
    assert d["comparability"]["comparable"] is False and d["verdict"] is None


def test_kineto_cpu_vs_ascend_cluster_is_not_comparable(cli: Any, cstore: Path) -> None:
    r = cli("compare", "kineto", CLEAN, "-s", cstore, "--no-findings")
    assert r.code == 1, r
    assert "not comparable because dump kind" in r.err and "--mode cross" in r.err
    assert "VERDICT" not in r.out.upper().split("NOT COMPARABLE")[0]


# ---- formats and CLI ---------------------------------------------------------------------------------------------
def test_json_is_versioned_and_markdown_says_the_same(cli: Any, cstore: Path) -> None:
    r = cli("compare", CLEAN, "chain", "-s", cstore, "--format", "json", "--device", DEVICE)
    assert r.code == 0, r
    d = json.loads(r.out)
    assert d["format"] == "traceql.compare/1" and d["mode"] == "same"
    assert {
        "base",
        "cand",
        "comparability",
        "verdict",
        "step",
        "ranks",
        "traffic",
        "operators",
        "findings",
    } <= set(d)
    m = cli("compare", CLEAN, "chain", "-s", cstore, "--format", "markdown", "--device", DEVICE)
    assert m.code == 0 and "REGRESSION" in m.out and "+3.898 ms" in m.out
    assert "| Conv2D |" in m.out and "## Findings" in m.out


def test_help_has_an_example_and_usage_errors_exit_2(cli: Any, cstore: Path) -> None:
    h = cli("compare", "--help")
    assert h.code == 0 and "traceql compare base cand --gate 5%" in h.out
    for args, needle in (
        (["--format", "xml"], "--format"),
        (["--mode", "both"], "--mode"),
        (["--gate", "abc"], "--gate"),
        (["--name-map", "x.json"], "--name-map"),
    ):
        r = cli("compare", CLEAN, "chain", "-s", cstore, *args)
        assert r.code == 2, (args, r)
        assert needle in r.err
    r = cli("compare", CLEAN, "nope", "-s", cstore)
    assert r.code == 1 and "'nope' is neither a run" in r.err and "clean" in r.err


def test_dump_paths_are_ingested_first_then_reused(cli: Any, tmp_path: Path) -> None:
    d = pc.write("a", tmp_path / "dumps")
    st = tmp_path / "st"
    r = cli("compare", str(d), str(d), "-s", st, "--no-findings")
    assert r.code == 0, r
    assert "NEUTRAL" in r.out
    from traceql.store import Store

    assert list(Store(st).runs()) == ["a"]  # the second side is the same source: ingested once


# ---- the real level0 / level1 recordings of one job -------------------------------------------------------------
def _csv_step_us(folder: Path) -> list[float]:
    out = []
    for f in sorted(folder.glob("rank*_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv")):
        with f.open(newline="", encoding="utf-8") as fh:
            out += [float(r["Computing"]) for r in csv.DictReader(fh)]
    return out


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from traceql import ingest

    st = tmp_path_factory.mktemp("real") / "store"
    ingest(real(LEVEL0), st, name="level0", workers=1)
    ingest(real(LEVEL1), st, name="level1", workers=1)
    return st


def test_real_level0_vs_level1_compares_and_says_what_level0_hides(real_store: Path) -> None:
    d = compare(real_store, "level0", "level1").to_dict()
    comp = d["comparability"]
    assert comp["comparable"]  # same job, same ranks and kernels: compared, with the differences listed
    aspects = {x["aspect"]: x for x in comp["differences"]}
    assert aspects["profiler level"]["base"] == "Level0" and aspects["profiler level"]["cand"] == "Level1"
    hidden = "\n".join(comp["hidden_by_difference"])
    assert "base (Level0) has no comm_matrix" in hidden
    assert "aic_metrics NONE" in hidden and "profiling overhead" in hidden
    assert "no operator type" in hidden  # Level0 writes no OP Type: typed through Level1's kernel names
    # one profiled step per rank on each side (raw step_trace_time.csv: 2 rows = 2 ranks x 1 step)
    assert len(_csv_step_us(real(LEVEL0))) == 2 and len(_csv_step_us(real(LEVEL1))) == 2
    assert d["verdict"]["verdict"] == "inconclusive" and d["verdict"]["base"]["n"] == 1
    # same job: every kernel matched (Level0's untyped names typed by Level1), none added or removed
    assert d["operators"]["counts"]["added"] == d["operators"]["counts"]["removed"] == 0
    assert d["traffic"]["totals"]["all"]["delta_kernels_per_step"] == 0
    assert d["findings"]["caveat"]


def test_real_level1_vs_level0_reverse_and_markdown(real_store: Path) -> None:
    from traceql.compare.render import to_markdown

    text = to_markdown(compare(real_store, "level1", "level0", with_findings=False))
    assert "cand (Level0) has no comm_matrix" in text and "What the difference hides" in text


# ---- the report's "what changed" section and the charts ---------------------------------------------------------
def test_report_with_baseline_has_the_what_changed_section(cli: Any, cstore: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = cli("report", "--run", "chain", "--baseline", CLEAN, "-s", cstore, "--device", DEVICE, "-o", out)
    assert r.code == 0, r
    html = out.read_text(encoding="utf-8")
    assert 'id="changed"' in html and "What changed since <code>planted-clean</code>" in html
    assert "REGRESSION: step 4.205 ms -&gt; 8.104 ms (+3.898 ms" in html
    specs = json.loads(html.split('id="traceql-specs"', 1)[1].split(">", 1)[1].split("</script>", 1)[0])
    assert {"compare_step_split", "compare_traffic"} <= set(specs)
    assert 'data-chart="compare_step_split"' in html and 'data-chart="compare_traffic"' in html
    plain = tmp_path / "p.html"
    assert cli("report", "--run", "chain", "-s", cstore, "--device", DEVICE, "-o", plain).code == 0
    assert 'id="changed"' not in plain.read_text(encoding="utf-8")


def test_charts_carry_the_comparison_numbers(results: Mapping[str, dict[str, Any]]) -> None:
    from traceql.compare.charts import step_split_chart, traffic_delta_chart

    d = results["regress"]
    s = step_split_chart(d).to_dict()
    rows = s["data"]["values"]
    cand_ms = sum(r["ms"] for r in rows if r["side"] == "cand: chain")
    assert cand_ms == pytest.approx(
        (pc.clean_step_ns() + pc.chain_ns()) / 1e6
    )  # the parts add up to the window
    t = traffic_delta_chart(d).to_dict()
    by = {r["op_type"]: r for r in t["data"]["values"]}
    assert {"Conv2D", "BNTrainingReduce", "BNTrainingUpdate", "Relu"} <= set(by)
    assert by["Relu"]["grade"] == "measured"


# ---- --mode cross: a GPU baseline against an NPU port -------------------------------------------------------------
ALEXNET = "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"


@pytest.fixture(scope="module")
def cross_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import HTA
    from traceql import ingest

    st = tmp_path_factory.mktemp("cross") / "store"
    ingest(real(HTA / ALEXNET), st, name="gpu", workers=1)  # Kineto, 1 x A100
    ingest(real(LEVEL1) / "rank0_ascend_pt", st, name="npu", workers=1)  # torch_npu Level1, rank 0 only
    return st


def _raw_kernels(path: Path, needle: str) -> int:
    import gzip

    with gzip.open(path) as fh:
        trace = json.loads(fh.read())
    return sum(
        1
        for e in trace["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") == "kernel" and needle in e.get("name", "")
    )


def test_cross_mode_matches_operators_through_the_framework_op(
    cli: Any, cross_store: Path, tmp_path: Path
) -> None:
    from tests.conftest import HTA

    same = cli("compare", "gpu", "npu", "-s", cross_store, "--no-findings")
    assert same.code == 1 and "different profilers" in same.err and "--mode cross" in same.err
    m = tmp_path / "map.json"
    m.write_text(json.dumps({"map": {"launch_clamp_scalar": "Relu"}}), encoding="utf-8")
    r = cli(
        "compare",
        "gpu",
        "npu",
        "-s",
        cross_store,
        "--mode",
        "cross",
        "--name-map",
        m,
        "--format",
        "json",
        "--no-findings",
    )
    # the AlexNet trace has no step markers (step_windows: one window, step NULL): its whole trace is no step
    # to time against the NPU's steps, so no verdict (issue 47); the operators are still matched and written
    assert r.code == 1, r
    d = json.loads(r.out)
    assert d["mode"] == "cross" and not d["comparability"]["comparable"]
    assert not any(x["refused"] for x in d["comparability"]["differences"])
    refusals = d["comparability"]["refusals"]
    assert len(refusals) == 1 and "base run 'gpu' has no step windows on any rank" in refusals[0], refusals
    ops = d["operators"]
    assert ops["matched_by"].startswith("framework operator")
    both = {x["op_type"] for x in ops["changed"]}
    assert {"conv2d", "linear", "relu", "maxpool2d"} <= both  # AlexNet and ResNet share these aten ops
    # the name map renames the CUDA clamp kernels (ReLU) to Ascend's Relu: their count from the raw trace
    from traceql.compare import compare, diff, load_name_map

    c = compare(cross_store, "gpu", "npu", mode="cross", with_findings=False, name_map=load_name_map(m))
    relu = diff._by(diff._renamed(c.base.ops, load_name_map(m)), "type")["Relu"]
    assert relu.calls == _raw_kernels(HTA / ALEXNET, "launch_clamp_scalar") > 0


@pytest.mark.parametrize(
    "content, needle",
    [
        ("{not json", "not a JSON/TOML name map"),
        ('{"map": {"(": "x"}}', "bad regex"),
        ('{"map": {"a": 1}}', "string keys and values"),
    ],
)
def test_bad_name_map_is_one_line_exit_1(
    cli: Any, cstore: Path, tmp_path: Path, content: str, needle: str
) -> None:
    m = tmp_path / "map.json"
    m.write_text(content, encoding="utf-8")
    r = cli("compare", CLEAN, "chain", "-s", cstore, "--mode", "cross", "--name-map", m, "--no-findings")
    assert r.code == 1 and needle in r.err and "Traceback" not in r.err


def test_no_fused_groups_skips_only_the_chains(cli: Any, cstore: Path) -> None:
    r = cli(
        "compare",
        CLEAN,
        "chain",
        "-s",
        cstore,
        "--format",
        "json",
        "--no-findings",
        "--no-fused-groups",
        "--device",
        DEVICE,
    )
    assert r.code == 0, r
    d = json.loads(r.out)
    assert d["traffic"]["fused_groups"] == [] and d["findings"] is None
    assert d["verdict"]["delta_ns"] == pc.chain_ns()
