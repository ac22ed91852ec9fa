"""Deeply nested JSON in every JSON-reading parser: refused or read, never a RecursionError traceback. Harness: tests/_fuzz_harness.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._fuzz_harness import (  # noqa: F401 - pool and print_totals are fixtures
    TALLY,
    Pool,
    base_store,
    check_outcome,
    pool,
    print_totals,
)

# ---------------------------------------------------------------------------------------------------------
# Deeply nested JSON in every JSON-reading parser: 100k levels in an otherwise valid dump (200 KB). A
# streaming reader that builds per-level prefix strings (ijson.items) goes quadratic: gigabytes and minutes.

_DEPTH = 100_000
_NEST = "[" * _DEPTH + "]" * _DEPTH
_TV_HEAD = (
    '[{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},'
    ' {"ph": "X", "name": "aten::add", "pid": 1, "tid": 1, "ts": "1736408883688177.930", "dur": 5.0, "cat": "cpu_op", "args": {"x": '
)


def _deep_json_cases(tmp: Path) -> dict[str, Path]:
    cases: dict[str, Path] = {}
    p = tmp / "tv" / "trace_view.json"
    p.parent.mkdir(parents=True)
    p.write_text(_TV_HEAD + _NEST + "}}]")
    cases["trace_view.json"] = p
    p = tmp / "kineto" / "w.pt.trace.json"
    p.parent.mkdir(parents=True)
    p.write_text('{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, '
                 '"ts": 1679055451545746, "dur": 5, "args": {"x": ' + _NEST + "}}]}")  # fmt: skip
    cases["kineto .pt.trace.json"] = p
    d = tmp / "comm_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    (d / "communication.json").write_text(
        '{"step1": {"collective": {"hcom_allReduce__1_0_1@g": ' + _NEST + "}}}"
    )
    cases["communication.json"] = d.parent
    d = tmp / "info_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    (d / "step_trace_time.csv").write_text(f"{STEP_CSV}")
    (d.parent / "profiler_info_0.json").write_text('{"config": ' + _NEST + "}")
    cases["profiler_info_0.json"] = d.parent
    return cases


STEP_CSV = "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive)\n7,1,2,3,4,5,6,0,2\n"
DEEP_KNOWN: dict[str, str] = {}  # fixed: nesting depth is bounded before ijson; claim maps RecursionError


@pytest.mark.parametrize(
    "case", ["trace_view.json", "kineto .pt.trace.json", "communication.json", "profiler_info_0.json"]
)
def test_deeply_nested_json(tmp_path: Path, case: str, pool: Pool) -> None:  # noqa: F811 - the fixture
    path = _deep_json_cases(tmp_path)[case]
    store = base_store(tmp_path / "store")
    manifest = (store / "manifest.json").read_bytes()
    o = pool.run(
        ["ingest", str(path), "--store", str(store), "--name", "fz", "-q", "-j", "1", "--no-check"],
        timeout=30,
    )
    TALLY.inputs += 1
    TALLY.max_rss_mb = max(TALLY.max_rss_mb, o.rss_mb)
    found = check_outcome(o, path, case)
    if not found and o.code == 1 and (store / "manifest.json").read_bytes() != manifest:
        found.append("exit 1 but the store changed")
    if found:
        msg = f"{case} nested {_DEPTH} deep: {' | '.join(found)}"
        if case in DEEP_KNOWN:
            TALLY.known.append(msg)
            pytest.xfail(f"{msg}\n    known: {DEEP_KNOWN[case]}")
        TALLY.failures.append(msg)
        pytest.fail(msg, pytrace=False)
    TALLY.ingested += o.code == 0
    TALLY.refused += o.code == 1
