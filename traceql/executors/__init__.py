"""Where per-rank work runs: the local process pool (default) or a Ray cluster.

The interface is one method, so another engine (Dask) is one more module:

    ex = get("ray", address="ray://head:10001")
    for index, result in ex.map(fn, jobs, memory=[bytes per job]):   # as jobs finish, in any order
        ...
    ex.close()

`fn` is a module-level function of traceql (workers import it by name); `jobs` are tuples of picklable
arguments. `map` raises the first job's error as it was raised (a TraceQLError keeps its one-line message)
after cancelling the jobs still queued; a worker that dies is the engine's to retry (Ray: `max_retries`),
and a job that cannot be completed raises ExecutorError naming it. `memory`: the bytes each job is
expected to need at its peak, for engines that schedule by memory (Ray); the pool ignores it.
"""

from __future__ import annotations

from ..errors import TraceQLError
from .base import Executor, ExecutorError

__all__ = ["NAMES", "Executor", "ExecutorError", "get"]

NAMES = ("local", "ray")


def get(
    name: str, workers: int | None = None, address: str | None = None, timeout_s: float | None = None
) -> Executor:
    """An executor by name: "local" (process pool of `workers`) or "ray" (connects to `address`, else
    $RAY_ADDRESS, else starts a local Ray)."""
    if name == "local":
        from .local import LocalPool

        return LocalPool(workers)
    if name == "ray":
        from .ray import RayExecutor

        return RayExecutor(address=address, workers=workers, timeout_s=timeout_s)
    raise TraceQLError(f"unknown executor {name!r}: use one of {', '.join(NAMES)}")
