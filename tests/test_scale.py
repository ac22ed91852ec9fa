"""Scale properties that hold at any size, checked on small-but-not-tiny synthetic dumps (traceql.synth, the real
torch_npu formats). Functional assertions only: the timings and memory peaks live in benchmarks/bench_ingest.py.

- a truncated trace fails on the truncation, naming the byte offset, before the body is parsed;
- re-opening a store and querying it never touches the dump (it may be gone);
- the store is partitioned by run and rank, and every time-series file is sorted by ts_ns with row-group
  statistics (what lets DuckDB skip row groups by time and files by run/rank);
- parallel ingest of a cluster stores exactly what serial ingest stores.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from traceql.synth import write_cluster
from traceql.synth.large import large_kernel_details

OUT = "ASCEND_PROFILER_OUTPUT"
TIME_TABLES = ("kernels", "host_ops", "counters", "comm_ops", "steps", "memory")


@pytest.fixture(scope="module")
def cluster_2x6mb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 ranks of full torch_npu dumps, ~6 MB each (trace_view.json ~5 MB: every event kind, replayed)."""
    root = tmp_path_factory.mktemp("cluster") / "job"
    write_cluster(root, 2, 6_000_000, seed=2)
    return root


def _copy_prefix(src: Path, dst: Path, n: int) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with open(src, "rb") as fh:
        dst.write_bytes(fh.read(n))


def _torch_npu_folder(root: Path, trace: bytes) -> Path:
    folder = root / "x_ascend_pt"
    (folder / OUT).mkdir(parents=True)
    (folder / OUT / "trace_view.json").write_bytes(trace)
    return folder


# ---- truncated dumps ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("fraction", [0.05, 0.5, 0.999])
def test_truncated_trace_view_names_the_byte_offset(
    tmp_path: Path, cli, store: Path, cluster_2x6mb: Path, fraction: float
):
    data = (cluster_2x6mb / "rank0_ascend_pt" / OUT / "trace_view.json").read_bytes()
    cut = int(len(data) * fraction)
    while data[cut - 1 : cut] in (b"]", b" ", b"}", b","):  # a cut must not look like a closed array
        cut -= 1
    # Garbage early in the body: a reader that parsed the body before checking the end would report this
    # instead. The message must be about the truncation, found from the end of the file, before parsing.
    body = bytearray(data[:cut])
    body[1000:1010] = b"\x00GARBAGE\x00\x00"
    folder = _torch_npu_folder(tmp_path, bytes(body))
    res = cli("ingest", folder, "--store", store, "--quiet", "--no-check")
    assert res.code == 1, res
    assert "trace_view.json" in res.err and "truncated" in res.err.lower()
    assert f"byte {cut}" in res.err, res.err  # the offset where the file stops
    assert "Traceback" not in res.err
    assert (
        not (store / "manifest.json").exists()
        or json.loads((store / "manifest.json").read_text())["runs"] == {}
    )


def test_truncated_rank_fails_the_cluster_ingest_naming_it(
    tmp_path: Path, cli, store: Path, cluster_2x6mb: Path
):
    job = tmp_path / "job"
    shutil.copytree(cluster_2x6mb, job)
    victim = job / "rank1_ascend_pt" / OUT / "trace_view.json"
    size = victim.stat().st_size
    cut = size * 2 // 3
    _copy_prefix(cluster_2x6mb / "rank1_ascend_pt" / OUT / "trace_view.json", victim, cut)
    while victim.read_bytes()[-1:] in (b"]", b" ", b"}", b","):
        cut -= 1
        _copy_prefix(cluster_2x6mb / "rank1_ascend_pt" / OUT / "trace_view.json", victim, cut)
    res = cli("ingest", job, "--store", store, "--quiet", "--no-check", "-j", "2")
    assert res.code == 1, res
    assert "rank1_ascend_pt" in res.err and f"byte {cut}" in res.err, res.err
    assert not (store / "runs").exists() or not any(
        (store / "runs").iterdir()
    )  # nothing half-written is visible


@pytest.mark.parametrize("fraction", [0.3, 0.9])
def test_truncated_kernel_details_fails_before_parsing(
    tmp_path: Path, cli, store: Path, cluster_2x6mb: Path, fraction: float
):
    """A CSV cut mid-row would otherwise store a half-written last row (a start time cut to its first digits is
    a valid but wrong number). Refused up front, naming the byte offset, before the trace_view is parsed."""
    dump = tmp_path / "rank0_ascend_pt"
    shutil.copytree(cluster_2x6mb / "rank0_ascend_pt", dump)
    kd = dump / OUT / "kernel_details.csv"
    data = kd.read_bytes()
    # cut a few bytes into the row that holds `fraction` of the file, so the last row has fewer fields than the
    # header (a cut inside a row's last field cannot be told from a whole unterminated row: that one is read,
    # with a warning)
    cut = data.rfind(b"\n", 0, int(len(data) * fraction)) + 8
    kd.write_bytes(data[:cut])
    tv = dump / OUT / "trace_view.json"
    tv.write_bytes(b"[" + b"\x00" * 1000 + tv.read_bytes()[1:])  # would fail differently if parsed first
    res = cli("ingest", dump, "--store", store, "--quiet", "--no-check")
    assert res.code == 1, res
    assert "kernel_details.csv" in res.err and "truncated CSV" in res.err and f"byte {cut}" in res.err, (
        res.err
    )


