"""Ray behind the Executor interface: one Ray task per job, scheduled by CPU and memory, retried on worker
death.

- Connects to `address` (`ray://head:10001`, `auto`), else $RAY_ADDRESS (ray.init's own rule), else starts a
  local Ray on this machine; an already-initialised Ray (a notebook, a test session) is reused as is.
- Each task asks for 1 CPU and its job's memory estimate (capped at the largest live node's memory, so a
  task is never unschedulable); Ray retries a task whose worker process died (`max_retries`, Ray's
  system-failure retry) and never retries a task that raised (a bad dump stays bad).
- A traceql error raised in a task is returned as a value and raised again on the driver, so the user sees
  its one-line message, not Ray's remote traceback.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import TraceQLError
from .base import ExecutorError

MAX_RETRIES = 3


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
    """The task body: ("ok", result) or ("error", the TraceQLError), so the driver re-raises it unwrapped."""
    try:
        return "ok", fn(*args)
    except TraceQLError as e:
        return "error", e


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise TraceQLError("--executor ray needs Ray on this machine: pip install 'traceql[ray]'") from e
    return ray


class RayExecutor:
    name = "ray"

    def __init__(
        self, address: str | None = None, workers: int | None = None, max_retries: int = MAX_RETRIES
    ) -> None:
        ray = _ray()
        self.max_retries = max_retries
        self._started = False
        if not ray.is_initialized():
            kw: dict[str, Any] = {"address": address, "include_dashboard": False, "log_to_driver": False}
            if address is None and workers:
                kw["num_cpus"] = (
                    workers  # a local Ray of that many CPUs (ignored when RAY_ADDRESS names a cluster)
                )
            try:
                ray.init(**kw)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise TraceQLError(f"cannot connect to Ray at {address or 'RAY_ADDRESS/local'}: {e}") from e
            self._started = True
        self._remote = ray.remote(_call)

    def _memory_cap(self) -> int:
        ray = _ray()
        mems = [int(n["Resources"].get("memory", 0)) for n in ray.nodes() if n.get("Alive")]
        return max(mems, default=0)

    def map(
        self, fn: Callable[..., Any], jobs: list[tuple[Any, ...]], memory: list[int] | None = None
    ) -> Iterator[tuple[int, Any]]:
        ray = _ray()
        cap = self._memory_cap() if memory else 0
        refs: dict[Any, int] = {}
        for i, job in enumerate(jobs):
            opts: dict[str, Any] = {"num_cpus": 1, "max_retries": self.max_retries, "retry_exceptions": False}
            if memory and cap:
                opts["memory"] = max(1, min(int(memory[i]), cap))
            refs[self._remote.options(**opts).remote(fn, job)] = i
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                ref = done[0]
                try:
                    status, value = ray.get(ref)
                except ray.exceptions.RayError as e:
                    first = (str(e).strip().splitlines() or [""])[-1][:300]
                    raise ExecutorError(
                        f"Ray could not complete job {refs[ref]} ({type(e).__name__}: {first})"
                    ) from e
                if status == "error":
                    raise value
                yield refs[ref], value
        except BaseException:
            for ref in pending:
                with contextlib.suppress(Exception):  # best effort: the task may have finished meanwhile
                    ray.cancel(ref, force=True)
            raise

    def close(self) -> None:
        if self._started:
            _ray().shutdown()
            self._started = False
