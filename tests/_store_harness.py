"""Helpers for the store's interruption and concurrency tests (tests/test_store_concurrency.py), run as
separate processes: `python tests/_store_harness.py <mode> ...`, printing one JSON line.

kill-loop STORE N SEED: until N kills have landed, fork a child that runs `ingest --replace` of run 'hot' (the real
    traceql.ingest.ingest, through a test-only parser of *.rows files), SIGKILL it after a random delay spread
    over one ingest's duration, and check the store after every kill: it opens; every listed file exists
    and holds the rows the manifest says; 'hot' is exactly the previous or the attempted version, never a mix;
    'base' is untouched. Forking from a process that has imported everything makes a kill cost ~10 ms, so
    100+ kills fit in seconds on a loaded machine.
writer STORE STOP: loop `--replace` and `rm` of run 'hot' (Store API, as ingest/rm do) until the file STOP
    exists; prints how many commits and removals it made.
readers STORE N [--no-lock]: N queries (engine.connect, then SQL over kernels, host_ops and the runs view),
    counting failures and inconsistent answers. --no-lock: without the readers' lock (the control experiment).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

T0 = 1_736_408_883_000_000_000


class RowsParser:
    """Claims `*.rows` files ("<n>": n kernels); the real ingest path does everything else."""

    name = "rows_test"
    description = "test-only parser: N kernel rows"

    def claim(self, path: Path) -> Any:
        from traceql.parsers import base

        if path.is_file() and path.suffix == ".rows":
            return [base.Unit(self.name, str(path), 0)]
        return None

    def parse(self, unit: Any, out: Any) -> dict[str, Any]:
        n = int(Path(unit.path).read_text())
        half = max(1, n // 2)  # two tables, two writes: a kill can land between them
        out.write(
            "kernels",
            {"name": [f"k{i}" for i in range(n)], "ts_ns": [T0 + i for i in range(n)], "dur_ns": [7] * n},
        )
        out.write(
            "host_ops",
            {
                "name": [f"h{i}" for i in range(half)],
                "ts_ns": [T0 + i for i in range(half)],
                "dur_ns": [3] * half,
            },
        )
        return {"device": "TestNPU"}


def register() -> None:
    from traceql.parsers import base

    base._REGISTRY = {"rows_test": RowsParser(), **base.registry()}


def store_rows(store: Path) -> dict[str, dict[str, int]]:
    """{run: {table: rows}} counted from the Parquet footers of exactly the files the manifest lists; raises if
    one is missing or unreadable."""
    import pyarrow.parquet as pq

    from traceql.store import Store

    st = Store(store)
    out: dict[str, dict[str, int]] = {}
    for run_id, info in st.runs().items():
        base = st.run_path(run_id, info)
        out[run_id] = {
            t: sum(pq.ParquetFile(base / rel).metadata.num_rows for rel in rels)
            for t, rels in info["files"].items()
        }
        if out[run_id] != {t: n for t, n in info["rows"].items() if n}:
            raise AssertionError(f"run {run_id}: files hold {out[run_id]}, manifest says {info['rows']}")
    return out


def _ingest_child(dump: Path, store: Path) -> None:
    from traceql.ingest import ingest

    try:
        ingest(dump, store, name="hot", replace=True, workers=1)
        os._exit(0)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        os._exit(3)


def _run_once(dump: Path, store: Path, delay: float | None) -> tuple[int, float]:
    t = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _ingest_child(dump, store)
    if delay is not None:
        time.sleep(delay)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return status, time.monotonic() - t


def kill_loop(store: Path, n: int, seed: int) -> dict[str, Any]:
    register()
    import pyarrow.parquet  # noqa: F401  # imported before fork: children start at once

    import traceql.ingest  # noqa: F401
    from traceql.store import Store

    rng = random.Random(seed)
    work = store.parent / "dumps"
    work.mkdir(exist_ok=True)
    (work / "base.rows").write_text("30")
    from traceql.ingest import ingest

    ingest(work / "base.rows", store, name="base", workers=1)
    first = work / "hot.rows"
    first.write_text("10")
    status, full = _run_once(first, store, None)
    assert status == 0, status
    hot = 10
    durations = [full]
    outcomes = {"old": 0, "new": 0, "killed": 0, "exited": 0, "left_orphan_run_dir": 0, "left_staging": 0}
    st = Store(store)
    seen: set[str] = set()
    i = -1
    while outcomes["killed"] < n:  # n actual kills (a kill that comes after the ingest ended does not count)
        i += 1
        assert i < 4 * n, outcomes
        attempt = 11 + i  # every attempt a different row count: the stored one says which version it is
        dump = work / f"hot{i}.rows"
        dump.write_text(str(attempt))
        window = 1.3 * sorted(durations)[len(durations) // 2]
        status, took = _run_once(dump, store, rng.uniform(0, window))
        if os.WIFSIGNALED(status):
            outcomes["killed"] += 1
        else:
            assert os.WEXITSTATUS(status) == 0, f"attempt {i}: ingest failed (exit {os.WEXITSTATUS(status)})"
            outcomes["exited"] += 1
            durations.append(took)
        # where the kill landed, from what it left: an unlisted generation dir = between the rename into
        # runs/ and the reap (the commit window); a staging entry = while parsing or before the rename
        # (counted only when this kill left a new one: an earlier kill's may still wait for its reaper)
        listed = {st.run_dir_name(r, inf) for r, inf in st.runs().items()}
        orphans = {p.name for p in (store / "runs").iterdir() if p.name not in listed}
        staged = {p.name for p in (store / ".staging").iterdir()} if (store / ".staging").is_dir() else set()
        outcomes["left_orphan_run_dir"] += bool(orphans - seen)
        outcomes["left_staging"] += bool(staged - seen)
        seen |= orphans | staged
        rows = store_rows(store)  # opens, every listed file present and complete
        assert rows["base"] == {"kernels": 30, "host_ops": 15}, rows
        got = rows.get("hot", {}).get("kernels")
        if got == hot:
            outcomes["old"] += 1
        elif got == attempt:
            outcomes["new"] += 1
            hot = attempt
        else:
            raise AssertionError(
                f"kill {i}: hot has {got} kernels; expected the old {hot} or the new {attempt}"
            )
        if i % 10 == 0:
            _duck_check(store, {"base": 30, "hot": hot})
    _duck_check(store, {"base": 30, "hot": hot})
    # the next ingest's start-up check reaps every leftover of the killed ones
    leftovers = _leftovers(store)
    dump = work / "final.rows"
    dump.write_text("5")
    status, _ = _run_once(dump, store, None)
    assert status == 0, status
    listed = {st.run_dir_name(r, i) for r, i in st.runs().items()}
    return {
        "outcomes": outcomes,
        "leftovers_before": leftovers,
        "after": _leftovers(store),
        "run_dirs": sorted(p.name for p in (store / "runs").iterdir()),
        "listed_dirs": sorted(listed),
        "median_ingest_s": sorted(durations)[len(durations) // 2],
    }


def _leftovers(store: Path) -> dict[str, int]:
    st = store / ".staging"
    return {
        "staging_entries": len(list(st.iterdir())) if st.is_dir() else 0,
        "tmp_files": len(list(store.glob(".*.tmp"))),
        "run_dirs": len(list((store / "runs").iterdir())),
    }


def _duck_check(store: Path, expect: dict[str, int]) -> None:
    """The store opens in DuckDB with these kernel counts (in a forked child: this process forks on)."""
    pid = os.fork()
    if pid == 0:
        try:
            from traceql import engine, schema

            con = engine.connect(store)
            for t in schema.TABLE_NAMES:
                con.execute(f"SELECT count(*) FROM {t}").fetchone()
            got = dict(con.execute("SELECT run_id, count(*) FROM kernels GROUP BY 1").fetchall())
            os._exit(0 if got == expect else 4)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            os._exit(5)
    _, status = os.waitpid(pid, 0)
    assert status == 0, f"DuckDB check of the store failed ({status}); expected {expect}"


def _commit_hot(store: Path, n: int) -> None:
    from traceql.rank_writer import RankWriter
    from traceql.store import Store

    st = Store(store)
    staging = st.new_staging()
    try:
        w = RankWriter(staging, "hot", 0)
        w.write(
            "kernels",
            {"name": [f"k{i}" for i in range(n)], "ts_ns": [T0 + i for i in range(n)], "dur_ns": [7] * n},
        )
        w.close()
        st.commit(
            staging,
            "hot",
            {
                "source": "t",
                "format": "canonical",
                "ranks": [0],
                "ranks_count": 1,
                "rows": w.rows,
                "files": w.files,
            },
            replace=True,
        )
    finally:
        st.discard(staging)


def writer(store: Path, stop: Path) -> dict[str, int]:
    from traceql.store import Store

    st = Store(store)
    done = {"replaced": 0, "removed": 0}
    i = 0
    while not stop.exists():
        i += 1
        _commit_hot(store, 10 + i % 7)
        done["replaced"] += 1
        if i % 3 == 0:
            st.remove("hot")
            done["removed"] += 1
    return done


def readers(store: Path, n: int, no_lock: bool = False) -> dict[str, Any]:
    from traceql import engine
    from traceql.store import Store

    if no_lock:  # the control experiment (by hand, not in the suite): readers without the shared lock
        Store.reader_lock = lambda self: None  # type: ignore[method-assign]

    failures: list[str] = []
    seen_hot = 0
    for _ in range(n):
        try:
            con = engine.connect(store)
            con.execute("SELECT count(*) FROM host_ops").fetchall()
            got = dict(con.execute("SELECT run_id, count(*) FROM kernels GROUP BY 1").fetchall())
            runs = {r for (r,) in con.execute("SELECT run_id FROM runs").fetchall()}
            if got.get("base") != 30 or not set(got) <= runs or got.get("hot", 10) not in range(10, 17):
                failures.append(f"inconsistent: {got} runs {runs}")
            seen_hot += "hot" in got
            con.close()
            del con
        except Exception as e:  # noqa: BLE001
            failures.append(f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return {"queries": n, "failures": len(failures), "first": failures[:3], "saw_hot": seen_hot}


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "kill-loop":
        res: Any = kill_loop(Path(args[0]), int(args[1]), int(args[2]))
    elif mode == "writer":
        res = writer(Path(args[0]), Path(args[1]))
    elif mode == "readers":
        res = readers(Path(args[0]), int(args[1]), no_lock="--no-lock" in args)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(res))
