"""Many files and many small ranks (issue 22): the fixed work per file and per rank stays fixed.

Counted, not timed (the CI machine's load would make a timing test flaky): how many DuckDB databases an ingest
of N small ranks opens (one per process and purpose, not per rank: each cost ~25 CPU-ms), how many queries
read N op_summary slices (one per run of slices with one header, not per slice: planning a query cost
~40-130 CPU-ms whatever the file's size), and that detection reports each rank folder as it goes. Values are
checked against the raw CSV read with the csv module and Decimal (independent of DuckDB)."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from traceql.ingest import ingest
from traceql.parsers import _csv, _process_db
from traceql.synth import write_torch_npu_dump
from traceql.synth.msprof_writer import make_msprof_sample
from traceql.synth.scenarios import article_scenario

START, DUR, BLOCK = "Task Start Time(us)", "Task Duration(us)", "Block Num"


def _slices(tmp: Path, n: int, odd_header_at: int, bad_at: int) -> tuple[Path, list[Path]]:
    """A PROF folder of n op_summary slices made from the synthetic sample's op_summary, each slice's tasks
    moved 1 s later than the previous one's; slice `odd_header_at` lacks the HF32 Eligible column and slice
    `bad_at` holds `0x20` (no profiler writes hex) in Block Num on its second data row."""
    src = next(make_msprof_sample(tmp / "src").rglob("op_summary_*.csv"))
    rows = list(csv.reader(io.StringIO(src.read_text(encoding="utf-8"), newline="")))
    header, body = rows[0], rows[1:]
    mpo = tmp / "PROF_000001_20250109074803123_ABCDEFGHIJKLMNOPQ" / "mindstudio_profiler_output"
    mpo.mkdir(parents=True)
    paths = []
    for i in range(n):
        h, b = list(header), [list(r) for r in body]
        for r in b:
            r[h.index(START)] = str(Decimal(r[h.index(START)].strip()) + 1_000_000 * i)
        if i == bad_at:
            b[1][h.index(BLOCK)] = "0x20"
        if i == odd_header_at:
            k = h.index("HF32 Eligible")
            h.pop(k)
            for r in b:
                r.pop(k)
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([h, *b])
        p = mpo / f"op_summary_slice_{i}_20250109074803.csv"
        p.write_text(out.getvalue(), encoding="utf-8")
        paths.append(p)
    return mpo.parent, paths


def test_op_summary_slices_are_read_a_header_run_per_query_with_every_row_and_the_bad_cell_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prof, paths = _slices(tmp_path, 12, odd_header_at=5, bad_at=8)
    selects: list[list[Path]] = []
    real = _csv.CsvFile.select

    def counting(self: _csv.CsvFile, *a: Any, **k: Any) -> Any:
        selects.append(list(self.paths))
        return real(self, *a, **k)

    monkeypatch.setattr(_csv.CsvFile, "select", counting)
    info = ingest(prof, store=tmp_path / "store", workers=1)
    kernel_reads = [ps for ps in selects if ps[0].name.startswith("op_summary")]
    # slices 0-4, then 5 (another header), then 6-11: three queries for twelve files, in file order
    assert kernel_reads == [paths[:5], [paths[5]], paths[6:]]

    # the stored kernels against the raw files: rows, durations (µs text -> ns, exact) and start times
    want_n, want_dur, want_ts = 0, 0, set()
    for p in paths:
        rows = list(csv.DictReader(io.StringIO(p.read_text(encoding="utf-8"), newline="")))
        want_n += len(rows)
        want_dur += sum(int(Decimal(r[DUR].strip()) * 1000) for r in rows)
        want_ts |= {int(Decimal(r[START].strip()) * 1000) for r in rows}
    import traceql

    con = traceql.connect(tmp_path / "store")
    n, dur, ts = con.execute("SELECT count(*), sum(dur_ns), count(DISTINCT ts_ns) FROM kernels").fetchone()
    assert (n, dur, ts) == (want_n, want_dur, len(want_ts))
    bad = con.execute("SELECT count(*) FROM kernels WHERE block_dim IS NULL").fetchone()[0]
    assert bad == 1
    # the warning names the slice that held the cell and its line (header = line 1, second data row = 3)
    [w] = [w for w in info["warnings"] if "Block Num" in w]
    assert str(paths[8]) in w and "line 3" in w and "0x20" in w, w


def _dump(root: Path, n: int) -> Path:
    write_torch_npu_dump(article_scenario(n_ranks=n, steps=1), root, aic_metrics="Memory")
    return root


def test_an_ingest_of_small_ranks_opens_as_many_duckdb_databases_for_4_ranks_as_for_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duckdb

    real = duckdb.connect
    opened: list[int] = []

    def counting(*a: Any, **k: Any) -> Any:
        opened.append(1)
        return real(*a, **k)

    counts = {}
    for n in (2, 4):
        # a fresh process's cache (the CSV, JSON and end-of-file databases all live in it): every database this
        # ingest needs is opened by it
        monkeypatch.setattr(_process_db, "_DBS", {})
        monkeypatch.setattr(duckdb, "connect", counting)
        opened.clear()
        info = ingest(_dump(tmp_path / f"d{n}", n), store=tmp_path / f"s{n}", workers=1)
        monkeypatch.setattr(duckdb, "connect", real)
        assert info["ranks_count"] == n
        counts[n] = len(opened)
    # CSV reader, JSON reader, end-of-file steps: one each per process (was three per rank)
    assert counts[4] == counts[2] <= 4, counts


def test_detection_reports_each_rank_folder_as_it_goes(tmp_path: Path) -> None:
    seen: list[tuple[int, int]] = []
    info = ingest(
        _dump(tmp_path / "d", 3), store=tmp_path / "s", workers=1, on_detect=lambda d, t: seen.append((d, t))
    )
    assert info["ranks_count"] == 3
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)]
