"""The local process pool behind the Executor interface (one process per job at a time)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from .base import ExecutorError


def _init(parent: int) -> None:
    from .. import _procs

    _procs.worker_init(parent)  # a worker dies with its parent


class LocalPool:
    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._ex: ProcessPoolExecutor | None = None

    def map(
        self, fn: Callable[..., Any], jobs: list[tuple[Any, ...]], memory: list[int] | None = None
    ) -> Iterator[tuple[int, Any]]:
        n = min(self.workers, len(jobs))
        if n <= 1:  # one job or one worker: here, in order (no process start-up)
            for i, job in enumerate(jobs):
                yield i, fn(*job)
            return
        if self._ex is None:
            self._ex = ProcessPoolExecutor(
                max_workers=self.workers, initializer=_init, initargs=(os.getpid(),)
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
