"""Store safety: a crash, a kill -9 or a Ctrl-C mid-ingest, two ingests at once, and stores from other versions.

Invariant checked everywhere: after any interruption the store is either exactly as before (manifest bytes
identical, no run directory for the interrupted run, every view still readable) or holds the complete new run
(never a partial one, never a mixed manifest).

Most tests drive the real CLI in a subprocess through a small driver that registers a test-only *slow* parser
(it writes its rows in chunks and sleeps between them), so the kill lands mid-ingest deterministically and the
tests do not depend on how fast the real parsers are. One test kills a real parser on a large synthetic
kernel_details.csv (formats.md §2, 2025 layout) when that parser is available.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from traceql.errors import StoreError
from traceql.store import STORE_FORMAT, Store

T0 = 1_736_408_883_000_000_000

# The driver: registers SlowParser (claims *.slow files, or a folder of them = one unit per file, i.e. a
# "cluster"), applies the crash point named by $CRASH_AT, then runs the real CLI entry point.
# A .slow file holds "<chunks> <rows per chunk> <sleep s per chunk>"; $HOLD_UNTIL=path holds the parse after its
# first chunk until that file exists (a test that needs an ingest live while another runs, however slow the machine).
DRIVER = r"""
import os, signal, sys, time
from pathlib import Path
from traceql.parsers import base
from traceql import store as store_mod

T0 = 1_736_408_883_000_000_000

def die():
    os.kill(os.getpid(), signal.SIGKILL)

class SlowParser:
    name = "slow_test"
    description = "test-only parser that writes slowly"

    def claim(self, path):
        if path.is_file() and path.suffix == ".slow":
            return [base.Unit(self.name, str(path), 0)]
        if path.is_dir():
            files = sorted(path.glob("*.slow"))
            if files:
                return [base.Unit(self.name, str(f), i) for i, f in enumerate(files)]
        return None

    def parse(self, unit, out):
        chunks, rows, pause = Path(unit.path).read_text().split()
        chunks, rows, pause = int(chunks), int(rows), float(pause)
        if os.environ.get("PARSE_TEMP"):  # a private temp dir, as the real parsers keep one (traceql._owned)
            from traceql import _owned
            with _owned.TempDir("slowtest"):
                return self._parse(chunks, rows, pause, out)
        return self._parse(chunks, rows, pause, out)

    def _parse(self, chunks, rows, pause, out):
        for c in range(chunks):
            base_i = c * rows
            out.write("kernels", {
                "name": [f"k{base_i + i}" for i in range(rows)],
                "ts_ns": [T0 + (base_i + i) * 1000 for i in range(rows)],
                "dur_ns": [500] * rows,
            })
            if c == 0 and os.environ.get("STARTED"):
                Path(os.environ["STARTED"] + f".{os.getpid()}").touch()
            if c == 0 and os.environ.get("HOLD_UNTIL"):  # stay live until the test says so (no timing race)
                deadline = time.monotonic() + 300
                while not Path(os.environ["HOLD_UNTIL"]).exists() and time.monotonic() < deadline:
                    time.sleep(0.02)
            if os.environ.get("CRASH_AT") == "parse":
                die()
            time.sleep(pause)
        return {"device": "TestNPU"}

reg = base.registry()
base._REGISTRY = {"slow_test": SlowParser(), **reg}

crash = os.environ.get("CRASH_AT")
if crash == "before_manifest":  # run dir already renamed into runs/, manifest not yet written
    store_mod.Store._write_manifest = lambda self, m: die()
elif crash == "manifest_tmp_written":  # new manifest written to its temp file, not yet renamed over
    real_replace = os.replace
    def replace(src, dst):
        if str(dst).endswith("manifest.json"):
            die()
        return real_replace(src, dst)
    os.replace = replace
elif crash == "after_manifest":  # manifest replaced, views.sql not yet rewritten
    store_mod.Store.write_views_sql = lambda self: die()
