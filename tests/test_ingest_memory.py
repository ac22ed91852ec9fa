"""Bounded memory degrades by spilling, never by failing (issue 18).

- traceql._sort sorts by ts_ns within a budget: the expected order is Python's stable sort of the rows read
  back with pyarrow (rows with equal ts_ns keep file order, NULLs last), compared row for row;
- an interleaved multi-stream kernel_details.csv (rows in time order only within a stream) ingests under a
  budget ~1/10 of its Arrow size: the stored kernels are exactly the CSV's rows (read independently with the
  csv module, µs text -> ns with Decimal) and every stored file is time-sorted; the sort's temp files stay
  inside the store's staging dir and are gone afterwards; nothing is written to the dump folder;
- a DuckDB out-of-memory is one line saying what to do, never an "internal error".
"""

from __future__ import annotations

import csv
import random
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from traceql import _sort
from traceql.synth.shapes import device_trace_view, interleaved_kernel_details


def _expected(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["ts_ns"] is None, r["ts_ns"] or 0))  # stable, NULLs last


def _table(ts: list[int | None]) -> pa.Table:
    # a wide payload (a MAP and a long string) so that a few thousand rows exceed the budget
    return pa.table(
        {
            "ts_ns": pa.array(ts, pa.int64()),
            "seq": pa.array(range(len(ts)), pa.int64()),
            "name": pa.array([f"op_{i % 17}" * 20 for i in range(len(ts))]),
            "metrics": pa.array(
                [[(f"k{j}", float(i + j)) for j in range(i % 5)] for i in range(len(ts))],
                pa.map_(pa.string(), pa.float64()),
            ),
        }
    )


