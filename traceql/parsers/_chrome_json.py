"""Streaming reader for Chrome-trace JSON: torch_npu trace_view.json, msprof msprof_*.json, Kineto traces.

Never `json.load`s a whole file. Two ways in, chosen by sniffing the first bytes (`sniff`):

* **DuckDB fast path** (`DuckStream`) — a plain (not gzip) file whose root is a bare event array and whose
  `ts` values are JSON *strings* (the Ascend form, `"ts": "1736408883688177.930"`). DuckDB's `read_json(...,
  format='array')` parses it in a background thread with bounded memory; `ts`/`dur` come out as text and
  become int64 ns in Arrow without passing through a double (`ts_text_to_ns`, `dur_text_to_ns`). DuckDB
  parses JSON *numbers* with a fractional part as doubles, so this path is only exact for string timestamps
  (a numeric `dur` prints back as written: < 16 significant digits; integers up to 2**63 are exact).
  Measured: read_json over one array file runs on a single core in this DuckDB (2.0.1), streaming or not.
* **ijson path** (`iter_events`) — everything else: object roots (`{"traceEvents": [...]}`, Kineto), gzip,
  numeric `ts`. ijson's C backend with `use_float=False` yields `Decimal` for non-integers, so µs values with
  3 decimals convert to ns exactly (`us_to_ns`).

Bad input fails fast with one BadTraceError naming the file: empty file, wrong root, a plain file whose last
byte does not close its root (truncated: checked before any parsing), a gzip stream that ends early, malformed
JSON and non-UTF-8 bytes (with the byte offset the parser had reached).

`scan_objects` finds small JSON objects (M metadata events) by byte search, so a parser can learn process
and thread names — which Chrome traces may put anywhere, often at the end — before the main pass.
"""

from __future__ import annotations

import functools
import gzip
import io
import os
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from ..errors import BadTraceError
from ._files import open_regular
from ._limits import GuardedStream
from ._numtext import note, plain

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
HEAD_BYTES = 1 << 16
CHUNK = 8 << 20  # read size for byte scans
# DuckDB reads one array element at a time; this is the largest single event it accepts (default 16 MiB).
# Events with long call stacks are tens of KB; 32 MiB leaves room without making DuckDB reserve huge
# buffers (it allocates ~2x this per thread up front: 1 GiB here runs out of memory, 64 MiB costs ~100 MB RSS).
MAX_EVENT_BYTES = 32 << 20
# A cap, not a reservation: ordinary traces stay at ~0.5-0.7 GB RSS in all (measured), but one event
# holding a 30 MB string needs DuckDB buffers of 128 MiB and fails under 512MB.
DUCK_MEMORY_LIMIT = "1GB"

_TS_RE = re.compile(rb'"ts"\s*:\s*(")?(-?\d)')
_WS = b" \t\r\n"


@dataclass(frozen=True)
class Sniff:
    """What the first bytes of a trace file say about it."""

    path: Path
    gzip: bool
    size: int  # bytes on disk
    root: str | None  # "array", "object", or None (empty / whitespace only)
    head: bytes  # first bytes, decompressed, BOM stripped
    ts_kind: str | None  # "string" | "number" | None: kind of the first `"ts":` value in the head
    trace_events: bool  # the head holds a "traceEvents" key

    @property
    def fast_path(self) -> bool:
        """Bare event array of string timestamps in a plain file: DuckDB can read it exactly."""
        return not self.gzip and self.root == "array" and self.ts_kind == "string"


def sniff(path: Path, n: int = HEAD_BYTES) -> Sniff:
    path = Path(path)
    try:
        with open_regular(path) as fh:
            size = os.fstat(fh.fileno()).st_size
            raw = fh.read(n)
    except OSError as e:
        raise BadTraceError(path, f"cannot read: {e.strerror or e}") from e
    is_gz = raw[:2] == GZIP_MAGIC
    head = raw
    if is_gz:
        head = _gunzip_head(path, n)
    if head.startswith(UTF8_BOM):
        head = head[len(UTF8_BOM) :]
    stripped = head.lstrip(_WS)
    root = None
    if stripped[:1] == b"[":
        root = "array"
    elif stripped[:1] == b"{":
        root = "object"
    elif stripped:
        root = "other"
    m = _TS_RE.search(head)
    ts_kind = None if m is None else ("string" if m.group(1) else "number")
    return Sniff(path, is_gz, size, root, head, ts_kind, b'"traceEvents"' in head)