elif crash == "after_publish":  # the new generation dir renamed into runs/, not yet fsynced nor listed
    real_publish = store_mod.Store._publish
    store_mod.Store._publish = lambda self, staging, final: (real_publish(self, staging, final), die())
elif crash == "after_seal":  # the new generation durable on disk, the manifest not yet written
    real_seal = store_mod.Store._seal
    store_mod.Store._seal = lambda self, d, rels: (real_seal(self, d, rels), die())
elif crash == "before_reap":  # the new manifest durable, nothing of the old run deleted yet
    store_mod.Store._after_change = lambda self, m: die()
elif crash == "mid_reap":  # the new manifest durable, the reaper killed after removing its first entry
    from traceql import _owned
    real_write, real_remove, switched = store_mod.Store._write_manifest, _owned.remove_tree, []
    def write_manifest(self, m):
        real_write(self, m)
        switched.append(1)
    def remove(p):
        real_remove(p)
        if switched:
            die()
    store_mod.Store._write_manifest, _owned.remove_tree = write_manifest, remove

from traceql.cli import main
sys.argv = ["traceql", *sys.argv[1:]]
main()
"""


def slow_file(path: Path, chunks: int, rows: int, pause: float) -> Path:
    path.write_text(f"{chunks} {rows} {pause}")
    return path


def traceql_cmd(*args: object) -> list[str]:
    return [sys.executable, "-c", DRIVER, *map(str, args)]


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("TRACEQL_")}
    e.update(extra)
    return e


def run_cli(*args: object, timeout: float = 60, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        traceql_cmd(*args), capture_output=True, text=True, timeout=timeout, env=env(**extra)
    )


def start_cli(*args: object, **extra: str) -> subprocess.Popen[str]:
    # own session: the test can signal the whole process tree like a terminal's Ctrl-C does
    return subprocess.Popen(
        traceql_cmd(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(**extra),
        start_new_session=True,
    )


def wait_for(pattern_dir: Path, prefix: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any(p.name.startswith(prefix) for p in pattern_dir.iterdir()):
            return
        time.sleep(0.02)
    raise AssertionError(f"the ingest never started parsing ({prefix}* not created in {timeout}s)")


def kill_tree(p: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGKILL)


def snapshot(store: Path) -> dict[str, object]:
    runs_dir = store / "runs"
    return {
        "manifest": (store / "manifest.json").read_bytes(),
        "run_dirs": sorted(p.name for p in runs_dir.iterdir()) if runs_dir.is_dir() else [],
    }


def assert_store_healthy(store: Path, expect_runs: dict[str, int]) -> None:
    """Manifest readable, exactly these runs with these kernel counts, every file it lists exists, views work."""
    from traceql import engine, schema

    st = Store(store)
    runs = st.runs()
    assert sorted(runs) == sorted(expect_runs)
    for rid, info in runs.items():
        for rels in info["files"].values():
            for rel in rels:
                assert (st.run_path(rid) / rel).is_file(), (rid, rel)
    con = engine.connect(st)
    for t in schema.TABLE_NAMES:
        con.execute(f"SELECT count(*) FROM {t}").fetchone()
    got = dict(con.execute("SELECT run_id, count(*) FROM kernels GROUP BY 1").fetchall())
    assert got == {k: v for k, v in expect_runs.items() if v}


@pytest.fixture(scope="module")
def base_store_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base store, ingested once per module by the CLI in a child process (as every test here did)."""
    tmp = tmp_path_factory.mktemp("base")
    store = tmp / "store"
    r = run_cli("ingest", slow_file(tmp / "base.slow", 3, 10, 0), "--store", store, "--name", "base", "-q")
    assert r.returncode == 0, r.stderr
    return store


@pytest.fixture
def base_store(base_store_template: Path, tmp_path: Path) -> Path:
    """A store holding one complete run 'base' (3 chunks x 10 rows = 30 kernels): a copy of the module's
    template (a store holds no absolute path: it is a folder that can move), each test free to damage its own."""
    store = tmp_path / "store"
    shutil.copytree(base_store_template, store, symlinks=True)
    assert_store_healthy(store, {"base": 30})
    return store


