"""The SQL library on disk: where queries/ is, and the one parser of its files' comment headers.

Metric queries (queries/*.sql), fidelity checks (queries/checks/*.sql) and derived tables
(queries/derived/*.sql) share one header convention (design.md):

    -- name: op_hbm_bytes                         (must equal the file stem)
    -- description: one line
    -- param: top_n INTEGER = 10  -- doc          (no `= default`: the param is required)
    -- column: name VARCHAR       -- doc          (every output column, in order, with its DuckDB type)
    -- <key>: value                               (other keys each kind of file allows: rank_filter, needs,
                                                   grain, level, order)

The header ends at the first line that is not a comment; comment lines that are not `-- key:` lines are the
file's definitions text. Files starting with `_` are helper macros, loaded before any query runs.

This module reads files only: no store, no connection (every layer above may use it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import QueryError

TYPES = ("INTEGER", "BIGINT", "DOUBLE", "VARCHAR", "BOOLEAN")
_REQUIRED = object()


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: Any  # typed default; None for NULL; the REQUIRED marker when the header gives none
    doc: str

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def signature(self) -> str:
        if self.required:
            return f"{self.name} {self.type} (required)"
        d = "NULL" if self.default is None else repr(self.default) if self.type == "VARCHAR" else self.default
        return f"{self.name} {self.type} = {d}"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    doc: str


@dataclass(frozen=True)
class Header:
    """A parsed SQL file: its header fields, params, columns, definitions text and the whole text."""

    path: Path
    fields: dict[str, str]
    params: list[Param]
    columns: list[Column]
    definitions: str
    text: str = field(repr=False)

    @property
    def name(self) -> str:
        return self.fields["name"]

    @property
    def description(self) -> str:
        return self.fields.get("description", "")


def library_dir(sub: str = "") -> Path:
    """queries/ (or a folder in it) as packaged into the wheel (traceql/_queries), else the repo's queries/."""
    here = Path(__file__).resolve().parent
    tried = [here / "_queries" / sub, here.parent / "queries" / sub]
    for d in tried:
        if d.is_dir():
            return d
    raise QueryError(f"no queries folder found (looked in {tried[0]} and {tried[1]})")


_KEY = re.compile(r"^--\s*([a-z_]+)\s*:\s*(.*)$")
_PARAM = re.compile(r"^(\w+)\s+([A-Za-z]+)\s*(?:=\s*(.*?))?\s*(?:--\s*(.*))?$")
_COLUMN = re.compile(r"^(\w+)\s+([A-Za-z]+(?:\[\])?)\s*(?:--\s*(.*))?$")
_COMMON_KEYS = frozenset({"name", "description", "param", "column"})


def parse_header(path: Path, keys: frozenset[str] = frozenset(), text: str | None = None) -> Header:
    """Parse a file's header. keys: the header keys this kind of file allows besides name, description, param
    and column (a `-- word:` line with another key is definitions text, as prose may start so)."""
    text = path.read_text(encoding="utf-8") if text is None else text
    allowed = _COMMON_KEYS | keys
    fields: dict[str, str] = {}
    params: list[Param] = []
    columns: list[Column] = []
    definitions: list[str] = []
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if not s.startswith("--"):
            break  # the header ends at the first SQL line
        where = f"{path.name}:{i}"
        m = _KEY.match(s)
        if not m or m.group(1) not in allowed:
            definitions.append(s[2:].strip())
            continue
        key, rest = m.group(1), m.group(2).strip()
        if key == "param":
            pm = _PARAM.match(rest)
            if not pm or pm.group(2).upper() not in TYPES:
                raise QueryError(
                    f"{where}: bad param line (want `-- param: name TYPE [= default] -- doc`, TYPE in {', '.join(TYPES)})"
                )
            type_ = pm.group(2).upper()
            default = _REQUIRED if pm.group(3) is None else _parse_default(pm.group(3), type_, where)
            params.append(Param(pm.group(1), type_, default, (pm.group(4) or "").strip()))
        elif key == "column":
            cm = _COLUMN.match(rest)
            if not cm:
                raise QueryError(f"{where}: bad column line (want `-- column: name TYPE -- doc`)")
            columns.append(Column(cm.group(1), cm.group(2).upper(), (cm.group(3) or "").strip()))
        else:
            fields[key] = rest.split("  --", 1)[0].strip() if key not in ("description",) else rest
    if fields.get("name", "") != path.stem:
        raise QueryError(
            f"{path}: header `-- name:` {fields.get('name', '')!r} must equal the file name ({path.stem!r})"
        )
    return Header(path, fields, params, columns, "\n".join(definitions), text)


def _parse_default(text: str, type_: str, where: str) -> Any:
    t = text.strip()
    if t.upper() == "NULL":
        return None
    if type_ == "VARCHAR":
        if len(t) >= 2 and t[0] == t[-1] == "'":
            return t[1:-1].replace("''", "'")
        raise QueryError(f"{where}: VARCHAR default must be quoted: {text!r}")
    try:
        return convert(t, type_)
    except QueryError as e:
        raise QueryError(f"{where}: bad default {text!r}: {e}") from None


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def convert(value: Any, type_: str) -> Any:
    """A CLI string or a Python value as the declared type (strings 'null'/'NULL' mean NULL)."""
    if value is None or (isinstance(value, str) and value.strip().upper() == "NULL" and type_ != "VARCHAR"):
        return None
    try:
        if type_ in ("INTEGER", "BIGINT"):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value.strip()) if isinstance(value, str) else int(value)
        if type_ == "DOUBLE":
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if type_ == "BOOLEAN":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                return value.strip().lower() in _TRUE
            raise ValueError
        if type_ == "VARCHAR":
            if not isinstance(value, str):
                raise ValueError
            return value
    except (ValueError, TypeError):
        raise QueryError(f"{value!r} is not a valid {type_}") from None
    raise QueryError(f"unsupported parameter type {type_}")


def strip_comments(sql: str) -> str:
    """The SQL without `--` comments (for scanning what a statement references)."""
    return re.sub(r"--[^\n]*", "", sql)


# ---- helper macros ------------------------------------------------------------------------------------------
_CREATE_MACRO = re.compile(r"^((?:\s*--[^\n]*\n)*\s*)CREATE\s+OR\s+REPLACE\s+MACRO", re.I)
_MACRO_NAME = re.compile(r"MACRO\s+(\w+)", re.I)


@lru_cache(maxsize=4)
def _helper_texts(qdir: str) -> tuple[str, ...]:
    return tuple(p.read_text(encoding="utf-8") for p in sorted(Path(qdir).glob("_*.sql")))


def helper_texts() -> list[str]:
    """The helper files' text (queries/_*.sql: macros every query may use), in file order."""
    return list(_helper_texts(str(library_dir())))


def helper_statements() -> list[tuple[str, str]]:
    """(macro name, CREATE OR REPLACE TEMP MACRO statement) for every helper statement, in file order. TEMP:
    helpers are session-local, so they never change the caller's database."""
    return list(_helper_statements_of(tuple(helper_texts())))


@lru_cache(maxsize=4)
def _helper_statements_of(texts: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    import duckdb

    out = []
    for text in texts:
        for stmt in duckdb.extract_statements(text):
            q = _CREATE_MACRO.sub(r"\1CREATE OR REPLACE TEMP MACRO", stmt.query, count=1)
            m = _MACRO_NAME.search(q)
            out.append((m.group(1) if m else "", q))
    return tuple(out)