def _gunzip_head(path: Path, n: int) -> bytes:
    """Up to n decompressed bytes; a short or corrupt stream just gives what could be read."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = b""
    with open(path, "rb") as fh:
        while len(out) < n:
            chunk = fh.read(65536)
            if not chunk:
                break
            try:
                out += d.decompress(chunk, n - len(out))
            except zlib.error:
                break
            if d.eof:
                break
    return out[:n]


def require_root(sn: Sniff, *, want: str) -> None:
    """Raise the one-line error for an empty file or a root that is not what `want` describes."""
    if sn.root is None:
        raise BadTraceError(
            sn.path, "empty file (no JSON at all); the profiler may have failed before writing"
        )
    if want == "array" and sn.root != "array":
        raise BadTraceError(
            sn.path, f"expected a JSON array of trace events ([{{...}}, ...]), found {_describe_root(sn)}"
        )
    if want == "events" and not (sn.root == "array" or (sn.root == "object" and sn.trace_events)):
        raise BadTraceError(
            sn.path,
            'expected a Chrome trace: a JSON array of events or an object with a "traceEvents" array, '
            f"found {_describe_root(sn)}",
        )


def _describe_root(sn: Sniff) -> str:
    if sn.root == "object":
        return 'a JSON object without a "traceEvents" key'
    if sn.root == "array":
        return "a JSON array"
    first = sn.head.lstrip(_WS)[:20]
    return f"data starting with {first!r}"


def check_complete(sn: Sniff) -> None:
    """A plain file must end by closing its root; otherwise it was cut off (a profiler killed mid-write).

    Checked on the last bytes before any parsing, so a truncated 4 GB file fails in milliseconds.
    Gzip files are checked while streaming (the gzip trailer is verified by the decompressor).
    """
    if sn.gzip or sn.root not in ("array", "object"):
        return
    with open_regular(sn.path) as fh:
        fh.seek(max(0, sn.size - 4096))
        tail = fh.read()
    end = tail.rstrip(_WS + b"\x00")
    want = b"]" if sn.root == "array" else b"}"
    if not end.endswith(want):
        last = end[-1:] or b""
        raise BadTraceError(
            sn.path,
            f"truncated JSON: the file ends at byte {sn.size} without the closing {want.decode()!r} of its top-level "
            f"{sn.root} (last character {last.decode('latin-1')!r}); the profiler was probably killed mid-write",
        )


# ---- byte scan for small objects (metadata events) -------------------------------------------------


def _raw_chunks(sn: Sniff) -> Iterator[bytes]:
    with open_stream(sn) as gz:
        while True:
            try:
                chunk = gz.read(CHUNK)
            except (EOFError, OSError, zlib.error) as e:
                raise gzip_error(sn.path, e, None) from e
            if not chunk:
                return
            yield chunk


def _enclosing_object(buf: bytes, pos: int, limit: int = 1 << 16) -> tuple[int, int] | None:
    """(start, end) of the innermost {...} around buf[pos], by brace matching over at most `limit` bytes.

    Good for small flat-ish objects like M events; strings containing braces may fool it, and then
    json.loads of the slice fails and the hit is ignored.
    """
    depth = 0
    i = pos
    lo = max(0, pos - limit)
    while i >= lo:
        c = buf[i]
        if c == 0x7D:  # }
            depth += 1
        elif c == 0x7B:  # {
            if depth == 0:
                break
            depth -= 1
        i -= 1
    else:
        return None
    start = i
    depth = 0
    hi = min(len(buf), start + limit)
    j = start
    while j < hi:
        c = buf[j]
        if c == 0x7B:
            depth += 1
        elif c == 0x7D:
            depth -= 1
            if depth == 0:
                return start, j + 1
        j += 1
    return None


def _object_at(buf: bytes, pos: int) -> dict[str, Any] | None:
    import json

    span = _enclosing_object(buf, pos)
    if span is None:
        return None
    try:
        obj = json.loads(buf[span[0] : span[1]])
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def scan_objects(
    sn: Sniff,
    needle: bytes,
    near: Sequence[bytes] = (),
    window: int = 1 << 18,
    probe: Callable[[bytes], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects enclosing each occurrence of `needle` (e.g. b'process_name'), and of the
    `near` needles within `window` bytes of such a hit (e.g. b'thread_name': profilers write a process's
    thread-name events next to its process-name event).

    One fast byte search over the file (bytes.find runs at ~1.5 GB/s; a second full-file needle would cost
    as much again, hence `near`), plus json.loads of each small enclosing slice; hits that do not parse
    are skipped. A needle inside a string yields whatever object encloses that string (e.g. an args
    dict): callers check what they got (M events: ph == "M"). Reads 8 MiB chunks with an overlap so objects
    straddling a chunk boundary are still found; each object is reported once. `probe`, if given, sees
    every chunk (for cheap checks riding on the same read).
    """
    overlap = window + (1 << 16)
    carry = b""
    carry_start = 0  # absolute offset of carry[0]
    seen_upto = 0  # hits before this absolute offset were already handled
    near_done: set[int] = set()  # absolute offsets of `near` hits already reported
    chunks = _raw_chunks(sn)
    pending = next(chunks, None)
    while pending is not None:
        nxt = next(chunks, None)
        if probe is not None:
            probe(pending)
        size = len(carry) + len(pending)
        last = nxt is None
        safe_end = carry_start + size - (0 if last else overlap)  # hits before this have full context
        start = max(0, seen_upto - carry_start)
        # carry + pending is made only for a chunk with a hit: a new 8 MiB bytes a chunk is fresh memory,
        # page-faulted in, and cost ~0.6 s per GB, twice the search itself (needles are rare: M events)
        buf = carry + pending if _may_hold(carry, pending, needle, start) else b""
        i = buf.find(needle, start) if buf else -1
        while i != -1 and carry_start + i < safe_end:
            obj = _object_at(buf, i)
            if obj is not None:
                yield obj
            lo, hi = max(0, i - window), min(len(buf), i + window)
            for nd in near:
                j = buf.find(nd, lo, hi)
                while j != -1:
                    if carry_start + j not in near_done:
                        near_done.add(carry_start + j)
                        o = _object_at(buf, j)
                        if o is not None:
                            yield o
                    j = buf.find(nd, j + 1, hi)
            i = buf.find(needle, i + 1)
        seen_upto = max(seen_upto, safe_end)
        keep = min(size, 2 * overlap)
        carry = pending[-keep:] if len(pending) >= keep else (carry + pending)[-keep:]
        carry_start = carry_start + size - keep
        pending = nxt


def _may_hold(carry: bytes, pending: bytes, needle: bytes, start: int) -> bool:
    """Might carry + pending hold `needle` at `start` or later (in carry, in pending, or across the two)?"""
    edge = len(needle) - 1
    return (
        carry.find(needle, start) != -1
        or pending.find(needle) != -1
        or (carry[-edge:] + pending[:edge]).find(needle) != -1
    )


# ---- DuckDB fast path ------------------------------------------------------------------------------


def duck_connection(threads: int | None = None, *, shared: bool = False) -> Any:
    """A DuckDB connection for the JSON fast path. shared=True: a cursor on this process's one database of
    these settings (traceql.parsers._process_db: duckdb.connect costs ~25 CPU-ms, a cursor ~0.3), for callers that
    change no database-wide setting; close() the cursor as usual."""
    import os

    import duckdb

    from .._duck import ingest_memory
    from ._process_db import process_db

    n = int(threads or min(os.cpu_count() or 1, 8))
    mem = ingest_memory(DUCK_MEMORY_LIMIT)

    def setup(con: Any) -> None:
        con.execute(f"SET threads={n}")
        con.execute(f"SET memory_limit='{mem}'")
        con.execute("SET preserve_insertion_order=false")

    if shared:
        con = process_db(("json", n, mem), setup)
    else:
        con = duckdb.connect(":memory:")
        setup(con)
    # DuckDB tracks query progress only with the progress bar on; printing stays off. The ingest progress bar
    # reads it (traceql.progress.stream): DuckDB reads ahead of its parse, so bytes read would run ahead.
    # (Session settings: a shared database's cursor sets its own.)
    con.execute("SET enable_progress_bar=true")
    con.execute("SET enable_progress_bar_print=false")
    return con


def duck_source(path: Path, columns: dict[str, str]) -> str:
    """A read_json(...) table expression over a bare event array, reading only `columns` (name -> type)."""
    from ._csv import lit, path_lit

    cols = ", ".join(f"{lit(k)}: {lit(v)}" for k, v in columns.items())
    return f"read_json({path_lit(str(path))}, format='array', columns={{{cols}}}, maximum_object_size={MAX_EVENT_BYTES})"