# ---- kill -9 / crash at every stage of an ingest ------------------------------------------------------


def test_kill_9_mid_parse_leaves_store_unchanged(base_store: Path, tmp_path: Path) -> None:
    before = snapshot(base_store)
    big = slow_file(tmp_path / "big.slow", 200, 1000, 0.05)  # ~10 s if left alone
    started = tmp_path / "started"
    p = start_cli("ingest", big, "--store", base_store, "--name", "partial", "-j", "1", STARTED=str(started))
    try:
        wait_for(tmp_path, "started")
        time.sleep(0.3)  # a few chunks into the staging Parquet
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
    finally:
        kill_tree(p)
    assert p.returncode == -signal.SIGKILL
    assert snapshot(base_store) == before
    assert_store_healthy(base_store, {"base": 30})
    # the dead ingest's staging dir is left behind, invisible to readers; the same name ingests fine afterwards
    r = run_cli(
        "ingest",
        slow_file(tmp_path / "small.slow", 1, 5, 0),
        "--store",
        base_store,
        "--name",
        "partial",
        "-q",
    )
    assert r.returncode == 0, r.stderr
    assert_store_healthy(base_store, {"base": 30, "partial": 5})


@pytest.mark.parametrize("crash_at", ["parse", "before_manifest", "manifest_tmp_written"])
def test_crash_before_the_manifest_switch_leaves_no_run(
    base_store: Path, tmp_path: Path, crash_at: str
) -> None:
    before = snapshot(base_store)
    r = run_cli(
        "ingest",
        slow_file(tmp_path / "x.slow", 2, 10, 0),
        "--store",
        base_store,
        "--name",
        "crashed",
        "-q",
        CRASH_AT=crash_at,
    )
    assert r.returncode == -signal.SIGKILL, r
    assert (base_store / "manifest.json").read_bytes() == before["manifest"]
    assert_store_healthy(base_store, {"base": 30})
    # before_manifest leaves runs/crashed as an orphan (not in the manifest, so not visible); the next ingest
    # of that name must move it aside rather than fail or merge with it
    r = run_cli(
        "ingest", slow_file(tmp_path / "y.slow", 1, 7, 0), "--store", base_store, "--name", "crashed", "-q"
    )
    assert r.returncode == 0, r.stderr
    assert_store_healthy(base_store, {"base": 30, "crashed": 7})


def test_crash_after_the_manifest_switch_keeps_the_whole_run(base_store: Path, tmp_path: Path) -> None:
    r = run_cli(
        "ingest",
        slow_file(tmp_path / "x.slow", 2, 10, 0),
        "--store",
        base_store,
        "--name",
        "late",
        "-q",
        CRASH_AT="after_manifest",
    )
    assert r.returncode == -signal.SIGKILL, r
    assert_store_healthy(base_store, {"base": 30, "late": 20})  # all 2 x 10 rows, not a part
    r = run_cli(
        "ingest", slow_file(tmp_path / "y.slow", 1, 7, 0), "--store", base_store, "--name", "late", "-q"
    )
    assert r.returncode == 1 and "already exists" in r.stderr


# ---- kill -9 at every step of a --replace and an rm ----------------------------------------------------
# Each step, in commit order: the ones before the manifest switch must leave the old run (its files byte-
# identical), the ones after must leave the new run; both leave a store that opens, and the next write reaps
# whatever the dead process left (unlisted generation dirs, staging dirs, temp manifests).
REPLACE_STEPS = {
    "parse": "old",
    "after_publish": "old",
    "after_seal": "old",
    "before_manifest": "old",
    "manifest_tmp_written": "old",
    "after_manifest": "new",
    "before_reap": "new",
    "mid_reap": "new",
}
RM_STEPS = {
    "before_manifest": "old",
    "manifest_tmp_written": "old",
    "after_manifest": "gone",
    "before_reap": "gone",
    "mid_reap": "gone",
}


