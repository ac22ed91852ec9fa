"""DuckDB compatibility shims (the Arrow fetch API was renamed in DuckDB 2.0) and path quoting for its readers."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable
from typing import Any

MEMORY_ENV = "TRACEQL_INGEST_MEMORY"
_SIZE = re.compile(r"^\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)\s*$", re.IGNORECASE)


def interrupted(e: BaseException | None) -> bool:
    """Whether `e`, or an exception it was raised from, is DuckDB's report of a Ctrl-C (or a SIGTERM) during a
    query. DuckDB 2.0's Python client consumes the pending KeyboardInterrupt and raises a plain
    RuntimeError("Query interrupted") (con.interrupt() gives InterruptException, a duckdb.Error), so every
    `except Exception` on the way up would take it for a failed query (issue 47: a report exited 0 with
    "This chart could not be drawn: RuntimeError: Query interrupted")."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if type(e).__name__ == "InterruptException" or isinstance(e, KeyboardInterrupt):
            return True  # (a KeyboardInterrupt in the chain: an error of the cleanup after Ctrl-C)
        if type(e) is RuntimeError and str(e).startswith("Query interrupted"):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def reraise_interrupt(e: BaseException) -> None:
    """Raise KeyboardInterrupt from `e` when it is an interrupt (see `interrupted`), so no handler of errors
    can swallow it and the CLI ends with exit 130; otherwise return."""
    if interrupted(e):
        raise KeyboardInterrupt("query interrupted") from e


def arrow_reader(result: Any, batch_rows: int = 256 * 1024) -> Any:
    """A pyarrow RecordBatchReader over a DuckDB result (connection.execute(...) or relation)."""
    if hasattr(result, "to_arrow_reader"):
        return result.to_arrow_reader(batch_rows)
    return result.fetch_record_batch(batch_rows)


def arrow_table(result: Any) -> Any:
    """A pyarrow Table from a DuckDB result (connection.execute(...) or relation)."""
    if hasattr(result, "to_arrow_table"):
        return result.to_arrow_table()
    t = result.arrow()
    return t.read_all() if hasattr(t, "read_all") else t


# query_table takes the DB-API path on purpose (see there): its copy advisory, attributed to this module by
# DuckDB's stacklevel, is silenced here only, not for a caller's own use of that path
warnings.filterwarnings(
    "ignore",
    message="Arrow output on a DB-API result makes an extra copy",
    category=UserWarning,
    module=__name__,
)


def query_table(cur: Any, sql: str, params: Any = None) -> Any:
    """One statement's rows as a pyarrow Table, for results of library size (aggregates, top-N lists). Through
    execute: DuckDB 2.0's relation path (`cur.sql(...)`) binds the statement once to learn its columns and
    again to run it, about a quarter of a small query's CPU (measured over the library's queries on a 2-rank
    Level1 dump); the DB-API result is copied once into Arrow, which costs little at these sizes.
    Streams of every row (export) keep the relation path (arrow_reader)."""
    res = cur.execute(sql, params) if params else cur.execute(sql)
    return arrow_table(res)


def glob_literal(path: str) -> str:
    """`path` as a DuckDB file pattern that matches exactly that file.

    read_parquet/read_json/read_csv expand `*`, `?` and `[...]` in every path they are given (a store at
    `team*` read its siblings teamB and teamC), and have no escape character; a one-character bracket class
    matches that character literally (`[*]`, `[?]`, `[[]`), which DuckDB's glob honours. Braces are not
    expanded. Quote the result as an SQL string as usual."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in path)


def sql_str(s: str) -> str:
    """`s` as an SQL string literal (the one quoting helper: single quotes doubled)."""
    return "'" + s.replace("'", "''") + "'"


def sql_path_list(paths: Iterable[Any]) -> str:
    """A DuckDB list literal of file paths, each matching exactly that file (glob characters escaped)."""
    return "[" + ", ".join(sql_str(glob_literal(str(p))) for p in paths) + "]"


def ingest_memory(default: str) -> str:
    """The DuckDB memory_limit an ingest step uses: TRACEQL_INGEST_MEMORY (e.g. 2GB) when set to a size, else
    the step's own default. The out-of-memory message (ingest_oom_message) tells users to raise it."""
    raw = os.environ.get(MEMORY_ENV, "")
    return raw.strip() if _SIZE.match(raw) else default


_EXHAUSTED_TEXT = ("can't start new thread", "std::bad_alloc", "cannot allocate memory", "out of memory")


def resource_exhausted(e: BaseException) -> bool:
    """Whether `e` says the process ran out of memory, address space or threads: Python's MemoryError, a
    thread that could not start (RuntimeError "can't start new thread", an address-space cap on its stack), a
    C++ std::bad_alloc surfacing through DuckDB or Arrow, ENOMEM, or DuckDB's own OutOfMemoryException.
    None of these is a bad dump or a bug: the user raises a limit (issue 47)."""
    if isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryException":
        return True
    if isinstance(e, OSError) and e.errno == 12:  # ENOMEM
        return True
    from_lib = type(e).__module__.startswith(("duckdb", "_duckdb", "pyarrow"))
    if not (isinstance(e, (RuntimeError, OSError)) or from_lib):
        return False
    text = str(e).lower()
    return any(t in text for t in _EXHAUSTED_TEXT)


def oom_message(where: str, err: BaseException) -> str:
    """The documented out-of-memory line for any exhaustion (resource_exhausted): DuckDB's budget gets
    ingest_oom_message; memory, address space or threads say which limit to raise."""
    if type(err).__name__ == "OutOfMemoryException":
        return ingest_oom_message(where, err)
    first = (str(err).strip().splitlines() or [""])[0][:200] or type(err).__name__
    return (
        f"{where}: ran out of memory ({type(err).__name__}: {first}); free memory or raise the process's "
        f"limits (ulimit -v address space, ulimit -u threads, the container's memory), or use fewer workers "
        f"(-j 1) and a smaller budget, e.g. {MEMORY_ENV}=1GB traceql ingest ..."
    )


def ingest_oom_message(where: str, err: BaseException) -> str:
    """One line for a DuckDB out-of-memory during ingest: what ran out and what to do (never a traceback)."""
    first = (str(err).strip().splitlines() or [""])[0]
    first = first.removeprefix("Out of Memory Error: ")[:200]
    return (
        f"{where}: DuckDB ran out of its memory budget ({first}); free memory or raise the budget, "
        f"e.g. {MEMORY_ENV}=2GB traceql ingest ..."
    )
