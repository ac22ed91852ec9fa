"""Query results kept between processes (traceql.query_cache): a later session reads them instead of running the
query, and only where running it would give the same table.

Expected values are the same query run with the cache off (a second code path: queries.run over the store), and
counts of query executions; no number here is computed by the code under test."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import SAMPLES

from traceql import queries, query_cache
from traceql.analysis import Analysis
from traceql.findings.evaluate import evaluate
from traceql.ingest import ingest


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEQL_QUERY_CACHE", "1")


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    ran: list[str] = []
    real = queries.run

    def counting(name: str, *a: Any, **k: Any) -> Any:
        ran.append(name)
        return real(name, *a, **k)

    monkeypatch.setattr(queries, "run", counting)
    return ran


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 2-rank sample ingested and prepared once (cache off); each test analyses its own copy."""
    st = tmp_path_factory.mktemp("qc") / "store"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    with Analysis(st, "demo"):  # the derived tables, so no test pays for them
        pass
    return st


def _store(tmp_path: Path, ingested: Path) -> Path:
    st = tmp_path / "store"
    shutil.copytree(ingested, st)
    return st


def _with_kept(tmp_path: Path, ingested: Path, query: str) -> tuple[Path, pa.Table]:
    """A copy of the sample store where one session kept `query`'s result, and that result."""
    st = _store(tmp_path, ingested)
    with Analysis(st, "demo") as a:
        return st, a.query(query)


def test_a_later_session_reads_the_kept_results(
    tmp_path: Path, ingested: Path, kept: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """findings twice: the second session runs no query, and its report is the first one's, JSON for JSON."""
    st = _store(tmp_path, ingested)
    first = evaluate(st)
    assert list((st / ".cache" / "queries").glob("*.arrow"))
    ran = _count_runs(monkeypatch)
    second = evaluate(st)
    assert ran == []
    assert second.to_json() == first.to_json()


def test_a_kept_result_is_the_table_the_query_returns(tmp_path: Path, ingested: Path, kept: None) -> None:
    """Rows and schema metadata (the findings read the params and device from it) as a run with the cache off."""
    st, _ = _with_kept(tmp_path, ingested, "rank_summary")
    with Analysis(st, "demo") as a:
        got = a.query("rank_summary")
        assert a.queries_run == 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRACEQL_QUERY_CACHE", "0")
        fresh = queries.run("rank_summary", st, run_id="demo")
    assert got.to_pylist() == fresh.to_pylist()
    assert got.schema == fresh.schema
    assert got.schema.metadata == fresh.schema.metadata


def test_a_run_ingested_again_is_never_answered_from_the_cache(
    tmp_path: Path, ingested: Path, kept: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's manifest entry is part of the key: the same run name replaced by another dump runs the query
    again and gives that dump's rows."""
    st, before_t = _with_kept(tmp_path, ingested, "rank_summary")
    before = before_t.to_pylist()
    ingest(SAMPLES / "msprof", st, name="demo", workers=1, replace=True)
    ran = _count_runs(monkeypatch)
    with Analysis(st, "demo") as a:
        after = a.query("rank_summary").to_pylist()
    assert ran == ["rank_summary"]
    monkeypatch.setenv("TRACEQL_QUERY_CACHE", "0")
    assert after == queries.run("rank_summary", st, run_id="demo").to_pylist()
    assert after != before


def test_other_params_peaks_device_or_code_run_again(
    tmp_path: Path, ingested: Path, kept: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    st, _ = _with_kept(tmp_path, ingested, "hbm_utilization")
    ran = _count_runs(monkeypatch)
    with Analysis(st, "demo") as a:
        a.query("hbm_utilization")  # kept
        a.query("hbm_utilization", {"sat_threshold": 0.5})
    with Analysis(st, "demo", peaks={"peak_hbm_bps": 1e12}) as a:
        a.query("hbm_utilization")
    with Analysis(st, "demo", device="ascend910b") as a:
        a.query("hbm_utilization")
    assert ran == ["hbm_utilization"] * 3
    monkeypatch.setattr(query_cache, "code_fingerprint", lambda: "another build")
    with Analysis(st, "demo") as a:
        a.query("hbm_utilization")
    assert ran == ["hbm_utilization"] * 4


def test_nothing_is_kept_when_turned_off(
    tmp_path: Path, ingested: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACEQL_QUERY_CACHE", "0")
    st = _store(tmp_path, ingested)
    evaluate(st)
    assert not (st / ".cache" / "queries").exists()


def test_only_the_newest_results_are_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At most MAX_FILES files: the oldest go first, when a process keeps its first result."""
    import os

    monkeypatch.setattr(query_cache, "MAX_FILES", 3)
    where = tmp_path / "queries"
    t = pa.table({"x": [1, 2, 3]})
    for i in range(5):
        query_cache.save(where, f"r{i}", t)
        os.utime(where / f"r{i}.arrow", (1_000_000 + i, 1_000_000 + i))
    query_cache._pruned.discard(where)  # a later process (each prunes once, at its first result)
    query_cache.save(where, "r5", t)
    assert sorted(p.stem for p in where.glob("*.arrow")) == ["r3", "r4", "r5"]
    assert query_cache.load(where, "r5") == t
    assert query_cache.load(where, "r0") is None


def test_an_unreadable_kept_file_is_run_again(
    tmp_path: Path, ingested: Path, kept: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    st, _ = _with_kept(tmp_path, ingested, "rank_summary")
    for p in (st / ".cache" / "queries").glob("*.arrow"):
        p.write_bytes(b"not arrow")
    ran = _count_runs(monkeypatch)
    with Analysis(st, "demo") as a:
        assert a.query("rank_summary").num_rows > 0
    assert ran == ["rank_summary"]


def test_nothing_is_written_through_a_link_or_by_a_session_that_does_not_prepare(
    tmp_path: Path, ingested: Path, kept: None
) -> None:
    """A .cache/queries that is a symbolic link is not the store's: nothing goes through it. A session opened with
    prepare=False writes nothing, as it promises."""
    st = _store(tmp_path, ingested)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (st / ".cache").mkdir(exist_ok=True)
    (st / ".cache" / "queries").symlink_to(elsewhere, target_is_directory=True)
    with Analysis(st, "demo") as a:
        a.query("rank_summary")
    assert list(elsewhere.iterdir()) == []
    (st / ".cache" / "queries").unlink()
    with Analysis(st, "demo", prepare=False) as a:
        a.query("rank_summary")
    assert not (st / ".cache" / "queries").exists()