def tree_hashes(d: Path) -> dict[str, str]:
    import hashlib

    return {
        p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(d.rglob("*"))
        if p.is_file()
    }


def assert_reaped(store: Path) -> None:
    """Only what the manifest lists is left in runs/; no staging dir or lock, no temp manifest or views."""
    st = Store(store)
    listed = {st.run_dir_name(r, i) for r, i in st.runs().items()}
    assert sorted(p.name for p in (store / "runs").iterdir()) == sorted(listed)
    assert not list((store / ".staging").iterdir())
    assert not list(store.glob(".*.tmp"))
    for r, info in st.runs().items():
        on_disk = {p.relative_to(st.run_path(r)).as_posix() for p in st.run_path(r).rglob("*.parquet")}
        assert on_disk == {rel for rels in info["files"].values() for rel in rels}, r


@pytest.fixture
def victim_store(base_store: Path, tmp_path: Path) -> Path:
    r = run_cli(
        "ingest",
        slow_file(tmp_path / "victim.slow", 2, 10, 0),
        "--store",
        base_store,
        "--name",
        "victim",
        "-q",
        "--no-check",
    )
    assert r.returncode == 0, r.stderr
    return base_store


@pytest.mark.parametrize("step", list(REPLACE_STEPS))
def test_kill_9_at_each_step_of_a_replace(victim_store: Path, tmp_path: Path, step: str) -> None:
    old_dir = Store(victim_store).run_path("victim")
    old_files = tree_hashes(old_dir)
    r = run_cli(
        "ingest",
        slow_file(tmp_path / "new.slow", 1, 7, 0),
        "--store",
        victim_store,
        "--name",
        "victim",
        "--replace",
        "-q",
        "--no-check",
        CRASH_AT=step,
    )
    assert r.returncode == -signal.SIGKILL, (step, r.stderr)
    if REPLACE_STEPS[step] == "old":
        assert_store_healthy(victim_store, {"base": 30, "victim": 20})
        assert Store(victim_store).run_path("victim") == old_dir and tree_hashes(old_dir) == old_files
    else:
        assert_store_healthy(victim_store, {"base": 30, "victim": 7})
    # the next write's start-up check reaps what the dead one left; the replace then works
    r = run_cli(
        "ingest",
        slow_file(tmp_path / "again.slow", 1, 5, 0),
        "--store",
        victim_store,
        "--name",
        "victim",
        "--replace",
        "-q",
        "--no-check",
    )
    assert r.returncode == 0, r.stderr
    assert_store_healthy(victim_store, {"base": 30, "victim": 5})
    assert_reaped(victim_store)


@pytest.mark.parametrize("step", list(RM_STEPS))
def test_kill_9_at_each_step_of_an_rm(victim_store: Path, step: str) -> None:
    old_dir = Store(victim_store).run_path("victim")
    old_files = tree_hashes(old_dir)
    r = run_cli("rm", "victim", "--store", victim_store, CRASH_AT=step)
    assert r.returncode == -signal.SIGKILL, (step, r.stderr)
    if RM_STEPS[step] == "old":
        assert_store_healthy(victim_store, {"base": 30, "victim": 20})
        assert tree_hashes(old_dir) == old_files
    else:
        assert_store_healthy(victim_store, {"base": 30})
    Store(victim_store).tidy()  # what the next write does first
    assert_reaped(victim_store)


def test_a_full_disk_leaves_no_temp_manifest_and_the_store_unchanged(victim_store: Path) -> None:
    """RLIMIT_FSIZE makes every write past 200 bytes fail (EFBIG), as a full disk fails it (ENOSPC)."""
    before = snapshot(victim_store)
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))\n"
        "from traceql.cli import main\n"
        f"sys.argv = ['traceql', 'rm', 'victim', '--store', {str(victim_store)!r}]\n"
        "main()\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env())
    assert r.returncode == 1, r
    assert "cannot write the new manifest" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not list(victim_store.glob(".*.tmp"))
    assert snapshot(victim_store) == before
    assert_store_healthy(victim_store, {"base": 30, "victim": 20})


