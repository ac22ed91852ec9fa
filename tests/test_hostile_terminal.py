"""`--format csv` to a terminal escapes control sequences from dump text (issue 22); to a pipe it is exact."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from pathlib import Path

from tests._bounded import ROOT
from traceql.rank_writer import RankWriter
from traceql.store import Store

EVIL = "op\x1b]0;pwned\x07\x1b[31mred\x9b2J"


def _store(tmp: Path) -> Path:
    store = tmp / "store"
    s = Store(store)
    staging = s.new_staging()
    w = RankWriter(staging, "r", 0)
    w.write("kernels", {"name": [EVIL], "ts_ns": [1], "dur_ns": [10]})
    w.close()
    s.commit(
        staging,
        "r",
        {
            "source": "t",
            "format": "canonical",
            "ranks": [0],
            "ranks_count": 1,
            "rows": w.rows,
            "files": w.files,
        },
    )
    return store


def _args(store: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "traceql",
        "sql",
        "SELECT name FROM kernels",
        "--store",
        str(store),
        "--format",
        "csv",
    ]


def test_csv_to_a_terminal_has_no_escape_sequences(tmp_path: Path) -> None:
    store = _store(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    master, slave = pty.openpty()
    p = subprocess.Popen(
        _args(store), stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env
    )
    os.close(slave)
    data = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        data += chunk
    p.wait(timeout=30)
    os.close(master)
    assert p.returncode == 0, p.stderr.read() if p.stderr else ""
    assert b"\x1b" not in data and b"\x07" not in data and "\x9b".encode() not in data, data
    assert b"\\x1b]0;pwned" in data, data  # shown escaped, not dropped


def test_csv_to_a_pipe_is_exact(tmp_path: Path) -> None:
    store = _store(tmp_path)
    r = subprocess.run(
        _args(store), capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60
    )
    assert r.returncode == 0, r
    assert EVIL.encode() in r.stdout
