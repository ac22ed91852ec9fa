"""Run a command; print its wall time, the CPU-seconds of its whole process tree and the tree's peak RSS.

CPU is user + sys of every child process that was waited for (getrusage(RUSAGE_CHILDREN)); the peak is the
resident memory summed over the command and its descendants, polled every 50 ms from /proc (Linux), so a
worker pool counts whole. The figures the benchmarks/README.md tables quote as "CPU s" and "peak RSS (all
processes)".

    python benchmarks/tree_usage.py traceql ingest DUMP --store S -q
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    return kids


def tree_rss(pid: int) -> int:
    """Resident bytes of pid and its descendants now."""
    kids, total, todo = _children(), 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            pass
        todo += kids.get(p, [])
    return total


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    t0 = time.time()
    proc = subprocess.Popen(argv)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        time.sleep(0.05)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"rc={proc.returncode} wall={time.time() - t0:.1f}s cpu={ru.ru_utime + ru.ru_stime:.1f}s "
        f"peak_tree_rss={peak / 2**20:.0f}MB",
        file=sys.stderr,
    )
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