def test_kill_at_random_moments_is_all_or_nothing(base_store: Path, tmp_path: Path) -> None:
    """Kill after 0.05..0.6 s: the run is either absent (store byte-identical) or complete (all its rows)."""
    before = snapshot(base_store)
    outcomes = []
    for i, delay in enumerate([0.05, 0.15, 0.3, 0.45, 0.6]):
        f = slow_file(tmp_path / f"r{i}.slow", 4, 50, 0.1)  # ~0.4 s of parsing, then commit
        p = start_cli("ingest", f, "--store", base_store, "--name", f"r{i}", "-q", "-j", "1")
        time.sleep(delay)
        kill_tree(p)
        p.wait(timeout=10)
        runs = Store(base_store).runs()
        if f"r{i}" in runs:
            outcomes.append("complete")
            assert runs[f"r{i}"]["rows"] == {"kernels": 200}
            before = snapshot(base_store)
        else:
            outcomes.append("absent")
            assert snapshot(base_store) == before
        expect = {"base": 30, **{r: 200 for r in Store(base_store).runs() if r != "base"}}
        assert_store_healthy(base_store, expect)
    assert "absent" in outcomes, outcomes  # at least the early kills landed mid-ingest


# ---- Ctrl-C -----------------------------------------------------------------------------------------------


