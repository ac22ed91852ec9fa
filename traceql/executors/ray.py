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
import os
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import TraceQLError
from .base import ExecutorError

MAX_RETRIES = 3


def _call(fn: Callable[..., Any], args: tuple[Any, ...], board: Any = None) -> tuple[str, Any]:
    """The task body: ("ok", result) or ("error", the TraceQLError), so the driver re-raises it unwrapped.
    board: the progress actor (RayBoard's), installed as this worker's progress slots for the job."""
    from .. import progress

    progress.init_worker(_ActorSlots(board) if board is not None else None)
    try:
        return "ok", fn(*args)
    except TraceQLError as e:
        return "error", e
    finally:
        progress.init_worker(None)  # a Ray worker process is reused by the next task


class _Board:
    """The progress actor's class: slot -> bytes done. A task's UnitProgress writes about 5 times a second
    (fire and forget: .remote() without waiting); the driver reads all slots twice a second."""

    def __init__(self, n: int) -> None:
        self.slots = [0] * n

    def set(self, index: int, value: int) -> None:
        if 0 <= index < len(self.slots):
            self.slots[index] = max(self.slots[index], value)

    def values(self) -> list[int]:
        return self.slots


class _ActorSlots:
    """Looks like the shared array traceql.progress writes (slots[i] = v, len), sends each change to the
    actor instead."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.n = 1 << 30  # the actor checks the bounds; UnitProgress only asks len() for that
        self._sent: dict[int, int] = {}

    def __len__(self) -> int:
        return self.n

    def __setitem__(self, index: int, value: int) -> None:
        if self._sent.get(index) != value:
            self._sent[index] = value
            self.actor.set.remote(index, int(value))


class RayBoard:
    """The Ray ProgressBoard: an actor of no CPU (it only holds numbers), read on the driver."""

    def __init__(self, n: int) -> None:
        ray = _ray()
        self.actor = ray.remote(num_cpus=0)(_Board).remote(n)
        # ready before the tasks start (an actor's process takes seconds to start on a loaded node; until it
        # runs, the driver's reads would wait and the first tasks' bytes show only when they are done)
        ray.get(self.actor.values.remote(), timeout=120)

    def values(self) -> list[int]:
        ray = _ray()
        try:
            return list(ray.get(self.actor.values.remote(), timeout=5))
        except Exception:  # noqa: BLE001 - the bar holds when the actor is slow or gone; the ingest goes on
            return []


def worker_env() -> dict[str, Any]:
    """The runtime_env of traceql's Ray tasks: the glibc malloc arena cap the local pool's workers get
    (traceql._procs.cap_malloc_arenas, which says why), set in the worker's environment, which glibc reads when
    the worker process starts; a task's runtime_env gives it workers of its own, so no other job's worker is
    changed. A MALLOC_ARENA_MAX set where traceql runs is passed on instead."""
    from .._procs import MALLOC_ARENAS

    return {"env_vars": {"MALLOC_ARENA_MAX": os.environ.get("MALLOC_ARENA_MAX", str(MALLOC_ARENAS))}}


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
        self._board: RayBoard | None = None

    def progress_board(self, n: int) -> RayBoard | None:
        """n == 0: no board (the following jobs publish nothing)."""
        self._board = RayBoard(n) if n else None
        return self._board

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
            opts: dict[str, Any] = {
                "num_cpus": 1,
                "max_retries": self.max_retries,
                "retry_exceptions": False,
                "runtime_env": worker_env(),
            }
            if memory and cap:
                opts["memory"] = max(1, min(int(memory[i]), cap))
            board = self._board.actor if self._board is not None else None
            refs[self._remote.options(**opts).remote(fn, job, board)] = i
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
        self._board = None  # the actor goes with its last handle
        if self._started:
            _ray().shutdown()
            self._started = False