def test_csv_cut_at_a_row_boundary_is_ingested(tmp_path: Path, cli, store: Path, cluster_2x6mb: Path):
    """The check only looks at the last byte: a file that ends with a whole row is complete as far as anyone
    can tell, and is read (rows up to the cut)."""
    dump = tmp_path / "rank0_ascend_pt"
    shutil.copytree(cluster_2x6mb / "rank0_ascend_pt", dump)
    kd = dump / OUT / "kernel_details.csv"
    lines = kd.read_bytes().split(b"\r\n")
    kd.write_bytes(b"\r\n".join(lines[:101]) + b"\r\n")  # header + 100 rows
    assert cli("ingest", dump, "--store", store, "--name", "r", "--quiet", "--no-check").code == 0
    n = cli("sql", "SELECT count(*) AS n FROM kernels", "--store", store, "--format", "csv")
    assert n.out.split()[-1] == "100", n


# ---- bounded memory: the communication files are streamed one step at a time -------------------------------
def test_json_object_items_streams_exactly_what_json_loads_reads(
    monkeypatch: pytest.MonkeyPatch, cluster_2x6mb: Path, tmp_path: Path
):
    from decimal import Decimal

    import traceql.parsers._ascend_text as tn

    monkeypatch.setattr(tn, "_READ_CHARS", 997)  # every value straddles reads; the buffer is compacted often
    files = sorted(cluster_2x6mb.glob(f"*/{OUT}/communication*.json"))
    assert len(files) == 4 and all(f.stat().st_size > 100_000 for f in files)
    for f in files:
        expected = json.loads(f.read_text(encoding="utf-8"), parse_float=Decimal)  # the independent reader
        assert list(tn.json_object_items(f, "x", "not an object")) == list(expected.items()), f
    odd = tmp_path / "odd.json"
    odd.write_bytes(b'\xef\xbb\xbf { "a\\"b" : {"x": [1, 2.50, "\xc3\xa9"]} ,"c":{} }\n')
    assert list(tn.json_object_items(odd, "x", "no")) == [
        ('a"b', {"x": [1, Decimal("2.50"), "é"]}),
        ("c", {}),
    ]
    for data, message in [
        (b"", "empty file"),
        (b"[1]", "not an object"),
        (b'{"a": 1 "b": 2}', "Expecting ',' delimiter at char 8"),
        (b'{"a": 1} x', "Extra data"),
        (b'{"a": "\xff"}', "not UTF-8 text (byte 0xff at offset 7)"),
        (b'{"a": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "nested too deeply"),
    ]:
        bad = tmp_path / "bad.json"
        bad.write_bytes(data)
        with pytest.raises(tn.BadTraceError, match=re.escape(message)):
            list(tn.json_object_items(bad, "x", "not an object"))


def test_communication_matrix_memory_does_not_grow_with_the_file(
    monkeypatch: pytest.MonkeyPatch, cluster_2x6mb: Path, tmp_path: Path
):
    """json.loads of the whole file held ~7x its size in Python objects; streamed, the peak is one step plus
    FLUSH_ROWS rows: the same for a file 8x larger."""
    import tracemalloc

    import traceql.parsers.torch_npu as tn

    class Sink:
        rows = 0

        def write(self, table: str, data: dict) -> None:
            self.rows += len(next(iter(data.values())))

    steps = json.loads((cluster_2x6mb / "rank0_ascend_pt" / OUT / "communication_matrix.json").read_text())
    values = list(steps.values())
    links_per_copy = sum(len(links) for kinds in values for ops in kinds.values() for links in ops.values())

    def peak_for(copies: int) -> int:
        f = tmp_path / f"matrix{copies}.json"
        f.write_text(json.dumps({f"step{i}": v for i, v in enumerate(values * copies)}))
        sink = Sink()
        tn.parse_communication_matrix(f, sink)  # warm-up: one-time allocations (imports, caches)
        tracemalloc.start()
        try:
            n = tn.parse_communication_matrix(f, sink)  # type: ignore[arg-type]
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert n == links_per_copy * copies
        return peak

    monkeypatch.setattr(tn, "FLUSH_ROWS", 50)
    import traceql.parsers._ascend_text as ascend_text

    monkeypatch.setattr(ascend_text, "_READ_CHARS", 8 * 1024)
    small, big = peak_for(1), peak_for(8)
    assert big < 1.5 * small, (small, big)  # whole-file json.loads: ~8x


# ---- re-open without re-parsing ----------------------------------------------------------------------------
def _snapshot(store: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(store)): (p.stat().st_size, p.stat().st_mtime_ns) for p in store.rglob("*.parquet")
    }