def test_sigint_mid_parse_exits_130_and_cleans_up(base_store: Path, tmp_path: Path) -> None:
    before = snapshot(base_store)
    started = tmp_path / "started"
    p = start_cli(
        "ingest",
        slow_file(tmp_path / "big.slow", 200, 100, 0.05),
        "--store",
        base_store,
        "--name",
        "cc",
        "-j",
        "1",
        STARTED=str(started),
    )
    try:
        wait_for(tmp_path, "started")
        os.kill(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        kill_tree(p)
    assert p.returncode == 130, err
    assert "Traceback" not in err
    # typer turns KeyboardInterrupt into exit code 130 before traceql's own handler sees it, so the
    # "interrupted" line may not be printed (reported to the lead); nothing else may be
    rest = [line for line in err.splitlines() if not line.startswith("detected ")]
    assert rest in ([], ["error: interrupted; the store is unchanged"]), err
    assert snapshot(base_store) == before
    assert not any((base_store / ".staging").iterdir()), "the interrupted staging dir should be discarded"
    assert_store_healthy(base_store, {"base": 30})


def test_ctrl_c_to_the_process_group_with_parallel_workers(base_store: Path, tmp_path: Path) -> None:
    """What a terminal does on Ctrl-C: SIGINT to every process of the job, parent and parser workers."""
    before = snapshot(base_store)
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    for r in range(3):
        slow_file(cluster / f"rank{r}.slow", 100, 100, 0.05)  # ~5 s per rank
    started = tmp_path / "started"
    p = start_cli("ingest", cluster, "--store", base_store, "--name", "cc", "-j", "2", STARTED=str(started))
    try:
        wait_for(tmp_path, "started")
        time.sleep(0.2)
        os.killpg(p.pid, signal.SIGINT)
        t = time.monotonic()
        out, err = p.communicate(timeout=60)
        stop_s = time.monotonic() - t
    finally:
        kill_tree(p)
    assert snapshot(base_store) == before
    assert_store_healthy(base_store, {"base": 30})
    assert p.returncode == 130, err
    assert "Traceback" not in err, err
    # queued units are cancelled and running workers stopped, not parsed to the end first (~5 s per rank here)
    assert stop_s < 3, f"exit took {stop_s:.1f}s after Ctrl-C"


# ---- concurrent ingests -----------------------------------------------------------------------------


def test_two_concurrent_ingests_with_different_names_both_land(base_store: Path, tmp_path: Path) -> None:
    started = tmp_path / "started"
    ps = [
        start_cli(
            "ingest",
            slow_file(tmp_path / f"c{i}.slow", 5, 20, 0.1),
            "--store",
            base_store,
            "--name",
            f"c{i}",
            "-j",
            "1",
            STARTED=str(started),
        )
        for i in range(2)
    ]
    try:
        results = [p.communicate(timeout=60) for p in ps]
    finally:
        for p in ps:
            kill_tree(p)
    assert [p.returncode for p in ps] == [0, 0], results
    assert_store_healthy(base_store, {"base": 30, "c0": 100, "c1": 100})
    # the manifest is one JSON document with all three runs (no interleaved writes)
    m = json.loads((base_store / "manifest.json").read_text())
    assert sorted(m["runs"]) == ["base", "c0", "c1"] and m["store_format"] == STORE_FORMAT


def test_two_concurrent_ingests_with_the_same_name_one_is_refused(base_store: Path, tmp_path: Path) -> None:
    started = tmp_path / "started"
    # different row counts, so the stored run tells which one won
    ps = [
        start_cli(
            "ingest",
            slow_file(tmp_path / f"s{i}.slow", 5, 10 + i, 0.1),
            "--store",
            base_store,
            "--name",
            "same",
            "-j",
            "1",
            STARTED=str(started),
        )
        for i in range(2)
    ]
    try:
        results = [p.communicate(timeout=60) for p in ps]
    finally:
        for p in ps:
            kill_tree(p)
    # both started parsing (both passed the early name check) before either committed
    assert len(list(tmp_path.glob("started.*"))) == 2
    codes = sorted(p.returncode for p in ps)
    assert codes == [0, 1], results
    loser_err = results[[p.returncode for p in ps].index(1)][1]
    assert "already exists" in loser_err and "Traceback" not in loser_err
    assert len(loser_err.strip().splitlines()) <= 2  # "detected ..." + the one error line
    winner = [p.returncode for p in ps].index(0)
    assert_store_healthy(base_store, {"base": 30, "same": 5 * (10 + winner)})


# ---- stores from other traceql versions, damaged stores ---------------------------------------------------


@pytest.mark.parametrize("fmt", [0, None, "1", 3])
def test_store_from_another_format_is_refused_with_a_message(base_store: Path, cli, fmt: object) -> None:  # type: ignore[no-untyped-def]
    m = json.loads((base_store / "manifest.json").read_text())
    if fmt is None:
        del m["store_format"]  # a store from before the format number existed
    else:
        m["store_format"] = fmt
    (base_store / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(StoreError, match="store format"):
        Store(base_store).runs()
    for args in (
        ("runs",),
        ("sql", "SELECT 1"),
        ("check",),
        ("ingest", base_store / "manifest.json", "--name", "x"),
    ):
        r = cli(*args, "--store", base_store)
        assert r.code == 1, (args, r)
        assert "store format" in r.err and "re-ingest" in r.err and "Traceback" not in r.err, (args, r)
        assert len(r.err.strip().splitlines()) == 1, (args, r)


@pytest.mark.parametrize(
    "damage",
    [
        "truncated",
        "empty",
        "not_json",
        "runs_not_a_dict",
    ],
)
def test_damaged_manifest_is_one_clear_error(base_store: Path, cli, damage: str) -> None:  # type: ignore[no-untyped-def]
    mp = base_store / "manifest.json"
    text = mp.read_text()
    mp.write_text(
        {
            "truncated": text[: len(text) // 2],
            "empty": "",
            "not_json": "\x00\x01garbage",
            "runs_not_a_dict": '{"store_format": 1, "runs": [1, 2]}',
        }[damage]
    )
    for args in (("runs",), ("sql", "SELECT count(*) FROM kernels"), ("check",)):
        r = cli(*args, "--store", base_store)
        assert r.code == 1, (args, r)
        assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1, (args, r)
        if damage != "runs_not_a_dict":
            assert "damaged" in r.err, (args, r)


def test_store_missing_a_newer_column_is_read(base_store: Path, cli) -> None:  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    for p in (base_store / "runs").rglob("kernels/*.parquet"):
        t = pq.read_table(p).drop_columns(["flops"])  # as if written before `flops` existed
        p.chmod(0o644)
        pq.write_table(t, p)
    r = cli(
        "sql",
        "SELECT count(*) AS n, count(flops) AS f FROM kernels",
        "--store",
        base_store,
        "--format",
        "json",
    )
    assert r.code == 0, r
    assert json.loads(r.out) == [{"n": 30, "f": 0}]


# ---- a real parser killed on a large input ------------------------------------------------------------


KD_HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),"
    "Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,Output Data Types,"
    "Output Formats,Context ID,aicore_time(us),aic_total_cycles,aic_mac_ratio,aiv_time(us),aiv_total_cycles,aiv_vec_ratio"
)


def big_kernel_details(path: Path, rows: int) -> Path:
    """A kernel_details.csv in the Jan 2025 torch_npu layout (formats.md §2.1): trailing TAB on the start time,
    literal quotes in shape cells, N/A where a value is missing."""
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(KD_HEADER + "\n")
        t = 1736408883704643
        for i in range(rows):
            fh.write(
                f"50,4294967295,{i % 65535},2,aclnnAdd_AddAiCore_Add_{i},Add,dynamic,AI_VECTOR_CORE,{t + i * 7}.212\t,"
                f'5.3{i % 10},1.0,40,0,N/A,"""32,3,224,224;32,3,224,224""",FLOAT;FLOAT,NCHW;NCHW,"""32,3,224,224""",'
                f"FLOAT,NCHW,N/A,0,0,0,5.1,9180,0.42{i % 10}\n"
            )
    return path


def _wait_for_staged_file(store: Path, p: subprocess.Popen[str], limit_s: float) -> None:
    """Until a file appears under the store's .staging/<id>/ (the parse is writing), the process ends, or
    limit_s passes."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end and p.poll() is None:
        if any(f.is_file() for f in (store / ".staging").glob("*/**/*")):
            return
        time.sleep(0.02)


def test_kill_a_real_parser_mid_ingest_of_a_large_csv(base_store: Path, tmp_path: Path) -> None:
    ROWS = 100_000  # ~2 s of ingest here: long enough to land kills inside it
    from traceql.parsers import base

    d = tmp_path / "big_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    kd = big_kernel_details(d / "kernel_details.csv", ROWS)
    try:
        units = base.detect(d.parent)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no parser claims a torch_npu kernel_details.csv yet ({e})")
    before = snapshot(base_store)
    t = time.monotonic()
    r = run_cli("ingest", d.parent, "--store", tmp_path / "timing", "--name", "t", "-q", "--no-check")
    full = time.monotonic() - t
    assert r.returncode == 0, r.stderr
    outcomes = []
    for i, frac in enumerate([0.3, 0.7]):
        p = start_cli("ingest", d.parent, "--store", base_store, "--name", f"big{i}", "-q", "--no-check")
        if i == 0:
            # the first kill lands while the parser writes: once its staging dir holds a file (a timed sleep
            # missed the parse when the timing run was slower than this one on a loaded machine)
            _wait_for_staged_file(base_store, p, full * 3)
        else:
            time.sleep(full * frac)
        kill_tree(p)
        p.wait(timeout=10)
        runs = Store(base_store).runs()
        if f"big{i}" in runs:
            outcomes.append("complete")
            assert runs[f"big{i}"]["rows"]["kernels"] == ROWS
            before = snapshot(base_store)
        else:
            outcomes.append("absent")
            assert snapshot(base_store) == before
    assert_store_healthy(
        base_store, {"base": 30, **{r: ROWS for r in Store(base_store).runs() if r != "base"}}
    )
    assert units and outcomes[0] == "absent", (outcomes, full, kd.stat().st_size)
