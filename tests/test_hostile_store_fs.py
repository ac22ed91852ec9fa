"""Store filesystem errors (issue 22): disk full mid-ingest, a read-only filesystem, a store path that is a
device, a /proc folder or a path through a file. Each is one line naming the path and what to do, exit 1,
no traceback on the way (pyarrow's 'Exception ignored in ParquetWriter.__del__' included), store unchanged.

Disk full and read-only use a real small tmpfs (mount needs root with CAP_SYS_ADMIN; skipped elsewhere).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._bounded import traceql

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
CLUSTER = SAMPLES / "torch_npu_2rank"
KINETO = SAMPLES / "kineto_cpu"


def clean_failure(r, *expect: str) -> None:  # type: ignore[no-untyped-def]
    assert r.code == 1, r
    errors = [ln for ln in r.err_lines if ln.startswith("error")]
    assert len(errors) == 1, r
    for bad in ("Traceback", "Exception ignored", "internal error"):
        assert bad not in r.err, r
    for e in expect:
        assert e in errors[0], (e, r)


@pytest.mark.parametrize(
    "store, expect",
    [
        ("/dev/null", "is not a traceql store folder"),
        ("/proc/self", "pass --store"),
        ("{file}/sub", "a part of the path is a file"),
    ],
)
def test_impossible_store_paths_are_one_line(tmp_path: Path, store: str, expect: str) -> None:
    f = tmp_path / "regular"
    f.write_text("x")
    r = traceql("ingest", KINETO, "--store", store.format(file=f), timeout=60)
    clean_failure(r, expect)
    assert f.read_text() == "x"


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=120k", "tmpfs", str(mnt)], capture_output=True
    ).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _remount(mnt: Path, opts: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{opts}", str(mnt)], check=True, capture_output=True)


def _snapshot(store: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(store)): p.read_bytes()
        for p in store.rglob("*")
        if p.is_file() and ".staging" not in p.parts
    }


def test_disk_full_mid_ingest_is_one_line_and_leaves_the_store_as_it_was(tmpfs: Path) -> None:
    store = tmpfs / "s"
    _remount(tmpfs, "size=2m")
    r = traceql("ingest", KINETO, "--store", store, "--no-prepare", timeout=60)
    assert r.code == 0, r
    before = _snapshot(store)
    used = sum(len(v) for v in before.values())
    _remount(tmpfs, f"size={(used >> 10) + 60}k")  # room for a few files of the next run, not for all of them
    r = traceql("ingest", CLUSTER, "--store", store, "--no-prepare", timeout=60)
    clean_failure(r, "no space left on the device", str(store), "free some space")
    assert _snapshot(store) == before
    assert list((store / ".staging").iterdir()) == []  # the partial run was discarded


def test_read_only_store_ingest_and_rm_are_one_line(tmpfs: Path) -> None:
    store = tmpfs / "s"
    _remount(tmpfs, "size=2m")
    assert traceql("ingest", KINETO, "--store", store, "--no-prepare", timeout=60).code == 0
    before = _snapshot(store)
    _remount(tmpfs, "ro")
    clean_failure(traceql("ingest", CLUSTER, "--store", store, timeout=60), "read-only", "writable")
    clean_failure(traceql("rm", "kineto_cpu", "--store", store, timeout=60), "read-only", "writable")
    # reading still works on a read-only store
    r = traceql("sql", "SELECT count(*) AS n FROM host_ops", "--store", store, "--format", "csv", timeout=60)
    assert r.code == 0 and r.out.split() == ['"n"', "44"], r
    assert _snapshot(store) == before
