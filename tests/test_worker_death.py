"""A worker told to die twice still removes its temp dirs (traceql._procs._die).

A pool worker is routinely signalled more than once as an ingest is stopped: the parent's terminate(), the
pool's manager thread terminating the rest once one worker has gone, the kernel's parent-death signal, the
watchdog thread. CI saw a worker's temp dir outlive a SIGTERM'd ingest; these tests make the second signal
land inside the first one's rmtree, every time, instead of waiting for the race."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

# A process that holds a traceql temp dir, handles SIGTERM as a pool worker does, and whose rmtree is slowed
# so that the second "die" (SECOND: a nested SIGTERM, or another thread's _die) arrives mid-cleanup.
SCRIPT = textwrap.dedent(
    r"""
    import os, shutil, signal, sys, threading, time
    from pathlib import Path
    from traceql import _owned, _procs

    signal.signal(signal.SIGTERM, _procs._on_fatal_signal)
    d = _owned.TempDir("dietwice")
    for i in range(50):
        (Path(d.name) / f"part-{i}").write_bytes(b"x" * 1000)
    real_rmtree = shutil.rmtree

    def slow_rmtree(path, *a, **k):
        if sys.argv[1] == "signal":
            os.kill(os.getpid(), signal.SIGTERM)  # lands in the handler already running
        else:
            threading.Thread(target=_procs._die, args=(3,)).start()  # the watchdog's path
        time.sleep(0.3)  # the second call has run by now: the old code had exited here
        return real_rmtree(path, *a, **k)

    shutil.rmtree = slow_rmtree
    print(d.name, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
    sys.exit(99)  # never reached: the handler exits the process
    """
)


def _run(tmp_path: Path, second: str) -> tuple[int, Path]:
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, second],
        capture_output=True,
        text=True,
        timeout=30,
        env={"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert p.stdout.strip(), p.stderr
    return p.returncode, Path(p.stdout.strip())


def test_a_second_sigterm_inside_the_cleanup_lets_it_finish(tmp_path: Path) -> None:
    code, d = _run(tmp_path, "signal")
    assert code == 128 + signal.SIGTERM
    assert not d.exists(), "the nested SIGTERM exited before rmtree finished"
    assert not Path(str(d) + ".lock").exists()


def test_another_threads_die_waits_for_the_cleaning_thread(tmp_path: Path) -> None:
    code, d = _run(tmp_path, "thread")
    assert code == 128 + signal.SIGTERM, "the second thread's exit code: it ended the process mid-cleanup"
    assert not d.exists()
    assert not Path(str(d) + ".lock").exists()
