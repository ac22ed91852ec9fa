"""One error hierarchy. The CLI turns any TraceQLError into one red line and exit code 1."""

from __future__ import annotations

from pathlib import Path


class TraceQLError(Exception):
    """Root of every error traceql raises on purpose (bad input, missing run, bad query...)."""


class BadTraceError(TraceQLError):
    """A dump could not be read: names the file and what was expected."""

    def __init__(self, path: str | Path, detail: str) -> None:
        self.path = str(path)
        self.detail = detail
        super().__init__(f"{self.path}: {detail}")

    def __reduce__(self):  # type: ignore[no-untyped-def]  # survive pickling out of worker processes
        return (type(self), (self.path, self.detail))


class UnknownFormatError(BadTraceError):
    """Nothing traceql knows how to parse was found at a path."""


class StoreError(TraceQLError):
    """The store is missing, locked, from an incompatible version, or a run is missing/duplicated."""


class QueryError(TraceQLError):
    """Unknown query, wrong parameters, or SQL that DuckDB rejected."""
