"""Ingest through executors and into object storage (traceql.distributed, traceql.executors, traceql.store_fs).

A real S3-compatible server (moto's server mode on 127.0.0.1) and a real local Ray (2 CPUs) from the session
fixtures in tests/_cluster.py. The reference for "identical" is the default ingest (process pool, local store,
derived tables from derive.ensure): every table, canonical and derived, row for row, and the findings JSON.
Independent of traceql: the kernel count is the number of data rows of the dump's kernel_details.csv files
(read with the csv module), and the commit-protocol tests check the bucket's objects with s3fs directly.
"""

from __future__ import annotations

import csv
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from traceql import derive, derived_tables, schema
from traceql.errors import StoreError, TraceQLError
from traceql.ingest import ingest
from traceql.stores import open_store
from traceql.synth import article_scenario, write_torch_npu_dump

RUN = "job8"
TABLES = list(schema.TABLE_NAMES) + list(derived_tables.names())


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 8-rank synthetic cluster (the article's story: rank 3 runs the unfused LayerNorm; one slow rank, so no two ranks tie as the last to arrive at a collective, see the report on arg_max ties)."""
    out = tmp_path_factory.mktemp("cluster8") / "job"
    write_torch_npu_dump(article_scenario(8, steps=2, slow_ranks=(3,)), out, aic_metrics="Memory")
    return out


@pytest.fixture(scope="module")
def reference(dump: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("ref") / "store"
    ingest(dump, store=root, name=RUN, workers=2)
    assert derive.prepare(open_store(root), [RUN], workers=2) == []
    return snapshot(str(root))


def snapshot(root: str, with_findings: bool = True) -> dict[str, Any]:
    """Every table's rows (sorted) and the findings JSON of RUN, with the store's root blanked out (the
    findings' suggested commands name the store). with_findings=False: the tables only (the findings are a
    function of the tables, compared in full by the executor and store tests above)."""
    from traceql import findings
    from traceql.engine import connect

    con = connect(root, runs=[RUN])
    tables = {}
    for t in TABLES:
        # kernel_bytes.kid numbers kernels in scan order (a join key used with run and rank only): the local
        # build numbers small ranks in groups of one session, a Ray task each rank alone
        cols = "* EXCLUDE (kid)" if t == "kernel_bytes" else "*"
        rows = con.execute(f"SELECT {cols} FROM {t}").fetchall()
        tables[t] = sorted(rows, key=repr)
    con.close()
    if not with_findings:
        return {"tables": tables}
    rep = findings.evaluate(root, RUN, device="ascend910b").to_dict()
    text = json.dumps(rep, sort_keys=True, default=str).replace(root, "<store>")
    return {"tables": tables, "findings": json.loads(text)}


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    for t in TABLES:
        assert len(got["tables"][t]) == len(want["tables"][t]), t
        assert got["tables"][t] == want["tables"][t], t
    if "findings" in got:
        assert got["findings"] == want["findings"]


def csv_kernels(dump: Path) -> int:
    n = 0
    for f in dump.rglob("kernel_details.csv"):
        with f.open(newline="") as fh:
            n += sum(1 for _ in csv.reader(fh)) - 1
    return n


def test_reference_matches_the_raw_files(dump: Path, reference: dict[str, Any]) -> None:
    assert len(reference["tables"]["kernels"]) == csv_kernels(dump) > 0
    fired = {f["id"] for f in reference["findings"]["findings"] if f["fired"]}
    assert fired  # the planted story fires something: an empty findings list would compare equal trivially


@pytest.fixture(scope="module")
def s3_ingested(dump: Path, moto_endpoint: str) -> tuple[str, dict[str, Any]]:
    """The dump ingested once into a fresh s3:// store (local pool); read-only for the tests that use it."""
    import uuid

    import s3fs

    bucket = f"tq-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem().mkdir(bucket)
    root = f"s3://{bucket}/traceql"
    return root, ingest(dump, store=root, name=RUN, workers=2)


def test_s3_store_gives_identical_tables_and_findings(
    s3_ingested: tuple[str, dict[str, Any]], reference: dict[str, Any]
) -> None:
    s3_root, info = s3_ingested
    st = open_store(s3_root)
    assert type(st).__name__ == "ObjectStore" and list(st.runs()) == [RUN]
    assert derived_tables.stored_for(st.run(RUN))  # the derived tables came with the run
    assert info["ranks_count"] == 8
    assert_same(snapshot(s3_root), reference)


def test_ray_gives_identical_tables_and_findings(
    dump: Path, tmp_path: Path, ray_local: Any, reference: dict[str, Any]
) -> None:
    from traceql.executors.ray import RayExecutor

    root = tmp_path / "store"
    ex = RayExecutor()
    done: list[int] = []
    ingest(dump, store=root, name=RUN, executor=ex, on_bytes=lambda d, t: done.append(d))
    # the bar ends at the bytes of every rank's profiler output folder (what the parsers read; traceql.progress)
    want = sum(
        p.stat().st_size for p in dump.rglob("*") if p.is_file() and "ASCEND_PROFILER_OUTPUT" in p.parts
    )
    assert done and done[-1] == want and done == sorted(done)
    assert_same(snapshot(str(root)), reference)


def test_ray_tasks_publish_their_bytes_while_they_run(ray_local: Any, tmp_path: Path) -> None:
    """Progress inside a rank: a task reading a file in four timed chunks is seen part way by the driver
    (its UnitProgress writes to the executor's board, a Ray actor; the driver polls it as the CLI bar does)."""
    from traceql import progress
    from traceql.executors.ray import RayExecutor

    data = tmp_path / "data.bin"
    data.write_bytes(b"x" * (4 << 20))

    def read_slowly(slot: int, path: str, size: int) -> int:
        import time as _t

        from traceql import progress as _p

        with _p.UnitProgress(slot, size, period_s=0.05), open(path, "rb") as fh:
            while fh.read(1 << 20):
                _t.sleep(0.5)
        return size

    ex = RayExecutor()
    size = data.stat().st_size
    seen: list[int] = []
    with progress.polling(ex.progress_board(1), [size], lambda d, t: seen.append(d)) as bar:
        for i, _r in ex.map(read_slowly, [(0, str(data), size)]):
            bar.finished(i)
    assert seen[-1] == size and seen == sorted(seen)
    assert any(0 < v < size for v in seen), seen  # moved before the task finished


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc arenas: Linux only")
def test_ray_tasks_run_in_workers_with_the_malloc_arena_cap(
    ray_local: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """traceql's Ray tasks get the arena cap the local pool's workers get (traceql._procs), through their
    runtime_env; a plain Ray task on the same cluster shows the test can fail."""
    import _arenas

    from traceql._procs import MALLOC_ARENAS
    from traceql.executors.ray import RayExecutor

    ray_local.cloudpickle.register_pickle_by_value(_arenas)  # a Ray worker cannot import tests/_arenas.py
    probe = _arenas.heaps_with_8_allocating_threads
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    plain = ray_local.get(ray_local.remote(probe).remote(), timeout=120)
    if plain <= MALLOC_ARENAS:
        pytest.skip(f"a Ray worker made {plain} arenas for 8 threads without the cap: nothing to tell apart")
    ((_, capped),) = list(RayExecutor().map(probe, [()]))
    assert capped <= MALLOC_ARENAS < plain


# ---- traceql sql and views.sql on an s3:// store; writes to other fsspec stores ------------------------
def test_sql_on_an_s3_store_reads_its_tables_and_nothing_else(
    s3_ingested: tuple[str, dict[str, Any]], dump: Path, cli: Any
) -> None:
    s3_root, _info = s3_ingested
    r = cli("sql", "--store", s3_root, "--format", "json", "SELECT count(*) AS n FROM kernels")
    assert r.code == 0, r
    assert json.loads(r.out) == [{"n": csv_kernels(dump)}]
    # the sandbox admits the store's runs/ prefix only: the run records beside it are refused, in one line
    r = cli("sql", "--store", s3_root, f"SELECT * FROM read_json_auto('{s3_root}/manifest.d/*.json')")
    assert r.code == 1 and "Permission Error" in r.err and len(r.err.strip().splitlines()) == 1, r


def test_views_sql_on_an_s3_store_recreates_the_views(
    s3_ingested: tuple[str, dict[str, Any]], dump: Path
) -> None:
    """views.sql as the duckdb shell runs it: statement by statement, the s3:// paths read through s3fs
    (registered on the connection: the shell would use its httpfs extension, which this machine cannot fetch)."""
    import duckdb
    import s3fs

    s3_root, _info = s3_ingested
    fs = s3fs.S3FileSystem()
    fs.invalidate_cache()
    text = fs.cat_file(f"{s3_root.split('://', 1)[1]}/views.sql").decode()
    con = duckdb.connect(":memory:")
    con.register_filesystem(fs)
    for stmt in duckdb.extract_statements(text):
        con.execute(stmt.query)
    assert con.execute("SELECT count(*) FROM kernels").fetchone() == (csv_kernels(dump),)
    assert con.execute("SELECT run_id FROM runs").fetchall() == [(RUN,)]


def test_writes_to_a_non_s3_fsspec_store_are_refused_before_parsing(dump: Path) -> None:
    fsspec = pytest.importorskip("fsspec", reason="fsspec comes with the s3 extra: pip install -e '.[s3]'")

    with pytest.raises(
        StoreError, match=r"^store memory://tq-w: traceql writes runs only to a local folder"
    ) as e:
        ingest(dump, store="memory://tq-w", name=RUN, workers=1)
    assert "\n" not in str(e.value)
    assert fsspec.filesystem("memory").find("/tq-w") == []  # nothing was written


# ---- a dump on object storage (traceql.dump_fs) ----------------------------------------------------------
@pytest.fixture(scope="module")
def s3_dump(dump: Path, moto_endpoint: str) -> str:
    """The same 8-rank dump uploaded to the moto server (s3fs directly, not traceql)."""
    import uuid

    import s3fs

    fs = s3fs.S3FileSystem()
    bucket = f"dump-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    fs.put(str(dump), f"{bucket}/job42", recursive=True)
    return f"s3://{bucket}/job42/"


def _dump_objects(url: str) -> dict[str, Any]:
    """Every object under the dump with its size and ETag: what 'nothing written to the dump' compares."""
    import s3fs

    fs = s3fs.S3FileSystem()
    fs.invalidate_cache()
    bucket = url.split("://", 1)[1].split("/", 1)[0]
    return {k: (v["size"], v.get("ETag")) for k, v in fs.find(bucket, detail=True).items()}


def test_s3_dump_with_the_local_pool_gives_identical_tables(
    s3_dump: str, dump: Path, tmp_path: Path, reference: dict[str, Any]
) -> None:
    before = _dump_objects(s3_dump)
    assert len(before) == sum(1 for p in dump.rglob("*") if p.is_file())  # the upload is the whole dump
    root = tmp_path / "store"
    info = ingest(s3_dump, store=root, name=RUN, workers=2)
    assert info["ranks"] == list(range(8)) and info["source"] == s3_dump.rstrip("/")
    assert_same(snapshot(str(root), with_findings=False), reference)
    assert _dump_objects(s3_dump) == before  # nothing written to (or removed from) the dump's bucket


def test_s3_dump_through_ray_into_an_s3_store_gives_identical_tables(
    s3_dump: str, dump: Path, s3_root: str, ray_local: Any, reference: dict[str, Any]
) -> None:
    from traceql.executors.ray import RayExecutor

    before = _dump_objects(s3_dump)
    done: list[int] = []
    ingest(s3_dump, store=s3_root, name=RUN, executor=RayExecutor(), on_bytes=lambda d, t: done.append(d))
    # the bar's total: the bytes of every rank's profiler output folder, counted on the local copy of the dump
    want = sum(
        p.stat().st_size for p in dump.rglob("*") if p.is_file() and "ASCEND_PROFILER_OUTPUT" in p.parts
    )
    assert done and done[-1] == want and done == sorted(done)
    assert_same(snapshot(s3_root, with_findings=False), reference)
    assert _dump_objects(s3_dump) == before


def test_cli_ingests_a_dump_url(moto_endpoint: str, tmp_path: Path, cli: Any) -> None:
    """The CLI keeps the URL's '//' (a Path argument would fold it to s3:/...): the bundled 2-rank sample."""
    import s3fs

    sample = Path(__file__).resolve().parents[1] / "sample_traces" / "torch_npu_2rank"
    fs = s3fs.S3FileSystem()
    fs.mkdir("tq-cli-dump")
    fs.put(str(sample), "tq-cli-dump/demo", recursive=True)
    store = tmp_path / "s"
    r = cli("ingest", "s3://tq-cli-dump/demo/", "--store", store, "-q", "--no-check", "--no-prepare")
    assert r.code == 0, r
    r = cli("runs", "--store", store, "--format", "json")
    assert json.loads(r.out)["demo"]["source"] == "s3://tq-cli-dump/demo"
    r = cli("sql", "--store", store, "--format", "json", "SELECT count(*) AS n FROM kernels")
    assert json.loads(r.out) == [{"n": csv_kernels(sample)}]


def test_s3_dump_errors_name_the_url(moto_endpoint: str, tmp_path: Path) -> None:
    import s3fs

    fs = s3fs.S3FileSystem()
    fs.mkdir("tq-bad-dump")
    with pytest.raises(TraceQLError, match=r"^s3://tq-bad-dump/none: no such file") as e:
        ingest("s3://tq-bad-dump/none", store=tmp_path / "s", name=RUN, workers=1)
    fs.pipe_file("tq-bad-dump/junk/notes.txt", b"hello")
    with pytest.raises(TraceQLError, match=r"^s3://tq-bad-dump/junk: no known profiler dump") as e:
        ingest("s3://tq-bad-dump/junk/", store=tmp_path / "s", name=RUN, workers=1)
    assert "\n" not in str(e.value) and "traceql-sniff" not in str(e.value)
    assert not (tmp_path / "s").exists() or open_store(tmp_path / "s").runs() == {}


# ---- the commit protocol on object storage -------------------------------------------------------------
def _objects(root: str) -> list[str]:
    import s3fs

    fs = s3fs.S3FileSystem()
    fs.invalidate_cache()
    return sorted(fs.find(root.split("://", 1)[1]))


def test_uploaded_files_without_a_record_are_invisible_and_one_writer_wins(
    s3_root: str, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    st = open_store(s3_root)
    local = tmp_path / "gen"
    (local / "kernels").mkdir(parents=True)
    pq.write_table(pa.table({"name": ["a"]}), local / "kernels" / "r0-0.parquet")
    info = {"files": {"kernels": ["kernels/r0-0.parquet"]}, "rows": {"kernels": 1}, "ranks": [0]}
    gens = [st.new_generation("r"), st.new_generation("r")]
    for g in gens:
        st.upload(local, g, ["kernels/r0-0.parquet"])
    assert not st.exists() or st.runs() == {}  # both generations uploaded, neither listed
    st.publish("r", gens[0], info)
    with pytest.raises(StoreError, match="differs only in case"):
        st.publish("R", gens[1], info)  # case-folded: the same record key
    assert list(open_store(s3_root).runs()) == ["r"]
    keys = _objects(s3_root)
    assert any(gens[0] in k for k in keys) and not any(gens[1] in k for k in keys)  # the loser's prefix went


def test_conditional_put_refuses_a_stale_replace(s3_root: str) -> None:
    from traceql.store_fs import conditional_put

    st = open_store(s3_root)
    key = f"{st.base}/manifest.d/x.json"
    conditional_put(st.fs, key, b"{}", None)
    with pytest.raises(FileExistsError):
        conditional_put(st.fs, key, b"{}", None)  # If-None-Match: the key exists
    etag = st.fs.info(key)["ETag"]
    conditional_put(st.fs, key, b"{ }", etag)  # If-Match with the current etag: accepted
    with pytest.raises(FileExistsError):
        conditional_put(st.fs, key, b"{  }", etag)  # the etag changed meanwhile: refused


def test_concurrent_ingests_of_one_name_leave_exactly_one(s3_root: str) -> None:
    # the bundled 2-rank sample: the commit protocol is under test here, not the tables (8 ranks cost 2 min)
    dump = Path(__file__).resolve().parents[1] / "sample_traces" / "torch_npu_2rank"
    errors: list[BaseException] = []
    ok: list[dict[str, Any]] = []
    barrier = threading.Barrier(2)

    def one() -> None:
        barrier.wait()
        try:
            ok.append(ingest(dump, store=s3_root, name=RUN, workers=1))
        except TraceQLError as e:
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 1 and len(errors) == 1, (ok, errors)
    assert isinstance(errors[0], StoreError)
    runs = open_store(s3_root).runs()
    assert list(runs) == [RUN]
    gens = {k.split("/runs/", 1)[1].split("/", 1)[0] for k in _objects(s3_root) if "/runs/" in k}
    assert gens == {runs[RUN]["dir"]}  # the loser removed its generation


# ---- a Ray worker killed mid-ingest --------------------------------------------------------------------
def _kill_a_busy_worker(stop: threading.Event, killed: list[int]) -> None:
    """SIGKILL the first Ray worker seen running a task (Ray titles it `ray::_call`), from outside."""
    import psutil

    while not stop.is_set() and not killed:
        for p in psutil.process_iter(["cmdline"]):
            cmd = p.info.get("cmdline") or []
            if cmd and cmd[0].startswith("ray::_call"):
                try:
                    p.kill()
                    killed.append(p.pid)
                except psutil.Error:
                    continue
                break
        time.sleep(0.01)


def _ingest_while_killing(dump: Path, root: Path, max_retries: int) -> tuple[list[int], BaseException | None]:
    from traceql.executors.ray import RayExecutor

    stop, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_a_busy_worker, args=(stop, killed))
    killer.start()
    err: BaseException | None = None
    try:
        ingest(dump, store=root, name=RUN, executor=RayExecutor(max_retries=max_retries))
    except TraceQLError as e:
        err = e
    finally:
        stop.set()
        killer.join()
    return killed, err


def test_killed_ray_worker_is_retried(
    dump: Path, tmp_path: Path, ray_local: Any, reference: dict[str, Any]
) -> None:
    killed, err = _ingest_while_killing(dump, tmp_path / "store", max_retries=3)
    assert killed, "no Ray worker was seen running a task (nothing was killed)"
    assert err is None
    assert_same(snapshot(str(tmp_path / "store"), with_findings=False), reference)


def test_killed_ray_worker_without_retries_fails_cleanly(dump: Path, tmp_path: Path, ray_local: Any) -> None:
    root = tmp_path / "store"
    killed, err = _ingest_while_killing(dump, root, max_retries=0)
    assert killed
    assert err is not None and "Ray could not complete" in str(err) and "\n" not in str(err)
    st = open_store(root)
    assert st.runs() == {}
    staging = root / ".staging"
    assert not staging.exists() or [p.name for p in staging.iterdir()] == []
    runs = root / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []


# ---- tiered mode -----------------------------------------------------------------------------------------
def test_light_ranks_keep_detail_only_for_the_picked_ranks(
    dump: Path, tmp_path: Path, reference: dict[str, Any]
) -> None:
    from traceql.engine import connect

    root = tmp_path / "store"
    info = ingest(dump, store=root, name=RUN, workers=2, ranks="light+2")
    picked = info["tier"]["ranks"]
    # planted: rank 3 runs the unfused LayerNorm, so it is the job's slowest busy rank and not its fastest;
    # rank 2 was asked for
    why = info["tier"]["why"]
    slowest = [int(r) for r, w in why.items() if any(x.startswith("slowest in job") for x in w)]
    fastest = [int(r) for r, w in why.items() if any(x.startswith("fastest in job") for x in w)]
    assert slowest == [3] and fastest[0] != 3
    assert 2 in picked and len(picked) < 8
    con = connect(root, runs=[RUN])
    ref = reference["tables"]
    # the light pass skipped the detail files of the ranks it did not mark (the parser's own list of files read)
    unmarked = [r for r in range(8) if r not in picked]
    assert unmarked and all("kernel_details.csv" not in info["meta"][str(r)]["files"] for r in unmarked)
    assert all("kernel_details.csv" in info["meta"][str(r)]["files"] for r in picked)
    for t in ("steps", "comm_ops", "comm_bandwidth", "comm_matrix", "counters", "run_meta"):
        # light tables: every rank, as in the full ingest
        assert sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr) == ref[t], t
    ranks_with_kernels = {r for (r,) in con.execute("SELECT DISTINCT rank FROM kernels").fetchall()}
    assert ranks_with_kernels == set(picked)
    kernels = sorted(con.execute("SELECT * FROM kernels").fetchall(), key=repr)
    rank_col = [c.name for c in schema.columns("kernels")].index("rank")
    assert kernels == [row for row in ref["kernels"] if row[rank_col] in set(picked)]
    assert derived_tables.stored_for(open_store(root).run(RUN))


def test_light_ranks_refuses_an_unknown_rank(dump: Path, tmp_path: Path) -> None:
    with pytest.raises(TraceQLError, match="rank 99 is not in the dump"):
        ingest(dump, store=tmp_path / "s", name=RUN, workers=1, ranks="light+99")
    assert open_store(tmp_path / "s").runs() == {}
