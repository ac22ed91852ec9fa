"""The local process pool behind the Executor interface (one process per job at a time)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from .base import ExecutorError


def _init(parent: int, slots: Any = None) -> None:
    from .. import _procs, progress

    _procs.worker_init(parent)  # a worker dies with its parent
    _procs.cap_malloc_arenas()  # a library caller's pool: its workers are ours, its own process is not
    progress.init_worker(slots)  # where this worker's units publish their bytes read (None: nowhere)


class SharedSlots:
    """The local ProgressBoard: a shared array the pool's workers inherit (multiprocessing.Array, no lock:
    each slot has one writer)."""

    def __init__(self, n: int) -> None:
        import multiprocessing

        self.slots = multiprocessing.Array("q", max(1, n), lock=False)

    def values(self) -> list[int]:
        return list(self.slots)


class LocalPool:
    name = "local"

    def __init__(self, workers: int | None = None, start_method: str | None = None) -> None:
        """start_method: multiprocessing's ("spawn" for jobs that use fsspec's S3 client: a worker forked
        from a driver whose fsspec event-loop thread is running can crash inside botocore); None: the
        platform default (fork on Linux, no start-up cost)."""
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.start_method = start_method
        self._ex: ProcessPoolExecutor | None = None
        self._board: SharedSlots | None = None

    def progress_board(self, n: int) -> SharedSlots | None:
        """Slots the next map()s' jobs publish into; the pool is restarted to hand them to its workers (an
        inherited shared array cannot be sent to a running worker). n == 0: no board, the pool kept."""
        if not n:
            self._board = None
            return None
        self._board = SharedSlots(n)
        self.close()
        return self._board

    def map(
        self, fn: Callable[..., Any], jobs: list[tuple[Any, ...]], memory: list[int] | None = None
    ) -> Iterator[tuple[int, Any]]:
        n = min(self.workers, len(jobs))
        slots = self._board.slots if self._board is not None else None
        if n <= 1:  # one job or one worker: here, in order (no process start-up)
            from .. import progress

            progress.init_worker(slots)
            for i, job in enumerate(jobs):
                yield i, fn(*job)
            return
        if self._ex is None:
            import multiprocessing

            ctx = multiprocessing.get_context(self.start_method) if self.start_method else None
            self._ex = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=ctx, initializer=_init, initargs=(os.getpid(), slots)
            )
        futs: dict[Future[Any], int] = {self._ex.submit(fn, *job): i for i, job in enumerate(jobs)}
        try:
            for fut in as_completed(futs):
                try:
                    yield futs[fut], fut.result()
                except BrokenProcessPool as e:
                    raise ExecutorError(
                        f"a worker process died while running job {futs[fut]} (killed, or out of memory)"
                    ) from e
        except BaseException:
            for f in futs:
                f.cancel()
            self._abort()
            raise

    def _abort(self) -> None:
        ex, self._ex = self._ex, None
        if ex is None:
            return
        procs = list((getattr(ex, "_processes", None) or {}).values())
        ex.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=5)

    def close(self) -> None:
        ex, self._ex = self._ex, None
        if ex is not None:
            ex.shutdown(wait=True)
