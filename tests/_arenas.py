"""glibc malloc arenas in this process, counted from glibc's own malloc_info() report, once 8 threads have each
allocated: the probe of the tests of traceql's arena cap (traceql._procs.cap_malloc_arenas), run in a fresh
process (tests/test_malloc_arenas.py) and in a Ray worker (tests/test_cluster_ingest.py)."""

from __future__ import annotations

from typing import Any


def heaps_with_8_allocating_threads() -> int:
    import ctypes
    import os
    import re
    import tempfile
    import threading

    barrier = threading.Barrier(9)
    keep: list[Any] = []

    def work() -> None:
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
    with open(path) as fh:
        n = len(re.findall(r"<heap nr=", fh.read()))
    os.unlink(path)
    return n