class DuckStream:
    """Arrow record batches of a DuckDB query over `path`, produced by a background thread.

    DuckDB runs a streaming query in the thread that fetches from it; fetching from a producer thread
    (DuckDB releases the GIL) lets the JSON parse overlap with whatever the caller does meanwhile, from the
    moment this object is created. At most `prefetch` batches wait, and, with `prefetch_bytes`, no more than
    that many bytes of them (one batch always may: a batch larger than the bound still moves). Errors ->
    BadTraceError (raised where the batches are consumed). close() stops the query early; safe to call twice.
    """

    def __init__(
        self,
        con: Any,
        path: Path,
        sql: str,
        batch_rows: int = 128 * 1024,
        prefetch: int = 3,
        prefetch_bytes: int | None = None,
    ) -> None:
        import collections
        import threading

        self.con, self.path = con, path
        self._cv = threading.Condition()
        self._items: collections.deque[tuple[Any, int]] = collections.deque()
        self._bytes = 0  # Arrow bytes of the batches waiting
        self._max_items, self._max_bytes = max(1, prefetch), prefetch_bytes
        self._stop = threading.Event()
        self._done = object()
        self._t = threading.Thread(
            target=self._produce, args=(sql, batch_rows), name="traceql-duckdb", daemon=True
        )
        self._t.start()

    def _room(self, nbytes: int) -> bool:
        if not self._items:
            return True
        if len(self._items) >= self._max_items:
            return False
        return self._max_bytes is None or self._bytes + nbytes <= self._max_bytes

    def _put(self, item: Any, nbytes: int = 0) -> bool:
        """Queue `item` once there is room; False if close() came first. The wait re-checks the bounds at least
        every 0.1 s (set_prefetch and close notify; this is only a safety net)."""
        with self._cv:
            while not self._stop.is_set() and not self._room(nbytes):
                self._cv.wait(0.1)
            if self._stop.is_set():
                return False
            self._items.append((item, nbytes))
            self._bytes += nbytes
            self._cv.notify_all()
            return True

    def _produce(self, sql: str, batch_rows: int) -> None:
        from .._duck import arrow_reader

        try:
            for b in arrow_reader(self.con.sql(sql), batch_rows):
                if not self._put(b, b.nbytes):
                    return
            self._put(self._done)
        except BaseException as e:  # handed to the consumer, which raises it
            self._put(e)

    def set_prefetch(self, n: int, nbytes: int | None = None) -> None:
        """Change the bounds on the batches waiting (lower bounds take effect as the consumer drains them)."""
        with self._cv:
            self._max_items, self._max_bytes = max(1, n), nbytes
            self._cv.notify_all()

    def waiting(self) -> tuple[int, int]:
        """(batches, Arrow bytes) parsed and not yet taken."""
        with self._cv:
            return len(self._items), self._bytes

    def _get(self) -> Any:
        with self._cv:
            while not self._items:
                self._cv.wait()
            item, nbytes = self._items.popleft()
            self._bytes -= nbytes
            self._cv.notify_all()
            return item

    def __iter__(self) -> Iterator[Any]:
        import duckdb
        import pyarrow as pa

        while True:
            item = self._get()
            if item is self._done:
                return
            # DuckDB's errors come as duckdb.Error, or wrapped by pyarrow's reader as OSError/ArrowException
            if isinstance(item, (duckdb.Error, OSError, pa.ArrowException)):
                raise _duck_error(self.path, item) from None
            if isinstance(item, BaseException):
                raise item
            yield item

    def close(self) -> None:
        self._stop.set()
        with self._cv:
            self._cv.notify_all()  # a producer waiting for room returns
        if self._t.is_alive():
            self.con.interrupt()
            while self._t.is_alive():
                self._t.join(timeout=0.05)
        with self._cv:
            self._items.clear()
            self._bytes = 0
        self.con.close()


def duck_batches(
    con: Any, path: Path, sql: str, batch_rows: int = 128 * 1024, prefetch: int = 3
) -> Iterator[Any]:
    """Stream the Arrow batches of `sql` (see DuckStream); the query stops if the consumer stops early."""
    from .. import progress

    stream = DuckStream(con, path, sql, batch_rows, prefetch)
    shown = progress.Stream(path, con.query_progress)
    try:
        yield from stream
    finally:
        shown.close()
        stream.close()


class DuckReadError(BadTraceError):
    """The DuckDB reader failed; `resource` is True when it ran out of memory (not a fault of the file)."""

    def __init__(self, path: str | Path, detail: str, resource: bool = False) -> None:
        super().__init__(path, detail)
        self.resource = resource

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (BadTraceError, (self.path, self.detail))


def _duck_error(path: Path, e: BaseException) -> DuckReadError:
    """One line naming the file, from a DuckDB (or pyarrow-wrapped DuckDB) error of any length."""
    full = str(e)
    first = full.splitlines()[0] if full else type(e).__name__
    msg = re.sub(r' in file "[^"]*"', "", re.sub(r"^[A-Za-z ]*Error: ", "", first))
    low = full.lower()
    if "out of memory" in low or "failed to allocate" in low or "maximum_object_size" in low:
        return DuckReadError(
            path, f"the DuckDB JSON reader ran out of memory (an event of tens of MB?): {msg}", resource=True
        )
    if "utf-8" in low or "utf8" in low:
        return DuckReadError(path, f"not UTF-8 text: {msg}")
    return DuckReadError(path, f"malformed JSON: {msg}")


# ---- ijson path ------------------------------------------------------------------------------------


MAX_NESTING = 512
# ijson keeps a prefix string per nesting level, so 100k-deep input costs O(depth^2) memory (GBs for a
# 200 KB file). Guard, on the bytes before ijson parses them: a window whose opening brackets outnumber its
# closing ones by more than MAX_NESTING (bytes.count: memory speed) is checked with _DEEP, a run of
# MAX_NESTING containers each opened as the first element/value of the previous one ('[[[[', '{"a": {"b": [').
# Nesting with siblings before each nested value ('[0, [0, [0, ...') is not caught; no profiler writes either.
_DEEP = re.compile(rb'(?:[\[{]\s*(?:"(?:[^"\\]|\\.){0,256}"\s*:\s*)?){%d}' % MAX_NESTING)
_DEEP_OVERLAP = 300 * MAX_NESTING


class _CountingReader(io.RawIOBase):
    """Wraps a binary stream for ijson: counts bytes handed out (the offset reported on errors), keeps the
    tail, and refuses absurdly deep nesting before ijson sees it (see MAX_NESTING)."""

    def __init__(self, raw: Any, keep_tail: int = 0, path: Path | None = None) -> None:
        self.raw = raw
        self.pos = 0
        self.keep_tail = keep_tail
        self.tail = b""
        self.path = path
        self._prev = b""

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        data: bytes = self.raw.read(n)
        if self.path is not None and data:
            window = self._prev + data
            net = window.count(b"[") + window.count(b"{") - window.count(b"]") - window.count(b"}")
            if net > MAX_NESTING and _DEEP.search(window):
                raise BadTraceError(
                    self.path,
                    f"JSON nested deeper than {MAX_NESTING} levels near byte {self.pos}: not a profiler trace",
                )
            self._prev = window[-_DEEP_OVERLAP:]
        self.pos += len(data)
        if self.keep_tail:
            self.tail = (self.tail + data)[-self.keep_tail :]
        return data

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