def test_reopen_queries_the_store_without_the_dump(tmp_path: Path, cli, store: Path, cluster_2x6mb: Path):
    job = tmp_path / "job"
    shutil.copytree(cluster_2x6mb, job)
    assert cli("ingest", job, "--store", store, "--name", "r", "--quiet", "--no-check").code == 0
    sql = (
        "SELECT rank, count(*) AS n, sum(dur_ns) AS busy, min(ts_ns) AS t0 FROM kernels GROUP BY rank "
        "UNION ALL SELECT rank, count(*), sum(dur_ns), min(ts_ns) FROM comm_ops GROUP BY rank ORDER BY 1, 2"
    )
    before = cli("sql", sql, "--store", store, "--format", "csv")
    metric = cli("query", "op_hbm_bytes", "--store", store, "--run", "r", "--format", "csv")
    assert before.code == 0 and metric.code == 0, (before, metric)
    files = _snapshot(store)
    manifest = (store / "manifest.json").read_bytes()

    shutil.rmtree(job)  # the dump is gone: anything that re-parsed would fail now
    after = cli("sql", sql, "--store", store, "--format", "csv")
    metric_after = cli("query", "op_hbm_bytes", "--store", store, "--run", "r", "--format", "csv")
    assert after.code == 0 and after.out == before.out
    assert metric_after.code == 0 and metric_after.out == metric.out
    assert _snapshot(store) == files  # nothing rewritten
    assert (store / "manifest.json").read_bytes() == manifest
    rows = list(csv.DictReader(after.out.splitlines()))
    assert {r["rank"] for r in rows} == {"0", "1"} and all(int(r["n"]) > 0 for r in rows)


# ---- layout: partitioned by run and rank, sorted by time ---------------------------------------------------
def test_store_is_partitioned_by_run_and_rank_and_sorted_by_time(store: Path, cli, cluster_2x6mb: Path):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    assert cli("ingest", cluster_2x6mb, "--store", store, "--name", "job", "--quiet", "--no-check").code == 0
    files = sorted((store / "runs").rglob("*.parquet"))
    assert files
    seen_time_tables = set()
    for f in files:
        rel = f.relative_to(store / "runs")
        # runs/<run>.<generation>/<table>/r<rank>-<tag>.parquet
        m = re.fullmatch(
            r"(?P<run>[^/]+)\.[0-9a-f]{12}/(?P<table>[a-z_0-9]+)/r(?P<rank>-?\d+)-[\w-]+\.parquet", str(rel)
        )
        assert m, rel
        t = pq.read_table(f, columns=None)
        assert set(t.column("run_id").to_pylist()) == {m["run"]}, rel
        assert set(t.column("rank").to_pylist()) <= {int(m["rank"])}, rel  # one rank per file
        if "ts_ns" not in t.schema.names or t.num_rows < 2:
            continue
        ts = pc.drop_null(t.column("ts_ns")).combine_chunks()
        assert (
            t.column("ts_ns").null_count == 0 or pc.all(pc.is_null(t.column("ts_ns").slice(len(ts)))).as_py()
        ), f"{rel}: null ts_ns must sort last"
        assert pc.all(pc.greater_equal(ts.slice(1), ts.slice(0, len(ts) - 1))).as_py(), (
            f"{rel}: not sorted by ts_ns"
        )
        md = pq.ParquetFile(f).metadata
        col = t.schema.get_field_index("ts_ns")
        for g in range(md.num_row_groups):
            stats = md.row_group(g).column(col).statistics
            assert stats is not None and stats.has_min_max, f"{rel}: row group {g} lacks ts_ns min/max"
        if m["table"] in TIME_TABLES:
            seen_time_tables.add(m["table"])
    # a cluster of full dumps fills these, so the sort check above really ran on them
    assert {"kernels", "host_ops", "counters", "comm_ops", "steps"} <= seen_time_tables


