"""The sandbox `traceql sql` runs the user's SQL in: no extensions, no files but the store's, bounded time.

DuckDB's own switches do the confining (a check of the SQL text cannot see every way DuckDB has to open a
file or a URL): extension auto-install and auto-load off (a `SELECT * FROM 'https://...'` otherwise makes
DuckDB download httpfs into ~/.duckdb/extensions/), external access off with the store's Parquet folder (and
whatever `--allow-files` names) as the only paths it may open, no spilling to a temp directory (DuckDB's
default is `./.tmp` in the current directory: a write outside the store), then the configuration locked so
the SQL cannot undo any of it. The order matters: every SET before `lock_configuration`.

A query runs on a worker thread so the main thread can interrupt the connection when `--timeout` passes or
Ctrl-C arrives (a query blocked inside DuckDB otherwise holds the signal until it finishes).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._duck import sql_str
from .errors import QueryError

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

#: seconds a `traceql sql` query may run before it is interrupted (0: no limit); $TRACEQL_SQL_TIMEOUT
MAX_TIMEOUT_S = 30 * 86400.0  # as the CLI's --timeout (traceql.cli._options.MAX_SECONDS)
DEFAULT_TIMEOUT_S = 300.0


def _dir_prefix(p: Path) -> str:
    # allowed_directories is a string-prefix match: without the slash /store/runs would also admit /store/runs-x
    return str(p).rstrip("/") + "/"


def confine(
    con: duckdb.DuckDBPyConnection,
    store_root: Path,
    allow: Iterable[Path] = (),
    memory_limit: str | None = None,
    threads: int | None = None,
) -> None:
    """Lock `con` down: no extension installs or loads, file access only under the store's runs/ and `allow`,
    no temp files, optional memory limit; then lock the configuration."""
    import duckdb

    # the views name the Parquet files as the store path was given (relative or not): admit both spellings
    from ._duck import glob_literal

    if "://" in str(store_root):
        # a URL store (traceql.store_fs): the views name s3://bucket/prefix/runs/...; DuckDB reads them through
        # the registered fsspec filesystem, and allowed_directories admits that prefix only
        runs = {_dir_prefix(store_root / "runs")}
    else:
        runs = {_dir_prefix(store_root / "runs"), _dir_prefix(store_root.absolute() / "runs")}
    # and as the views spell them when the store path holds glob characters (escaped: `team[*]/runs/...`),
    # which DuckDB checks against this list before expanding the pattern
    dirs = sorted(runs | {glob_literal(d) for d in runs})
    files: list[str] = []
    for a in allow:
        a = a.absolute()
        if a.is_dir():
            dirs.append(_dir_prefix(a))
        else:
            # a file (or one COPY ... TO will create): that path only; its folder must exist
            if not a.parent.is_dir():
                raise QueryError(f"--allow-files {a}: its folder {a.parent} does not exist")
            files.append(str(a))
    settings = [
        "SET autoinstall_known_extensions = false",
        "SET autoload_known_extensions = false",
        "SET allow_community_extensions = false",
        f"SET allowed_directories = [{', '.join(map(sql_str, dirs))}]",
        f"SET allowed_paths = [{', '.join(map(sql_str, files))}]",
        "SET temp_directory = ''",
    ]
    if memory_limit:
        settings.append(f"SET memory_limit = {sql_str(memory_limit)}")
    if threads:
        settings.append(f"SET threads = {int(threads)}")
    settings += ["SET enable_external_access = false", "SET lock_configuration = true"]
    for s in settings:
        try:
            con.execute(s)
        except duckdb.Error as e:
            if "memory_limit" in s:
                raise QueryError(
                    f"--memory-limit {memory_limit!r}: {str(e).splitlines()[0]} (e.g. 2GB, 500MB)"
                ) from e
            raise


def timeout_from_env(given: float | None) -> float:
    if given is not None:
        return given
    raw = os.environ.get("TRACEQL_SQL_TIMEOUT", "")
    try:
        v = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError as e:
        raise QueryError(f"TRACEQL_SQL_TIMEOUT={raw!r}: expected seconds (0 for no limit)") from e
    # 1e308 or inf would overflow the thread join's timeout; nan would never time out nor fail
    if not math.isfinite(v) or not 0 <= v <= MAX_TIMEOUT_S:
        raise QueryError(
            f"TRACEQL_SQL_TIMEOUT={raw!r}: expected seconds from 0 (no limit) to {MAX_TIMEOUT_S:g}"
        )
    return v


def run(con: duckdb.DuckDBPyConnection, query: str, timeout_s: float) -> Any:
    """The Arrow table of `query` (None for a statement with no result), interrupted after `timeout_s`
    seconds (0: never) or on Ctrl-C. DuckDB errors become one-line QueryErrors."""
    import duckdb

    from ._duck import arrow_table

    box: dict[str, Any] = {}

    def work() -> None:
        try:
            rel = con.sql(query)
            box["table"] = arrow_table(rel) if rel is not None else None
        except BaseException as e:  # noqa: BLE001  # handed to the main thread
            box["error"] = e

    t = threading.Thread(target=work, name="traceql-sql", daemon=True)
    t.start()
    timed_out = False
    try:
        t.join(timeout_s if timeout_s > 0 else None)
        if t.is_alive():
            timed_out = True
            con.interrupt()
            t.join(10)
    except KeyboardInterrupt:
        con.interrupt()
        t.join(10)
        raise
    if timed_out:
        raise QueryError(
            f"query stopped after the {timeout_s:g} s limit (raise it with --timeout SECONDS or TRACEQL_SQL_TIMEOUT; 0 = no limit)"
        )
    err = box.get("error")
    if isinstance(err, duckdb.Error):
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if isinstance(err, duckdb.PermissionException):
            msg += (
                " (traceql sql reads only the store's tables; --allow-files PATH lets it read or write PATH)"
            )
        elif isinstance(err, duckdb.OutOfMemoryException):
            msg += " (raise the limit with --memory-limit, e.g. --memory-limit 8GB)"
        raise QueryError(f"SQL error: {msg}") from err
    if err is not None:
        raise err
    return box.get("table")


# What `traceql sql` runs without --write: queries, plain EXPLAIN, and metadata pragmas. Everything else is
# refused, SET and most PRAGMAs included: DuckDB can write files through them (query logs, profiler output,
# IMPORT DATABASE running a folder's SQL), and EXPLAIN ANALYZE executes its statement.
_READ_ONLY_PRAGMAS = {
    "table_info",
    "show_tables",
    "show_tables_expanded",
    "show",
    "database_size",
    "version",
    "storage_info",
}


def check_read_only(sql: str) -> None:
    """Refuse (QueryError) any statement but SELECT, plain EXPLAIN and the metadata PRAGMAs: the one read-only
    rule of `traceql sql` and the MCP server's sql tool."""
    import re

    import duckdb

    try:
        stmts = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise QueryError(f"SQL error: {str(e).splitlines()[0]}") from e
    for s in stmts:
        text = s.query.strip()
        try:
            kind = str(s.type).split(".")[-1]
        except ValueError:
            # a statement type newer than DuckDB's Python enum (UPDATE EXTENSIONS in 2.0: ValueError "29 is not
            # a valid StatementType"): unknown means refused, not an internal error
            first = " ".join(text.split()[:2])[:40]
            raise QueryError(
                f"statement {first!r} is of a type traceql does not know, refused: traceql sql runs SELECT, "
                "EXPLAIN and metadata PRAGMAs (pass --write to allow others)"
            ) from None
        if kind == "SELECT":
            continue
        if kind == "EXPLAIN" and not re.match(r"(?is)^explain\s+analy[sz]e\b", text):
            inner = re.sub(r"(?is)^explain\s+", "", text)
            check_read_only(inner)
            continue
        if kind == "PRAGMA":
            m = re.match(r"(?is)^pragma\s+([a-z_]+)", text)
            if m and m.group(1).lower() in _READ_ONLY_PRAGMAS:
                continue
        raise QueryError(
            f"{kind} statements are refused: traceql sql is read-only over the store (pass --write to allow)"
        )