def open_stream(sn: Sniff) -> GuardedStream:
    """The file's (decompressed) bytes through the size/ratio/string limits (traceql.parsers._limits)."""
    return GuardedStream(sn.path, sn.gzip)


def gzip_error(path: Path, e: BaseException, offset: int | None) -> BadTraceError:
    where = f" after {offset} decompressed bytes" if offset is not None else ""
    if isinstance(e, EOFError):
        return BadTraceError(
            path, f"truncated gzip: the compressed stream ends early{where} (file cut off mid-write?)"
        )
    return BadTraceError(path, f"corrupt gzip data{where}: {e}")


def iter_events(
    sn: Sniff, *, keep_tail: int = 0, tail_out: list[bytes] | None = None
) -> Iterator[dict[str, Any]]:
    """Every event dict of the trace (array root, or the object's "traceEvents"), numbers exact (int/Decimal).

    With keep_tail > 0, the last keep_tail raw bytes read are appended to tail_out at the end (object keys
    written after traceEvents, e.g. Kineto's traceName).
    """
    import ijson

    require_root(sn, want="events")
    check_complete(sn)
    prefix = "item" if sn.root == "array" else "traceEvents.item"
    fh = open_stream(sn)
    reader = _CountingReader(fh, keep_tail, sn.path)
    unit = "decompressed byte" if sn.gzip else "byte"
    try:
        # ijson reads through our counter, so .pos is the offset it had reached when an error surfaced
        for ev in ijson.items(reader, prefix, use_float=False):
            if isinstance(ev, dict):
                yield ev
    except ijson.JSONError as e:
        text = e.args[0] if e.args else e
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        first = str(text).splitlines()[0] if str(text) else type(e).__name__
        if "premature EOF" in first or "incomplete" in first.lower():
            raise BadTraceError(
                sn.path,
                f"truncated JSON: input ends at {unit} {reader.pos} before the top-level {sn.root} closes "
                "(profiler killed mid-write?)",
            ) from None
        if "UTF8" in first or "utf-8" in first.lower():
            raise BadTraceError(
                sn.path, f"not UTF-8 text: invalid bytes before {unit} {reader.pos}"
            ) from None
        raise BadTraceError(sn.path, f"malformed JSON before {unit} {reader.pos}: {first}") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise gzip_error(sn.path, e, reader.pos) from None
    except UnicodeDecodeError as e:
        raise BadTraceError(sn.path, f"not UTF-8 text near {unit} {reader.pos}: {e.reason}") from None
    finally:
        fh.close()
    if tail_out is not None:
        tail_out.append(reader.tail)


def read_header(sn: Sniff, stop_key: str = "traceEvents") -> dict[str, Any]:
    """The top-level keys of an object root written before `stop_key` (Kineto: schemaVersion,
    deviceProperties, distributedInfo, baseTimeNanoseconds...). Parses only the head of the file."""
    import ijson

    if sn.root != "object":
        return {}
    fh: Any = _CountingReader(open_stream(sn), 0, sn.path)
    out: dict[str, Any] = {}
    try:
        key = None
        builder: _Builder | None = None
        for prefix, event, value in ijson.parse(fh, use_float=False):
            if builder is not None:
                builder.event(event, value)
                if builder.depth == 0:  # the value of `key` is complete
                    out[key] = builder.value  # type: ignore[index]
                    builder = None
                continue
            if prefix == "" and event == "map_key":
                key = value
                if key == stop_key:
                    break
                continue
            if key is not None and prefix == key:
                if event in ("start_map", "start_array"):
                    builder = _Builder()
                    builder.event(event, value)
                else:
                    out[key] = value
    except (ijson.JSONError, EOFError, zlib.error, OSError):
        pass  # the events pass reports these with a byte offset
    finally:
        fh.raw.close()
    return out


class _Builder:
    """ijson ObjectBuilder that also tracks nesting depth, so the caller knows when a value is complete."""

    def __init__(self) -> None:
        import ijson

        self._b = ijson.ObjectBuilder()
        self.depth = 0

    def event(self, event: str, value: Any) -> None:
        if event in ("start_map", "start_array"):
            self.depth += 1
        elif event in ("end_map", "end_array"):
            self.depth -= 1
        self._b.event(event, value)

    @property
    def value(self) -> Any:
        return self._b.value


def tail_bytes(sn: Sniff, n: int = 1 << 16) -> bytes:
    """The last n bytes of the (decompressed) file. For gzip this decompresses the whole stream (C speed)."""
    if not sn.gzip:
        with open_regular(sn.path) as fh:
            fh.seek(max(0, sn.size - n))
            return fh.read()
    tail = b""
    for chunk in _raw_chunks(sn):
        tail = (tail + chunk)[-n:]
    return tail


# ---- writing off the parsing thread -----------------------------------------------------------------


class BackgroundWriter:
    """Feeds a RankWriter from one background thread, so Parquet encoding/compression (which releases
    the GIL) overlaps with mapping the next batch. Bounded queue; the first error is re-raised on the
    next write() or on close(). The RankWriter is only ever touched by this thread until close() returns.
    """

    def __init__(self, out: Any, depth: int = 4) -> None:
        import queue
        import threading

        self.out = out
        self._q: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._err: BaseException | None = None
        self._t = threading.Thread(target=self._run, name="traceql-parquet-writer", daemon=True)
        self._t.start()

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            if self._err is None:
                try:
                    item()
                except BaseException as e:  # re-raised in the parsing thread
                    self._err = e

    def write(
        self, table: str, data: Any, part: str = "", apart_by: str | None = None, reorder: bool = False
    ) -> None:
        # reorder only when asked: an `out` that never reorders need not know the keyword
        extra = {"reorder": True} if reorder else {}
        self._put(functools.partial(self.out.write, table, data, part, apart_by=apart_by, **extra))

    def seal(self, table: str, part: str = "") -> None:
        """RankWriter.seal, in order after the writes queued before it."""
        self._put(functools.partial(self.out.seal, table, part))

    def _put(self, call: Callable[[], None]) -> None:
        if self._err is not None:
            raise self._err
        self._q.put(call)

    def close(self) -> None:
        """Wait for every queued write; raise the first error."""
        if self._t.is_alive():
            self._q.put(None)
            self._t.join()
        if self._err is not None:
            raise self._err