@pytest.mark.parametrize(
    "shape",
    ["random", "streams", "skewed", "all_equal", "with_nulls", "all_null", "sorted"],
)
def test_sort_by_time_matches_a_stable_sort(tmp_path: Path, shape: str) -> None:
    rng = random.Random(7)
    n = 6000
    if shape == "random":
        ts: list[int | None] = [rng.randrange(10**15, 10**15 + 10**9) for _ in range(n)]
    elif shape == "streams":  # 4 streams, each in time order, written one after the other per "second"
        ts = [
            s * 7 + (i // 4) * 1000 + sec * 10**7
            for sec in range(3)
            for s in range(4)
            for i in range(n // 12)
        ]
    elif shape == "skewed":  # most rows share one timestamp: that bucket stays too large and is copied
        ts = [5 if rng.random() < 0.8 else rng.randrange(10**6) for _ in range(n)]
    elif shape == "all_equal":
        ts = [42] * n
    elif shape == "with_nulls":
        ts = [None if rng.random() < 0.2 else rng.randrange(10**6) for _ in range(n)]
    elif shape == "all_null":
        ts = [None] * n
    else:
        ts = list(range(n))
    src, dst = tmp_path / "t.parquet", tmp_path / "out.parquet"
    table = _table(ts)
    pq.write_table(table, src, row_group_size=1000)
    assert table.nbytes > 8 * (64 << 10)  # the budget below forces the external path
    _sort.sort_by_time(src, dst, row_group=512, budget=64 << 10)
    got = pq.read_table(dst)
    assert got.schema.equals(table.schema)
    assert got.to_pylist() == _expected(table.to_pylist())
    assert {p.name for p in tmp_path.iterdir()} == {"t.parquet", "out.parquet"}  # the spill dir is removed


def test_external_path_is_taken_and_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget decides: over it the rows are dealt into buckets, each sorted alone (spied)."""
    dealt: list[int] = []
    sorted_rows: list[int] = []
    real_deal, real_sorted = _sort._deal, _sort._sorted

    def deal(src, bounds, tmp, batch_rows):  # type: ignore[no-untyped-def]
        dealt.append(len(bounds))
        return real_deal(src, bounds, tmp, batch_rows)

    def srt(table):  # type: ignore[no-untyped-def]
        sorted_rows.append(table.num_rows)
        return real_sorted(table)

    monkeypatch.setattr(_sort, "_deal", deal)
    monkeypatch.setattr(_sort, "_sorted", srt)
    rng = random.Random(3)
    table = _table([rng.randrange(10**9) for _ in range(8000)])
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=1000)
    budget = 64 << 10
    _sort.sort_by_time(tmp_path / "t.parquet", tmp_path / "o.parquet", row_group=512, budget=budget)
    assert dealt and dealt[0] >= 2
    per_row = table.nbytes / table.num_rows
    # every in-memory sort held at most the budget (sampling slack: x2), never the whole table
    assert max(sorted_rows) * per_row <= 2 * budget < table.nbytes
    assert sum(sorted_rows) == table.num_rows


@pytest.mark.parametrize("shape", ["merge", "many_runs", "skewed", "mostly_null"])
def test_spilled_writes_merge_like_a_stable_sort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """A RankWriter file whose rows go back in time after an in-order prefix: its later writes are spilled, each
    sorted, and the sort merges them as runs (no bucket dealt). Past MAX_RUNS (many_runs), or with most rows on
    one timestamp (skewed: a slab would hold them all), it deals them into buckets as before. Either way the
    file is Python's stable sort of the rows in the order they were written (equal ts_ns in write order, NULLs
    last), compared row for row; the writes repeat timestamps across runs and hold NULLs, and one write is NULLs
    only. mostly_null: the NULL rows (60%) are merged too, and written in pieces of at most a quarter of the
    budget (read from the file's row groups), never held at once."""
    from traceql.rank_writer import RankWriter

    monkeypatch.setenv("TRACEQL_SORT_MEMORY", "1MB")  # the rows below are ~3.5 MB of Arrow
    monkeypatch.setattr(_sort, "RUN_CHUNK_ROWS", 64)  # a run's record batches: 64 rows of ~300 bytes
    if shape == "many_runs":
        monkeypatch.setattr(_sort, "MAX_RUNS", 2)
    dealt: list[int] = []
    real_deal = _sort._deal

    def deal(src, bounds, tmp, batch_rows):  # type: ignore[no-untyped-def]
        dealt.append(len(bounds))
        return real_deal(src, bounds, tmp, batch_rows)

    monkeypatch.setattr(_sort, "_deal", deal)
    rng = random.Random(11)
    null_share = 0.6 if shape == "mostly_null" else 0.05

    def stamp(lo: int) -> int | None:
        if rng.random() < null_share:
            return None
        if shape == "skewed" and rng.random() < 0.8:
            return 25_000
        return rng.randrange(lo, lo + 8_000) // 7 * 7

    writes: list[list[int | None]] = [list(range(0, 30_000, 10))]  # the in-order prefix: 3000 rows
    for k in range(6):  # then writes that go back in time, overlapping each other
        writes.append([stamp(20_000 + k * 3_000) for _ in range(1500)])
    writes.append([None] * 40)
    w = RankWriter(tmp_path, "r", 0)
    written = []
    for i, ts in enumerate(writes):
        names = [f"w{i}-{j}-" + "x" * 200 for j in range(len(ts))]
        w.write("host_ops", {"name": names, "ts_ns": ts})
        written += list(zip(names, ts, strict=True))
    w.close()
    out = tmp_path / "host_ops/r0-0.parquet"
    got = pq.read_table(out, columns=["name", "ts_ns"]).to_pylist()
    expected = sorted(written, key=lambda r: (r[1] is None, r[1] or 0))  # stable: write order for ties
    assert [(r["name"], r["ts_ns"]) for r in got] == expected
    assert bool(dealt) == (shape in ("many_runs", "skewed"))
    assert not list(tmp_path.rglob("*.arrow")) and not list(tmp_path.rglob(".sort-*"))
    if shape == "mostly_null":
        meta = pq.ParquetFile(out).metadata
        ts_col = meta.schema.names.index("ts_ns")
        null_groups = [
            meta.row_group(g).num_rows
            for g in range(meta.num_row_groups)
            if meta.row_group(g).column(ts_col).statistics.null_count == meta.row_group(g).num_rows
        ]
        per_row = pq.read_table(out).nbytes / len(got)
        assert sum(null_groups) == sum(1 for r in got if r["ts_ns"] is None) > 5000
        assert len(null_groups) > 4 and max(null_groups) * per_row <= (1 << 20) / 4 + 64 * per_row


def _kernel_rows(names: list[str], ts: list[int | None], dictionary: bool) -> pa.Table:
    """Kernels rows with a metrics map whose keys are dictionary-encoded (a CSV's metric names) or plain text:
    a file's writes may come either way, and the reorder window holds both at once."""
    metrics = [{"m": float(i), f"k{i % 3}": 1.0} for i in range(len(ts))]
    plain = pa.array([list(m.items()) for m in metrics], pa.map_(pa.string(), pa.float64()))
    if dictionary:
        words = sorted({k for m in metrics for k in m})
        keys = pa.DictionaryArray.from_arrays(
            pa.array([words.index(k) for m in metrics for k in m], pa.int32()), pa.array(words)
        )
        plain = pa.MapArray.from_arrays(plain.offsets, keys, plain.items)
    return pa.table({"name": names, "ts_ns": pa.array(ts, pa.int64()), "metrics": plain})


@pytest.mark.parametrize("shape", ["nearly_ordered", "in_order", "window_overflows"])
def test_reorder_window_writes_a_nearly_ordered_stream_in_time_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """write(reorder=True) on a stream that goes back in time by less than one write (each row up to ~150 ns
    behind the stream, a write spans ~200-1200 ns), with a few rows far behind and NULL ts_ns rows: the file gets
    every row it can place in time order as written (never spilled nor sorted), the late part exactly the rows
    the rule in _Window's docstring calls late (a plain-Python model of it below: a row is late when NULL or
    below the least ts_ns of a write before it; window_overflows: below every row before it, as a window too small
    to hold a write writes all it holds at once), sorted at close. Every file reads back in time order (NULLs
    last) and the rows as written. in_order: one file, released by slices (no take)."""
    import traceql.rank_writer as rw_mod
    from traceql.rank_writer import RankWriter

    if shape == "window_overflows":
        monkeypatch.setattr(rw_mod, "WINDOW_BYTES", 1)
    spilled: list[str] = []
    real_spill = RankWriter._spill
    monkeypatch.setattr(
        RankWriter, "_spill", lambda self, rel, t: (spilled.append(rel), real_spill(self, rel, t))
    )
    takes: list[int] = []
    real_take = rw_mod._time_take
    monkeypatch.setattr(
        rw_mod, "_time_take", lambda tables, lo, hi: (takes.append(1), real_take(tables, lo, hi))[1]
    )
    rng = random.Random(5)
    w = RankWriter(tmp_path, "r", 0)
    written: list[tuple[str, int | None]] = []
    expected_late: list[tuple[str, int | None]] = []
    mark: int | None = None  # the model's
    clock = 1000
    for i in range(40):
        ts: list[int | None] = []
        for _ in range(rng.randrange(20, 120)):
            clock += rng.randrange(1, 10)  # distinct: in_order's writes meet at no shared ts_ns
            behind = 0 if shape == "in_order" else rng.randrange(0, 150)
            roll = rng.random()
            if shape != "in_order" and roll < 0.01:
                ts.append(None)
            elif shape != "in_order" and roll < 0.02:
                ts.append(clock - 5000)  # far behind: late whatever the window
            else:
                ts.append(clock - behind)
        names = [f"w{i}-{j}" for j in range(len(ts))]
        w.write("kernels", _kernel_rows(names, ts, dictionary=i % 2 == 0), reorder=True)
        rows = list(zip(names, ts, strict=True))
        written += rows
        late = [r for r in rows if r[1] is None or (mark is not None and r[1] < mark)]
        expected_late += late
        placed = [r[1] for r in rows if r not in late]
        if placed:
            top = max(placed) if shape == "window_overflows" else min(placed)
            mark = top if mark is None else max(mark, top)
    w.close()
    got = {}
    for rel in w.files["kernels"]:
        t = pq.read_table(tmp_path / rel, columns=["name", "ts_ns", "metrics"])
        got[rel] = [(r["name"], r["ts_ns"]) for r in t.to_pylist()]
        stamps = [x for _, x in got[rel]]
        assert stamps == sorted(stamps, key=lambda x: (x is None, x or 0)), rel  # in time order, NULLs last
        # the metrics map reads back as written (key m holds the row's index in its write)
        assert all(dict(r["metrics"])["m"] == float(r["name"].split("-")[1]) for r in t.to_pylist())
    assert sorted(r for rows in got.values() for r in rows) == sorted(written)
    assert sorted(got.get("kernels/r0-0-late.parquet", [])) == sorted(expected_late)
    assert set(spilled) <= {"kernels/r0-0-late.parquet"}  # the file the window writes is never spilled
    assert not list(tmp_path.rglob("*.arrow"))
    if shape == "in_order":
        assert list(got) == ["kernels/r0-0.parquet"] and not takes and not spilled
    else:
        assert expected_late and len(got) == 2 and takes


def test_small_writes_are_gathered_into_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file written in small pieces (a counter track's few samples per 32k-event batch) is encoded in row groups
    of GROUP_MIN_ROWS, not one per write (expected by hand: 100 writes of 50 rows, GROUP_MIN_ROWS 1000 -> 5 groups
    of 1000, the rows as written). The rows held wait within GROUPING_BYTES over all files (1 byte: every write is
    its own group again), and a small apart_by slice of a large batch is held as a copy, not pinning its batch."""
    import traceql.rank_writer as rw_mod
    from traceql.rank_writer import RankWriter

    monkeypatch.setattr(rw_mod, "GROUP_MIN_ROWS", 1000)

    def groups(cap: int) -> tuple[list[int], list[int | None]]:
        monkeypatch.setattr(rw_mod, "GROUPING_BYTES", cap)
        d = tmp_path / str(cap)
        w = RankWriter(d, "r", 0)
        for i in range(100):
            w.write("counters", {"track": ["a"] * 50, "ts_ns": list(range(i * 50, i * 50 + 50))})
        w.close()
        pf = pq.ParquetFile(d / "counters/r0-0.parquet")
        md = pf.metadata
        return [md.row_group(g).num_rows for g in range(md.num_row_groups)], pf.read().column(
            "ts_ns"
        ).to_pylist()

    assert groups(8 << 20) == ([1000] * 5, list(range(5000)))
    assert groups(1) == ([50] * 100, list(range(5000)))

    # one write of 20k rows: 19,990 on track "big" then 10 on "small", in runs (apart_by slices them)
    monkeypatch.setattr(rw_mod, "GROUPING_BYTES", 8 << 20)
    w = RankWriter(tmp_path / "slices", "r", 0)
    n = 20_000
    w.write(
        "counters", {"track": ["x"], "ts_ns": [10**9]}
    )  # a later ts first: the next write is out of order
    w.write(
        "counters",
        pa.table({"track": ["big"] * (n - 10) + ["small"] * 10, "ts_ns": pa.array(range(n), pa.int64())}),
        apart_by="track",
    )
    held = [t for rows in w._grouping.values() for t in rows]
    small = [t for t in held if t.num_rows == 10]
    assert small and all(
        t.get_total_buffer_size() < 64 << 10 for t in small
    )  # not the 20k-row batch's buffers
    w.close()
    got = sorted(
        r["ts_ns"]
        for rel in w.files["counters"]
        for r in pq.read_table(tmp_path / "slices" / rel).to_pylist()
    )
    assert got == [*range(n), 10**9]


def _csv_kernels(path: Path) -> list[tuple[int, int, int, int, str]]:
    """(stream, task, ts_ns, dur_ns, name) per CSV row, read with the csv module; µs text -> ns exactly."""
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            ts = int(Decimal(row["Start Time(us)"].strip()) * 1000)
            dur = int(Decimal(row["Duration(us)"].strip()) * 1000)
            out.append((int(row["Stream ID"]), int(row["Task ID"]), ts, dur, row["Name"]))
    return out


def _ingest_interleaved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streams: int
) -> tuple[dict, Path, list[Path], list[tuple[int, int, int, int, str]]]:
    """Ingest an interleaved kernel_details.csv of 20k rows on `streams` streams with a 2 MB sort budget;
    (ingest info, run dir, the dirs the sort spilled into, the CSV's rows read with the csv module)."""
    from traceql.ingest import ingest
    from traceql.store import Store

    dump = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    dump.mkdir(parents=True)
    kd = dump / "kernel_details.csv"
    interleaved_kernel_details(kd, 20_000, streams=streams, seed=1)
    rows = _csv_kernels(kd)
    ts = [r[2] for r in rows]
    assert any(b < a for a, b in zip(ts, ts[1:], strict=False))  # the file really is out of time order
    assert len({r[0] for r in rows}) == streams
    before = sorted(p.name for p in dump.iterdir())

    # the kernels' Arrow rows are ~1 KB (the metrics map): 20k rows ~ 20 MB, a 2 MB budget is 1/10 of it
    monkeypatch.setenv("TRACEQL_SORT_MEMORY", "2MB")
    spill_dirs: list[Path] = []
    real = _sort.sort_by_time

    def spy(src: Path, dst: Path, row_group: int, budget: int | None = None, more: Any = ()) -> None:
        spill_dirs.append(dst.parent)
        real(src, dst, row_group, budget, more)

    monkeypatch.setattr(_sort, "sort_by_time", spy)
    st = Store(tmp_path / "store")
    info = ingest(tmp_path / "rank0_ascend_pt", st, name="kd", workers=1)
    assert info["rows"]["kernels"] == len(rows)
    assert sorted(p.name for p in dump.iterdir()) == before  # nothing written into the dump
    run_dir = tmp_path / "store" / "runs" / st.manifest()["runs"]["kd"]["dir"]
    assert not list(run_dir.rglob(".sort-*")) and not list(run_dir.rglob("*.tmp"))
    assert not list(run_dir.rglob("*.arrow"))  # RankWriter's spills are merged and deleted
    got = []
    for rel in info["files"]["kernels"]:
        t = pq.read_table(run_dir / rel, columns=["stream_id", "task_id", "ts_ns", "dur_ns", "name"])
        file_ts = t.column("ts_ns").to_pylist()
        assert file_ts == sorted(file_ts), rel  # every stored file is in time order
        got += [tuple(r.values()) for r in t.to_pylist()]
    # expected: the CSV's rows read with the csv module (ns from the µs text with Decimal)
    assert sorted(got) == sorted(rows)
    return info, run_dir, spill_dirs, rows


def test_interleaved_kernel_details_is_stored_as_time_ordered_stream_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rows grouped by stream (each stream in time order): one file per stream, each in order as written, and
    # no post-write sort at all
    info, _run, spill_dirs, rows = _ingest_interleaved(tmp_path, monkeypatch, streams=4)
    assert spill_dirs == []
    assert sorted(info["files"]["kernels"]) == [f"kernels/r0-0-s{s}.parquet" for s in (2, 3, 4, 5)]


def test_interleaved_kernel_details_ingests_under_a_small_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from traceql.rank_writer import APART_MAX

    # more streams than parts: the streams past APART_MAX share one part, out of time order, which the
    # bounded external sort orders within its 2 MB budget, spilling only inside the store's staging dir
    streams = APART_MAX + 8
    info, _run, spill_dirs, rows = _ingest_interleaved(tmp_path, monkeypatch, streams=streams)
    assert len(info["files"]["kernels"]) == APART_MAX + 1
    assert spill_dirs and all((tmp_path / "store" / ".staging") in d.parents for d in spill_dirs)


def _duck_oom(self, unit, out):  # type: ignore[no-untyped-def]
    """A parse step that runs DuckDB past its memory limit (a real OutOfMemoryException, not a stand-in)."""
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute("SET memory_limit='1MB'")
    con.execute("SET threads=1")
    con.execute("SELECT list(range(i, i + 100)) AS l FROM range(2000000) t(i) ORDER BY l[1] DESC").fetchall()


def test_duckdb_out_of_memory_is_one_clear_line(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from traceql.parsers.trace_view import TraceViewParser

    trace = tmp_path / "trace_view.json"
    device_trace_view(trace, 200_000)
    monkeypatch.setattr(TraceViewParser, "parse", _duck_oom)
    r = cli("ingest", trace, "--store", tmp_path / "store", "--workers", "1")
    assert r.code == 1, r
    assert "internal error" not in r.err and "Traceback" not in r.err
    assert (
        str(trace) in r.err and "ran out of its memory budget" in r.err and "TRACEQL_INGEST_MEMORY" in r.err
    )
    assert len([ln for ln in r.err.splitlines() if ln.startswith("error")]) == 1
    assert "stored run" not in r.out


def test_ingest_memory_option_sets_duckdb_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    from traceql.parsers._chrome_json import duck_connection

    monkeypatch.setenv("TRACEQL_INGEST_MEMORY", "300MB")
    con = duck_connection(1)
    limit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    assert limit.replace(" ", "") in ("286.1MiB", "300.0MB", "300MB"), limit
    monkeypatch.setenv("TRACEQL_INGEST_MEMORY", "lots")  # not a size: the default stays
    con = duck_connection(1)
    assert con.execute("SELECT current_setting('memory_limit')").fetchone()[0] != limit
