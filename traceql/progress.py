"""Byte-level ingest progress, measured with almost no help from the parsers.

Each ingest unit runs in a worker process (or in-process with -j 1). While it runs, a watcher thread publishes
how many of the unit's input bytes have been consumed, every 0.2 s, into the unit's slot of a shared array; the
parent sums the slots for the progress bar. The measure is the process's own `rchar` from /proc/self/io (bytes
returned by read()/pread(): ijson, CSV and SQLite reads, gzip), except while a DuckDB JSON scan runs: DuckDB
reads far ahead of its parse (buffers of several times maximum_object_size), so the JSON fast path reports
DuckDB's own query progress for its file instead (`stream`). Values are capped at the unit's input size and set
to it when the unit finishes. Without /proc (not Linux) the slots move only with DuckDB scans and finished units.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

_slots: Any = None  # multiprocessing.Array('q') shared with the parent (set per worker process)


def init_worker(slots: Any) -> None:
    """ProcessPoolExecutor initializer: remember the shared slots."""
    global _slots
    _slots = slots


def _rchar() -> int | None:
    try:
        with open("/proc/self/io", "rb") as fh:
            for line in fh:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


_current: UnitProgress | None = None  # the unit this process is parsing


class UnitProgress:
    """Publishes one unit's bytes consumed into slot `index` while the `with` block runs."""

    def __init__(self, index: int, size: int, period_s: float = 0.2) -> None:
        self.index, self.size, self.period = index, size, period_s
        self._stop = threading.Event()
        self._t: threading.Thread | None = None
        self._lock = threading.Lock()
        self._base = 0  # bytes accounted for before the current measure started
        self._rstart: int | None = None  # rchar when the current rchar measure started
        self._stream: tuple[int, Callable[[], float]] | None = None  # (file size, DuckDB progress %)
        self.value = 0

    def _now(self) -> int:
        with self._lock:
            if self._stream is not None:
                size, fraction = self._stream
                try:
                    pct = float(fraction())
                except Exception:  # noqa: BLE001 - a progress probe must never break the parse
                    pct = -1.0
                if pct < 0:
                    return self.value  # no estimate right now: hold
                return self._base + int(min(pct, 100.0) / 100.0 * size)
            r = _rchar()
            if r is None or self._rstart is None:
                return self.value
            return self._base + (r - self._rstart)

    def _set(self, value: int) -> None:
        self.value = max(self.value, max(0, min(int(value), self.size)))  # never backwards
        if _slots is not None and 0 <= self.index < len(_slots):
            _slots[self.index] = self.value

    def _watch(self) -> None:
        while not self._stop.wait(self.period):
            self._set(self._now())

    def skip_reads(self, n: int) -> None:
        """The last n bytes read were not progress (see uncounted)."""
        with self._lock:
            if self._rstart is not None:
                self._rstart += n

    def begin_stream(self, size: int, fraction: Callable[[], float]) -> None:
        # bytes read since the last committed point (a pre-scan of this same file, say) are not carried into
        # the base: the displayed value holds (never goes backwards) until the stream's progress passes it
        with self._lock:
            self._stream = (size, fraction)

    def end_stream(self, done: bool = True) -> None:
        """done=False: the stream was abandoned (another reader takes over the file): count nothing for it."""
        with self._lock:
            if self._stream is not None:
                self._base += self._stream[0] if done else 0
                self._stream = None
            self._rstart = _rchar()  # DuckDB's read-ahead is already counted in the file's size
        self._set(self._base)

    def __enter__(self) -> UnitProgress:
        global _current
        self._rstart = _rchar()
        _current = self
        if _slots is not None:
            self._t = threading.Thread(target=self._watch, name="traceql-progress", daemon=True)
            self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        global _current
        _current = None
        self._stop.set()
        if self._t is not None:
            self._t.join(timeout=1)
        if exc[0] is None:
            self._set(self.size)


@contextlib.contextmanager
def uncounted() -> Iterator[None]:
    """Reads inside the block do not count as progress (a fast pre-scan over a file parsed afterwards)."""
    unit = _current
    before = _rchar()
    try:
        yield
    finally:
        after = _rchar()
        if unit is not None and before is not None and after is not None:
            unit.skip_reads(after - before)


class Stream:
    """While open, the unit's progress through `path` is fraction() percent (DuckDB's query_progress(): -1 when
    it has no estimate) instead of bytes read. Open it when the DuckDB scan starts: its read-ahead would
    otherwise count as progress. close(done=False) if the scan is abandoned for another reader."""

    def __init__(self, path: str | Path, fraction: Callable[[], float]) -> None:
        self.unit = _current
        if self.unit is not None:
            try:
                size = Path(path).stat().st_size
            except OSError:
                size = 0
            self.unit.begin_stream(size, fraction)

    def close(self, done: bool = True) -> None:
        if self.unit is not None:
            self.unit.end_stream(done)
            self.unit = None


def input_bytes(path: str | Path) -> int:
    """Bytes a unit will read, near enough for a progress bar: the file, or the profiler's output folder inside
    a dump folder (ASCEND_PROFILER_OUTPUT, mindstudio_profiler_output), else every file under the folder."""
    p = Path(path)
    try:
        if p.is_file():
            return p.stat().st_size
        for sub in ("ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output"):
            if (p / sub).is_dir():
                p = p / sub
                break
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())
    except OSError:
        return 0


class Polling:
    """The driver's side of a progress board (traceql.executors): every `period_s` while the `with` block
    runs, on_bytes(done, total) with done = the finished jobs' sizes plus the running jobs' published bytes
    (each capped at its size), never going backwards; at a normal exit once more with done = total."""

    def __init__(
        self, board: Any, sizes: list[int], on_bytes: Callable[[int, int], None] | None, period_s: float = 0.2
    ) -> None:
        self.board, self.sizes, self.on_bytes, self.period = board, sizes, on_bytes, period_s
        self.total = sum(sizes)
        self._finished: set[int] = set()
        self._last = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._t: threading.Thread | None = None

    def finished(self, index: int) -> None:
        """Job `index` is done: count its whole size now (a remote board's last write may still be in flight)."""
        self._finished.add(index)
        self._report()

    def _report(self) -> None:
        if self.on_bytes is None:
            return
        try:
            values = self.board.values() if self.board is not None else []
        except Exception:  # noqa: BLE001 - a progress probe must never break the ingest
            values = []
        done = sum(
            s if i in self._finished else max(0, min(int(values[i]) if i < len(values) else 0, s))
            for i, s in enumerate(self.sizes)
        )
        with self._lock:
            self._last = max(self._last, min(done, self.total))
            self.on_bytes(self._last, self.total)

    def _watch(self) -> None:
        while not self._stop.wait(self.period):
            self._report()

    def __enter__(self) -> Polling:
        if self.on_bytes is not None:
            self._t = threading.Thread(target=self._watch, name="traceql-progress-poll", daemon=True)
            self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._t is not None:
            self._t.join(timeout=2)
        if exc[0] is None and self.on_bytes is not None:
            self._finished.update(range(len(self.sizes)))
            self._report()


def polling(board: Any, sizes: list[int], on_bytes: Callable[[int, int], None] | None) -> Polling:
    return Polling(board, sizes, on_bytes)