# ---- parallel == serial ------------------------------------------------------------------------------------
def test_parallel_cluster_ingest_stores_what_serial_ingest_stores(tmp_path: Path, cli, cluster_2x6mb: Path):
    stores = {}
    for j in ("1", "2"):
        stores[j] = tmp_path / f"store-j{j}"
        assert (
            cli(
                "ingest",
                cluster_2x6mb,
                "--store",
                stores[j],
                "--name",
                "job",
                "--quiet",
                "--no-check",
                "-j",
                j,
            ).code
            == 0
        )
    # an order-independent digest per table: row count and a hash over the rows (sorted), from DuckDB
    sql = "SELECT count(*) AS n, sum(hash(t)) AS h FROM {t} t"  # t: the whole row as a struct
    for table in ("kernels", "host_ops", "counters", "flows", "comm_ops", "comm_matrix", "steps", "memory"):
        outs = [cli("sql", sql.format(t=table), "--store", stores[j], "--format", "csv") for j in ("1", "2")]
        assert outs[0].code == 0, outs[0]
        assert outs[0].out == outs[1].out, table
        assert int(list(csv.DictReader(outs[0].out.splitlines()))[0]["n"]) > 0, table


# ---- the benchmark generators ------------------------------------------------------------------------------
def test_large_kernel_details_is_exact_sorted_and_deterministic(tmp_path: Path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    info = large_kernel_details(a, 15_001, seed=4)  # one replayed second is 13,771 rows: cut in the second
    large_kernel_details(b, 15_001, seed=4)
    assert a.read_bytes() == b.read_bytes()
    with open(a, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    assert len(header) == 46 and header[8] == "Start Time(us)"
    assert len(body) == 15_001 == info["rows"] and all(len(r) == 46 for r in body)
    assert info["bytes"] == os.path.getsize(a)
    # start times strictly as torch_npu writes them ("<µs>.<3 digits>\t") and non-decreasing across seconds
    starts = [r[8] for r in body]
    assert all(re.fullmatch(r"\d{16}\.\d{3}\t", s) for s in starts)
    ns = [int(s.strip().replace(".", "")) for s in starts]
    assert all(x <= y for x, y in zip(ns[:-1], ns[1:], strict=True))
    assert ns[-1] - ns[0] > 1_000_000_000  # two replayed seconds


def test_ingest_reports_bytes_read_while_parsing_one_big_file(tmp_path: Path) -> None:
    """The progress bar counts input bytes (traceql.progress), so a single large trace moves before it is done:
    reports never go backwards, never pass the total, and end at the total (the file's size, by os.stat)."""
    import time

    from traceql.ingest import ingest
    from traceql.synth.large import large_trace_view

    folder = tmp_path / "big_ascend_pt"
    tv = folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    tv.parent.mkdir(parents=True)
    large_trace_view(tv, 60_000_000, seed=1)
    size = tv.stat().st_size
    seen: list[tuple[int, int]] = []
    t0 = time.monotonic()
    ingest(folder, tmp_path / "store", name="big", workers=1, on_bytes=lambda d, t: seen.append((d, t)))
    took = time.monotonic() - t0
    assert seen[-1] == (size, size)
    assert all(t == size for _d, t in seen)
    done = [d for d, _t in seen]
    assert done == sorted(done) and done[-1] == size
    if took > 1.5:  # reports come every 0.2 s: a parse this long must have shown some in the middle
        assert any(0 < d < size for d in done), seen


def test_trace_view_in_profiler_order_needs_no_post_write_sort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch_npu writes counters in time order across series (0 inversions over 4.3k C events in each real
    level0/level1 trace_view.json) and the host process's events as one block before the CANN/device events. The
    parser keeps each such stream in its own file part, so none of the files needs the post-write sort (a full
    external sort: 1.3 s of a 1 GB ingest when percent counters were appended after the others)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import traceql.rank_writer as rw_mod
    from traceql.ingest import ingest
    from traceql.synth.large import large_trace_view

    sorted_files: list[Path] = []
    real_sort = rw_mod.sort_parquet_by_time
    monkeypatch.setattr(
        rw_mod, "sort_parquet_by_time", lambda p, *more: (sorted_files.append(p), real_sort(p, *more))
    )
    dump = tmp_path / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    large_trace_view(dump, 3_000_000, seed=1)
    st = tmp_path / "s"
    ingest(dump, st, name="tv", workers=1)
    assert sorted_files == []
    from traceql.store import Store

    run = Store(st).run_path("tv")
    host_files = sorted(p.name for p in (run / "host_ops").glob("*.parquet"))
    counter_files = sorted(p.name for p in (run / "counters").glob("*.parquet"))
    assert host_files == ["r0-0-cann.parquet", "r0-0.parquet"]
    assert counter_files == ["r0-0-pct.parquet", "r0-0.parquet"]  # LLC Hit Rate(%) rescaled at the end
    for f in [*(run / "host_ops").glob("*.parquet"), *(run / "counters").glob("*.parquet")]:
        ts = pq.read_table(f, columns=["ts_ns"]).column("ts_ns").combine_chunks()
        assert pc.all(pc.greater_equal(ts.slice(1), ts.slice(0, len(ts) - 1))).as_py(), f
    cann = pq.read_table(run / "host_ops" / "r0-0-cann.parquet", columns=["cat"]).column("cat")
    assert set(cann.to_pylist()) == {"cann"}
