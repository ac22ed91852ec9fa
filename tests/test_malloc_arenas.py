"""traceql caps glibc's malloc arenas (traceql._procs.cap_malloc_arenas, issue 18): a parse worker's threads
each took an arena of their own, and what they freed stayed there, so a worker's memory grew with the units it
had parsed. The arena count is read from glibc's own malloc_info() report (not from traceql; tests/_arenas.py),
in a fresh process whose threads each allocate; the same process without the cap shows the test can fail."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_PROBE = textwrap.dedent(
    f"""
    import sys
    if sys.argv[1] == "cap":
        from traceql._procs import cap_malloc_arenas
        cap_malloc_arenas()
    sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
    from _arenas import heaps_with_8_allocating_threads
    print(heaps_with_8_allocating_threads())
    """
)


def _arenas(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, env=env, timeout=60, check=True
    )
    return int(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc arenas: Linux only")
def test_capped_process_keeps_at_most_two_malloc_arenas() -> None:
    from traceql._procs import MALLOC_ARENAS

    uncapped = _arenas("plain")
    if uncapped <= MALLOC_ARENAS:
        pytest.skip(f"this libc made {uncapped} arenas for 8 threads without the cap: nothing to tell apart")
    assert _arenas("cap") <= MALLOC_ARENAS < uncapped
