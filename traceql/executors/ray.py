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
# How long traceql waits on Ray for a sign of life before it gives up in one line (issue 47: a dead local node
# made an ingest wait 125 s and print `internal error: GetTimeoutError`): connecting to the cluster, the
# progress actor starting, and the cluster having no live node while tasks are pending. A task that runs long
# on a live node is never cut short by it.
TIMEOUT_ENV = "TRACEQL_RAY_TIMEOUT"
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 30 * 86400.0
_POLL_S = 2.0  # how often map() looks at the cluster while no task finishes


def ray_timeout(given: float | None = None) -> float:
    """--ray-timeout, else TRACEQL_RAY_TIMEOUT, else 60 s; finite and > 0 (the CLI checks its option too)."""
    import math

    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        v = given if given is not None else (float(raw) if raw else DEFAULT_TIMEOUT_S)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or not 0 < v <= MAX_TIMEOUT_S:
        shown = given if given is not None else f"{TIMEOUT_ENV}={raw!r}"
        raise TraceQLError(f"Ray timeout {shown}: expected seconds > 0 and <= {MAX_TIMEOUT_S:g}")
    return v


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

    def __init__(self, n: int, timeout_s: float = DEFAULT_TIMEOUT_S, where: str = "a local Ray") -> None:
        ray = _ray()
        self.actor = ray.remote(num_cpus=0)(_Board).remote(n)
        # ready before the tasks start (an actor's process takes seconds to start on a loaded node; until it
        # runs, the driver's reads would wait and the first tasks' bytes show only when they are done); no
        # live node to start it on is the first sign of a dead cluster: one line, within the timeout
        try:
            ray.get(self.actor.values.remote(), timeout=timeout_s)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayError) as e:
            raise ExecutorError(
                _lost(where, f"its first actor did not start ({type(e).__name__})", timeout_s)
            ) from e

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


def _lost(where: str, what: str, timeout_s: float) -> str:
    return (
        f"Ray at {where}: {what} within {timeout_s:g} s: the cluster is unreachable or has lost its nodes "
        f"(check `ray status`); raise the wait with --ray-timeout or {TIMEOUT_ENV}. The store is unchanged"
    )


def _init(ray: Any, kw: dict[str, Any], where: str, timeout_s: float) -> None:
    """ray.init, bounded: an unreachable address makes it retry for minutes, so a remote connection runs on
    a daemon thread the process does not wait for. A local start stays on the main thread (it installs
    signal handlers there), bounded by Ray itself."""
    import threading

    if kw.get("address") is None and not os.environ.get("RAY_ADDRESS"):
        ray.init(**kw)
        return
    box: dict[str, BaseException] = {}

    def connect() -> None:
        try:
            ray.init(**kw)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=connect, name="traceql-ray-connect", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise ExecutorError(_lost(where, "no connection", timeout_s))
    if "error" in box:
        raise box["error"]


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise TraceQLError("--executor ray needs Ray on this machine: pip install 'traceql[ray]'") from e
    return ray


class RayExecutor:
    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        max_retries: int = MAX_RETRIES,
        timeout_s: float | None = None,
    ) -> None:
        ray = _ray()
        self.max_retries = max_retries
        self.timeout_s = ray_timeout(timeout_s)
        self.where = address or os.environ.get("RAY_ADDRESS") or "a local Ray"
        self._started = False
        if not ray.is_initialized():
            kw: dict[str, Any] = {"address": address, "include_dashboard": False, "log_to_driver": False}
            if address is None and workers:
                kw["num_cpus"] = (
                    workers  # a local Ray of that many CPUs (ignored when RAY_ADDRESS names a cluster)
                )
            try:
                _init(ray, kw, self.where, self.timeout_s)
            except (ConnectionError, RuntimeError, ValueError) as e:
                first = (str(e).strip().splitlines() or [""])[0][:300]
                raise TraceQLError(f"cannot connect to Ray at {self.where}: {first}") from e
            self._started = True
        self._remote = ray.remote(_call)
        self._board: RayBoard | None = None

    def progress_board(self, n: int) -> RayBoard | None:
        """n == 0: no board (the following jobs publish nothing)."""
        self._board = RayBoard(n, self.timeout_s, self.where) if n else None
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
            dead_since: float | None = None
            while pending:
                done, pending = ray.wait(pending, num_returns=1, timeout=min(_POLL_S, self.timeout_s))
                if not done:
                    dead_since = self._check_alive(dead_since)
                    continue
                dead_since = None
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

    def _check_alive(self, dead_since: float | None) -> float | None:
        """While tasks are pending and none finishes: None when a node is alive; else since when none is, and
        an ExecutorError once that has lasted the timeout (Ray would otherwise wait for a node forever)."""
        import time

        ray = _ray()
        try:
            alive = any(n.get("Alive") for n in ray.nodes())
        except Exception:  # noqa: BLE001 - the head itself is gone: as dead as no node
            alive = False
        if alive:
            return None
        now = time.monotonic()
        if dead_since is None:
            return now
        if now - dead_since >= self.timeout_s:
            raise ExecutorError(_lost(self.where, "no live node to run the pending tasks", self.timeout_s))
        return dead_since

    def close(self) -> None:
        self._board = None  # the actor goes with its last handle
        if self._started:
            _ray().shutdown()
            self._started = False
