"""Many small ranks (issue 22): the analysis tables built for a group of ranks in one session equal those of
one session per rank (traceql.derive.groups), and a 1,000-rank run gets its report and every chart.

The group build is checked against the per-rank build (two code paths over the same Parquet; the per-rank one
is the build the other derive tests check against values by hand); the 1,000-rank run is written straight into
a store (ingesting 1,000 folders would time the parsers, not the charts)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from traceql import charts, derive, derived_tables
from traceql.ingest import ingest
from traceql.store import Store
from traceql.synth import write_torch_npu_dump
from traceql.synth.scenarios import article_scenario


def _tables(store: Path) -> dict[str, list[tuple[object, ...]]]:
    import duckdb

    out = {}
    for t in derived_tables.names():
        files = sorted(str(p) for p in store.glob(f"runs/*/{t}/*.parquet"))
        rel = duckdb.sql(f"SELECT * FROM read_parquet({files!r})")
        cols = [c for c in rel.columns if c != "kid"]  # an arbitrary row id (unique within a rank)
        out[t] = duckdb.sql(f"SELECT {', '.join(cols)} FROM read_parquet({files!r}) ORDER BY ALL").fetchall()
        out[t + ".types"] = [
            tuple(r[:2]) for r in duckdb.sql(f"DESCRIBE SELECT * FROM '{files[0]}'").fetchall()
        ]
    return out


def test_analysis_tables_of_a_rank_group_equal_one_session_per_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_torch_npu_dump(article_scenario(n_ranks=3, steps=2), tmp_path / "dump", aic_metrics="Memory")
    stores = {}
    for kind, per_group in (("group", 64), ("single", 1)):
        monkeypatch.setattr(derive, "GROUP_RANKS", per_group)
        st = tmp_path / kind
        info = ingest(tmp_path / "dump", store=st, workers=1)
        assert derive.groups({r: {} for r in range(3)}, 1) == (
            [[0, 1, 2]] if per_group > 1 else [[r] for r in range(3)]
        )
        assert derive.prepare(Store(st), [info["run_id"]], workers=1) == []
        stores[kind] = _tables(st)
    for t in derived_tables.names():
        assert stores["group"][t] and stores["group"][t] == stores["single"][t], t
        assert stores["group"][t + ".types"] == stores["single"][t + ".types"], t


def test_a_rank_built_in_a_group_gets_no_bandwidth_left_over_from_the_rank_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bw_segments' running sums run on across the ranks of a group (one sorted pass). Rank 0's three kernels
    overlap at 1e9/3, 2e9/7 and 5e9/11 bytes/s (PMU bytes 1000, 2000, 5000 in 3, 7 and 11 us): added and taken
    away in doubles they leave 5.96e-08 (by hand, in Python floats), which rank 1's kernel at 1e9/3 bytes/s
    (1000 bytes in 3 us) would carry as its last bit. Summed in fixed point they cancel exactly: rank 1's pieces
    are the same built with rank 0 as built alone, and its kernel's piece is 1e9/3 bytes/s."""
    from _canon import build_store

    def k(t0: int, dur: int, nbytes: int) -> dict[str, object]:
        return {"name": "Mul", "op_type": "Mul", "task_type": "AI_VECTOR_CORE", "is_comm": False, "step": 1,
                "stream_id": 1, "ts_ns": t0, "dur_ns": dur, "hbm_read_bytes": nbytes, "hbm_write_bytes": 0}  # fmt: skip

    steps = [{"step": 1, "ts_ns": 0, "dur_ns": 20_000, "source": "t"}]
    ranks = {
        0: {"kernels": [k(0, 3000, 1000), k(1000, 7000, 2000), k(2000, 11000, 5000)], "steps": steps},
        1: {"kernels": [k(0, 3000, 1000)], "steps": steps},
    }
    stores = {}
    for kind, per_group in (("group", 64), ("single", 1)):
        monkeypatch.setattr(derive, "GROUP_RANKS", per_group)
        st = build_store(tmp_path / kind, "w", ranks, device="Ascend910B")
        assert derive.prepare(st, ["w"], workers=1) == []
        stores[kind] = _tables(tmp_path / kind)["bw_segments"]
    assert stores["group"] == stores["single"]
    import duckdb

    files = sorted(str(p) for p in (tmp_path / "group").glob("runs/*/bw_segments/*.parquet"))
    q = f"SELECT bw_bps FROM read_parquet({files!r}) WHERE rank = 1 AND n_kernels = 1"
    (bw,) = duckdb.sql(q).fetchall()
    assert bw[0] == pytest.approx(1e9 / 3, rel=1e-15)


