"""traceql caps glibc's malloc arenas (traceql._procs.cap_malloc_arenas, issue 18): a parse worker's threads
each took an arena of their own, and what they freed stayed there, so a worker's memory grew with the units it
had parsed. The arena count is read from glibc's own malloc_info() report (not from traceql), in a fresh
process whose threads each allocate; the same process without the cap shows the test can fail."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_PROBE = textwrap.dedent(
    """
    import ctypes, os, re, sys, tempfile, threading
    if sys.argv[1] == "cap":
        from traceql._procs import cap_malloc_arenas
        cap_malloc_arenas()
    barrier = threading.Barrier(9)
    keep = []
    def work():
        keep.append([bytearray(10000) for _ in range(50)])  # > 512 bytes: glibc malloc, not pymalloc
        barrier.wait()  # every thread alive at once: none can hand its arena to the next
        barrier.wait()
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    barrier.wait()
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    fd, path = tempfile.mkstemp()
    os.close(fd)
    fp = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(fp))
    libc.fclose(ctypes.c_void_p(fp))
    barrier.wait()
    for t in threads:
        t.join()
    print(len(re.findall(r"<heap nr=", open(path).read())))
    os.unlink(path)
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
