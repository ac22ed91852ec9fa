"""Issue 46, "a newcomer reads the answer": findings ordered by saving, the short headline and its caveats, the
legend behind `findings --explain`, claims that check their data, piped tables a person can read, and the CLI
gaps (--version, sql --run, did-you-mean, a --store that is not there).

Expected values: the order is recomputed from the JSON's own fields (saving.value, severity) by hand-written
sort keys here, never by traceql.findings.order; the sample's numbers (2.90 ms, 81%) are the planted ones the
sample's README states (sample_traces/README.md); level1's free_time saving is checked against the order only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _canon import MS, build_store
from conftest import LEVEL1

from traceql.findings.headline import HEADLINE_MAX, caveats_of, headline_parts, main_clause, shorten
from traceql.findings.legend import LEGEND

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_traces" / "torch_npu_2rank"
SEV = ["info", "low", "medium", "high", "critical"]


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from traceql.ingest import ingest

    st = tmp_path_factory.mktemp("reading") / "store"
    ingest(SAMPLE, st, name="demo", workers=1)
    return st


def _traceql(*args: Any) -> subprocess.CompletedProcess[str]:
    """The real command in a subprocess with stdout a pipe (what `| cat` sees)."""
    return subprocess.run(
        [sys.executable, "-m", "traceql", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def _assert_impact_order(findings: list[dict[str, Any]]) -> None:
    fired = [f for f in findings if f["fired"]]
    silent = [f for f in findings if not f["fired"]]
    assert findings == fired + silent
    keys = [(-(f["saving"]["value"] or 0.0), -SEV.index(f["severity"])) for f in fired]
    assert keys == sorted(keys), keys
    assert [f["checklist_step"] for f in silent] == sorted(f["checklist_step"] for f in silent)


# ---- the bundled sample, end to end through the CLI --------------------------------------------------------------
def test_sample_findings_piped_are_ordered_short_and_narrow(sample_store: Path) -> None:
    r = _traceql(
        "findings", "--store", sample_store, "--run", "demo", "--device", "ascend910b", "--format", "json"
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    _assert_impact_order(d["findings"])
    v = d["verdict"]
    assert len(v["short"]) <= HEADLINE_MAX and v["short"].startswith("memory-bound: ")
    assert (
        "rank 0 waits 2.90 ms per step" in v["short"]
    )  # the sample's planted wait (sample_traces/README.md)
    assert v["headline"].startswith("memory-bound: ") and isinstance(v["caveats"], list)

    r = _traceql("findings", "--store", sample_store, "--run", "demo", "--device", "ascend910b")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == v["short"]
    assert max(len(x) for x in lines) <= 200, max(lines, key=len)
    # the table's rows in the JSON's order: each fired check's id appears once, in that order
    ids = [f["id"] for f in d["findings"] if f["fired"]]
    pos = [next(i for i, x in enumerate(lines) if f" {c} " in x) for c in ids]
    assert pos == sorted(pos), list(zip(ids, pos, strict=True))
    assert "--explain" in r.stderr  # the legend is reachable from the output

    r = _traceql(
        "findings", "--store", sample_store, "--run", "demo", "--device", "ascend910b", "-f", "markdown"
    )
    assert "| saving | severity | check | step |" in r.stdout and "findings --explain" in r.stdout
    assert f"**{v['short']}**" in r.stdout and f"Full verdict: {v['headline']}" in r.stdout


def test_explain_prints_every_legend_word(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("findings", "--explain")
    assert r.code == 0, r
    for t in LEGEND:
        assert t.word in r.out and t.example.split()[0] in r.out, t.word
    assert max(len(x) for x in r.out.splitlines()) <= 110


# ---- headline and caveats: hand-written verdicts -----------------------------------------------------------------
PARTIAL = (
    "2 of 8 ranks captured (6 not in the dump: ranks 2,3,4,5,6,7): the ranks here spend 60% of the step waiting "
    "in collectives after every captured peer arrived, for ranks outside the dump or for sync, so the job's bound "
    "cannot be judged from these ranks alone; capture every rank (or the slowest). On these ranks: "
    "communication-bound: 64% of step time is exposed communication (2% moving data, 62% waiting); HBM counters "
    "average 2.8% of peak on rank 0 (sampled every 20 ms, highest sample 8.6%; at most 57% while computing), "
    "below the 70% line, so memory work will not help (compute fraction 0.06)"
)


def test_partial_capture_headline_starts_with_cannot_tell() -> None:
    v = {
        "bound": "communication",
        "confidence": "cannot tell",
        "headline": PARTIAL,
        "capture": {
            "complete": False,
            "ranks_captured": 2,
            "job_ranks": 8,
            "job_ranks_exact": True,
            "missing_ranks": "2,3,4,5,6,7",
            "kernel_coverage": 1.0,
        },
        "hbm_evidence": {"grade": "sampled", "detail": "HBM counters sampled every 20 ms"},
    }
    p = headline_parts(v)
    assert p["short"] == (
        "cannot tell (these ranks look communication-bound): 64% of step time is exposed communication "
        "(2% moving data, 62% waiting)"
    )
    assert p["caveats"][0] == "only 2 of 8 ranks captured (missing: 2,3,4,5,6,7)"
    assert p["caveats"][1] == "HBM evidence is sampled: HBM counters sampled every 20 ms"
    assert len(p["caveats"]) == 3


def test_headline_cut_at_a_word_and_coverage_note_becomes_a_caveat() -> None:
    long = "memory-bound: " + "word " * 60 + "; rest"
    v = {
        "bound": "memory",
        "confidence": "judged",
        "headline": long + "; note: the device task list covers",
        "capture": {"kernel_coverage": 0.5},
        "hbm_evidence": {"grade": "measured"},
    }
    p = headline_parts(v)
    assert (
        len(p["short"]) <= HEADLINE_MAX
        and p["short"].endswith("word…")
        and p["short"].startswith("memory-bound: ")
    )
    assert caveats_of(v) == [
        "the device task list covers only 50% of the device time; shares rest on part of each step"
    ]
    assert main_clause("memory-bound: a; b") == "a"
    assert shorten("x" * 10, 160) == "x" * 10
    assert headline_parts({"bound": None, "confidence": "cannot tell", "headline": "no device time"})[
        "short"
    ] == ("cannot tell: no device time")


def test_whole_capture_that_cannot_tell_leans_without_blaming_missing_ranks() -> None:
    v = {
        "bound": "compute",
        "confidence": "cannot tell",
        "headline": "compute by time (70% of step time), but whether that compute is HBM-bound cannot be told: x; y",
        "capture": {"complete": True},
        "hbm_evidence": {"grade": "insufficient", "detail": "no HBM bytes"},
    }
    p = headline_parts(v)
    assert p["short"] == (
        "cannot tell (looks compute-bound): compute by time (70% of step time), but whether that compute is "
        "HBM-bound cannot be told: x"
    )
    assert p["caveats"][0] == "HBM evidence is insufficient: no HBM bytes"


# ---- a claim that needs data checks it exists --------------------------------------------------------------------
def test_free_time_without_a_host_timeline_names_no_cause(tmp_path: Path) -> None:
    """Kernels with 1 ms gaps and no host_ops: the idle time cannot be blamed on launches (issue 46, item 4)."""
    from traceql.findings import evaluate

    k = [
        {
            "name": "Add",
            "op_type": "Add",
            "ts_ns": t * 2 * MS,
            "dur_ns": MS,
            "is_comm": False,
            "task_type": "AI_VECTOR_CORE",
            "step": 1,
        }
        for t in range(6)
    ]
    steps = [{"step": 1, "ts_ns": 0, "dur_ns": 12 * MS}]
    build_store(tmp_path / "st", "gaps", {0: {"kernels": k, "steps": steps}}, device="Ascend910B")
    ft = evaluate(tmp_path / "st", "gaps").finding("free_time")
    assert ft.fired, ft.message
    assert "no host timeline" in ft.message and "launch gaps" not in ft.message


# ---- piped tables, compare text --------------------------------------------------------------------------------
def test_pipe_wraps_prose_and_keeps_paths_whole(capsys: pytest.CaptureFixture[str]) -> None:
    from traceql.cli import _console

    path = "/a/very/long/path/" + "x" * 120 + "/rank0_ascend_pt"
    prose = "word " * 80
    _console.print_table(["n", "path", "text"], [(1.234, path, prose)])
    out = capsys.readouterr().out
    assert path in out and "1.234" in out  # whole, on one line
    assert max(len(x) for x in out.splitlines()) <= len(path) + 60


def test_compare_text_is_a_table() -> None:
    from traceql.compare.render import _num, text_table

    t = text_table(["op", "ms"], [["MatMul", "1.25"], ["Add", "10.5"]])
    assert t == ["op        ms", "------  ----", "MatMul  1.25", "Add     10.5"]
    # numbers for people: no scientific notation (exact values stay in the JSON)
    assert _num(1.776e-06 * 1e9, 1e9) == "<0.001" and _num(4.44821e10) == "44,482,100,000"
    assert (
        _num(12_900.0) == "12,900"
        and _num(-0.5, signed=True) == "-0.500"
        and _num(0.5, signed=True) == "+0.500"
    )


# ---- CLI gaps ----------------------------------------------------------------------------------------------------
def test_version_and_missing_store(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from traceql.version import __version__

    r = cli("--version")
    assert r.code == 0 and r.out.strip() == f"traceql {__version__}", r
    for args in (["runs"], ["findings"], ["sql", "SELECT 1"], ["query", "op_hbm_bytes"], ["check"]):
        r = cli(*args, "--store", tmp_path / "typo")
        assert r.code == 1 and r.err.startswith("error: no traceql store at") and r.out == "", (args, r)
        assert len(r.err.strip().splitlines()) == 1
    assert not (tmp_path / "typo").exists()


def test_did_you_mean(cli, sample_store: Path) -> None:  # type: ignore[no-untyped-def]
    cases = [
        (["query", "hbm_utilisation"], "did you mean 'hbm_utilization'?"),
        (["findings", "--run", "dmeo"], "did you mean 'demo'?"),
        (["query", "op_hbm_bytes", "--device", "ascend91b"], "did you mean 'ascend910b'?"),
        (["schema", "kernel"], "did you mean 'kernels'?"),
        (["sql", "--run", "deom", "SELECT 1"], "did you mean 'demo'?"),
    ]
    for args, hint in cases:
        extra = [] if args[0] == "schema" else ["--store", sample_store]
        r = cli(*args, *extra)
        assert r.code == 1 and hint in r.err, (args, r)


def test_sql_run_scopes_every_table(cli, sample_store: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from traceql.ingest import ingest

    ingest(ROOT / "sample_traces" / "msprof", sample_store, name="other", workers=1)
    q = "SELECT run_id, count(*) AS n FROM kernels GROUP BY 1 ORDER BY 1"
    r = cli("sql", q, "--store", sample_store, "--format", "json")
    assert [x["run_id"] for x in json.loads(r.out)] == ["demo", "other"], r
    r = cli("sql", q, "--store", sample_store, "--run", "demo", "--format", "json")
    # 120 kernels: the sample's kernel_details rows (sample_traces/README.md: 20 tasks a step, 3 steps, 2 ranks)
    assert json.loads(r.out) == [{"run_id": "demo", "n": 120}], r
    r = cli(
        "sql",
        "SELECT DISTINCT run_id FROM kernel_bytes",
        "--store",
        sample_store,
        "--run",
        "demo",
        "-f",
        "json",
    )
    assert json.loads(r.out) == [{"run_id": "demo"}], r


@pytest.mark.skipif(not LEVEL1.exists(), reason="real dumps absent")
def test_level1_findings_ordered_and_headline(tmp_path: Path) -> None:
    from traceql.findings import evaluate
    from traceql.ingest import ingest

    ingest(LEVEL1, tmp_path / "st", name="level1", workers=1)
    d = json.loads(evaluate(tmp_path / "st", "level1").to_json())
    _assert_impact_order(d["findings"])
    assert d["findings"][0]["id"] == "free_time"  # the issue: the biggest saving was the last row
    v = d["verdict"]
    assert len(v["short"]) <= HEADLINE_MAX and v["short"].startswith("cannot tell")
    assert any("2 of at least 8 ranks" in c for c in v["caveats"])  # a bound (issue 44): rank ids up to 7


def test_report_headers_for_people() -> None:
    """Hand-written expectations for the SQL names the issue quoted."""
    from traceql.report.headers import human_header, important_first

    assert human_header("bw_utilization") == "bandwidth utilisation"
    assert human_header("measured_over_modeled") == "measured / modeled"
    assert human_header("conversion_ns") == "conversion time"
    assert human_header("conversion_bytes") == "conversion bytes"  # two columns, two headers
    assert important_first(["calls", "gb", "implausible", "op_type"]) == [
        "op_type",
        "implausible",
        "calls",
        "gb",
    ]


def test_compare_default_output_is_readable_tables(cli, sample_store: Path) -> None:  # type: ignore[no-untyped-def]
    from traceql.ingest import ingest

    ingest(SAMPLE, sample_store, name="demo-again", workers=1)
    r = cli("compare", "demo", "demo-again", "--store", sample_store, "--device", "ascend910b")
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert max(len(x) for x in lines) <= 120, max(lines, key=len)
    assert not any(x.startswith("|") for x in lines)  # not markdown
    i = next(
        i for i, x in enumerate(lines) if x.split() == ["base", "cand", "delta"]
    )  # the step table's header
    assert set(lines[i + 1].replace(" ", "")) == {"-"}  # a rule under the header
    assert "e+" not in r.out and "e-0" not in r.out  # no scientific notation


def test_query_table_shows_durations_in_ms(cli, sample_store: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("query", "rank_summary", "--run", "demo", "--store", sample_store, "--format", "csv")
    lines = r.out.splitlines()
    header = [h.strip('"') for h in lines[1 - 1].split(",")]
    assert "compute_ns" in header  # exact values in CSV
    first = dict(zip(header, lines[1].split(","), strict=True))
    r = cli("query", "rank_summary", "--run", "demo", "--store", sample_store)
    assert "compute_ms" in r.out and "compute_ns" not in r.out
    # the csv's ns divided by 1e6 by hand, 6 significant digits as the table prints floats
    assert f"{int(first['compute_ns']) / 1e6:.6g}" in r.out


def test_per_step_figures_without_step_markers_say_so(sample_store: Path, tmp_path: Path) -> None:
    """The bundled msprof sample has no step markers (no steps rows; its kernels carry no step id: see
    sample_traces/README.md), so its "per step" numbers are per capture; the 2-rank sample has 3 steps."""
    from traceql.findings import evaluate
    from traceql.findings.headline import NO_STEP_MARKERS
    from traceql.ingest import ingest

    ingest(ROOT / "sample_traces" / "msprof", tmp_path / "st", name="m", workers=1)
    assert NO_STEP_MARKERS in evaluate(tmp_path / "st", "m").verdict["caveats"]
    assert NO_STEP_MARKERS not in evaluate(sample_store, "demo", device="ascend910b").verdict["caveats"]