def test_groups_keep_big_ranks_alone_and_feed_every_worker(tmp_path: Path) -> None:
    """Big means GROUP_ROWS input rows (the Parquet footers' counts), not bytes: the group's tables are held in
    memory, and Parquet compresses counter samples ~100x. A file that is not Parquet counts as no rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    big = tmp_path / "big.parquet"
    pq.write_table(pa.table({"x": pa.array([0] * derive.GROUP_ROWS, pa.int8())}), big)
    small = tmp_path / "small.parquet"
    pq.write_table(pa.table({"x": pa.array(range(10))}), small)
    assert big.stat().st_size < small.stat().st_size * 20  # the big one is not big in bytes
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"\0" * 10)
    by_rank = {r: {"kernels": [str(big if r == 3 else small)], "counters": [str(junk)]} for r in range(8)}
    assert derive.input_rows(by_rank) == {r: derive.GROUP_ROWS if r == 3 else 10 for r in range(8)}
    g = derive.groups(by_rank, 2)
    assert [3] in g and sorted(r for grp in g for r in grp) == list(range(8))
    assert len(g) >= 2 and all(len(grp) <= derive.GROUP_RANKS for grp in g)


scale = pytest.mark.skipif(
    os.environ.get("TRACEQL_SCALE_TESTS") != "1", reason="1,000-rank run: set TRACEQL_SCALE_TESTS=1 (minutes)"
)


@pytest.fixture(scope="module")
def store1000(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.test_hostile_scale import many_rank_store

    return many_rank_store(tmp_path_factory.mktemp("s1000") / "store", 1000, kernels=4)


@pytest.mark.scale
@scale
def test_report_and_every_chart_of_a_1000_rank_run(store1000: Path, tmp_path: Path) -> None:
    from traceql.report import render

    html = render.write_report(tmp_path / "r.html", store1000, "big", device="ascend910b").read_text()
    # placeholders carry the error after the phrase; the page's own script has it once, before `" + err`
    failed = [
        m
        for m in re.findall(r"This chart could not be drawn: (.{0,120})", html)
        if not m.startswith('" + err')
    ]
    assert not failed, failed
    drawn = set(re.findall(r"chart-([a-z_]+)-", html))
    assert {"hbm_timeline", "hbm_ranks", "wait_steps", "step_breakdown"} <= drawn, drawn


@pytest.mark.scale
@scale
@pytest.mark.parametrize("name", sorted(charts.CHARTS))
def test_every_chart_at_1000_ranks_stays_in_the_row_budget(store1000: Path, name: str) -> None:
    """Each chart of a 1,000-rank run is drawn from SQL-aggregated (or sampled) rows, within the budget
    Altair is given (2 x ROW_BUDGET), and a chart that had to aggregate or sample says so in its title."""
    try:
        chart = charts.make(name, store1000, run_id="big", device="ascend910b")
    except Exception as e:  # noqa: BLE001 - a chart may refuse a run without its data, never crash on size
        assert "MaxRowsError" not in repr(e) and "rows" not in str(e).lower(), (name, e)
        pytest.skip(f"{name}: {type(e).__name__}: {e}")
    spec = charts.to_spec(chart)
    rows = sum(len(v) for v in spec.get("datasets", {}).values())
    assert rows <= 2 * charts.ROW_BUDGET, (name, rows)
    if name in ("hbm_timeline", "wait_steps"):
        title = json.dumps(spec.get("title"))
        assert "1000" in title.replace(",", ""), (name, title)  # says how it reduced 1,000 ranks


def test_small_ranks_are_built_here_with_threads_and_equal_the_serial_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups of small ranks are built in this process (issue 18: a worker forked per group counted this
    process's image again): no process pool is made, and with 2 threads (DuckDB's, and the per-rank files
    written side by side) the tables equal the 1-thread build's."""
    import concurrent.futures

    write_torch_npu_dump(article_scenario(n_ranks=3, steps=2), tmp_path / "dump", aic_metrics="Memory")

    class NoPool:
        def __init__(self, *a: object, **k: object) -> None:
            raise AssertionError("small ranks went to a process pool")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", NoPool)
    stores = {}
    for workers in (1, 2):
        st = tmp_path / f"w{workers}"
        info = ingest(tmp_path / "dump", store=st, workers=1)
        assert derive.prepare(Store(st), [info["run_id"]], workers=workers) == []
        stores[workers] = _tables(st)
    for t in derived_tables.names():
        assert stores[2][t] and stores[2][t] == stores[1][t], t
        assert stores[2][t + ".types"] == stores[1][t + ".types"], t
