"""Store, engine and the sql/schema/runs CLI, over a store built directly from canonical rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traceql import schema
from traceql.errors import StoreError
from traceql.rank_writer import RankWriter
from traceql.store import Store


def make_run(store: Path, run_id: str = "demo", ranks: int = 2) -> Store:
    st = Store(store)
    staging = st.new_staging()
    files: dict[str, list[str]] = {}
    rows: dict[str, int] = {}
    for r in range(ranks):
        w = RankWriter(staging, run_id, r, tag=str(r))
        # rank r: 3 kernels, durations 1000, 2000, 3000 ns (+ r*10 so ranks differ)
        w.write(
            "kernels",
            {
                "name": ["MatMul_1", "TransData_2", "Add_3"],
                "op_type": ["MatMulV2", "TransData", "Add"],
                "ts_ns": [1_000_000_300, 1_000_000_100, 1_000_000_200],
                "dur_ns": [1000 + r * 10, 2000 + r * 10, 3000 + r * 10],
            },
        )
        w.close()
        for t, fl in w.files.items():
            files.setdefault(t, []).extend(fl)
        for t, n in w.rows.items():
            rows[t] = rows.get(t, 0) + n
    st.commit(
        staging,
        run_id,
        {
            "source": "test",
            "format": "canonical",
            "ranks": list(range(ranks)),
            "ranks_count": ranks,
            "rows": rows,
            "files": files,
        },
    )
    return st


def test_views_and_sorting(store: Path) -> None:
    import traceql

    make_run(store)
    con = traceql.connect(store)
    # by hand: 2 ranks x 3 kernels; total = (1000+2000+3000) + (1010+2010+3010) = 12030
    assert con.execute("SELECT count(*), sum(dur_ns) FROM kernels").fetchone() == (6, 12030)
    # the writer sorts each rank's file by ts_ns: TransData (ts ...100) comes first
    names = [
        r[0]
        for r in con.execute(
            "SELECT name FROM read_parquet(?)",
            [str(next((Store(store).run_path("demo") / "kernels").glob("r0-*.parquet")))],
        ).fetchall()
    ]
    assert names == ["TransData_2", "Add_3", "MatMul_1"]
    assert con.execute("SELECT run_id, ranks, format FROM runs").fetchall() == [("demo", 2, "canonical")]
    # every canonical table exists as a view, empty ones included, with the documented columns
    for t in schema.TABLE_NAMES:
        cols = [r[0] for r in con.execute(f"DESCRIBE {t}").fetchall()]
        assert cols == [c.name for c in schema.columns(t)], t


def test_rows_out_of_time_order_go_to_one_part_per_stream(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    import traceql.rank_writer as rw_mod

    w = RankWriter(tmp_path, "r", 0)
    # by hand: batch 1 is in time order across streams 7 and 8 -> stays in the one file
    w.write("kernels", {"name": ["a", "b"], "stream_id": [7, 8], "ts_ns": [10, 20]}, apart_by="stream_id")
    # batch 2 starts before batch 1 ended: from here rows go to a part per stream (None: the shared part)
    w.write(
        "kernels",
        {"name": ["c", "d", "e", "f"], "stream_id": [8, 7, None, 8], "ts_ns": [15, 30, 5, 40]},
        apart_by="stream_id",
    )
    w.write("kernels", {"name": ["g"], "stream_id": [7], "ts_ns": [35]}, apart_by="stream_id")  # a part now
    w.close()
    got = {
        rel: pq.read_table(tmp_path / rel).select(["name", "ts_ns"]).to_pylist() for rel in w.files["kernels"]
    }
    as_names = {rel: [r["name"] for r in rows] for rel, rows in got.items()}
    assert as_names == {
        "kernels/r0-0.parquet": ["a", "b"],
        "kernels/r0-0-s8.parquet": ["c", "f"],
        "kernels/r0-0-s7.parquet": ["d", "g"],
        "kernels/r0-0-s-rest.parquet": ["e"],
    }
    assert not w._unsorted  # every file in time order as written: nothing to sort
    assert w.rows["kernels"] == 7
    # past APART_MAX distinct streams the rest share one part, which is sorted at close
    w2 = RankWriter(tmp_path / "b", "r", 0)
    n = rw_mod.APART_MAX + 3
    w2.write("kernels", {"name": ["x"], "stream_id": [0], "ts_ns": [10**6]}, apart_by="stream_id")
    streams = list(range(n))
    w2.write(
        "kernels",
        {"name": [f"s{s}" for s in streams], "stream_id": streams, "ts_ns": [1000 - s for s in streams]},
        apart_by="stream_id",
    )
    w2.close()
    assert len(w2.files["kernels"]) == 1 + rw_mod.APART_MAX + 1
    rest = pq.read_table(tmp_path / "b" / "kernels/r0-0-s-rest.parquet").column("ts_ns").to_pylist()
    assert rest == sorted(1000 - s for s in streams[rw_mod.APART_MAX :])  # streams 32-34, in time order


def test_arrow_rows_are_split_before_they_are_conformed(tmp_path: Path) -> None:
    """A RecordBatch whose metrics map has dictionary-encoded keys (what CsvFile.select builds) is split by stream
    as it is and conformed per part: every file has the canonical schema (text keys) and each row keeps its own
    metrics. By hand: the second batch goes back in time, so its rows go to parts s1 / s2."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def batch(names: list[str], streams: list[int], ts: list[int], metric: list[float]) -> pa.RecordBatch:
        keys = pa.DictionaryArray.from_arrays(pa.array([0] * len(names), pa.int32()), pa.array(["aic_time"]))
        offsets = pa.array(range(len(names) + 1), pa.int32())
        metrics = pa.MapArray.from_arrays(offsets, keys, pa.array(metric))
        return pa.RecordBatch.from_pydict(
            {"name": names, "stream_id": pa.array(streams, pa.int64()), "ts_ns": pa.array(ts, pa.int64()),
             "metrics": metrics}
        )  # fmt: skip

    w = RankWriter(tmp_path, "r", 0)
    w.write("kernels", batch(["a", "b"], [1, 2], [10, 20], [1.0, 2.0]), apart_by="stream_id")
    w.write("kernels", batch(["c", "d", "e"], [2, 1, 2], [15, 25, 30], [3.0, 4.0, 5.0]), apart_by="stream_id")
    w.close()
    want = schema.arrow_schema("kernels")
    got = {}
    for rel in w.files["kernels"]:
        t = pq.read_table(tmp_path / rel)
        assert t.schema.field("metrics").type == want.field("metrics").type, rel
        got[rel] = [(r["name"], r["metrics"]) for r in t.select(["name", "metrics"]).to_pylist()]
    assert got == {
        "kernels/r0-0.parquet": [("a", [("aic_time", 1.0)]), ("b", [("aic_time", 2.0)])],
        "kernels/r0-0-s2.parquet": [("c", [("aic_time", 3.0)]), ("e", [("aic_time", 5.0)])],
        "kernels/r0-0-s1.parquet": [("d", [("aic_time", 4.0)])],
    }