class RowGroups:
    """Rows for the store, gathered per (table, file part) and handed to `out.write` in pieces of at least
    `rows` rows: one Parquet row group per write call, so per-batch pieces would make many tiny row groups,
    while the rows held here are a fixed part of the ingest's peak memory (hence a small `rows`). Row counts
    per table go to `counts` (the caller's dict)."""

    def __init__(self, out: Any, rows: int, counts: dict[str, int]) -> None:
        self.out, self.rows, self.counts = out, rows, counts
        self._pending: dict[tuple[str, str], list[Any]] = {}
        self._apart_by: dict[tuple[str, str], str | None] = {}
        self._reorder: set[tuple[str, str]] = set()

    def add(
        self, table: str, data: Any, part: str = "", apart_by: str | None = None, reorder: bool = False
    ) -> None:
        """data: an Arrow table or record batch, or a dict of columns. apart_by, reorder: see RankWriter.write
        (one value per table and part)."""
        import pyarrow as pa

        if isinstance(data, pa.RecordBatch):
            t = pa.Table.from_batches([data])
        else:
            t = data if isinstance(data, pa.Table) else pa.table(data)
        if t.num_rows == 0:
            return
        self.counts[table] = self.counts.get(table, 0) + t.num_rows
        parts = self._pending.setdefault((table, part), [])
        self._apart_by[(table, part)] = apart_by
        if reorder:
            self._reorder.add((table, part))
        parts.append(t)
        if sum(p.num_rows for p in parts) >= self.rows:
            self.flush((table, part))

    def flush(self, key: tuple[str, str] | None = None) -> None:
        """Write what is held for `key` (table, part), or for every table."""
        import pyarrow as pa

        for table, part in [key] if key else list(self._pending):
            parts = self._pending.pop((table, part), [])
            if parts:
                self.out.write(
                    table,
                    pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0],
                    part,
                    self._apart_by.get((table, part)),
                    **({"reorder": True} if (table, part) in self._reorder else {}),
                )


# ---- spilling to a temporary Parquet file ------------------------------------------------------------


class Spill:
    """Arrow tables appended to a temporary Parquet file, for things that must wait for the end of the
    file (flow pairing, per-series decisions) without holding them in memory; read back with DuckDB."""

    def __init__(self, directory: str | Path, name: str) -> None:
        self.path = Path(directory) / f"{name}.parquet"
        self._w: Any = None
        self.rows = 0

    def add(self, table: Any) -> None:
        import pyarrow.parquet as pq

        if table.num_rows == 0:
            return
        if self._w is None:
            from .._arrow_helpers import parquet_options

            self._w = pq.ParquetWriter(
                self.path, table.schema, compression="lz4", **parquet_options(table.schema)
            )
        self._w.write_table(table.cast(self._w.schema) if table.schema != self._w.schema else table)
        self.rows += table.num_rows

    def close(self) -> Path | None:
        if self._w is not None:
            self._w.close()
            self._w = None
        return self.path if self.rows else None


def spill_connection() -> Any:
    """A small DuckDB connection for the end-of-file steps: bounded memory, spilling to a temp dir of this
    process. A cursor on the process's one database for them (traceql.parsers._process_db): a database per step
    (two per trace_view) was ~50 CPU-ms of a small rank's ~400."""
    from .._duck import ingest_memory
    from ._csv import lit
    from ._process_db import process_db, process_temp_dir

    # 128 MB: the flow pairing over a 4 GB trace's spilled flows would otherwise grow the ingest's peak RSS
    # ~100 MB above a small trace's (the peak should not depend on the input size)
    mem = ingest_memory("128MB")

    def setup(con: Any) -> None:
        con.execute(f"SET memory_limit='{mem}'")
        con.execute("SET preserve_insertion_order=false")
        con.execute(f"SET temp_directory={lit(str(Path(process_temp_dir()) / 'duckdb_tmp'))}")

    return process_db(("spill", mem), setup)


FLOW_ENDS = ("cat", "name", "fid", "ph", "pid", "tid", "ts_ns")  # columns of a flows Spill


# flow ends paired per pass. Every pass re-reads every end, and the join runs within the spill connection's
# memory limit anyway (DuckDB's hash join spills past it): on a 4 GB Kineto trace (8.5M ends) one pass peaks
# ~18 MB above passes of 512k ends and spends 18% less CPU on the whole ingest (benchmarks/README.md). Passes
# remain for traces beyond this many ends.
FLOW_PAIR_ROWS = 16 * 1024 * 1024


