"""The derived tables' definitions: queries/derived/*.sql, one file per table, fingerprinted from its SQL.

A derived table is a plain SELECT over the canonical tables, the helper macros (queries/_helpers.sql) and other
derived tables, with the library's header (traceql.sqlfiles) plus three keys:

    -- grain: one row per kernel (run_id, rank, kid)   what a row is, and its key
    -- level: rank | run     rank: computed per rank (its SQL partitions by run and rank); run: needs every rank
                             at once (collectives matched across ranks), stored split by rank
    -- order: ts_ns, kid     sort order of the stored files (time-sorted row groups)

One switch decides how a session sees each table (`statements`): a view over its stored Parquet when the
stored copy is current (its fingerprint matches), else a view over its own SELECT. No macro is rewritten and
every query runs the same SQL either way; storing only makes it faster (traceql.derive builds and stores them).

The fingerprint of a table hashes its SQL (comments dropped), the helper macros it calls (transitively) and the
fingerprints of the derived tables it reads: editing any of them makes the stored copy stale, so it is never
used, and the next prepare rebuilds it; editing a helper that only queries apply on top changes nothing stored.

This module reads files only (no store, no connection): the store's views.sql writer, the engine, the query
runner and the builder all take the definitions from here.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import schema
from .errors import QueryError
from .sqlfiles import Column, helper_statements, library_dir, parse_header, strip_comments

LEVELS = ("rank", "run")


@dataclass(frozen=True)
class DerivedTable:
    name: str
    description: str
    grain: str
    level: str
    order: str
    columns: list[Column]
    sql: str  # the SELECT (the file without its header comments' meaning: DuckDB skips comments)
    path: Path
    reads: tuple[str, ...] = ()  # canonical and derived tables it reads (directly or through helper macros)
    fingerprint: str = field(default="", compare=False)


def parse(path: Path) -> DerivedTable:
    h = parse_header(path, frozenset({"grain", "level", "order"}))
    for key in ("description", "grain", "level", "order"):
        if not h.fields.get(key):
            raise QueryError(f"{path}: missing `-- {key}:` line")
    if h.fields["level"] not in LEVELS:
        raise QueryError(f"{path}: level must be one of {', '.join(LEVELS)}")
    if not h.columns:
        raise QueryError(f"{path}: no `-- column:` lines")
    return DerivedTable(
        h.name,
        h.description,
        h.fields["grain"],
        h.fields["level"],
        h.fields["order"],
        h.columns,
        h.text.strip().rstrip(";").strip(),
        path,
    )


def _refs(sql: str, names: list[str], call: bool) -> set[str]:
    """The `names` that `sql` calls (call=True: `name(`) or reads (a bare `name`)."""
    return set(_ref_pattern(tuple(names), call).findall(strip_comments(sql)))


@lru_cache(maxsize=8)
def _ref_pattern(names: tuple[str, ...], call: bool) -> re.Pattern[str]:
    # one alternation per name list, longest names first so `a_b` is not read as `a`: a pattern per name and
    # query cost ~60 ms of every ingest's commit (174 compiles of 910 searches)
    alt = "|".join(re.escape(n) for n in sorted({n for n in names if n}, key=len, reverse=True)) or r"(?!)"
    return re.compile(rf"\b({alt})\s*\(" if call else rf"\b({alt})\b(?!\s*\()")


@lru_cache(maxsize=4)
def _load(qdir: str, helpers: tuple[tuple[str, str], ...]) -> tuple[DerivedTable, ...]:
    tables = {p.stem: parse(p) for p in sorted(Path(qdir).glob("*.sql"))}
    macros = dict(helpers)
    macro_names = list(macros)
    # what each macro calls and reads, transitively
    calls = {m: _refs(q, macro_names, call=True) - {m} for m, q in macros.items()}
    reads_of_macro = {m: _refs(q, [*schema.TABLE_NAMES, *tables], call=False) for m, q in macros.items()}

    def closure(start: set[str]) -> set[str]:
        seen: set[str] = set()
        todo = list(start)
        while todo:
            m = todo.pop()
            if m in seen or m not in macros:
                continue
            seen.add(m)
            todo.extend(calls[m])
        return seen

    out: dict[str, DerivedTable] = {}
    pending = dict(tables)
    while pending:
        progressed = False
        for name, t in list(pending.items()):
            used = closure(_refs(t.sql, macro_names, call=True))
            reads = _refs(t.sql, [*schema.TABLE_NAMES, *tables], call=False) - {name}
            for m in used:
                reads |= reads_of_macro[m]
            upstream = sorted(r for r in reads if r in tables)
            if any(u not in out for u in upstream):
                continue
            h = hashlib.sha256(strip_comments(t.sql).encode())
            for m in sorted(used):
                h.update(b"\0" + m.encode() + b"\0" + strip_comments(macros[m]).encode())
            for u in upstream:
                h.update(b"\0" + out[u].fingerprint.encode())
            out[name] = DerivedTable(
                **{**t.__dict__, "reads": tuple(sorted(reads)), "fingerprint": h.hexdigest()[:16]}
            )
            del pending[name]
            progressed = True
        if not progressed:
            raise QueryError(f"derived tables read each other in a circle: {', '.join(sorted(pending))}")
    return tuple(out.values())  # dependency order: every table after the ones it reads


def tables() -> list[DerivedTable]:
    """Every derived table, each after the derived tables it reads."""
    return list(_load(str(library_dir("derived")), tuple(helper_statements())))


def names() -> list[str]:
    return [t.name for t in tables()]


def get(name: str) -> DerivedTable:
    for t in tables():
        if t.name == name:
            return t
    raise QueryError(f"unknown derived table {name!r}; derived tables: {', '.join(names())}")


def fingerprints() -> dict[str, str]:
    return {t.name: t.fingerprint for t in tables()}


def current_tables(info: dict[str, Any]) -> set[str]:
    """The derived tables a run (its manifest entry) stores with the fingerprint of today's SQL.
    TRACEQL_NO_DERIVED=1 ignores every stored copy (sessions then compute each table from its SELECT)."""
    if os.environ.get("TRACEQL_NO_DERIVED"):
        return set()
    stored = (info.get("derived") or {}).get("fingerprints") or {}
    files = info.get("files") or {}
    return {t.name for t in tables() if stored.get(t.name) == t.fingerprint and t.name in files}


def stored_for(info: dict[str, Any]) -> bool:
    """Whether every derived table of the run is stored and current."""
    return current_tables(info) == set(names())


def file_name(table: str, rank: int) -> str:
    """Where a rank's part of a stored table lives in the run dir. The fingerprint is in the name: a rebuild
    never overwrites a file a reader may still have open."""
    return rank_file_name(get(table), rank)


def rank_file_name(table: DerivedTable, rank: int) -> str:
    """file_name for a table already at hand (get() re-reads the library: ~1.5 ms, per rank and table)."""
    return f"{table.name}/r{rank}-d{table.fingerprint[:8]}.parquet"


def statements(
    stored: set[str], temp: bool = True, shell: bool = False, for_sql: str | None = None
) -> list[str]:
    """Every helper macro and derived-table view, in dependency order, for one session (for_sql: only those
    that SQL uses, directly or through each other: defining a macro binds it, ~20 ms each, per query).

    stored: the derived tables the session already sees as views over their stored (current) Parquet: those
    are left as they are; every other table becomes a view over its own SELECT. temp: TEMP views and macros
    (session-local: a query cursor never changes the connection's catalog). shell: for the stock duckdb shell
    after `.read views.sql`: plain macros, and each table's view only where views.sql did not define it."""
    key = tuple((t.name, t.fingerprint) for t in tables())
    return list(
        _statements(frozenset(stored), temp and not shell, shell, tuple(helper_statements()), key, for_sql)
    )


def view_statements(stored: set[str]) -> list[str]:
    """statements(stored)'s derived-table views alone, in the same order (what a session pointed at other files
    defines again; its helper macros stay)."""
    heads = tuple(f"CREATE OR REPLACE TEMP VIEW {t.name} AS\n" for t in tables() if t.name not in stored)
    return [s for s in statements(stored) if s.startswith(heads)]


@lru_cache(maxsize=64)
def _statements(
    stored: frozenset[str],
    temp: bool,
    shell: bool,
    helpers: tuple[tuple[str, str], ...],
    fingerprints: tuple[tuple[str, str], ...],
    for_sql: str | None,
) -> tuple[str, ...]:
    # the dependency sort scans every statement's text (~25 ms): once per (stored set, mode and the SQL's
    # fingerprints), not once per query
    defs = {t.name: t for t in tables()}
    macro_names = [n for n, _ in helpers]
    needs: dict[str, set[str]] = {}
    text: dict[str, str] = {}
    order: list[str] = []
    for n, q in helpers:
        key = n or f"#stmt{len(order)}"
        order.append(key)
        text[key] = q if temp else q.replace("CREATE OR REPLACE TEMP MACRO", "CREATE OR REPLACE MACRO", 1)
        needs[key] = (_refs(q, macro_names, call=True) - {n}) | (_refs(q, list(defs), call=False) - stored)
    for name, t in defs.items():
        if name in stored:
            continue
        order.append(name)
        create = (
            "CREATE VIEW IF NOT EXISTS" if shell else f"CREATE OR REPLACE {'TEMP VIEW' if temp else 'VIEW'}"
        )
        text[name] = f"{create} {name} AS\n{t.sql}"
        needs[name] = (_refs(t.sql, macro_names, call=True)) | (_refs(t.sql, list(defs), call=False) - stored)
    if for_sql is not None:  # keep what the SQL reaches
        reach = (_refs(for_sql, macro_names, call=True) | _refs(for_sql, list(defs), call=False)) & set(order)
        todo = list(reach)
        while todo:
            k = todo.pop()
            for d in needs.get(k, ()):
                if d in needs and d not in reach:
                    reach.add(d)
                    todo.append(d)
        order = [k for k in order if k in reach or k.startswith("#stmt")]
    out: list[str] = []
    done: set[str] = set()
    pending = list(order)
    while pending:
        ready = [k for k in pending if needs[k] <= done | (set(needs[k]) - set(order))]
        if not ready:
            raise QueryError(f"helper macros and derived tables refer to each other in a circle: {pending}")
        for k in ready:
            out.append(text[k])
            done.add(k)
        pending = [k for k in pending if k not in done]
    return tuple(out)


def tables_read(stored: set[str], for_sql: str) -> set[str]:
    """The canonical and derived tables (and `runs`) that `for_sql` reads, directly or through the helper
    macros and derived tables it reaches (`statements(stored, for_sql=...)`, whose SELECTs read further): the
    views a query's cursor must scope to its run. A superset is harmless (a name in a comment-free string);
    a table left out would be read unscoped, so every statement the query's session defines is scanned."""
    key = tuple((t.name, t.fingerprint) for t in tables())
    return set(_tables_read(frozenset(stored), tuple(helper_statements()), key, for_sql))


@lru_cache(maxsize=256)
def _tables_read(
    stored: frozenset[str],
    helpers: tuple[tuple[str, str], ...],
    fingerprints: tuple[tuple[str, str], ...],
    for_sql: str,
) -> frozenset[str]:
    names = ["runs", *schema.TABLE_NAMES, *(n for n, _ in fingerprints)]
    texts = [for_sql, *_statements(stored, True, False, helpers, fingerprints, for_sql)]
    return frozenset(n for q in texts for n in _refs(q, names, call=False))


def documented_tables() -> dict[str, tuple[str, list[Any]]]:
    """Every table a user can query, as `traceql schema` lists it: runs, the canonical tables, then the
    derived tables (description with grain and level, and their columns)."""
    out: dict[str, tuple[str, list[Any]]] = {
        t: (schema.describe(t), list(schema.columns(t))) for t in ["runs", *schema.TABLE_NAMES]
    }
    for d in tables():
        out[d.name] = (
            f"Derived ({d.path.parent.name}/{d.path.name}): {d.description}. Grain: {d.grain}; "
            f"computed per {d.level}, stored sorted by {d.order}.",
            list(d.columns),
        )
    return out
