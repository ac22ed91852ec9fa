"""Special files a hostile dump (e.g. an untarred archive) can hold: FIFOs, /dev/zero links, folders named like files, sparse files. Harness: tests/_fuzz_harness.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests._fuzz_harness import (  # noqa: F401 - pool and print_totals are fixtures
    TALLY,
    base_store,
    check_outcome,
    print_totals,
    run_cli,
)

# ---------------------------------------------------------------------------------------------------------
# Special files a hostile dump (e.g. an untarred archive) can hold


def _special_cases(tmp: Path) -> list[tuple[str, Path]]:
    cases: list[tuple[str, Path]] = []
    d = tmp / "fifo_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    os.mkfifo(d / "kernel_details.csv")
    cases.append(("fifo named kernel_details.csv", d.parent))
    d = tmp / "zero_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    (d / "trace_view.json").symlink_to("/dev/zero")
    cases.append(("trace_view.json -> /dev/zero", d.parent))
    d = tmp / "dir_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    (d / "kernel_details.csv").mkdir(parents=True)
    cases.append(("a directory named kernel_details.csv", d.parent))
    d = tmp / "sparse"
    d.mkdir()
    with open(d / "trace_view.json", "wb") as fh:
        fh.truncate(256 * 2**20)
    cases.append(("256 MB of NUL bytes named trace_view.json", d / "trace_view.json"))
    d = tmp / "loop"
    d.mkdir()
    (d / "rank0_ascend_pt").symlink_to(d, target_is_directory=True)
    cases.append(("a folder whose child links back to itself", d))
    d = tmp / "dangling_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    (d / "kernel_details.csv").symlink_to(tmp / "does_not_exist.csv")
    cases.append(("dangling symlink named kernel_details.csv", d.parent))
    return cases


SPECIAL_KNOWN: dict[str, str] = {}


@pytest.mark.parametrize("idx", range(6))
def test_special_files(tmp_path: Path, idx: str) -> None:
    name, path = _special_cases(tmp_path)[int(idx)]
    store = base_store(tmp_path / "store")
    manifest = (store / "manifest.json").read_bytes()
    o = run_cli(["ingest", str(path), "--store", str(store), "--name", "fz", "-q", "-j", "1"], timeout=20)
    TALLY.inputs += 1
    TALLY.max_rss_mb = max(TALLY.max_rss_mb, o.rss_mb)
    TALLY.max_wall_s = max(TALLY.max_wall_s, o.wall_s)
    found = check_outcome(o, path, name)
    if not found and o.code == 1 and (store / "manifest.json").read_bytes() != manifest:
        found.append("exit 1 but the store changed")
    if found:
        reason = SPECIAL_KNOWN.get(name)
        msg = f"{name}: {' | '.join(found)}\n    command: traceql ingest {path} --store {store} --name fz -q -j 1"
        if reason:
            TALLY.known.append(msg)
            pytest.xfail(f"{msg}\n    known: {reason}")
        TALLY.failures.append(msg)
        pytest.fail(msg, pytrace=False)
    if o.code == 0:
        TALLY.ingested += 1
    else:
        TALLY.refused += 1
