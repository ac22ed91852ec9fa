"""Worker processes that die with their parent, and a parent that cleans up on SIGTERM/SIGHUP.

A ProcessPoolExecutor worker blocks on its call queue for ever once the parent is gone (kill -9, OOM kill,
a closed terminal), holding ~190 MB and the parent's stdout/stderr (so `traceql ingest ... | tee log` never
ends). Each worker therefore:
- asks the kernel for SIGTERM when its parent dies (Linux prctl PR_SET_PDEATHSIG; it fires when the *thread*
  that forked the worker exits: traceql starts its pools from the main thread);
- handles SIGTERM/SIGHUP by removing its temp dirs (traceql._owned) and exiting at once;
- runs a watchdog thread that polls the parent pid, for systems without prctl and for a main thread stuck in a
  long C call (a Python signal handler only runs between bytecodes).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

PR_SET_PDEATHSIG = 1
WATCH_INTERVAL_S = 0.5


def _set_parent_death_signal(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


# The thread that is removing this worker's temp dirs before it exits. A worker is often told to die more
# than once: the parent's terminate(), the pool's manager thread terminating the rest once one worker is gone,
# the kernel's parent-death signal, the watchdog. A second call must not os._exit while the first is still
# inside rmtree (its dir would be left behind): in the cleaning thread (a signal handler nested in the cleanup)
# it returns, in any other thread it waits for the cleaning thread to exit the process.
_cleaning: list[int] = []  # list.append is atomic; the first entry wins


def _die(code: int) -> None:
    from . import _owned

    me = threading.get_ident()
    if _cleaning and _cleaning[0] == me:
        return  # a signal handler run inside this thread's own cleanup: let the cleanup finish
    _cleaning.append(me)
    if _cleaning[0] != me:
        while True:  # another thread is cleaning up and will end the process
            time.sleep(WATCH_INTERVAL_S)
    try:
        _owned.release_all()
    finally:
        os._exit(code)


def _on_fatal_signal(signum: int, _frame: Any) -> None:
    _die(128 + signum)


def _watch(parent: int) -> None:
    while True:
        time.sleep(WATCH_INTERVAL_S)
        if os.getppid() != parent:
            _die(128 + signal.SIGTERM)


# glibc malloc gives each new thread that allocates its own arena (up to 8 per core), and memory freed in an arena
# stays with it. A parse worker runs DuckDB's, Arrow's and traceql's own threads unit after unit, so its resident
# memory crept up with the number of units it had parsed: a cluster of 247 small ranks on 2 workers, 280 -> 420
# MB a worker over the run, the ingest's peak 571 / 711 / 883 MB at 0.25 / 1 / 4 GB (max/min 1.55, issue 18).
# With 2 arenas the two workers together stay at 490-520 MB over the whole run (4 arenas: 520-600), and a 1 GB
# trace_view ingests at the same speed (2 A/B pairs: 9.05-9.48 s default, 8.63-9.11 s capped).
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number in glibc's malloc.h
_arenas_capped: list[bool] = []


def cap_malloc_arenas(n: int = MALLOC_ARENAS) -> None:
    """At most `n` glibc malloc arenas in this process (and the workers it forks later), unless the user set
    MALLOC_ARENA_MAX (glibc read it at start-up). Arenas made before the call stay: call it early. Only in
    processes traceql owns (the CLI, its pool workers): a library caller's own process keeps its malloc."""
    if _arenas_capped or not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return
    _arenas_capped.append(True)
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, n)
    except (OSError, AttributeError):  # not glibc: its malloc has no such arenas
        pass


# pyarrow's default allocator (mimalloc) reserves 1 GiB of address space at its first allocation. Under an
# address-space cap (`ulimit -v`) too small for that it falls back to segments that leave the rest of the process
# too little room, and a thread that then starts can abort the process in glibc ("cannot allocate memory for
# thread-local data", exit 127), where no error line can be printed: an ingest of a sample dump under 640 MB did,
# now and then (tests/test_outputs_interrupts.py). The system allocator reserves nothing ahead.
ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


def fit_address_space_cap() -> None:
    """Arrow on the system allocator when this process runs under an address-space cap (RLIMIT_AS), unless
    the user chose a pool (ARROW_DEFAULT_MEMORY_POOL). Arrow reads the variable when pyarrow is imported, and
    pool workers inherit it: call it before anything imports pyarrow."""
    if ARROW_POOL_ENV in os.environ:
        return
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):  # no such limit on this platform
        return
    if soft != resource.RLIM_INFINITY:
        os.environ[ARROW_POOL_ENV] = "system"


def worker_init(parent: int) -> None:
    """ProcessPoolExecutor initializer: tie this worker's life to `parent` (the pid that made the pool)."""
    _set_parent_death_signal(signal.SIGTERM)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_fatal_signal)
    if os.getppid() != parent:  # the parent died before prctl took effect
        _die(128 + signal.SIGTERM)
    threading.Thread(target=_watch, args=(parent,), name="traceql-parent-watch", daemon=True).start()


def _raise_exit(signum: int, _frame: Any) -> None:
    # SystemExit unwinds the parent like Ctrl-C does: finally blocks stop the pool, discard the staging dir,
    # remove temp dirs; atexit handlers run
    raise SystemExit(128 + signum)


def install_parent_handlers() -> None:
    """In the CLI process: SIGTERM and SIGHUP end it through SystemExit instead of killing it outright, so
    its cleanup (worker pools, staging and temp dirs) runs. Only from the main thread, where signals land."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _raise_exit)


def map_jobs(
    ex: ProcessPoolExecutor | None, fn: Callable[..., Any], jobs: list[tuple[Any, ...]]
) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(job, fn(*job)) for each job, as they finish: in the pool when there is one, else here in order."""
    if ex is None:
        for job in jobs:
            yield job, fn(*job)
        return
    futs = {ex.submit(fn, *job): job for job in jobs}
    for fut in as_completed(futs):
        yield futs[fut], fut.result()


def abort_pool(ex: ProcessPoolExecutor) -> None:
    """Stop a pool at once: pending jobs cancelled, running workers terminated (an error or Ctrl-C path)."""
    procs = list(getattr(ex, "_processes", {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)