@pytest.mark.parametrize("run", [1, 3, 400])
def test_streams_in_runs_split_like_streams_that_alternate(tmp_path: Path, run: int) -> None:
    """Rows whose streams come in runs (400 rows: at least store.SPLIT_RUN_ROWS a run, so they are split by slicing)
    or alternate (1, 3: split by one take) land in the same parts with the same rows, in file order. Expected
    rows built here with plain lists: each stream's rows of the second batch, in input order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import traceql.rank_writer as rw_mod

    assert (run >= rw_mod.SPLIT_RUN_ROWS) == (run == 400)
    n = 2400
    streams = [(i // run) % 3 for i in range(n)]  # streams 0, 1, 2 in runs of `run` rows
    ts = [
        10_000 + i // 3 if s == 0 else 5_000 + i for i, s in enumerate(streams)
    ]  # stream 0 goes back in time
    keys = pa.DictionaryArray.from_arrays(
        pa.array([i % 2 for i in range(n)], pa.int32()), pa.array(["x", "y"])
    )
    metrics = pa.MapArray.from_arrays(
        pa.array(range(n + 1), pa.int32()), keys, pa.array([float(i) for i in range(n)])
    )
    second = pa.RecordBatch.from_pydict(
        {"name": [f"k{i}" for i in range(n)], "stream_id": pa.array(streams, pa.int64()),
         "ts_ns": pa.array(ts, pa.int64()), "metrics": metrics}
    )  # fmt: skip
    w = RankWriter(tmp_path, "r", 0)
    w.write("kernels", {"name": ["first"], "stream_id": [9], "ts_ns": [20_000]}, apart_by="stream_id")
    w.write("kernels", second, apart_by="stream_id")  # before the first row's time: split into parts
    w.close()
    got = {
        rel: pq.read_table(tmp_path / rel).select(["name", "ts_ns", "metrics"]).to_pylist()
        for rel in w.files["kernels"]
    }
    want = {"kernels/r0-0.parquet": [{"name": "first", "ts_ns": 20_000, "metrics": None}]}
    for s in (0, 1, 2):
        want[f"kernels/r0-0-s{s}.parquet"] = [
            {"name": f"k{i}", "ts_ns": ts[i], "metrics": [("x" if i % 2 == 0 else "y", float(i))]}
            for i in range(n)
            if streams[i] == s
        ]
    assert got == want


def test_text_stream_values_name_their_parts_by_order_of_first_sight(tmp_path: Path) -> None:
    """A counter track's name may hold any character (`Stars Soc Info`, `a/b`): its part is numbered, not named
    after it. By hand: the second write goes back in time, so from there rows go to parts v0 ('a/b'), v1."""
    import pyarrow.parquet as pq

    w = RankWriter(tmp_path, "r", 0)
    w.write("counters", {"track": ["a/b"], "ts_ns": [10]}, apart_by="track")
    w.write("counters", {"track": ["a/b", "Stars Soc Info", "a/b"], "ts_ns": [5, 7, 8]}, apart_by="track")
    w.close()
    got = {rel: pq.read_table(tmp_path / rel).column("ts_ns").to_pylist() for rel in w.files["counters"]}
    assert got == {
        "counters/r0-0.parquet": [10],
        "counters/r0-0-v0.parquet": [5, 8],
        "counters/r0-0-v1.parquet": [7],
    }
    assert not w._unsorted


def test_seal_sorts_in_the_background_and_refuses_later_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """seal() closes a file (and its apart parts) early and sorts it off the caller's thread; close() waits.
    Expected order by hand: host rows written 30, 10, 20 -> 10, 20, 30; the in-order kernels file untouched."""
    import threading

    import pyarrow.parquet as pq

    import traceql.rank_writer as rw_mod

    threads: list[str] = []
    real_sort = rw_mod.sort_parquet_by_time

    def recording_sort(p: Path, *more: Path) -> None:
        threads.append(threading.current_thread().name)
        real_sort(p, *more)

    w = RankWriter(tmp_path, "r", 0)
    w.write("host_ops", {"name": ["c", "a"], "ts_ns": [30, 10]})
    w.write("host_ops", {"name": ["b"], "ts_ns": [20]})
    w.write("kernels", {"name": ["k"], "stream_id": [1], "ts_ns": [5]})
    monkeypatch.setattr(rw_mod, "sort_parquet_by_time", recording_sort)
    w.seal("host_ops")
    with pytest.raises(RuntimeError, match="written after seal"):
        w.write("host_ops", {"name": ["d"], "ts_ns": [40]})
    w.write("kernels", {"name": ["l"], "stream_id": [1], "ts_ns": [6]})  # other tables go on
    w.close()
    assert len(threads) == 1 and threads[0].startswith("traceql-sort")
    assert pq.read_table(tmp_path / "host_ops/r0-0.parquet").column("name").to_pylist() == ["a", "b", "c"]
    assert pq.read_table(tmp_path / "kernels/r0-0.parquet").column("name").to_pylist() == ["k", "l"]


def test_seal_covers_the_apart_parts_and_not_other_parts(tmp_path: Path) -> None:
    """By hand: counters split by track after the second write; seal('counters') closes the main file and both
    track parts, while the 'pct' part (written afterwards, as trace_view's percent counters are) stays open."""
    w = RankWriter(tmp_path, "r", 0)
    w.write("counters", {"track": ["A"], "ts_ns": [10]}, apart_by="track")
    w.write("counters", {"track": ["A", "B"], "ts_ns": [5, 7]}, apart_by="track")
    w.seal("counters")
    w.write("counters", {"track": ["A"], "ts_ns": [1]}, part="pct")
    with pytest.raises(RuntimeError):
        w.write("counters", {"track": ["B"], "ts_ns": [9]}, apart_by="track")
    w.close()
    assert sorted(w.files["counters"]) == sorted(
        [
            "counters/r0-0.parquet",
            "counters/r0-0-v0.parquet",
            "counters/r0-0-v1.parquet",
            "counters/r0-0-pct.parquet",
        ]
    )
    assert w.rows["counters"] == 4


def _names(path: Path) -> list[str]:
    import pyarrow.parquet as pq

    names: list[str] = pq.read_table(path).column("name").to_pylist()
    return names


def test_rows_after_a_file_goes_out_of_order_are_spilled_then_merged(tmp_path: Path) -> None:
    """By hand: batch 2 goes back in time, so it and batch 3 are spilled (Arrow IPC beside the file, no Parquet
    row group for them); close() sorts prefix and spill into the one file and deletes the spill."""
    import pyarrow.parquet as pq

    w = RankWriter(tmp_path, "r", 0)
    w.write("host_ops", {"name": ["a", "d"], "ts_ns": [10, 40]})
    w.write("host_ops", {"name": ["b"], "ts_ns": [20]})  # out of order: spilled
    w.write("host_ops", {"name": ["c", "e"], "ts_ns": [30, 50]})  # spilled
    spill = tmp_path / "host_ops/r0-0.parquet.unsorted.arrow"
    assert spill.exists()
    w._close_file("host_ops/r0-0.parquet")  # the file as written so far (its held row group encoded)
    assert pq.read_table(tmp_path / "host_ops/r0-0.parquet").num_rows == 2  # the in-order prefix only
    w.close()
    assert _names(tmp_path / "host_ops/r0-0.parquet") == list("abcde")
    assert not spill.exists()
    assert w.rows["host_ops"] == 5 and w.file_rows["host_ops/r0-0.parquet"] == 5


def test_close_without_sort_appends_the_spill_as_written(tmp_path: Path) -> None:
    """sort=False keeps the writes in the order written (by hand), the spilled ones after the prefix, each
    spilled write in time order (RankWriter._spill sorts a write before storing it)."""
    import pyarrow.parquet as pq

    w = RankWriter(tmp_path, "r", 0)
    w.write("host_ops", {"name": ["d"], "ts_ns": [40]})
    w.write("host_ops", {"name": ["b"], "ts_ns": [20]})
    w.write("host_ops", {"name": ["c", "a"], "ts_ns": [30, 10]})
    w.close(sort=False)
    assert pq.read_table(tmp_path / "host_ops/r0-0.parquet").column("name").to_pylist() == [
        "d",
        "b",
        "a",
        "c",
    ]
    assert not (tmp_path / "host_ops/r0-0.parquet.unsorted.arrow").exists()


def test_seal_merges_the_spill_in_the_background_sort(tmp_path: Path) -> None:
    w = RankWriter(tmp_path, "r", 0)
    for name, ts in (("c", 30), ("a", 10), ("d", 40), ("b", 20)):
        w.write("host_ops", {"name": [name], "ts_ns": [ts]})
    w.seal("host_ops")
    w.close()
    assert _names(tmp_path / "host_ops/r0-0.parquet") == list("abcd")
    assert not list(tmp_path.rglob("*.arrow"))


def test_abort_waits_for_a_background_sort(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error path must not return while a sort still writes into the staging dir."""
    import threading
    import time

    import traceql.rank_writer as rw_mod

    done = threading.Event()
    real_sort = rw_mod.sort_parquet_by_time

    def slow_sort(p: Path, *more: Path) -> None:
        time.sleep(0.3)
        real_sort(p, *more)
        done.set()

    w = RankWriter(tmp_path, "r", 0)
    w.write("host_ops", {"name": ["b", "a"], "ts_ns": [2, 1]})
    monkeypatch.setattr(rw_mod, "sort_parquet_by_time", slow_sort)
    w.seal("host_ops")
    w.abort()
    assert done.is_set()


def test_duplicate_run_refused_and_replace(store: Path) -> None:
    make_run(store)
    with pytest.raises(StoreError, match="already exists"):
        make_run(store)
    st = Store(store)
    assert list(st.runs()) == ["demo"]


def test_parquet_is_read_only_and_views_sql_for_duckdb_shell(store: Path) -> None:
    import duckdb

    make_run(store)
    for p in (store / "runs").rglob("*.parquet"):
        assert not (p.stat().st_mode & 0o222), p
    # the stock duckdb shell: cd into the store and .read views.sql (relative paths)
    sql = (store / "views.sql").read_text()
    con = duckdb.connect()
    import os

    cwd = os.getcwd()
    os.chdir(store)
    try:
        for stmt in sql.split(";\n"):
            body = "\n".join(line for line in stmt.splitlines() if not line.startswith("--")).strip()
            if body:
                con.execute(body)
        assert con.execute("SELECT count(*) FROM kernels").fetchone() == (6,)
    finally:
        os.chdir(cwd)


def test_future_store_format_refused(store: Path) -> None:
    make_run(store)
    m = json.loads((store / "manifest.json").read_text())
    m["store_format"] = 99
    (store / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(StoreError, match="store format 99"):
        Store(store).runs()


@pytest.mark.parametrize("bad", ["../evil", "a/b", ".hidden", "", "x" * 200, "-rf"])
def test_bad_run_names_refused(store: Path, bad: str) -> None:
    from traceql.store import check_run_name

    with pytest.raises(StoreError):
        check_run_name(bad)


def test_cli_sql_formats(store: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    make_run(store)
    r = cli(
        "sql",
        "SELECT op_type, sum(dur_ns) AS ns FROM kernels GROUP BY 1 ORDER BY 2 DESC",
        "--store",
        store,
        "--format",
        "csv",
    )
    assert r.code == 0, r
    # by hand: Add 3000+3010=6010, TransData 2000+2010=4010, MatMulV2 1000+1010=2010
    assert r.out.splitlines() == ['"op_type","ns"', '"Add",6010', '"TransData",4010', '"MatMulV2",2010']
    r = cli("sql", "SELECT count(*) AS n FROM kernels", "--store", store, "--format", "json")
    assert json.loads(r.out) == [{"n": 6}]
    out = tmp_path / "k.parquet"
    r = cli("sql", "SELECT * FROM kernels", "--store", store, "--format", "parquet", "--output", out)
    assert r.code == 0 and out.exists()
    r = cli("sql", "SELECT name FROM kernels LIMIT 1", "--store", store)
    assert r.code == 0 and "name" in r.out


@pytest.mark.parametrize(
    "stmt",
    [
        "COPY kernels TO '/tmp/x.parquet'",
        "CREATE TABLE t AS SELECT 1",
        "INSERT INTO kernels SELECT * FROM kernels",
        "ATTACH '/tmp/x.db' AS x",
        "DROP VIEW kernels",
    ],
)
def test_cli_sql_read_only(store: Path, cli, stmt: str) -> None:  # type: ignore[no-untyped-def]
    make_run(store)
    r = cli("sql", stmt, "--store", store)
    assert r.code == 1 and "read-only" in r.err and "Traceback" not in r.err


def test_cli_sql_errors(store: Path, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("sql", "SELECT 1", "--store", store)
    assert r.code == 1 and "no traceql store" in r.err
    make_run(store)
    r = cli("sql", "SELECT nope FROM kernels", "--store", store)
    assert r.code == 1 and "SQL error" in r.err and len(r.err.strip().splitlines()) == 1


def test_cli_schema_and_runs(store: Path, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("schema", "kernels", "--format", "json")
    assert r.code == 0
    cols = [c["name"] for c in json.loads(r.out)]
    assert cols[:2] == ["run_id", "rank"] and "hbm_read_bytes" in cols
    assert cli("schema", "nope").code == 1
    make_run(store)
    r = cli("runs", "--store", store, "--format", "json")
    assert r.code == 0 and "demo" in json.loads(r.out)
    assert cli("rm", "demo", "--store", store).code == 0
    assert json.loads(cli("runs", "--store", store, "--format", "json").out) == {}


@pytest.mark.parametrize("cmd", ["ingest", "runs", "rm", "sql", "schema"])
def test_help_has_example(cli, cmd: str) -> None:  # type: ignore[no-untyped-def]
    r = cli(cmd, "--help")
    assert r.code == 0 and "Example" in r.out


def test_connect_limited_to_runs_lists_only_their_files(store: Path) -> None:
    """A store of many runs opens as fast as one for a command about one run: its views name only that run's
    files (checked in the view SQL, not by timing)."""
    from traceql import engine

    for i in range(5):
        make_run(store, f"run{i}", ranks=1 + i % 2)
    con = engine.connect(store, runs=["run3"])
    sql = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'kernels'").fetchone()[0]
    # each run's files live in its generation dir runs/<run>.<gen>/
    assert "/runs/run3." in sql and not any(f"/runs/run{i}." in sql for i in (0, 1, 2, 4))
    # run3 has 2 ranks x 3 kernels; the other runs are invisible, in the runs view too
    assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM kernels").fetchone() == (6, 1)
    assert con.execute("SELECT list(run_id) FROM runs").fetchone()[0] == ["run3"]
    every = engine.connect(store)
    assert every.execute("SELECT count(DISTINCT run_id) FROM kernels").fetchone()[0] == 5
    with pytest.raises(StoreError, match="no run 'nope'"):
        engine.connect(store, runs=["nope"])
