"""The executor interface (see traceql.executors) and its error."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from ..errors import TraceQLError


class ExecutorError(TraceQLError):
    """A job could not be completed (its worker died past the retries, or the cluster went away)."""


class Executor(Protocol):
    name: str

    def map(
        self, fn: Callable[..., Any], jobs: list[tuple[Any, ...]], memory: list[int] | None = None
    ) -> Iterator[tuple[int, Any]]: ...

    def close(self) -> None: ...
