"""DuckDB compatibility shims (the Arrow fetch API was renamed in DuckDB 2.0) and path quoting for its readers."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

MEMORY_ENV = "TRACEQL_INGEST_MEMORY"
_SIZE = re.compile(r"^\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)\s*$", re.IGNORECASE)


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


def ingest_oom_message(where: str, err: BaseException) -> str:
    """One line for a DuckDB out-of-memory during ingest: what ran out and what to do (never a traceback)."""
    first = (str(err).strip().splitlines() or [""])[0]
    first = first.removeprefix("Out of Memory Error: ")[:200]
    return (
        f"{where}: DuckDB ran out of its memory budget ({first}); free memory or raise the budget, "
        f"e.g. {MEMORY_ENV}=2GB traceql ingest ..."
    )
