"""DuckDB compatibility shims (the Arrow fetch API was renamed in DuckDB 2.0) and path quoting for its readers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


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
