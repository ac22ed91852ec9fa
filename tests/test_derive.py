"""Derived tables (traceql.derive): what ingest stores gives every query the same answer as computing from the raw
tables (the independent method here is the raw path itself: TRACEQL_NO_DERIVED=1 makes the helper macros
recompute everything from kernels/counters/steps/comm_ops), and stale or missing copies are never used."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import planted
import pytest
from conftest import DB_LEVEL1, LEVEL1, SAMPLES, real

from traceql import derive, derived_tables, queries
from traceql.ingest import ingest
from traceql.store import Store


def _rows(name: str, store: Path, run: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    """One query through an analysis session (which prepares the run's derived tables when not stored)."""
    from traceql.analysis import Analysis

    with Analysis(store, run) as a:
        t = a.query(name, params)
    return sorted((tuple(r.values()) for r in t.to_pylist()), key=repr)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
        return abs(a - b) <= 1  # sums of fractional shares are rounded to whole ns / bytes once
    return bool(a == b)


def _assert_rows_same(stored: list[tuple[Any, ...]], raw: list[tuple[Any, ...]], what: str) -> None:
    """Row for row, each value `_same` (DuckDB's parallel sums may add floats in another order)."""
    assert len(stored) == len(raw), what
    for rs, rr in zip(stored, raw, strict=True):
        assert all(_same(a, b) for a, b in zip(rs, rr, strict=True)), (
            what,
            [(i, a, b) for i, (a, b) in enumerate(zip(rs, rr, strict=True)) if not _same(a, b)],
            rs,
        )


def _assert_stored_equals_raw(store: Path, run: str, monkeypatch: pytest.MonkeyPatch) -> int:
    assert not derived_tables.stored_for(Store(store).run(run))  # ingest does not build them
    assert derive.prepare(Store(store), [run]) == []
    info = Store(store).run(run)
    assert derived_tables.stored_for(info), info.get("derived")
    import traceql

    # the one query with a required parameter (op_calls: one operator's calls) gets the busiest operator
    busiest = (
        traceql.connect(store)
        .execute(
            "SELECT coalesce(nullif(op_type, 'N/A'), name) FROM kernels WHERE run_id = ? GROUP BY 1 ORDER BY sum(dur_ns) DESC LIMIT 1",
            [run],
        )
        .fetchone()[0]
    )
    from traceql.analysis import Analysis

    specs = queries.list_queries()
    params = {spec.name: {p.name: busiest for p in spec.params if p.required} for spec in specs}
    assert all(set(p) <= {"op"} for p in params.values()), params

    def every_query() -> dict[str, list[tuple[Any, ...]]]:
        # one session for all of them (a session per query cost most of this test's time)
        with Analysis(store, run) as a:
            return {
                s.name: sorted(
                    (tuple(r.values()) for r in a.query(s.name, params[s.name]).to_pylist()), key=repr
                )
                for s in specs
            }

    stored = every_query()
    with monkeypatch.context() as m:
        m.setenv("TRACEQL_NO_DERIVED", "1")
        raw = every_query()
    for spec in specs:
        _assert_rows_same(stored[spec.name], raw[spec.name], spec.name)
    return sum(len(v) for v in stored.values())


def _assert_tables_equal_raw(store: Path, run: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """Every derived table as stored equals its SELECT over the raw tables, row for row (`_same`). Every query
    reads the derived tables through these views and the same SQL in both modes, so equal tables give equal
    answers; the every-query comparison above runs on the real Level1 text dump. kernel_bytes.kid numbers
    kernels in scan order (a join key used with run and rank only): a build in one session numbers them
    differently from the stored per-rank builds."""
    import traceql

    assert derive.prepare(Store(store), [run]) == []
    assert derived_tables.stored_for(Store(store).run(run))

    def every_table() -> dict[str, list[tuple[Any, ...]]]:
        con = traceql.connect(store)
        try:
            for stmt in derived_tables.statements(derived_tables.current_tables(Store(store).run(run))):
                con.execute(stmt)  # raw mode: each table a view over its SELECT (stored mode: none left)
            return {
                t: sorted(
                    con.execute(
                        f"SELECT {'* EXCLUDE (kid)' if t == 'kernel_bytes' else '*'} FROM {t}"
                    ).fetchall(),
                    key=repr,
                )
                for t in derived_tables.names()
            }
        finally:
            con.close()

    stored = every_table()
    with monkeypatch.context() as m:
        m.setenv("TRACEQL_NO_DERIVED", "1")
        raw = every_table()
    for t in derived_tables.names():
        _assert_rows_same(stored[t], raw[t], t)
    return sum(len(v) for v in stored.values())


def test_sample_derived_tables_same_from_stored_and_raw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = tmp_path / "s"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=2)
    assert _assert_tables_equal_raw(st, "demo", monkeypatch) > 100


def test_big_ranks_built_in_one_retargeted_session_equal_the_raw_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every rank "big" (GROUP_ROWS 0): the ranks are built one after another in one session, its views pointed at
    each rank's files in turn (_Session.retarget), the helper macros kept. Each rank's tables must still equal
    their SELECT over that rank's raw rows: a macro bound to the first rank's files would give the second
    rank the first one's rows."""
    st = tmp_path / "s"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    sessions: list[int] = []
    init = derive._Session.__init__

    def counted(self: Any, *a: Any, **k: Any) -> None:
        sessions.append(1)
        init(self, *a, **k)

    monkeypatch.setattr(derive, "GROUP_ROWS", 0)
    monkeypatch.setattr(derive._Session, "__init__", counted)
    assert _assert_tables_equal_raw(st, "demo", monkeypatch) > 100
    assert len(sessions) == 2  # the run-level session, then one for both ranks


def test_one_session_serves_the_ranks_and_a_retry_gets_a_session_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """_OneSession: ranks built at the build budget share one session (retargeted to each rank's files); a rank
    built again with the larger limit after running out (_budgeted) gets a fresh session, closed after it, and
    the shared one goes on with the next rank. Stand-ins record which session built what."""
    made: list[Any] = []

    class Session:
        def __init__(self, out_dir: Path, files: dict[str, list[str]], threads: int, mem_limit: str) -> None:
            self.out_dir, self.files, self.limit, self.closed = out_dir, [files], mem_limit, False
            made.append(self)

        def retarget(self, files: dict[str, list[str]]) -> None:
            self.files.append(files)

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(derive, "_Session", Session)
    monkeypatch.setattr(derive, "_write_rank", lambda s, rank: {"files": {}, "rows": {"r": rank}})
    one = derive._OneSession()
    for rank, limit in [(0, "512MB"), (1, "512MB"), (2, "3072MB"), (3, "512MB")]:
        assert one.derive_rank("out", rank, {"kernels": [f"r{rank}"]}, 1, limit) == {
            "files": {},
            "rows": {"r": rank},
        }
    assert [s.limit for s in made] == ["512MB", "3072MB"]
    assert made[0].files == [{"kernels": ["r0"]}, {"kernels": ["r1"]}, {"kernels": ["r3"]}]
    assert made[1].files == [{"kernels": ["r2"]}] and made[1].closed and not made[0].closed
    one.close()
    assert made[0].closed


@pytest.mark.parametrize("case", ["unfused_chain", "h2d_not_overlapped", "hbm_wait", "slow_link"])
def test_planted_derived_tables_same_from_stored_and_raw(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = tmp_path / "s"
    ingest(planted.write(case, tmp_path / "dumps"), st, name=case, workers=1)
    assert _assert_tables_equal_raw(st, case, monkeypatch) > 0


def test_real_every_query_same_from_stored_and_raw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = tmp_path / "s"
    ingest(real(LEVEL1), st, name="real", workers=2)
    assert _assert_stored_equals_raw(st, "real", monkeypatch) > 0


def test_real_db_derived_tables_same_from_stored_and_raw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = tmp_path / "s"
    ingest(real(DB_LEVEL1), st, name="real", workers=2)
    assert _assert_tables_equal_raw(st, "real", monkeypatch) > 0


def test_first_analysis_builds_per_rank_files_listed_in_the_manifest(tmp_path: Path) -> None:
    st = tmp_path / "s"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    assert "derived" not in Store(st).run("demo")
    queries.run("rank_summary", st, run_id="demo")  # a plain query writes nothing
    assert "derived" not in Store(st).run("demo")
    _rows("rank_summary", st, "demo")  # the first analysis session builds them
    info = Store(st).run("demo")
    for table in derived_tables.names():
        v = derived_tables.get(table).fingerprint[:8]
        assert info["files"][table] == [f"{table}/r0-d{v}.parquet", f"{table}/r1-d{v}.parquet"], table
        assert all((Store(st).run_path("demo") / rel).is_file() for rel in info["files"][table])
    # 120 kernels: kernel_details.csv has 48 + 72 data rows (`wc -l` minus the headers: 49 and 73 lines)
    assert info["derived"]["rows"]["kernel_bytes"] == info["rows"]["kernels"] == 120
    assert info["derived"]["rows"]["step_windows"] == 6  # 3 ProfilerStep spans per rank


def test_a_rank_with_pmu_bytes_is_not_cut_at_its_counter_samples(tmp_path: Path) -> None:
    """The sample's ranks have per-task PMU bytes and HBM counter samples (39 windows a rank): their bandwidth
    is the kernels', so a counter sample inside the span changes nothing bw_segments reports and is no cut
    point. Two adjacent pieces that agree on every reported column, split at a counter window edge, would be
    such a needless cut (the old sweep cut at every sample: a third of the benchmark cluster's timeline)."""
    import traceql

    st = tmp_path / "s"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    assert derive.prepare(Store(st), ["demo"]) == []
    con = traceql.connect(st)
    assert con.execute("SELECT DISTINCT bw_source FROM bw_segments").fetchall() == [("pmu",)]
    edges = con.execute(
        "SELECT count(*) FROM hbm_windows w WHERE wi > 1 AND EXISTS (SELECT 1 FROM bw_segments s "
        "WHERE s.rank = w.rank AND w.win_start > s.seg_start AND w.win_start < s.seg_end)"
    ).fetchone()
    assert edges is not None and edges[0] > 20  # interior counter edges fall inside pieces: not cut there
    cols = "n_comp, n_kernels, n_copy, bw_bps, n_comm, n_peer_wait, n_unsplit, transit_share, in_counter_span"
    needless = con.execute(
        f"WITH s AS (SELECT rank, step, seg_start, seg_end, ({cols}) AS v FROM bw_segments) "
        "SELECT count(*) FROM s a JOIN s b ON a.rank = b.rank AND a.step IS NOT DISTINCT FROM b.step "
        "AND a.seg_end = b.seg_start AND a.v = b.v "
        "WHERE a.seg_end IN (SELECT win_start FROM hbm_windows w WHERE w.rank = a.rank)"
    ).fetchone()
    assert needless == (0,)


def test_a_stale_derivation_is_never_used_and_is_rebuilt(tmp_path: Path) -> None:
    """A run whose derived tables were made by other helper SQL (an older traceql) is not read through them: a
    plain connection does not expose them, and the next analysis rebuilds them (same answer, old files gone)."""
    import traceql

    st = tmp_path / "s"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    before = _rows("wait_attribution", st, "demo")
    m = json.loads((st / "manifest.json").read_text())
    m["runs"]["demo"]["derived"]["fingerprints"]["kernel_bytes"] = "0000000000000000"
    (st / "manifest.json").write_text(json.dumps(m))
    assert not derived_tables.stored_for(Store(st).run("demo"))
    con = traceql.connect(st)
    assert not con.execute("SELECT derived FROM runs").fetchone()[0]
    assert "kernel_bytes" not in {
        r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()
    }
    del con  # an open connection holds the readers' lock: superseded files would stay until it is gone
    old = sorted((Store(st).run_path("demo") / "kernel_bytes").iterdir())
    # same version in the file names, so the rebuild replaces them: make them look old
    for p in old:
        p.rename(p.with_name(p.name.replace("-d", "-dold")))
    m["runs"]["demo"]["files"]["kernel_bytes"] = [
        f"kernel_bytes/{p.name.replace('-d', '-dold')}" for p in old
    ]
    (st / "manifest.json").write_text(json.dumps(m))
    assert _rows("wait_attribution", st, "demo") == before
    assert derived_tables.stored_for(Store(st).run("demo"))
    assert not list((Store(st).run_path("demo") / "kernel_bytes").glob("*-dold*"))


def test_read_only_store_is_analysed_from_the_raw_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = tmp_path / "s"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    monkeypatch.setattr(derive.os, "access", lambda *a, **k: False)
    assert derive.prepare(Store(st), ["demo"]) == ["demo"]
    rows = _rows("wait_attribution", st, "demo")
    assert "derived" not in Store(st).run("demo")
    monkeypatch.undo()
    _assert_rows_same(
        _rows("wait_attribution", st, "demo"), rows, "wait_attribution"
    )  # now from stored tables
    assert derived_tables.stored_for(Store(st).run("demo"))


def test_derived_tables_are_queryable_ad_hoc(tmp_path: Path) -> None:
    import traceql

    st = tmp_path / "s"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    _rows("rank_summary", st, "demo")  # builds them
    con = traceql.connect(st)
    # every kernel has exactly one row; its bytes come from one named source
    n, srcs = con.execute("SELECT count(*), list(DISTINCT hbm_bytes_source) FROM kernel_bytes").fetchone()
    assert n == con.execute("SELECT count(*) FROM kernels WHERE ts_ns IS NOT NULL").fetchone()[0]
    assert set(srcs) <= {"pmu", "sampled", "modeled", None}
    # the timeline tiles every step window exactly (segments add up to the window length)
    bad = con.execute(
        "SELECT count(*) FROM (SELECT rank, step, sum(dur_ns) AS d, any_value(win_end - win_start) AS w "
        "FROM timeline_base GROUP BY rank, step) WHERE d <> w"
    ).fetchone()[0]
    assert bad == 0


def test_a_failed_build_leaves_the_run_to_the_raw_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build that fails (DuckDB out of memory even at the larger limit) must not fail the analysis or leave
    files behind."""
    import duckdb

    st = tmp_path / "s"
    ingest(SAMPLES / "torch_npu_2rank", st, name="demo", workers=1)
    with monkeypatch.context() as m:
        m.setenv("TRACEQL_NO_DERIVED", "1")  # raw tables only, nothing built
        expected = _rows("rank_summary", st, "demo")

    def dies(*a: Any, **k: Any) -> Any:
        raise duckdb.OutOfMemoryException(
            "could not allocate block of size 256 KiB (512.0 MiB/512.0 MiB used)"
        )

    with monkeypatch.context() as m:
        m.setattr(derive, "_build", dies)
        assert derive.prepare(Store(st), ["demo"]) == ["demo"]
        assert _rows("rank_summary", st, "demo") == expected
    assert "derived" not in Store(st).run("demo")
    assert not list((st / ".staging").iterdir())


def test_fingerprints_cover_exactly_the_sql_the_stored_tables_depend_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Editing a helper a stored table is computed from (directly, through another macro, or through an
    upstream derived table) changes that table's fingerprint; editing a parameterised helper applied on top of
    the stored tables changes none (no needless rebuild)."""
    from traceql import sqlfiles

    stmts = list(sqlfiles.helper_statements())
    base = derived_tables.fingerprints()

    def edited(name: str) -> dict[str, str]:
        changed = tuple((n, q + " " if n == name else q) for n, q in stmts)  # any byte of SQL counts
        derived_tables._load.cache_clear()
        return {
            t.name: t.fingerprint for t in derived_tables._load(str(sqlfiles.library_dir("derived")), changed)
        }

    names = {n for n, _q in stmts}
    # _dtype_bytes: modeled bytes (kernel_bytes and everything downstream of it); _is_comm: comm_events too
    for dependency, tables in (
        ("_dtype_bytes", {"kernel_bytes", "bw_segments", "timeline_base"}),
        ("_hbm_windows", {"kernel_bytes", "bw_segments", "timeline_base"}),
        ("_is_comm", {"comm_events", "kernel_bytes", "bw_segments", "timeline_base"}),
        ("_comm_parts_base", {"bw_segments", "timeline_base"}),
    ):
        assert dependency in names
        got = edited(dependency)
        assert {t for t in base if got[t] != base[t]} == tables, dependency
    # parameterised, only ever applied by queries over the stored tables
    for on_top in ("_timeline", "_comm_parts", "_timeline_parts"):
        assert on_top in names
        assert edited(on_top) == base, on_top
    derived_tables._load.cache_clear()


def test_ingest_prepare_builds_the_analysis_tables_at_ingest(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """A run of 2+ ranks gets its derived tables at ingest by default (the first analysis then builds nothing and
    returns what an unprepared run returns); --no-prepare stores only the parsed tables; a single trace is not
    prepared unless asked."""
    st = tmp_path / "s"
    plain = cli(
        "ingest",
        SAMPLES / "torch_npu_2rank",
        "--store",
        st,
        "--name",
        "plain",
        "-q",
        "--no-check",
        "--no-prepare",
    )
    assert plain.code == 0, plain.err
    assert not derived_tables.stored_for(Store(st).run("plain"))
    prepared = cli("ingest", SAMPLES / "torch_npu_2rank", "--store", st, "--name", "prep", "-q", "--no-check")
    assert prepared.code == 0, prepared.err
    assert "building the analysis tables of run 'prep'" in prepared.err
    assert derived_tables.stored_for(Store(st).run("prep"))
    one_rank = next(p for p in sorted((SAMPLES / "torch_npu_2rank").iterdir()) if p.is_dir())
    single = cli("ingest", one_rank, "--store", st, "--name", "single", "-q", "--no-check")
    assert single.code == 0, single.err
    assert Store(st).run("single")["ranks_count"] == 1 and not derived_tables.stored_for(
        Store(st).run("single")
    )
    asked = cli("ingest", one_rank, "--store", st, "--name", "asked", "-q", "--no-check", "--prepare")
    assert asked.code == 0 and derived_tables.stored_for(Store(st).run("asked")), asked.err
    q = cli("query", "rank_summary", "--store", st, "--run", "prep", "--format", "csv")
    assert q.code == 0 and "building the analysis tables" not in q.err
    assert q.out == cli(
        "query", "rank_summary", "--store", st, "--run", "plain", "--format", "csv"
    ).out.replace("plain", "prep")


def test_build_memory_limit_is_a_share_of_available_memory_within_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Half of MemAvailable split between the sessions, clamped to [1 GB, 3 GB] (values worked out by hand)."""
    gb = 1 << 30
    monkeypatch.setattr(derive, "_available_bytes", lambda: 20 * gb)
    assert derive.memory_limit(1) == "3072MB"  # 10 GB -> cap
    assert derive.memory_limit(4) == "2560MB"  # 20 GB x 0.5 / 4 = 2.5 GB
    assert derive.memory_limit(16) == "1024MB"  # 0.625 GB -> floor
    monkeypatch.setattr(derive, "_available_bytes", lambda: None)  # not Linux: the floor
    assert derive.memory_limit(1) == "1024MB"


def test_refs_finds_calls_and_reads_by_whole_name() -> None:
    """The dependency scan behind the fingerprints, on SQL written by hand: a name is read when it stands alone
    (not followed by `(`), called when followed by `(`, never matched inside a longer identifier or in a comment,
    and a name that prefixes another (`kb` / `kb_x`) is told apart both ways."""
    names = ["kb", "kb_x", "steps", "_pct"]
    sql = """-- kb_x( in a comment is no call
    SELECT _pct (a), kb_x(b) FROM steps JOIN kb ON TRUE WHERE mykb = 1 AND kb_xy(2) AND steps2 > 0"""
    assert derived_tables._refs(sql, names, call=True) == {"_pct", "kb_x"}
    assert derived_tables._refs(sql, names, call=False) == {"steps", "kb"}
    assert derived_tables._refs("SELECT 1", [], call=True) == set()
    assert derived_tables._refs("SELECT kb_x FROM t", names, call=False) == {"kb_x"}


def test_a_rank_that_runs_out_within_the_budget_is_built_again_with_the_larger_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One session at a time starts at BUILD_MEMORY (the whole ingest stays near ~1 GB); a rank whose window
    and ASOF operators need more is built again with memory_limit(1), not left to the raw tables."""
    import duckdb

    gb = 1 << 30
    monkeypatch.setattr(derive, "_available_bytes", lambda: 8 * gb)  # 8 GB x 0.5 -> the 3 GB cap
    monkeypatch.delenv("TRACEQL_INGEST_MEMORY", raising=False)
    limits: list[str] = []

    def build(out_dir: str, ranks: Any, files: Any, threads: int, limit: str) -> dict[str, Any]:
        limits.append(limit)
        if limit == "512MB":
            raise duckdb.OutOfMemoryException("could not allocate block")
        return {"files": {}, "rows": {}}

    assert derive._budgeted(build, "out", 0, {}, 2) == {"files": {}, "rows": {}}
    assert limits == ["512MB", "3072MB"]
    monkeypatch.setenv("TRACEQL_INGEST_MEMORY", "2GB")  # the user's budget replaces the default
    limits.clear()
    derive._budgeted(build, "out", 0, {}, 2)
    assert limits == ["2GB"]


def test_hbm_bandwidth_is_exact_where_every_series_has_gone_to_zero(tmp_path: Path) -> None:
    """hbm_windows sums the HBM series' changes in time order. Channels 0, 1, 2 write 1e9/3, 2e9/7 and 5e9/11
    bytes/s from 0, 1 and 2 us, 0 from 10, 11 and 12 us, and a last 0 at 20 us. By hand: [2, 10) us holds
    (1/3 + 2/7 + 5/11) x 1e9 = 248e9/231 bytes/s, [12, 20) us exactly 0. Added and taken away in doubles the
    changes leave 5.96e-08 bytes/s there (Python floats, in that order), a write bandwidth where nothing is
    written."""
    from _canon import build_store

    import traceql

    values = {"0": (0, 1e9 / 3), "1": (1000, 2e9 / 7), "2": (2000, 5e9 / 11)}
    counters = [
        {"track": "HBM", "channel": ch, "metric": "write_bw", "unit": "bytes/s", "ts_ns": ts, "value": v}
        for ch, (t0, bps) in values.items()
        for ts, v in ((t0, bps), (t0 + 10_000, 0.0), (20_000, 0.0))
    ]
    steps = [{"step": 1, "ts_ns": 0, "dur_ns": 30_000, "source": "t"}]
    build_store(tmp_path / "s", "w", {0: {"counters": counters, "steps": steps}}, device="Ascend910B")
    assert derive.prepare(Store(tmp_path / "s"), ["w"]) == []
    got = dict(
        traceql.connect(tmp_path / "s").execute("SELECT win_start, write_bps FROM hbm_windows").fetchall()
    )
    assert got[2000] == pytest.approx(248e9 / 231, rel=1e-15)
    assert got[12_000] == 0.0