def pair_flows(path: Path, batch_rows: int = 128 * 1024) -> Iterator[Any]:
    """Canonical `flows` batches from a Spill of flow ends (FLOW_ENDS): s paired with f/t on (cat, id),
    one row per f (an s may fan out to several tasks), unpaired ends kept with the other side null.
    Runs in DuckDB with bounded memory (spills to the process's temp dir: see spill_connection), in as many
    passes over disjoint hash ranges of the (cat, id) key as it takes to keep each pass at FLOW_PAIR_ROWS ends."""
    import pyarrow.parquet as pq

    from .._duck import arrow_reader
    from ._csv import path_lit

    passes = max(1, -(-pq.ParquetFile(path).metadata.num_rows // FLOW_PAIR_ROWS))
    con = spill_connection()
    try:
        src = f"read_parquet({path_lit(str(path))})"
        for k in range(passes):
            part = f"hash(coalesce(cat, ''), fid) % {passes} = {k}" if passes > 1 else "true"
            sql = f"""
            WITH s AS (SELECT coalesce(cat, '') AS c, fid, name, pid, tid, ts_ns FROM {src} WHERE ph = 's' AND {part}),
                 f AS (SELECT coalesce(cat, '') AS c, fid, name, pid, tid, ts_ns FROM {src} WHERE ph IN ('f', 't') AND {part})
            SELECT nullif(coalesce(s.c, f.c), '') AS cat, coalesce(s.name, f.name) AS name,
                   coalesce(s.fid, f.fid) AS flow_id, s.pid AS src_pid, s.tid AS src_tid, s.ts_ns AS src_ts_ns,
                   f.pid AS dst_pid, f.tid AS dst_tid, f.ts_ns AS dst_ts_ns
            FROM s FULL OUTER JOIN f ON s.c = f.c AND s.fid = f.fid"""
            yield from arrow_reader(con.sql(sql), batch_rows)
    finally:
        con.close()


# ---- args as parallel key/value lists, vectorised ----------------------------------------------------


class ArgsKV:
    """Per-event `args` given as two parallel list columns (keys, values as text), read column-wise.

    Both readers produce args this way (DuckDB: json_keys(args) and json_extract_string(args, '$.*');
    ijson: the dict's keys and values), so canonical columns are pulled out by key with Arrow kernels and
    everything else becomes the `extra` map, with no per-row Python.
    """

    def __init__(self, keys: Any, vals: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        vals = vals.combine_chunks() if isinstance(vals, pa.ChunkedArray) else vals
        self.n = len(keys)
        klen = pc.fill_null(pc.list_value_length(keys), 0)
        vlen = pc.fill_null(pc.list_value_length(vals), 0)
        if not pc.all(pc.equal(klen, vlen)).as_py():  # args that were not an object: drop them
            ok = pc.equal(klen, vlen)
            keys = pc.if_else(ok, keys, pa.scalar(None, keys.type))
            vals = pc.if_else(ok, vals, pa.scalar(None, vals.type))
            klen = pc.fill_null(pc.list_value_length(keys), 0)
        self.lens = klen.cast(pa.int64())
        self.keys = pc.list_flatten(keys)
        self.vals = pc.list_flatten(vals)
        self.parents = pc.list_parent_indices(keys)
        # entry range of each row in the flattened arrays: [starts[r], ends[r])
        self.ends = pc.cumulative_sum(self.lens)
        self.starts = pc.subtract(self.ends, self.lens)
        self.width = 0  # > 0: every row has these many args, the same keys in the same order
        self._fixed = self._fixed_layout()

    def _fixed_layout(self) -> tuple[dict[str, int], Any] | None:
        """(key -> position, values as a FixedSizeList) when every row has the same keys in the same order, as
        one writer's events of one kind do (torch_npu's device tasks: the same 8 args on every row). get() is
        then one list_element per key instead of a search over all entries (issue 18: ~20% of a device-task
        trace_view's mapping).

        The test compares bytes, not strings: the key lengths and the key text of the whole batch must be the
        first row's repeated n times (two memcmp over buffers; equal lengths and equal concatenated text mean
        equal keys). A per-position string compare took half of a device-task batch's mapping (issue 18)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.n == 0 or len(self.keys) == 0 or self.keys.null_count:
            return None
        mm = pc.min_max(self.lens).as_py()
        width = mm["max"]
        if width != mm["min"] or not width or width * self.n != len(self.keys):
            return None
        keys = self.keys if self.keys.type == pa.string() else self.keys.cast(pa.string())
        first = keys.slice(0, width).to_pylist()
        if len(set(first)) != width:
            return None
        blen = pc.binary_length(keys)  # int32, contiguous (a fresh array)
        lens_buf = blen.buffers()[1].slice(blen.offset * 4, len(blen) * 4)
        if not lens_buf.equals(pa.py_buffer(lens_buf.to_pybytes()[: width * 4] * self.n)):
            return None
        offs = memoryview(keys.buffers()[1]).cast("i")  # int32 offsets (pa.string())
        lo, hi = offs[keys.offset], offs[keys.offset + len(keys)]
        text = keys.buffers()[2].slice(lo, hi - lo)
        row = "".join(first).encode()
        if hi - lo != len(row) * self.n or not text.equals(pa.py_buffer(row * self.n)):
            return None
        self.width = width
        return {k: j for j, k in enumerate(first)}, pa.FixedSizeListArray.from_arrays(self.vals, width)

    def _before(self, mask: Any) -> Any:
        """[0] + running count of `mask` over the flattened entries (int64), for per-row counting."""
        import pyarrow as pa
        import pyarrow.compute as pc

        return pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(mask.cast(pa.int64()))])

    def get(self, *names: str, values: Any = None) -> Any:
        """The value of the first present key among `names`, per row (text, null when absent). values: another
        array parallel to the entries to take the value from instead (a conversion of all of them done once).

        No hashing: with c = running count of matching entries, row r has a match iff c[end_r] > c[start_r],
        and that match is entry number c[start_r] among the matching ones (JSON keys are unique per row).
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        vals = self.vals if values is None else values
        out = None
        if self._fixed is not None:
            pos, fvals = self._fixed
            if values is not None:
                fvals = pa.FixedSizeListArray.from_arrays(values, self.width)
            for name in names:
                key = name.as_py() if isinstance(name, pa.Scalar) else name  # callers pass str or pa.scalar
                if key in pos:
                    col = pc.list_element(fvals, pos[key])
                    out = col if out is None else pc.coalesce(out, col)
            return out if out is not None else pa.nulls(self.n, vals.type)
        for name in names:
            m = pc.equal(self.keys, name)
            if not pc.any(m).as_py():
                continue
            c = self._before(m)
            first = c.take(self.starts)
            has = pc.greater(c.take(self.ends), first)
            col = vals.filter(m).take(pc.if_else(has, first, pa.scalar(None, pa.int64())))
            out = col if out is None else pc.coalesce(out, col)
        return out if out is not None else pa.nulls(self.n, vals.type)

    def extra(self, canonical: Sequence[str]) -> Any:
        """MAP(key -> text) of every arg not in `canonical`, in the order written."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self._fixed is not None:  # the same keys on every row: the kept positions repeat (no hashing)
            pos = self._fixed[0]
            pattern = bytes(0 if k in canonical else 1 for k in sorted(pos, key=pos.__getitem__))
            kw = sum(pattern)
            mask = pa.Array.from_buffers(
                pa.int8(), len(pattern) * self.n, [None, pa.py_buffer(pattern * self.n)]
            )
            keep = mask.cast(pa.bool_())
            offsets = pa.concat_arrays(
                [pa.array([0], pa.int32()), pc.cumulative_sum(pa.repeat(pa.scalar(kw, pa.int32()), self.n))]
            )
            return pa.MapArray.from_arrays(offsets, self.keys.filter(keep), self.vals.filter(keep))
        keep = pc.invert(pc.is_in(self.keys, value_set=pa.array(list(canonical), pa.string())))
        return self.map_of(keep, self.vals.filter(keep))

    def map_of(self, keep: Any, items: Any) -> Any:
        """A MAP per row of the entries `keep` marks (a mask over the flattened entries), in the order written,
        with `items` (one value per kept entry) as its values."""
        import pyarrow as pa
        import pyarrow.compute as pc

        kept_before = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(keep.cast(pa.int64()))])
        old_offsets = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(self.lens)])
        offsets = kept_before.take(old_offsets).cast(pa.int32())
        return pa.MapArray.from_arrays(offsets, self.keys.filter(keep), items)


def ints(arr: Any) -> Any:
    """Text -> int64, exact for integers; anything else ('1.0', '1e3', 'abc', past int64) through to_int
    (null if not integral), one by one for those values only (one such arg used to send its batch)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return pc.cast(arr, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    return _column_then_rest(arr, r"^-?[0-9]{1,18}$", pa.int64(), to_int)  # 18 digits: always in int64


# a decimal float64 holds as a finite number: at most 40 significant characters, a 2-digit exponent
_SHORT_REAL = r"^[+-]?([0-9]{1,40}(\.[0-9]{0,40})?|\.[0-9]{1,40})([eE][+-]?[0-9]{1,2})?$"


def floats(arr: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        out = pc.cast(arr, pa.float64())
        if pc.all(pc.fill_null(pc.is_finite(out), True)).as_py():
            return out
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # one by one only for what is not a plain short decimal (N/A, 'nan', '1e400', junk: NULL, noted by num)
    return _column_then_rest(arr, _SHORT_REAL, pa.float64(), num)


def _column_then_rest(arr: Any, pattern: str, type_: Any, one: Callable[[Any], Any]) -> Any:
    """Cast the values matching `pattern` (RE2) to `type_` as a column; the other non-null ones through `one`
    one by one. `pattern` must admit only text the cast takes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    simple = pc.fill_null(pc.match_substring_regex(arr, pattern), False)
    out = pc.cast(pc.if_else(simple, arr, None), type_)
    return _one_by_one(arr, out, pc.and_(pc.invert(simple), pc.is_valid(arr)), one, type_)


def _one_by_one(arr: Any, out: Any, where: Any, one: Callable[[Any], Any], type_: Any) -> Any:
    """`out` with the rows of `where` replaced by `one` of the same rows of `arr`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pc.any(where).as_py():
        return out
    slow = [one(x) for x in pc.filter(arr, where).to_pylist()]
    return pc.replace_with_mask(out, where, pa.array(slow, type_))


# A µs timestamp that becomes ns by integer arithmetic alone: optional minus, at most 16 integer digits (so the
# ns value has at most 19 and the checked multiply catches the few past int64), at most 3 decimals (whole ns)
_SHORT_US = r"^-?[0-9]{1,16}(\.[0-9]{0,3})?$"


def decimal_times(arr: Any, scale: int, bound: int | None = None) -> Any:
    """Decimal text column (at most 3 nonzero fractional digits) times `scale`, as exact int64; None when any
    value is not such a number, or (with `bound`) not below it in magnitude, or the product is not a whole
    int64. Arrow's decimal parse is exact or raises (more decimals, past 19 integer digits, spaces, quotes,
    `null`, NaN...), and so is the decimal -> int64 cast (a fraction left, an overflow)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        dec = pc.cast(arr, pa.decimal128(22, 3))
        if bound is not None:
            mm = pc.min_max(dec).as_py()
            if mm["min"] is None or mm["min"] <= -bound or mm["max"] >= bound:
                return None
        return pc.cast(pc.multiply(dec, pa.scalar(scale, pa.decimal128(4, 0))), pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def ts_text_to_ns(arr: Any) -> Any:
    """µs text column -> exact int64 ns, vectorised. The 3-decimal form ('1736408883688177.930': drop the
    dot) is one cast; a column that mixes it with other short forms (a real level1 trace_view prints a counter
    sample at a whole µs as '1736408883973810') is one regex, one cast and one multiply by 10^(3 - decimals);
    only the values of neither form (signs, spaces, exponents, >3 decimals, non-numbers) go through `us_to_ns`
    one by one. One such value used to send its whole 64k-row batch through `us_to_ns`: on that level1 file
    tiled to 250 MB, 2 in 3 of the parse's CPU-seconds."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if arr.null_count == len(arr):
        return pa.nulls(len(arr), pa.int64())
    # what Arrow's decimal parse takes ('1736408883688177.930', a whole µs, '+5', '.5', '1.5e3') is what us_to_ns
    # takes, to the same value: 3 passes where the mixed forms below cost ~10 (a 32k level1 batch: 3 ms against
    # 14 ms, the regex alone 9); a batch with an odd value goes on below
    whole = decimal_times(arr, 1000)
    if whole is not None:
        return whole
    # find_substring counts bytes, so the length it is compared with is in bytes too
    dot = pc.find_substring(arr, ".")
    three = pc.equal(dot, pc.subtract(pc.binary_length(arr), 4))
    if pc.all(pc.fill_null(three, True)).as_py():
        try:
            return pc.cast(pc.replace_substring(arr, ".", "", max_replacements=1), pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    short = pc.fill_null(pc.match_substring_regex(arr, _SHORT_US), False)
    decimals = pc.if_else(pc.less(dot, 0), 0, pc.subtract(pc.subtract(pc.binary_length(arr), dot), 1))
    decimals = pc.if_else(short, decimals, 3)  # the rest: any power, their digits are NULL
    scale = pc.power(pa.scalar(10, pa.int64()), pc.subtract(3, decimals).cast(pa.int64()))
    digits = pc.if_else(short, pc.replace_substring(arr, ".", "", max_replacements=1), None)
    try:
        # "123." leaves "123": 0 decimals, x1000; a bare "." or "-" never matched the pattern
        out = pc.multiply_checked(pc.cast(digits, pa.int64()), scale)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # past int64 ns: NULL and noted by us_to_ns
        return pa.array([us_to_ns(x) for x in arr.to_pylist()], pa.int64())
    return _one_by_one(arr, out, pc.and_(pc.invert(short), pc.is_valid(arr)), us_to_ns, pa.int64())


def dur_text_to_ns(arr: Any) -> Any:
    """µs text column (a JSON number as DuckDB prints it: '145.57', '0.60003125', '1e-05') -> exact int64 ns,
    rounded half away from zero like `us_to_ns`.

    Through float64 where that is provably exact: DuckDB parsed the number as a double and prints its shortest
    round-trip form, so the cast gets that double back, and y = x * 1000 is within |y| * 2**-52 of the printed
    decimal x 1000 (half an ulp from the parse, half from the product); rounding y gives the exact answer
    unless the decimal could lie on the other side of a half. So the values with y within 1e-6 + |y| * 2**-49
    of a half (ties such as '2.0005', or '67597223.0005', which is 67597223000.49999 as a float product), with
    |y| >= 2**40 ns, or not finite go through decimal128(26,12), or `us_to_ns` one by one where that does not
    fit; the rest keep the float result. Only those values, not their batch: a real level1 trace_view has a
    tie ('27.0805') and 16-decimal float noise ('8.569999999999999', past decimal128's 12) in most batches,
    which sent every batch through `us_to_ns`, a third of that file's parse. (The float path is ~5x cheaper
    than the decimal cast, which was a tenth of the trace_view parse.)"""
    import pyarrow as pa
    import pyarrow.compute as pc

    if arr.null_count == len(arr):
        return pa.nulls(len(arr), pa.int64())
    try:
        ns = pc.multiply(pc.cast(arr, pa.float64()), 1000.0)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # text that is no number: NULL, noted
        return pa.array([us_to_ns(x) for x in arr.to_pylist()], pa.int64())
    frac = pc.abs(pc.subtract(ns, pc.trunc(ns)))
    near_half = pc.less(pc.abs(pc.subtract(frac, 0.5)), pc.add(pc.multiply(pc.abs(ns), 2.0**-49), 1e-6))
    exact = pc.fill_null(
        pc.or_(pc.or_(near_half, pc.greater_equal(pc.abs(ns), 2.0**40)), pc.is_nan(ns)), False
    )
    fast = pc.if_else(exact, 0.0, ns)  # flagged values replaced below (a NaN or 1e400 cannot cast to int64)
    out = pc.cast(pc.round(fast, 0, round_mode="half_towards_infinity"), pa.int64())
    if not pc.any(exact).as_py():
        return out
    texts = pc.filter(arr, exact)
    try:
        d = pc.multiply(pc.cast(texts, pa.decimal128(26, 12)), pa.scalar(1000, pa.decimal128(4, 0)))
        slow = pc.cast(pc.round(d, 0, round_mode="half_towards_infinity"), pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        slow = pa.array([us_to_ns(x) for x in texts.to_pylist()], pa.int64())
    return pc.replace_with_mask(out, exact, slow)


def const(value: Any, n: int, type_: Any = None) -> Any:
    """An Arrow array of n copies of value (without building an n-long Python list)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = type_ or pa.string()
    return pc.fill_null(pa.nulls(n, t), pa.scalar(value, t))


# ---- exact time conversion -------------------------------------------------------------------------


def us_to_ns(v: Any, scale: int = 1000) -> int | None:
    """A µs value as ijson gives it (int, Decimal, or a numeric string) -> exact int ns (scale=1000).

    scale=1 for values already in ns. Non-integral ns are rounded half away from zero (as the Arrow
    conversion of the DuckDB path does). Floats never reach here on the ijson path; if one does, its
    shortest repr is used (exact for what a profiler printed).
    """
    t = type(v)
    if t is int:
        r = v * scale
        if -(2**63) <= r < 2**63:
            return r  # type: ignore[no-any-return]
        note(v)
        return None
    if v is None or t is bool:
        return None
    if t is Decimal:
        d = v
    else:
        s = str(v).strip()
        if not s or s in _NA:
            return None
        # only ASCII decimals as profilers write them: Decimal() also takes '1_000', '١٢٣', 'Infinity'
        if not plain(s if t is str else repr(v)):
            note(s)
            return None
        try:
            d = Decimal(repr(v) if isinstance(v, float) else s)
        except InvalidOperation:
            note(s)
            return None
    if not d.is_finite():
        note(v)
        return None
    out = int((d * scale).to_integral_value(rounding=ROUND_HALF_UP))
    if -(2**63) <= out < 2**63:
        return out
    note(v)  # a JSON 1e400 is a finite Decimal with no int64 home
    return None


def num(v: Any) -> float | None:
    """A JSON scalar -> float (None for missing/non-numeric)."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float, Decimal)):
        try:
            f = float(v)
        except OverflowError:
            f = float("inf")
    else:
        s = str(v).strip()
        if not s or s in _NA:
            return None
        if not plain(s):  # float() takes '1_000', '١٢٣', 'NaN', 'Infinity'
            note(s)
            return None
        f = float(s)
    if f != f or f in (float("inf"), float("-inf")):
        note(v)
        return None
    return f


def to_int(v: Any) -> int | None:
    t = type(v)
    if t is int:
        if -(2**63) <= v < 2**63:
            return v  # type: ignore[no-any-return]
        note(v)
        return None
    if v is None or t is bool:
        return None
    if isinstance(v, int):
        return int(v)
    if isinstance(v, Decimal):
        if not v.is_finite() or v != v.to_integral_value():
            return None
        i = int(v)
    else:
        txt = str(v).strip()
        if not plain(txt):  # int() takes '1_000' and '١٢٣'; not numbers any profiler writes
            if txt and txt not in _NA:
                note(txt)
            return None
        try:
            i = int(txt)
        except ValueError:
            d = Decimal(txt)  # '1.0', '1e3': integral values written as decimals (plain: always parses)
            if d != d.to_integral_value():
                return None
            i = int(d)
    if -(2**63) <= i < 2**63:
        return i
    note(v)
    return None


# text that means "no value" in the profilers' JSON (not counted as an unparsed number)
_NA = frozenset({"", "N/A", "NA", "n/a", "null", "None", "-"})
_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*", re.ASCII)


def _beyond_int64(v: Any) -> bool:
    """Whether a value to_int gave up on is an integer that is only too large (not text, not a fraction)."""
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    if isinstance(v, Decimal):
        return v.is_finite() and v == v.to_integral_value()
    return isinstance(v, str) and _INT_TEXT.fullmatch(v) is not None


def int_field(v: Any, path: Path, field: str) -> int | None:
    """to_int of an id field (pid, tid...), refusing an integer outside int64 with the file and field named.

    Profilers write pids, tids and ids that fit int64; a larger one used to become NULL, and a NULL pid drops
    the event, so a Kineto trace with pid 2**63 lost every host op and step with exit 0 (issue 22)."""
    i = to_int(v)
    if i is None and v is not None and _beyond_int64(v):
        raise out_of_range(path, field, v)
    return i


def out_of_range(path: Path, field: str, v: Any) -> BadTraceError:
    return BadTraceError(
        path,
        f"field {field!r} holds {str(v).strip()[:40]}, outside the signed 64-bit integer range profilers "
        "write; refused rather than dropping the events that carry it",
    )


def check_int_column(raw: Any, got: Any, path: Path, field: str) -> None:
    """Column-wise int_field: refuse when a value that is an integer as text (`raw`) became NULL in `got`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if got.null_count == raw.null_count:
        return
    txt = (
        raw
        if pa.types.is_string(raw.type) or pa.types.is_large_string(raw.type)
        else pc.cast(raw, pa.string())
    )
    lost = pc.and_(
        pc.is_null(got), pc.fill_null(pc.match_substring_regex(txt, r"^\s*[+-]?[0-9]+\s*$"), False)
    )
    if pc.any(lost).as_py():
        raise out_of_range(path, field, txt.filter(lost)[0].as_py())


def text(v: Any) -> str | None:
    """A JSON value as text: strings verbatim, numbers as written, lists/objects as compact JSON."""
    t = type(v)  # exact-type dispatch: this runs for every arg of every event on the ijson path
    if t is str:
        return v  # type: ignore[no-any-return]
    if v is None:
        return None
    if t is int or t is Decimal:
        return str(v)
    if t is bool:
        return "true" if v else "false"
    if t is list and all(type(x) is int for x in v):
        return "[" + ",".join(map(str, v)) + "]"  # grid/block dims: same text as json.dumps compact
    if t is float:
        return repr(v)
    return str(_json_encoder().encode(v))


@functools.lru_cache(maxsize=1)
def _json_encoder() -> Any:
    """One compact encoder (json.dumps with options builds a new encoder per call: 3x slower)."""
    import json

    return json.JSONEncoder(separators=(",", ":"), default=str, ensure_ascii=False)
