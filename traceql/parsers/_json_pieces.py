"""Cut a plain event-array JSON file (`[ {...}, {...} ]`) into byte ranges of whole events, and feed one range
to DuckDB as JSON arrays of their own (segment files), so that worker processes can parse the pieces of one big
trace at once.

Where a cut goes: after an event's closing brace followed by `, {` (the _kineto_duck.Feed rule). A cut that
falls inside a string (a name holding `}, {`) cannot go unnoticed: the piece before it then ends inside an
open string and fails to parse, and so, by induction from the first piece (which starts at a true event
boundary), every cut is a true boundary when every piece parses; the caller reads the file serially when one
does not. Each piece keeps the file's event order.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from . import _chrome_json as cj
from ._files import open_regular
from ._kineto_duck import Feed

_CUT = re.compile(rb"\}\s*,\s*\{")
WINDOW = 4 << 20  # bytes searched for a cut after each target offset
READ = 1 << 20  # read size of the range feed


def plan(path: Path, size: int, pieces: int) -> list[tuple[int, int]]:
    """Up to `pieces` byte ranges [start, end) covering the file's events: each but the first starts at an
    event's `{`, each but the last ends after an event's `}` (the separating comma belongs to no range)."""
    bounds: list[tuple[int, int]] = []  # (end of the piece before, start of the next)
    with open_regular(path) as fh:
        for k in range(1, pieces):
            target = size * k // pieces
            if bounds and target <= bounds[-1][1]:
                continue
            fh.seek(target)
            m = _CUT.search(fh.read(WINDOW))
            if m is not None:
                bounds.append((target + m.start() + 1, target + m.end() - 1))
    ranges, start = [], 0
    for end, nxt in bounds:
        ranges.append((start, end))
        start = nxt
    ranges.append((start, size))
    return ranges


class RangeFeed(Feed):
    """A Feed (segment files of at most SEGMENT bytes, each a JSON array of whole events, for DuckDB) over the byte
    range [start, end) of a plain file: `[` is added before a range that does not open the file's array and
    `]` after one that does not close it."""

    def __init__(self, sn: cj.Sniff, start: int, end: int, tmp: str) -> None:
        self.range = (start, end)
        super().__init__(sn, 0, tmp)

    def _array(self) -> Any:
        start, end = self.range
        first = start == 0
        with open_regular(self.sn.path) as fh:
            fh.seek(start)
            pos = start
            if not first:
                yield b"["
            while pos < end:
                data = fh.read(min(READ, end - pos))
                if not data:
                    break
                if first and data.startswith(cj.UTF8_BOM):
                    data = data[len(cj.UTF8_BOM) :]
                first = False
                pos += len(data)
                self.raw_read = pos - start
                yield data
            if end < self.sn.size:
                yield b"]"


def cpu_workers() -> int:
    """Worker processes for one file: TRACEQL_PARSE_WORKERS when set (1 turns pieces off), else the CPUs this
    process may run on, at most 8."""
    raw = os.environ.get("TRACEQL_PARSE_WORKERS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, 8))
