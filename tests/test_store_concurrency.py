"""The store under interruption and concurrency (issue 23): random kills over `ingest --replace`, readers
during replaces and removals, staging dirs owned by live ingests, store paths with glob characters, run names
that differ only in case, workers of a killed parent, temp dirs, and dumps that must not be touched.

Real processes and signals throughout: the kill loop and the reader/writer loops run tests/_store_harness.py
in subprocesses; the CLI runs through tests/test_store_safety.py's driver (its slow test parser).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DB_LEVEL1, SAMPLES, real
from test_store_safety import (
    assert_reaped,
    assert_store_healthy,
    env,
    kill_tree,
    run_cli,
    slow_file,
    start_cli,
    wait_for,
)

from traceql.errors import StoreError
from traceql.rank_writer import RankWriter
from traceql.store import Store

HARNESS = Path(__file__).with_name("_store_harness.py")
KILLS = int(os.environ.get("TRACEQL_TEST_KILLS", "100"))  # a longer loop: TRACEQL_TEST_KILLS=1000


def harness(*args: object, timeout: float = 300) -> dict:  # type: ignore[type-arg]
    r = subprocess.run(
        [sys.executable, str(HARNESS), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def make_run(store: Path, run_id: str, n: int, replace: bool = False) -> None:
    st = Store(store)
    staging = st.new_staging()
    w = RankWriter(staging, run_id, 0)
    w.write("kernels", {"name": [f"k{i}" for i in range(n)], "ts_ns": list(range(n)), "dur_ns": [5] * n})
    w.close()
    st.commit(
        staging,
        run_id,
        {
            "source": "t",
            "format": "canonical",
            "ranks": [0],
            "ranks_count": 1,
            "rows": w.rows,
            "files": w.files,
        },
        replace=replace,
    )


# ---- 1. kill -9 at random moments of `ingest --replace` --------------------------------------------------


def test_random_kills_over_ingest_replace_leave_the_old_or_the_new_run(tmp_path: Path) -> None:
    """>= 100 SIGKILLs at random moments over one ingest's duration (parse, staging, rename, fsync, manifest,
    reap): after every one the store opens, every listed file is there with the rows the manifest says, the
    replaced run is exactly the old or the new version, and the other run is untouched (the harness asserts
    all of it after each kill; see tests/_store_harness.py)."""
    res = harness("kill-loop", tmp_path / "store", KILLS, 23)
    o = res["outcomes"]
    assert o["killed"] >= KILLS
    assert o["old"] + o["new"] == o["killed"] + o["exited"]
    # kills landed in every phase: before the commit (old kept) and inside it (an unlisted generation dir left)
    assert o["old"] > 0 and o["new"] > 0 and o["left_orphan_run_dir"] > 0 and o["left_staging"] > 0, o
    # and the next ingest reaped everything they left
    assert res["after"]["staging_entries"] == 0 and res["after"]["tmp_files"] == 0
    assert res["run_dirs"] == res["listed_dirs"], res


# ---- 2. staging dirs belong to live ingests -------------------------------------------------------------


def test_a_live_ingests_staging_dir_survives_another_ingest_however_old_it_looks(tmp_path: Path) -> None:
    store = tmp_path / "store"
    started = tmp_path / "started"
    p = start_cli(
        "ingest",
        slow_file(tmp_path / "long.slow", 30, 50, 0.05),
        "--store",
        store,
        "--name",
        "long",
        "-j",
        "1",
        "-q",
        "--no-check",
        STARTED=str(started),
        HOLD_UNTIL=str(tmp_path / "release"),
    )
    try:
        wait_for(tmp_path, "started")
        (staging,) = [d for d in (store / ".staging").iterdir() if d.is_dir()]
        old = time.time() - 7200
        os.utime(staging, (old, old))  # looks two hours old (what broke the mtime rule; NFS skew does it too)
        r = run_cli(
            "ingest",
            slow_file(tmp_path / "other.slow", 1, 5, 0),
            "--store",
            store,
            "--name",
            "other",
            "-q",
            "--no-check",
        )
        assert r.returncode == 0, r.stderr
        assert p.poll() is None, "the long ingest was to be live (held) while the other ran"
        assert staging.is_dir(), "a concurrent ingest reaped a live ingest's staging dir"
        (tmp_path / "release").touch()
        out, err = p.communicate(timeout=60)
    finally:
        kill_tree(p)
    assert p.returncode == 0, err
    assert_store_healthy(store, {"long": 1500, "other": 5})


def test_a_dead_ingests_staging_dir_is_reaped_by_the_next_one(tmp_path: Path) -> None:
    store = tmp_path / "store"
    started = tmp_path / "started"
    p = start_cli(
        "ingest",
        slow_file(tmp_path / "long.slow", 100, 50, 0.05),
        "--store",
        store,
        "--name",
        "dead",
        "-j",
        "1",
        "-q",
        STARTED=str(started),
    )
    wait_for(tmp_path, "started")
    kill_tree(p)
    p.wait(timeout=10)
    assert [d for d in (store / ".staging").iterdir() if d.is_dir()], (
        "expected the killed ingest's staging dir"
    )
    r = run_cli(
        "ingest", slow_file(tmp_path / "x.slow", 1, 5, 0), "--store", store, "--name", "x", "-q", "--no-check"
    )
    assert r.returncode == 0, r.stderr
    assert_reaped(store)


def test_a_commit_checks_every_listed_file_exists_before_the_manifest(tmp_path: Path) -> None:
    store = tmp_path / "store"
    make_run(store, "base", 3)
    before = (store / "manifest.json").read_bytes()
    st = Store(store)
    staging = st.new_staging()
    w = RankWriter(staging, "lost", 0)
    w.write("kernels", {"name": ["a"], "ts_ns": [1], "dur_ns": [1]})
    w.close()
    (staging / w.files["kernels"][0]).unlink()  # what a reaper deleting a live staging dir did
    with pytest.raises(
        StoreError, match=r"r0-0\.parquet: missing from the staging dir of run 'lost'; nothing was committed"
    ):
        st.commit(staging, "lost", {"files": w.files, "rows": w.rows})
    assert (store / "manifest.json").read_bytes() == before
    st.discard(staging)


# ---- 3. readers never fail because of a writer -------------------------------------------------------------


def test_queries_during_replace_and_rm_loops_never_fail(tmp_path: Path) -> None:
    """Two reader processes, 120 queries each (engine.connect, then SQL over the views), while a writer
    replaces and removes a run as fast as it can. Without the readers' lock about half of these fail here
    (`No files found`, or a run's file missing: ~120 of 240 expected); with it, none may."""
    store = tmp_path / "store"
    make_run(store, "base", 30)
    stop = tmp_path / "stop"
    w = subprocess.Popen(
        [sys.executable, str(HARNESS), "writer", store, stop],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        time.sleep(0.3)
        rs = [
            subprocess.Popen(
                [sys.executable, str(HARNESS), "readers", str(store), "120"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env(),
            )
            for _ in range(2)
        ]
        outs = [r.communicate(timeout=300) for r in rs]
    finally:
        stop.touch()
        wout, werr = w.communicate(timeout=60)
    assert w.returncode == 0, werr
    wrote = json.loads(wout)
    results = [json.loads(o.strip().splitlines()[-1]) for o, _e in outs]
    assert sum(r["queries"] for r in results) == 240
    assert [r["failures"] for r in results] == [0, 0], results
    assert wrote["replaced"] > 20 and wrote["removed"] > 5, wrote  # the writer really ran meanwhile
    assert sum(r["saw_hot"] for r in results) > 0
    Store(store).tidy()
    assert_reaped(store)  # and once the readers are gone, nothing superseded is kept


def test_rm_while_a_reader_holds_the_store_keeps_its_files_until_it_ends(tmp_path: Path) -> None:
    from traceql import engine

    store = tmp_path / "store"
    make_run(store, "a", 3)
    make_run(store, "b", 4)
    con = engine.connect(store)
    b_dir = Store(store).run_path("b")
    assert Store(store).remove("b") is False  # deferred: a reader holds the store
    assert b_dir.is_dir()
    assert con.execute("SELECT count(*) FROM kernels").fetchone() == (7,)  # the snapshot still reads
    del con
    make_run(store, "c", 1)  # the next write reaps it
    assert not b_dir.exists()
    assert_reaped(store)


# ---- 4. store paths with glob characters, spaces, quotes, newlines --------------------------------------


@pytest.mark.parametrize(
    "name,siblings",
    [
        ("team*", ["teamB", "teamC"]),
        ("q?x", ["qzx"]),
        ("a[1]", ["a1"]),
        ("[ab]", ["a", "b"]),
        ("sp ace 'quo\"te'\nnew", []),
    ],
)
def test_a_store_path_reads_exactly_its_own_files(
    tmp_path: Path, cli, name: str, siblings: list[str]
) -> None:  # type: ignore[no-untyped-def]
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from traceql import engine

    store = tmp_path / name
    make_run(store, "own", 3)
    for sib in siblings:  # the same store with 10x the rows: identical paths below the store dir
        shutil.copytree(store, tmp_path / sib)
        for f in (tmp_path / sib / "runs").rglob("*.parquet"):
            t = pq.read_table(f)
            f.chmod(0o644)
            pq.write_table(pa.concat_tables([t] * 10), f)
    assert engine.connect(store).execute("SELECT count(*) FROM kernels").fetchone() == (3,)
    r = cli("sql", "SELECT count(*) AS n FROM kernels", "--store", store, "--format", "json")
    assert r.code == 0 and json.loads(r.out) == [{"n": 3}], r
    # views.sql (relative paths) in the stock duckdb shell, run from the store dir
    cwd = os.getcwd()
    os.chdir(store)
    try:
        con = duckdb.connect()
        for stmt in (store / "views.sql").read_text().split(";\n"):
            body = "\n".join(line for line in stmt.splitlines() if not line.startswith("--")).strip()
            if body:
                con.execute(body)
        assert con.execute("SELECT count(*) FROM kernels").fetchone() == (3,)
    finally:
        os.chdir(cwd)


def test_derived_tables_and_queries_on_a_store_named_with_a_glob(tmp_path: Path) -> None:
    from traceql import derive, queries
    from traceql.ingest import ingest

    store = tmp_path / "team*"
    ingest(SAMPLES / "torch_npu_2rank", store, name="demo", workers=1)
    assert derive.prepare(Store(store), ["demo"]) == []  # the derived tables, stored under the glob name
    want = queries.run("rank_summary", store, run_id="demo").to_pylist()
    shutil.copytree(store, tmp_path / "teamB")
    assert queries.run("rank_summary", store, run_id="demo").to_pylist() == want
    assert Store(store).run("demo").get("derived")
    n = queries.run("op_hbm_bytes", store, run_id="demo", params={"top_n": 1000}).num_rows
    assert (
        n == queries.run("op_hbm_bytes", tmp_path / "teamB", run_id="demo", params={"top_n": 1000}).num_rows
    )


def test_a_dump_path_with_glob_characters_is_read(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """DuckDB's read_csv gets the dump's path: `t[1]/kernel_details.csv` must not read `t1/kernel_details.csv`."""
    src = SAMPLES / "torch_npu_2rank" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    a, b = tmp_path / "t[1]", tmp_path / "t1"
    for d in (a, b):
        d.mkdir()
    shutil.copy(src, a / "kernel_details.csv")
    lines = src.read_text().splitlines(keepends=True)
    (b / "kernel_details.csv").write_text("".join(lines[:3]))  # a sibling with 2 rows
    store = tmp_path / "s"
    r = cli("ingest", a / "kernel_details.csv", "--store", store, "--name", "k", "-q", "--no-check")
    assert r.code == 0, r
    assert Store(store).run("k")["rows"]["kernels"] == len(lines) - 1


# ---- 8. run names that differ only in case -----------------------------------------------------------------


def test_run_names_that_differ_only_in_case_collide(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "s"
    make_run(store, "Demo", 3)
    for extra in ([], ["--replace"]):
        r = cli(
            "ingest", SAMPLES / "kineto_cpu", "--store", store, "--name", "demo", "-q", "--no-check", *extra
        )
        assert r.code == 1, r
        assert "differs only in case from run 'Demo'" in r.err and len(r.err.strip().splitlines()) == 1, r
    with pytest.raises(StoreError, match="differs only in case"):
        make_run(store, "DEMO", 1)
    r = cli(
        "ingest", SAMPLES / "kineto_cpu", "--store", store, "--name", "Demo", "--replace", "-q", "--no-check"
    )
    assert r.code == 0, r
    assert list(Store(store).runs()) == ["Demo"]


# ---- 5/6. workers die with their parent; temp dirs go on every exit Python sees -------------------------------


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _temp_dirs(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("traceql-slowtest-") and p.is_dir())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_killing_the_parent_ends_its_workers_and_their_temp_dirs(tmp_path: Path, sig: int) -> None:
    store = tmp_path / "store"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    for r in range(2):
        slow_file(cluster / f"rank{r}.slow", 400, 20, 0.05)  # ~20 s per rank if left alone
    started = tmp_path / "started"
    workers: list[int] = []
    p = start_cli(
        "ingest",
        cluster,
        "--store",
        store,
        "--name",
        "c",
        "-j",
        "2",
        "-q",
        STARTED=str(started),
        PARSE_TEMP="1",
        TMPDIR=str(tmp),
    )
    try:
        end = time.monotonic() + 30
        while len(list(tmp_path.glob("started.*"))) < 2 and time.monotonic() < end:
            time.sleep(0.05)
        workers += [int(f.name.split(".")[-1]) for f in tmp_path.glob("started.*")]
        assert len(workers) == 2 and p.pid not in workers
        assert len(_temp_dirs(tmp)) == 2
        os.kill(p.pid, sig)  # the parent only, as `kill PID`, a closed terminal or the OOM killer do
        t = time.monotonic()
        while any(_alive(w) for w in workers) and time.monotonic() - t < 10:
            time.sleep(0.05)
        gone_s = time.monotonic() - t
        # the workers held the parent's stdout/stderr: with them gone the pipes close (`| tee log` ends)
        out, err = p.communicate(timeout=10)
    finally:
        kill_tree(p)
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
    assert not any(_alive(w) for w in workers), f"workers outlived the parent killed by {sig!r}"
    assert gone_s < 5, gone_s
    assert _temp_dirs(tmp) == [], "a worker's temp dir outlived it"
    if sig != signal.SIGKILL:  # the parent itself cleaned up: exit 128+N, staging discarded
        assert p.returncode == 128 + sig and "Traceback" not in err, (p.returncode, err)
        assert not [d for d in (store / ".staging").iterdir() if d.is_dir()]
    assert not Store(store).runs()


def test_sigterm_to_a_single_process_ingest_removes_its_temp_dir(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    started = tmp_path / "started"
    p = start_cli(
        "ingest",
        slow_file(tmp_path / "x.slow", 400, 20, 0.05),
        "--store",
        tmp_path / "s",
        "-j",
        "1",
        "-q",
        STARTED=str(started),
        PARSE_TEMP="1",
        TMPDIR=str(tmp),
    )
    try:
        wait_for(tmp_path, "started")
        assert len(_temp_dirs(tmp)) == 1
        os.kill(p.pid, signal.SIGTERM)
        p.communicate(timeout=20)
    finally:
        kill_tree(p)
    assert p.returncode == 128 + signal.SIGTERM
    assert _temp_dirs(tmp) == [] and not list(tmp.iterdir()), list(tmp.iterdir())


def test_temp_dirs_of_a_kill_9_are_reaped_by_the_next_ingest(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp / "traceql-not-ours").mkdir()  # no lock file: another program's (or an older traceql's); left alone
    started = tmp_path / "started"
    p = start_cli(
        "ingest",
        slow_file(tmp_path / "x.slow", 400, 20, 0.05),
        "--store",
        tmp_path / "s",
        "-j",
        "1",
        "-q",
        STARTED=str(started),
        PARSE_TEMP="1",
        TMPDIR=str(tmp),
    )
    wait_for(tmp_path, "started")
    kill_tree(p)  # SIGKILL: no Python code runs
    p.wait(timeout=10)
    assert len(_temp_dirs(tmp)) == 1
    r = run_cli(
        "ingest",
        slow_file(tmp_path / "y.slow", 1, 5, 0),
        "--store",
        tmp_path / "s",
        "-q",
        "--no-check",
        TMPDIR=str(tmp),
    )
    assert r.returncode == 0, r.stderr
    assert _temp_dirs(tmp) == [] and sorted(x.name for x in tmp.iterdir()) == ["traceql-not-ours"]


# ---- 7. dumps are read-only in every sense ----------------------------------------------------------------


def tree_fingerprint(d: Path) -> dict[str, object]:
    """Every entry under d (links not followed) with its type and, for files, size and content hash."""
    out: dict[str, object] = {}
    for p in sorted(d.rglob("*")):
        rel = p.relative_to(d).as_posix()
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_file():
            out[rel] = ("file", p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
        else:
            out[rel] = ("dir",)
    return out


def test_a_wal_mode_db_dump_is_left_byte_identical(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    dump = tmp_path / "rank0_ascend_pt"
    shutil.copytree(
        real(DB_LEVEL1 / "rank0_ascend_pt"), dump, ignore=shutil.ignore_patterns("*-wal", "*-shm")
    )
    for db in dump.rglob("*.db"):
        db.chmod(0o644)
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
        con.close()
    before = tree_fingerprint(dump)
    assert not [k for k in before if k.endswith(("-wal", "-shm"))]
    r = cli("ingest", dump, "--store", tmp_path / "s", "--name", "db", "-q", "--no-check")
    assert r.code == 0, r
    assert tree_fingerprint(dump) == before, "the ingest changed the dump (SQLite -wal/-shm files?)"
    assert Store(tmp_path / "s").run("db")["rows"]["kernels"] > 0


def test_uncheckpointed_wal_rows_are_read_from_a_private_copy(tmp_path: Path) -> None:
    from traceql.parsers._sqlite import SqliteDb

    db = tmp_path / "d" / "x.db"
    db.parent.mkdir()
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (x INTEGER)")
    writer.execute("INSERT INTO t VALUES (1), (2)")
    writer.commit()  # in the -wal only: a live (or killed) profiler's export
    try:
        before = tree_fingerprint(db.parent)
        assert (db.parent / "x.db-wal").stat().st_size > 0
        s = SqliteDb(db, "a test db")
        try:
            assert s.conn.execute("SELECT sum(x) FROM t").fetchone() == (3,)
        finally:
            s.close()
        assert tree_fingerprint(db.parent) == before
    finally:
        writer.close()


def test_a_symlink_out_of_the_dump_is_refused_and_not_read(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    secret = tmp_path / "secret" / "profiler_metadata.json"
    secret.parent.mkdir()
    secret.write_text(json.dumps({"ENV_VARIABLES": {"API_TOKEN": "tok-3f9a-SECRET"}}))
    dump = tmp_path / "dump"
    shutil.copytree(SAMPLES / "torch_npu_2rank" / "rank0_ascend_pt", dump)
    link = dump / "profiler_metadata.json"
    link.unlink(missing_ok=True)
    link.symlink_to(secret)
    before = tree_fingerprint(dump)
    store = tmp_path / "s"
    r = cli("ingest", dump, "--store", store, "--name", "x", "-q", "--no-check")
    assert r.code == 1, r
    assert "profiler_metadata.json: symbolic link to" in r.err and "outside the dump" in r.err, r
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert tree_fingerprint(dump) == before
    assert not Store(store).runs()
    assert not any(
        b"tok-3f9a" in p.read_bytes()
        for p in tmp_path.rglob("*")
        if p.is_file() and not p.is_symlink() and p != secret
    )
    # only when asked: --follow-links (a dump assembled from links by its owner)
    r = cli("ingest", dump, "--store", store, "--name", "x", "-q", "--no-check", "--follow-links")
    assert r.code == 0, r
    assert cli("rm", "x", "--store", store).code == 0
    # a link that stays inside the dump is fine without it
    link.unlink()
    (dump / "notes.txt").symlink_to(dump / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    assert cli("ingest", dump, "--store", store, "--name", "x", "-q", "--no-check").code == 0


# ---- format-1 stores (before generation dirs) ----------------------------------------------------------------


def test_a_format_1_store_is_read_and_migrated_on_the_next_write(tmp_path: Path) -> None:
    from traceql import engine

    store = tmp_path / "s"
    make_run(store, "old", 3)
    make_run(store, "keep", 2)
    # rewrite it as traceql wrote it before generation dirs: runs/<run>/, no `dir`, store_format 1
    m = json.loads((store / "manifest.json").read_text())
    for run_id, info in m["runs"].items():
        (store / "runs" / info.pop("dir")).rename(store / "runs" / run_id)
    m["store_format"] = 1
    (store / "manifest.json").write_text(json.dumps(m))
    assert engine.connect(store).execute("SELECT count(*) FROM kernels").fetchone() == (5,)
    make_run(store, "old", 4, replace=True)
    m = json.loads((store / "manifest.json").read_text())
    assert (
        m["store_format"] == 2
        and m["runs"]["old"]["dir"].startswith("old.")
        and "dir" not in m["runs"]["keep"]
    )
    assert not (store / "runs" / "old").exists() and (store / "runs" / "keep").is_dir()
    assert dict(
        engine.connect(store).execute("SELECT run_id, count(*) FROM kernels GROUP BY 1").fetchall()
    ) == {"old": 4, "keep": 2}
    assert_reaped(store)


@pytest.mark.parametrize("torn", ["new_in_place", "nothing_in_place"])
def test_a_format_1_replace_torn_by_a_kill_is_repaired(tmp_path: Path, torn: str) -> None:
    """What the old commit left when killed between its renames: the manifest describes the old run, whose dir
    is in .staging/trash-*, while runs/<run> holds the new files (or nothing). The start-up check puts it back."""
    from traceql import engine

    store = tmp_path / "s"
    make_run(store, "old", 3)
    make_run(store, "new", 8)
    m = json.loads((store / "manifest.json").read_text())
    for run_id, info in m["runs"].items():
        (store / "runs" / info.pop("dir")).rename(store / "runs" / run_id)
    m["store_format"] = 1
    del m["runs"]["new"]
    (store / "manifest.json").write_text(json.dumps(m))
    (store / "runs" / "old").rename(store / ".staging" / "trash-0123")
    if torn == "new_in_place":
        (store / "runs" / "new").rename(store / "runs" / "old")  # same file names, other rows
    else:
        shutil.rmtree(store / "runs" / "new")
    Store(store).tidy()
    assert engine.connect(store).execute("SELECT count(*) FROM kernels").fetchone() == (3,)
    assert sorted(p.name for p in (store / "runs").iterdir()) == ["old"]
    assert_reaped(store)
