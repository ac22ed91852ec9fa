"""Committed goldens: every output of the bundled samples and a few planted dumps (tests/_golden.py says
which outputs and what is normalised) equals tests/golden/. A refactor that changes any number shows here,
and the diff of tests/golden/ shows it in review.

Expected values: traceql's own outputs at the commit that wrote them (a regression guard, not a correctness
test; the correctness of each number is tested against the raw files elsewhere). Regenerate after an intended
change, and commit the diff with the change:

    python -m pytest tests/test_golden.py --update-goldens
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import _golden
import pytest
from conftest import session_store

RUN_FILES = ("findings", "queries", "checks", "export")


@pytest.fixture(scope="module")
def golden_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, list[str]]]:
    """A store of exactly the golden dumps (its own: the byte_model_vs_measured check reads every run of the
    store, so another run there would change checks.json), and a folder for the exports."""
    runs = _golden.runs()
    yield session_store(tmp_path_factory, "golden", runs), tmp_path_factory.mktemp("golden"), list(runs)


def _check(path: Path, got: object, store: Path, update: bool, rows: bool = False) -> None:
    text = _golden.text(got, store.parent)  # the store's path as <TMP>/store
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"{path} is missing: python -m pytest tests/test_golden.py --update-goldens")
    want = json.loads(path.read_text(encoding="utf-8"))
    diffs = _golden.differences(want, json.loads(text), path.stem, rows=rows)
    assert not diffs, (
        f"{path} differs ({len(diffs)}): if intended, python -m pytest tests/test_golden.py --update-goldens\n"
        + "\n".join(diffs[:40])
    )


RUNS = [f"sample-{n}" for n in _golden.SAMPLES] + [f"planted-{c}" for c in _golden.PLANTED]


@pytest.mark.parametrize("run", RUNS)
def test_run_outputs_equal_the_goldens(
    run: str, golden_store: tuple[Path, Path, list[str]], request: pytest.FixtureRequest
) -> None:
    store, tmp, runs = golden_store
    assert run in runs
    update = bool(request.config.getoption("--update-goldens"))
    snap = _golden.snapshot_run(store, run, tmp)
    assert set(snap) == set(RUN_FILES)
    for key in RUN_FILES:
        _check(_golden.GOLDEN / run / f"{key}.json", snap[key], store, update, rows=key == "queries")


@pytest.mark.parametrize("pair", _golden.PAIRS, ids=lambda p: f"{p[0]}--{p[1]}")
def test_compare_equals_the_golden(
    pair: tuple[str, str], golden_store: tuple[Path, Path, list[str]], request: pytest.FixtureRequest
) -> None:
    store, _, _ = golden_store
    update = bool(request.config.getoption("--update-goldens"))
    got = _golden.snapshot_pair(store, *pair)
    _check(_golden.GOLDEN / "compare" / f"{pair[0]}--{pair[1]}.json", got, store, update)


def test_the_comparison_sees_a_changed_number() -> None:
    """The check can fail: a changed float, a reordered list and a missing key are all reported, while rows
    that only swap places are not."""
    want = {"q": [{"a": 1.0}, {"a": 2.0}], "k": {"x": 1}}
    assert _golden.differences(want, {"q": [{"a": 2.0}, {"a": 1.0}], "k": {"x": 1}}, rows=True) == []
    assert _golden.differences(want, {"q": [{"a": 2.0}, {"a": 1.5}], "k": {"x": 1}}, rows=True)
    assert _golden.differences(want, {"q": [{"a": 2.0}, {"a": 1.0}], "k": {"x": 1}})
    assert _golden.differences(want, {"q": want["q"]})
    assert _golden.canon(0.1 + 0.2) == 0.3 and _golden.canon(float("inf")) == "inf"
