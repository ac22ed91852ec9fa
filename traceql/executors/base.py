"""The executor interface (see traceql.executors) and its error."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from ..errors import TraceQLError


class ExecutorError(TraceQLError):
    """A job could not be completed (its worker died past the retries, or the cluster went away)."""


class ProgressBoard(Protocol):
    """Bytes done per job, published by the jobs (traceql.progress.UnitProgress writes slot `i` of job i while
    it runs) and read on the driver for the progress bar."""

    def values(self) -> list[int]: ...


class Executor(Protocol):
    name: str

    def map(
        self, fn: Callable[..., Any], jobs: list[tuple[Any, ...]], memory: list[int] | None = None
    ) -> Iterator[tuple[int, Any]]: ...

    def progress_board(self, n: int) -> ProgressBoard | None:
        """A board of n slots that the jobs of the following map() calls publish into (slot = the job's own
        index argument), until the next progress_board() call; n == 0: none."""
        ...

    def close(self) -> None: ...
