"""Documented limits on what a dump may make traceql read, and the stream guard that enforces them.

Profilers write traces whose gzip ratio is ~5-30x and whose longest string (a kernel's template name, a
Python stack) is kilobytes. A file far outside that is an attack or a broken writer, and reading it anyway
costs minutes and gigabytes (issue 22: a 200 KB .json.gz holding one 200 MB string took 168 s and 1.96 GB;
20 MB of gzip inflating to 20 GB of whitespace never finished). Each limit has an environment variable to
raise it (README, "Reliability"):

- TRACEQL_MAX_INFLATE_RATIO (default 200): decompressed bytes per compressed byte of a .gz, checked as the
  stream is read; a file may always inflate to TRACEQL_MIN_INFLATE_BYTES (default 64 MiB) whatever its ratio.
- TRACEQL_MAX_STRING_BYTES (default 32 MiB, the largest event the DuckDB readers accept): the longest run of
  JSON text without a double quote, i.e. one string (or whitespace / number run) longer than this is refused.
- TRACEQL_MAX_CSV_COLUMNS (default 16384): columns in a CSV header (profilers write under 200; the cost of a
  wide header is linear, ~0.5 ms a column, so this only bounds memory and time, it is not a speed fix).
- TRACEQL_MAX_METADATA_BYTES (default 64 MiB): a metadata file read whole (profiler_info*.json...).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import BadTraceError

_DEFAULTS = {
    "TRACEQL_MAX_INFLATE_RATIO": 200,
    "TRACEQL_MIN_INFLATE_BYTES": 64 << 20,
    "TRACEQL_MAX_STRING_BYTES": 32 << 20,
    "TRACEQL_MAX_CSV_COLUMNS": 16384,
    "TRACEQL_MAX_METADATA_BYTES": 64 << 20,
}


def limit(name: str) -> int:
    """The limit `name` (an environment variable above): its value if set to a positive integer, else the default."""
    raw = os.environ.get(name, "").strip().replace("_", "")
    if raw:
        try:
            v = int(raw)
        except ValueError:
            v = 0
        if v > 0:
            return v
    return _DEFAULTS[name]


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n >= 1 << 20 else f"{n} bytes"


class QuoteGap:
    """Tracks the longest run of bytes without a `"` across a stream's chunks (O(1) per chunk, C-speed find)."""

    def __init__(self, path: Path, max_run: int | None = None) -> None:
        self.path = path
        self.max_run = max_run if max_run is not None else limit("TRACEQL_MAX_STRING_BYTES")
        self.run = 0  # length of the quote-free run at the end of what was seen
        self.pos = 0

    def feed(self, data: bytes) -> None:
        first = data.find(b'"')
        if first < 0:
            self.run += len(data)
            self._check(len(data))
        else:
            self.run += first
            self._check(first)
            if len(data) > self.max_run:  # a run inside one chunk can only exceed the limit in a big chunk
                i = first
                while (j := data.find(b'"', i + 1)) >= 0:
                    self.run = j - i - 1
                    self._check(j)
                    i = j
            self.run = len(data) - data.rfind(b'"') - 1
            self._check(len(data))
        self.pos += len(data)

    def _check(self, at: int) -> None:
        if self.run > self.max_run:
            raise BadTraceError(
                self.path,
                f"more than {_mib(self.max_run)} of JSON without a quote before byte {self.pos + at} (one huge string or "
                "whitespace run): not a profiler trace (raise the limit with TRACEQL_MAX_STRING_BYTES)",
            )


class GuardedStream:
    """A binary file (gunzipped when gzip) read through the limits: inflated size vs compressed size, and
    longest quote-free run. `.fileobj` is the raw file (its tell() is the compressed offset, for progress)."""

    def __init__(self, path: Path, gz: bool, json_text: bool = True) -> None:
        import gzip

        from ._files import open_regular

        self.path = path
        self.fileobj = open_regular(path)
        self._fh: Any = gzip.GzipFile(fileobj=self.fileobj, mode="rb") if gz else self.fileobj
        self.gz = gz
        self.inflated = 0
        if gz:
            compressed = os.fstat(self.fileobj.fileno()).st_size
            self.max_inflated = max(
                limit("TRACEQL_MIN_INFLATE_BYTES"), compressed * limit("TRACEQL_MAX_INFLATE_RATIO")
            )
            self._compressed = compressed
        self.gap = QuoteGap(path) if json_text else None

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = 8 << 20  # never one unbounded read: the limits are checked per chunk
        data: bytes = self._fh.read(n)
        if self.gz:
            self.inflated += len(data)
            if self.inflated > self.max_inflated:
                raise BadTraceError(
                    self.path,
                    f"gzip inflates past {_mib(self.max_inflated)} from {self._compressed} compressed bytes (more than "
                    f"{limit('TRACEQL_MAX_INFLATE_RATIO')}x): a decompression bomb, not a profiler trace (raise the limit "
                    "with TRACEQL_MAX_INFLATE_RATIO)",
                )
        if self.gap is not None and data:
            self.gap.feed(data)
        return data

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        try:
            if self._fh is not self.fileobj:
                self._fh.close()
        finally:
            self.fileobj.close()

    def __enter__(self) -> GuardedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
