"""Which number text may become a number, and the tally of text that did not.

Profilers write numbers as plain ASCII decimals (`145.57`, `1736408883704643.212`, `1e-05`, `-3`). Python's
int()/float()/Decimal() also take what no profiler writes and a reader would not call a number: `1_000`
(read as 1000), Arabic-Indic and other Unicode digits (`١٢٣` as 123), `NaN`, `Infinity`; and a JSON `1e400`
or an integer past int64 has no home in an int64/float64 column. Each parser-edge converter (traceql.parsers
._units, ._chrome_json) accepts only `plain()` text; everything else becomes NULL and is counted here
(`note`), so ingest can warn and record it for the `unparsed_numbers` check (issue 22: such values were
silently numbers, or silently NULL). The CSV path does the same in SQL and reports per column (`add_cells`).

Counts are per process: each ingest unit parses in its own worker and ingest takes them after each unit.
"""

from __future__ import annotations

import re

# ASCII only: [0-9], never \d (which matches every Unicode digit)
_PLAIN = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

# (file, field, cells, first line or None, example)
Cells = tuple[str, str, int, "int | None", str]
_CELLS: list[Cells] = []
_TEXT: dict[str, int] = {}  # example text (first 40 chars) -> how many values like it
_TEXT_N = [0]


def plain(s: str) -> bool:
    """Whether stripped text `s` is a number as profilers write it."""
    return _PLAIN.fullmatch(s) is not None


_WORDS = {"nan", "inf", "infinity"}


def numberlike(s: str) -> bool:
    """Text a reader could take for a number (a digit of any script, or NaN/Infinity): a name such as Kineto's
    `"pid": "Spans"` in an id field is not a lost number."""
    return any(ch.isdigit() for ch in s) or s.strip().lstrip("+-").lower() in _WORDS


def note(text: object) -> None:
    """A value that was number-like text (or a number) yet is no number traceql can store: stored as NULL."""
    if isinstance(text, str) and not numberlike(text):
        return
    _TEXT_N[0] += 1
    if len(_TEXT) < 8:
        key = str(text).strip()[:40]
        _TEXT[key] = _TEXT.get(key, 0) + 1


def add_cells(path: str, field: str, cells: int, first_line: int | None, example: str) -> None:
    """CSV cells of one column that were not numbers (counted in SQL by traceql.parsers._csv)."""
    _CELLS.append((path, field, cells, first_line, example))


_UNREADABLE: list[tuple[str, str, int, str]] = []


def reset() -> None:
    """Forget what an earlier unit in this process counted (a refused unit never took its counts)."""
    take("")
    take_unreadable()


def add_unreadable(path: str, field: str, values: int, example: str) -> None:
    """Values of a dump that read as NULL although the dump refers to them (an SQLite string past the length
    limit): not numbers, so kept apart, for the `unreadable_values` check."""
    _UNREADABLE.append((path, field, values, example))


def take_unreadable() -> list[tuple[str, str, int, str]]:
    out = list(_UNREADABLE)
    _UNREADABLE.clear()
    return out


def take(unit_path: str) -> list[Cells]:
    """Everything counted since the last take; values counted by `note` are attributed to `unit_path` (the
    converters do not know their file)."""
    out = list(_CELLS)
    if _TEXT_N[0]:
        example = max(_TEXT, key=lambda k: _TEXT[k]) if _TEXT else ""
        out.append((unit_path, "(number in JSON/text fields)", _TEXT_N[0], None, example))
    _CELLS.clear()
    _TEXT.clear()
    _TEXT_N[0] = 0
    return out
