"""Shared test fixtures: paths to real dumps (skip loudly when ../shared is absent) and a CLI runner."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "real_traces"
SAMPLES = ROOT / "sample_traces"
MSI = SHARED / "Ascend__msinsight"
LEVEL1 = MSI / "test/data/pytorch/text/level1"
LEVEL0 = MSI / "test/data/pytorch/text/level0"
DB_LEVEL1 = MSI / "test/data/pytorch/db/level1"
HTA = SHARED / "facebookresearch__HolisticTraceAnalysis/tests/data"

# Query results kept in a store between processes (traceql.query_cache) would let one test's analysis answer
# another's from the store's .cache/: off in every test and every command a test starts, on where a test sets
# TRACEQL_QUERY_CACHE=1 (tests/test_query_cache.py).
os.environ["TRACEQL_QUERY_CACHE"] = "0"

# the cluster tests' session fixtures (a moto S3 server, a local Ray): tests/_cluster.py
sys.path.insert(0, str(Path(__file__).resolve().parent))
import planted as _planted  # noqa: E402
import planted_compare as _planted_compare  # noqa: E402
from _cluster import moto_endpoint, ray_local, s3_root  # noqa: E402,F401

# ---- the fast loop: `python -m pytest -m "not slow" -q -n 2` (docs/contributing.md) ---------------------------
# What is slow is decided here, in one place, from the measured durations (docs/contributing.md says how):
# whole files of kill loops, fuzzing, Ray/S3, many ranks, capture and scale; tests whose name says they kill or
# race processes; and single tests measured over a few seconds. CI runs everything (no -m).
SLOW_FILES = {
    "test_worker_death.py",  # kills ingest workers mid-parse
    "test_store_concurrency.py",  # kill -9 loops and racing writers
    "test_fuzz_deep_json.py",  # fuzzing
    "test_fuzz_hypothesis.py",
    "test_fuzz_mutated.py",
    "test_fuzz_special_files.py",
    "test_cluster_ingest.py",  # a local Ray and a moto S3 server
    "test_hostile_store_fs.py",  # tmpfs / object-store failure paths
    "test_many_ranks.py",  # hundreds of ranks
    "test_many_files.py",
    "test_capture.py",  # torch capture
    "test_compare_capture.py",
    "test_scale.py",  # large synthetic runs
    "test_hostile_scale.py",
    "test_ingest_memory.py",  # peak-memory runs over large synthetic dumps
    "test_malloc_arenas.py",
    "test_report_browser.py",  # a headless chromium
    "test_mcp_real.py",  # every MCP answer on every real dump (84 s, 2026-12-06 night)
    "test_findings_order.py",  # rules and checks permuted on every planted and real dump (17-25 s a dump)
}
SLOW_NAME_WORDS = ("kill", "crash", "sigint", "ctrl_c", "concurrent")  # tests that kill or race processes
SLOW_MARKERS = ("scale", "capture", "browser")
# single tests measured slow: over ~15 s (call or setup) in the full run of 2026-12-06 (--durations=60, wall
# seconds on the shared 2-core machine at load ~20, so ~3x what an idle machine takes; docs/contributing.md)
SLOW_TESTS = {
    "tests/test_compare.py::test_run_against_itself_is_neutral_with_every_delta_zero",  # 194 s setup
    "tests/test_compare.py::test_report_with_baseline_has_the_what_changed_section",  # 55 s
    "tests/test_compare.py::test_cross_mode_matches_operators_through_the_framework_op",  # 46 s
    "tests/test_compare.py::test_json_is_versioned_and_markdown_says_the_same",  # 46 s
    "tests/test_compare.py::test_real_level0_vs_level1_compares_and_says_what_level0_hides",  # 33 s
    "tests/test_derive.py::test_planted_derived_tables_same_from_stored_and_raw",  # 1.3-1.6 s a case, idle
    "tests/test_derive.py::test_real_db_derived_tables_same_from_stored_and_raw",  # 1.6 s, idle
    "tests/test_derive.py::test_sample_derived_tables_same_from_stored_and_raw",  # 2 s, idle
    "tests/test_derive.py::test_real_every_query_same_from_stored_and_raw",  # 44-82 s a dump
    "tests/test_findings.py::test_confusion_matrix",  # 98 s setup (every planted case)
    "tests/test_findings.py::test_every_message_variant_is_reached",  # 62 s setup
    "tests/test_findings.py::test_gate_with_a_higher_peak",  # 50 s setup
    "tests/test_queries_real.py::test_every_query_runs_on_real_dumps",  # 31-78 s a dump
    "tests/test_cli_uniformity.py::test_compare_json_is_the_same_in_every_process",  # 73 s
    "tests/test_cli_uniformity.py::test_findings_export_compare_check_json_carry_the_name_as_it_is",  # 22 s
    "tests/test_hostile_inputs.py::test_sqlite_generated_column_bomb_is_bounded",  # 71 s
    "tests/test_hostile_inputs.py::test_one_huge_string_in_a_plain_trace_is_refused_by_the_string_limit",  # 63 s
    "tests/test_hostile_inputs.py::test_gzip_inflating_to_gigabytes_of_whitespace_is_a_bomb",  # 24 s
    "tests/test_report.py::test_report_of_an_8_rank_run_stays_small",  # 62 s
    "tests/test_synth.py::test_large_trace_view_is_valid_and_deterministic",  # 37 s
    "tests/test_csv_row_gates.py::test_any_cell_in_a_plain_row_reads_the_same_gated_or_not",  # 32 s
    "tests/test_hostile_sql.py::test_sql_still_reads_the_store_and_allow_files_admits_one_folder",  # 29 s
    "tests/test_honest_numbers.py::test_comm_waits_slow_rank_and_wait_attribution_agree",  # 28 s
    "tests/test_parse_trace_view.py::test_duckdb_out_of_memory_on_a_huge_event_falls_back_to_ijson",  # 26 s
    "tests/test_formats_2026.py::test_aicore_freq_finding",  # 25 s
    "tests/test_charts.py::test_step_groups_agree_with_wait_attribution_and_step_breakdown",  # 24 s
    "tests/test_checks.py::test_real_dumps_pass_every_check",  # 19 s
    # the full run of 2026-12-06 night (--durations=100, load 7-13)
    "tests/test_docs.py::test_every_readme_command_runs_on_the_samples",  # 125 s
    "tests/test_outputs_interrupts.py::test_interrupt_exits_130_and_writes_nothing",  # up to 23 s a case
    "tests/test_phases.py::test_compare_without_step_markers_never_says_per_step",  # 19 s
    "tests/test_mcp.py::test_in_memory_compare_passes_the_comparisons_verdict",  # 19 s
    "tests/test_reading.py::test_sample_findings_piped_are_ordered_short_and_narrow",  # 17 s
    # the fast loop of 2026-12-07 (--durations=0, load 3-5): over ~3 s a test and covered in spirit by a faster
    # test that stays in the loop (an id with [param] marks that case only)
    # these four goldens run the same outputs' code as sample-torch_npu_2rank's on other dumps (5-9 s each);
    # the rest of the goldens are in tests/slow_ids.txt but sample-torch_npu_2rank's (KEEP_FAST)
    "tests/test_golden.py::test_run_outputs_equal_the_goldens[sample-msprof]",
    "tests/test_golden.py::test_run_outputs_equal_the_goldens[planted-clean]",
    "tests/test_golden.py::test_run_outputs_equal_the_goldens[planted-hbm_wait]",
    "tests/test_golden.py::test_run_outputs_equal_the_goldens[planted-late_host]",
    # the real Level1 text and db dumps ingested and evaluated (5-6 s each); the samples' stories stay, and
    # test_reading / test_honest_numbers read level1's findings in the loop
    "tests/test_findings.py::test_level1_resnet_job",
    "tests/test_findings.py::test_level1_packet_alignment_by_hand",
    "tests/test_findings.py::test_text_and_db_exports_agree",
    # real traces of 3-5 s each; the benchmark_result, nccl, Qwen and sampled traces stay
    "tests/test_phases.py::test_no_step_marker_never_says_per_step[graph_capture_rank_0.1773709742341309550]",
    "tests/test_phases.py::test_no_step_marker_never_says_per_step[sglang_Qwen3-8B_prefilldecode.json.gz]",
    "tests/test_phases.py::test_no_step_marker_never_says_per_step[graph_execution.json.gz]",
    # 3-3.6 s each; [level1] (the text export with PMU) and [h100] (a GPU) stay
    "tests/test_physics_real.py::test_no_modeled_bandwidth_above_the_peak[db_level1]",
    "tests/test_physics_real.py::test_no_modeled_bandwidth_above_the_peak[level0]",
}


# measured slow but kept in the fast loop: the one guard there on every output of a whole run
KEEP_FAST = {"tests/test_golden.py::test_run_outputs_equal_the_goldens[sample-torch_npu_2rank]"}


def _measured_slow() -> set[str]:
    """Test ids measured at 1 s or more in the fast loop (tests/slow_ids.txt, written by tools/slow_tests.py)."""
    path = Path(__file__).resolve().parent / "slow_ids.txt"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return {s.strip() for s in lines if s.strip() and not s.startswith("#")} - KEEP_FAST


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    measured = _measured_slow()
    for item in items:
        name = item.nodeid.split("::")[-1].split("[")[0]
        if (
            item.path.name in SLOW_FILES
            or any(w in name for w in SLOW_NAME_WORDS)
            or any(item.get_closest_marker(m) for m in SLOW_MARKERS)
            or item.nodeid.split("[")[0] in SLOW_TESTS
            or item.nodeid in SLOW_TESTS
            or item.nodeid in measured
        ):
            item.add_marker(pytest.mark.slow)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="tests/test_golden.py writes tests/golden/ from the current outputs instead of comparing",
    )


# ---- the planted store: the small dumps the findings and compare tests read, built once per session ---------
# run name -> how its dump is made: ("planted", case) tests/planted.py, ("compare", kwargs) tests/planted_compare.py
# (whose clean job and unfused chain are planted.py's clean and unfused_chain, byte for byte: not built twice),
# ("sample", folder) sample_traces/
PLANTED_RUNS: dict[str, tuple[str, Any]] = {
    **{f"planted-{c}": ("planted", c) for c in _planted.CASES},
    "chain": ("compare", {"chain": True}),
    "fused": ("compare", {"clean": False, "fused": True}),
    "chain_noisy": ("compare", {"chain": True, "jitter": _planted_compare.NOISE_A}),
    "clean_noisy": ("compare", {"jitter": _planted_compare.NOISE_B}),
    "clean8": ("compare", {"n_ranks": 8}),
    "kineto": ("sample", "kineto_cpu"),
}


def _session_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A folder this test session's xdist workers share (their basetemp's parent is one per session), or this
    process's own basetemp's when it runs alone."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


def _build_store(root: Path, runs: dict[str, tuple[str, Any]]) -> Path:
    from traceql import derive, ingest
    from traceql.stores import open_store

    st = root / "store"
    for run, (kind, arg) in runs.items():
        if kind == "planted":
            dump = _planted.write(arg, root / "dumps")
        elif kind == "compare":
            dump = _planted_compare.write(run, root / "dumps", **arg)
        else:
            dump = SAMPLES / arg
        ingest(dump, st, name=run, workers=1)
        if kind != "sample":
            shutil.rmtree(dump)  # the store keeps what the tests need
    # the analysis tables now, so that no test writes the store (two workers may read it at once)
    derive.prepare(open_store(st), list(runs))
    return st


def session_store(
    tmp_path_factory: pytest.TempPathFactory, name: str, runs: dict[str, tuple[str, Any]]
) -> Path:
    """A store of `runs` built once per test session and shared by the xdist workers (a file lock: the first
    one builds, the others wait for it), its analysis tables already built; its path ends in /store."""
    from filelock import FileLock

    root = _session_dir(tmp_path_factory, name)
    with FileLock(f"{root}.lock"):
        if not (root / "built").exists():
            shutil.rmtree(root, ignore_errors=True)  # a build another worker left half done
            _build_store(root, runs)
            (root / "built").write_text("", encoding="utf-8")
    return root / "store"


@pytest.fixture(scope="session")
def planted_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every planted case (tests/planted.py) as run "planted-CASE", the other sides of the compare pairs
    (tests/planted_compare.py) and the Kineto CPU sample as "kineto": PLANTED_RUNS, one store per test session
    (session_store). Read it, never change it (no ingest, rm or derive into it): the findings, findings-order
    and compare tests share it."""
    return session_store(tmp_path_factory, "planted", PLANTED_RUNS)


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sample_traces/torch_npu_2rank ingested once per test process as run "demo" (read it, do not change it:
    every test file that reads the sample shares this store instead of ingesting it again)."""
    from traceql import ingest

    st = tmp_path_factory.mktemp("sample") / "store"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    return st


def write_two_kernel_run(store: Path, run: str = "r") -> Path:
    """A store holding one run of two kernels (a and b), written through the store's own writer and commit."""
    from traceql.rank_writer import RankWriter
    from traceql.store import Store

    s = Store(store)
    staging = s.new_staging()
    w = RankWriter(staging, run, 0)
    w.write("kernels", {"name": ["a", "b"], "ts_ns": [1, 2], "dur_ns": [10, 20]})
    w.close()
    s.commit(
        staging,
        run,
        {
            "source": "t",
            "format": "canonical",
            "ranks": [0],
            "ranks_count": 1,
            "rows": w.rows,
            "files": w.files,
        },
    )
    return store


def real(path: Path) -> Path:
    """A real dump under ../shared/real_traces, or skip the test saying which file is missing."""
    if not path.exists():
        pytest.skip(f"real trace not available: {path} (../shared/real_traces is absent on this machine)")
    return path


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"CliResult(code={self.code}, out={self.out[-2000:]!r}, err={self.err[-2000:]!r})"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Run `traceql ARGS...` in-process through the real entry point (error boundary included)."""
    from traceql.cli import main

    def run(*args: str) -> CliResult:
        monkeypatch.setattr(sys, "argv", ["traceql", *map(str, args)])
        capsys.readouterr()
        code = 0
        try:
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        cap = capsys.readouterr()
        return CliResult(code, cap.out, cap.err)

    return run


TRACELENS = SHARED / "AMD-AGI__TraceLens/tests/traces"
