"""Run the real CLI in a subprocess under a wall-clock timeout and an address-space cap.

Hostile-input tests must not be able to hang CI or eat the machine: each run gets RLIMIT_AS (the cap the
issue's attacks were measured under) and a timeout; a run that exceeds either fails the test loudly instead.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MEM = 3 << 30  # 3 GiB of address space: DuckDB + pyarrow reserve ~1.2 GiB at start


@dataclass
class Ran:
    code: int
    out: str
    err: str
    wall_s: float

    def __repr__(self) -> str:
        return f"Ran(code={self.code}, wall={self.wall_s:.1f}s, out={self.out[-1500:]!r}, err={self.err[-1500:]!r})"

    @property
    def err_lines(self) -> list[str]:
        return [ln for ln in self.err.splitlines() if ln.strip()]


def traceql(
    *args: object,
    timeout: float = 60,
    mem: int = DEFAULT_MEM,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Ran:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))

    e = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
    e.pop("TRACEQL_DEBUG", None)
    t = time.monotonic()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "traceql", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=cap,
            env=e,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as x:
        raise AssertionError(
            f"traceql {args} still running after {timeout} s (a hang): {x.stderr!r}"
        ) from None
    return Ran(p.returncode, p.stdout, p.stderr, time.monotonic() - t)
