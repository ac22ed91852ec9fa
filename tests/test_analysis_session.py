"""The analysis layer's contracts (issue 15): one session per analysis, reads never write, one run rule, the
derived tables documented and switched per table.

Expected values here are structural (counts of query executions, files on disk, manifest bytes) or DuckDB's
own DESCRIBE of the views, never numbers the code computes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES

from traceql import derive, derived_tables, engine, queries
from traceql.analysis import Analysis, resolve_run
from traceql.ingest import ingest
from traceql.store import Store


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    st = tmp_path_factory.mktemp("s") / "store"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    return st


def _tree(root: Path) -> dict[str, int]:
    # lock files aside: a reader takes the readers' lock (creating its empty file once)
    return {
        str(p.relative_to(root)): p.stat().st_size
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def test_a_connection_and_a_plain_query_never_write(tmp_path: Path) -> None:
    """engine.connect and queries.run read only: an unprepared run stays unprepared (the derived tables are
    computed from their SELECTs), byte for byte the same store afterwards."""
    st = tmp_path / "s"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    before = _tree(st)
    con = engine.connect(st)
    con.execute("SELECT count(*) FROM kernels").fetchall()
    con.close()
    t = queries.run("wait_attribution", st, run_id="demo")
    assert t.num_rows > 0
    assert _tree(st) == before
    assert "derived" not in Store(st).run("demo")


def test_the_session_prepares_explicitly_and_then_reads_the_stored_tables(tmp_path: Path) -> None:
    st = tmp_path / "s"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    with Analysis(st, "demo", prepare=False) as a:
        unprepared = a.rows("rank_summary")
    assert "derived" not in Store(st).run("demo")
    with Analysis(st, "demo") as a:
        prepared = a.rows("rank_summary")
        stored = a.con.execute("SELECT derived_tables FROM runs").fetchall()[0][0].split(",")
    assert derived_tables.stored_for(Store(st).run("demo"))
    assert set(stored) == set(derived_tables.names())
    assert prepared == unprepared


def test_the_report_runs_each_query_once(sample_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """findings, every chart and the report's tables share one session: no (query, run, rank) runs twice, not even
    with other params (a chart asking another top_n than findings would cost a second run of the query: findings'
    ub_l2_rates read asks the chart's top_n, and the prefix queries cut a smaller top_n from a larger one)."""
    from traceql.report import render_report

    calls: list[tuple[str, str]] = []
    real_run = queries.run

    def counting(name: str, *a: Any, **k: Any) -> Any:
        calls.append((name, json.dumps([k.get("run_id"), k.get("rank")], sort_keys=True, default=str)))
        return real_run(name, *a, **k)

    monkeypatch.setattr(queries, "run", counting)
    html = render_report(sample_store, "demo")
    assert "<html" in html.lower()
    assert len(calls) > 10
    dupes = {c for c in calls if calls.count(c) > 1}
    assert not dupes, sorted(dupes)


def test_params_equal_to_the_defaults_share_one_run(sample_store: Path) -> None:
    """A chart asking wait_attribution with {} and findings asking for the header's default sat_threshold bind
    the same values: one run between them (the report did both, each costing ~1 CPU-s on an 8-rank cluster).
    A different value, or a peak given as None (the runner fills a left-out peak from the device), runs again."""
    default = queries.get("wait_attribution").param("sat_threshold")
    assert default is not None and default.default is not None
    with Analysis(sample_store, "demo") as a:
        first = a.query("wait_attribution", {})
        assert a.query("wait_attribution", {"sat_threshold": default.default}) is first
        assert a.query("wait_attribution", {"sat_threshold": str(default.default)}) is first  # CLI strings
        assert a.queries_run == 1
        a.query("wait_attribution", {"sat_threshold": 0.5})
        a.query("wait_attribution", {"peak_hbm_bps": None})
        assert a.queries_run == 3


def test_one_run_rule_ties_go_to_the_larger_name(tmp_path: Path) -> None:
    """The latest run by ingest time; equal times (a copied manifest) go to the larger name, everywhere."""
    st = tmp_path / "s"
    ingest(SAMPLES / "torch_npu_2rank", st, name="a", workers=1)
    ingest(SAMPLES / "torch_npu_2rank", st, name="b", workers=1)
    m = json.loads((st / "manifest.json").read_text())
    m["runs"]["a"]["ingested_at"] = m["runs"]["b"]["ingested_at"] = "2026-01-01T00:00:00+00:00"
    (st / "manifest.json").write_text(json.dumps(m))
    assert resolve_run(Store(st), None) == "b"
    assert Store(st).latest_run() == "b"
    con = engine.connect(st)
    assert queries._pick_run(con.cursor(), None) == "b"
    t = queries.run("rank_summary", st)
    assert (t.schema.metadata or {})[b"traceql.run_id"] == b"b"


def test_every_derived_table_declares_exactly_the_columns_duckdb_returns(sample_store: Path) -> None:
    """The header of each queries/derived file lists its columns in order with their types (DuckDB's DESCRIBE
    of the view over its SELECT is the independent answer), and `traceql schema` documents each."""
    con = engine.connect(sample_store)
    cur = con.cursor()
    queries.scope(cur, "demo")
    docs = derived_tables.documented_tables()
    for t in derived_tables.tables():
        got = [(r[0], r[1]) for r in cur.execute(f"DESCRIBE SELECT * FROM {t.name}").fetchall()]
        assert got == [(c.name, c.type) for c in t.columns], t.name
        assert all(c.doc for c in t.columns), t.name
        assert t.name in docs and t.grain in docs[t.name][0]


def test_stored_and_computed_derived_tables_agree_row_for_row(sample_store: Path) -> None:
    """The one switch: the same table read from its stored Parquet and from its SELECT."""
    derive.prepare(Store(sample_store), ["demo"])
    con = engine.connect(sample_store)
    stored = con.cursor()
    queries.scope(stored, "demo")
    computed = con.cursor()
    queries._scope_views(computed, "demo", None)
    queries.define_library(computed, set())
    for t in derived_tables.tables():
        # kernel_bytes.kid numbers kernels in scan order (an id joined together with run and rank only)
        cols = "* EXCLUDE (kid)" if any(c.name == "kid" for c in t.columns) else "*"
        a = stored.execute(f"SELECT {cols} FROM {t.name} ORDER BY ALL").fetchall()
        b = computed.execute(f"SELECT {cols} FROM {t.name} ORDER BY ALL").fetchall()
        assert a == b, t.name


def test_a_stale_table_alone_is_recomputed(tmp_path: Path) -> None:
    """Per-table currency: a run whose bw_segments fingerprint is stale reads bw_segments (and what reads it)
    from the SELECT and the other tables from their stored files."""
    st = tmp_path / "s"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    derive.prepare(Store(st), ["demo"])
    m = json.loads((st / "manifest.json").read_text())
    m["runs"]["demo"]["derived"]["fingerprints"]["bw_segments"] = "stale"
    (st / "manifest.json").write_text(json.dumps(m))
    info = Store(st).run("demo")
    assert derived_tables.current_tables(info) == set(derived_tables.names()) - {"bw_segments"}
    con = engine.connect(st)
    views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert "kernel_bytes" in views and "bw_segments" not in views
    cur = con.cursor()
    queries.scope(cur, "demo")
    sql = {
        r[0]: r[1]
        for r in cur.execute("SELECT view_name, sql FROM duckdb_views() WHERE temporary").fetchall()
    }
    assert "read_parquet" not in sql["bw_segments"] and "main.kernel_bytes" in sql["kernel_bytes"]


def test_a_smaller_top_n_is_cut_from_a_larger_one(sample_store: Path) -> None:
    """The report's op_hbm_bytes chart (top 10) after findings' top 50: one run. The cut rows and their
    metadata equal what a run of the query with the smaller top_n returns (compared with a fresh queries.run:
    two code paths, no number computed here)."""
    from traceql.analysis import PREFIX_QUERIES

    assert set(PREFIX_QUERIES) == {"op_hbm_bytes", "layout_transforms"}
    with Analysis(sample_store, "demo") as a:
        big = a.query("op_hbm_bytes", {"top_n": 50})
        assert big.num_rows > 3  # else the cut would prove nothing
        small = a.query("op_hbm_bytes", {"top_n": 3})
        assert a.queries_run == 1
        fresh = queries.run("op_hbm_bytes", sample_store, run_id="demo", params={"top_n": 3})
        assert small.to_pylist() == fresh.to_pylist()
        assert small.schema.metadata == fresh.schema.metadata
        a.query("op_hbm_bytes", {"top_n": 60})  # larger than any cached: runs
        a.query("op_hbm_bytes", {"top_n": 3, "peak_hbm_bps": 1e12})  # another param: runs
        assert a.queries_run == 3


def test_the_prefix_queries_end_in_limit_top_n() -> None:
    """What the cut relies on: the query's last clause is LIMIT $top_n after an ORDER BY (the ORDER BY's
    columns cover the grouping key, so the order is total: see the comment above it in each file)."""
    import re

    from traceql.analysis import PREFIX_QUERIES

    for name, param in PREFIX_QUERIES.items():
        sql = re.sub(r"--[^\n]*", "", queries.get(name).sql).strip()
        assert re.search(rf"\bORDER BY [^;]+\bLIMIT \${param}\s*;?$", sql), name
