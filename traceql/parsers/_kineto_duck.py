"""DuckDB reader for Kineto traces: the same rows as kineto.py's ijson loop, ~5x faster, bounded memory.

How: DuckDB cannot start reading at a byte offset, and read_json over the whole `{"traceEvents": [...]}` object
is very slow, so a producer thread (`Feed`) writes just the events array (`[` ... `]`, gzip decompressed on
the way: zlib releases the GIL) into temporary segment files that DuckDB reads with `read_json(format='array')`,
in file order. DuckDB hands over JSON text per field and per arg; Arrow turns it into the canonical columns on this
thread (`_Mapper`), a third thread encodes Parquet. The array goes out in 32 MiB segments, one query each, and the next
segment's query runs while this one's batches are mapped (`_Segments`), so both cores stay busy on one file.
The few events whose meaning depends on file order or that are rare (M/C events, cuda_profiler_range) go through
the ijson reader's own per-event code.

Exactness. DuckDB parses JSON numbers with yyjson: integers stay exact int64, but a real (`5142431484056.641`)
becomes a double and the digits as written are lost. So:

* ts/dur: integers convert exactly. A real d converts to k = the integer ns nearest d * scale (scale 1000 for
  µs, 1 for ns traces), accepted only if |d| < 2**43 and k / scale rounds back to d. Below 2**42 µs that
  makes k exactly what the ijson reader computes from the written decimal, whatever its number of digits
  (the double's spacing is <= 2**-11 µs, so written value and k/scale are < 0.5 ns apart); in [2**42, 2**43)
  (modern Kineto's relative ts, ~5.1e12 µs) it is exact for decimals of at most 3 fractional digits, which is
  what Kineto writes. Any other real ts/dur makes the whole file go to the ijson reader (`GiveUp`).
* arg values become cj.text of the value as ijson gives it. Strings, integers, booleans and lists/objects of
  them are reproduced exactly (DuckDB prints compact JSON as Python's encoder does; escapes are re-encoded in
  Python). A real arg is rendered from its double as str(Decimal(repr(d))): the text ijson gives when the
  writer wrote the shortest round-trip decimal, as Kineto (fmt) and Python's json do. Reals of 1e16 or more
  (where an integer literal beyond 64 bits would also arrive as a double) send the file to ijson.
* Also sent to ijson: a "traceEvents" key not within the first 64 KiB, or more than TAIL bytes of keys
  after the array. Not detected (never written by torch.profiler): duplicate keys inside one args object,
  and non-string name/cat values (read as DuckDB prints them).

A GiveUp can come late in the file, after rows were written: kineto.py therefore stages this reader's output in
a private RankWriter and adopts the files only when the read succeeded.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

from .. import progress
from ..errors import BadTraceError
from . import _chrome_json as cj
from . import kineto as kn

TAIL = 1 << 20  # bytes held back by the feed: the keys after the events array must fit in them
CHUNK = 1 << 20  # read size of the feed
# Bytes per segment file / DuckDB query (see Feed). When segments were FIFOs, DuckDB held what it read of one until
# its query ended, with two queries open (_Segments.AHEAD): at 64 MiB a 0.25 GB trace peaked at 0.66-0.78 GB and a
# 4 GB one at 0.80-0.90 (max/min up to 1.36), at 32 MiB 0.54 and 0.58-0.59 GB, at the same speed (2026-12-04).
SEGMENT = 32 << 20
# events per DuckDB batch: the mapping's cost per batch (~60 Arrow calls) is paid half as often as at 32k, ~5% of a
# 1 GB trace's CPU, for ~25 MB more peak RSS; memory stays flat over the trace's size (benchmarks/README.md)
BATCH_ROWS = 64 * 1024
# batches queued per open segment (two are open, see _Segments): 4 ran at the same speed with 20-75 MB more RSS
PREFETCH = 2
WRITE_ROWS = (
    32 * 1024
)  # rows per write to the store (its row groups); 128k: peak RSS 0.63 / 0.72-0.78 GB at 0.25 / 1 GB, 32k: 0.47 / 0.60-0.61 GB, same speed
MAX_REAL = 2**43  # largest real ts/dur converted from a double (see the module docstring)
PLAIN = (1e-4, 1e16)  # DuckDB prints doubles in this range exactly as Python's repr (tested)

HOST_CANON = ("correlation", "External id", "Sequence number", "Input Dims", "Input type")
KERNEL_CANON = ("stream", "device", "correlation")
MEM_CANON = ("Bytes", "Total Allocated", "Total Reserved")


class GiveUp(Exception):
    """This file cannot be read exactly by the DuckDB reader; str() says why. kineto.py then uses ijson."""


# ---------------------------------------------------------------------------------------------------
# where the events array starts and ends


_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_CUT = re.compile(rb"\}\s*,\s*\{")  # between two events (see Feed)
_WS = re.compile(r"[ \t\r\n]*")
_END = re.compile(r"[ \t\r\n\x00]*\Z")  # only blanks (and NULs) to the end of the text


def array_start(head: bytes) -> int | None:
    """Offset in `head` (decompressed, BOM stripped) of the '[' opening the top-level traceEvents array."""
    for m in _KEY.finditer(head):
        if _depth_at(head, m.start()) == 1:
            return m.end() - 1
    return None


def _depth_at(buf: bytes, end: int) -> int | None:
    """Nesting depth at buf[end]; None inside a string (a "traceEvents" text in some value)."""
    depth, in_str, esc = 0, False, False
    for c in buf[:end]:
        if in_str:
            if esc:
                esc = False
            elif c == 0x5C:
                esc = True
            elif c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c in (0x7B, 0x5B):
            depth += 1
        elif c in (0x7D, 0x5D):
            depth -= 1
    return None if in_str else depth


def array_end(tail: bytes) -> int | None:
    """Offset in `tail` (the stream's last bytes) of the ']' closing traceEvents: the leftmost ']' followed by
    only the rest of the root object (`}` or `, "key": value, ... }`). A ']' inside the events is followed by
    more events and their closing ']', so it never qualifies; one inside a later key's value is to the right."""
    skip = 0
    while skip < min(3, len(tail)) and 0x80 <= tail[skip] < 0xC0:  # start on a UTF-8 character boundary
        skip += 1
    s = tail[skip:].decode("utf-8", "surrogateescape")
    dec = json.JSONDecoder()
    found, p = None, len(s)
    while (p := s.rfind("]", 0, p)) != -1:
        if _closes_root(s, p + 1, dec):
            found = p
    return None if found is None else skip + len(s[:found].encode("utf-8", "surrogateescape"))


def _closes_root(s: str, i: int, dec: json.JSONDecoder) -> bool:
    n = len(s)
    i = _WS.match(s, i).end()  # type: ignore[union-attr]
    while i < n and s[i] == ",":
        i = _WS.match(s, i + 1).end()  # type: ignore[union-attr]
        if i >= n or s[i] != '"':
            return False
        try:
            _, i = dec.raw_decode(s, i)
            i = _WS.match(s, i).end()  # type: ignore[union-attr]
            if i >= n or s[i] != ":":
                return False
            _, i = dec.raw_decode(s, _WS.match(s, i + 1).end())  # type: ignore[union-attr]
        except (ValueError, RecursionError):
            return False
        i = _WS.match(s, i).end()  # type: ignore[union-attr]
    # matched in place: slicing off the rest of the tail for each candidate ']' (one before every `]}` in the
    # events' args) made this quadratic, ~2 s for a 1 MiB tail of a 250 MB trace
    return i < n and s[i] == "}" and _END.match(s, i + 1) is not None


# ---------------------------------------------------------------------------------------------------
# the feed: events array -> segment files


class Feed:
    """Writes the trace's events array as segment files that DuckDB reads, from a background thread.

    The array goes out in SEGMENT-sized pieces, each a JSON array of whole events in a file of its own, written
    completely and then announced in `segments` (None after the last), read by one query each. A piece is cut
    after an event's closing brace followed by `, {`; a cut anywhere else would leave DuckDB a malformed array,
    which makes the file go to the ijson reader (never wrong rows).

    Regular files, not FIFOs: DuckDB keeps everything it reads from a pipe in fresh memory until its query ends,
    and reads a file through its own reused buffers. The same 256 MB of Kineto events in 32 MiB segments through
    this query, one thread: FIFOs 3.1-3.5 s, 3.3-3.6 CPU-s, 220k page faults; files 2.5-2.6 s, 2.6-2.8 CPU-s, 153k
    (measured 2026-12-05).

    Bounded: at most OUTSTANDING segment files exist at a time (written or being read); the consumer calls
    done(path) when its query on that file is closed, which deletes it and lets the feed write the next. Never
    blocks for good: every wait checks for close(). A fault of the file itself (gzip cut off, JSON cut off) or of
    the temp folder (full disk) is kept in `error` for the consumer, and a segment cut short by it is never
    announced.
    """

    # two segments being read (_Segments.AHEAD) and one being written
    OUTSTANDING = 3

    def __init__(self, sn: cj.Sniff, start: int, tmp: str) -> None:
        import queue

        self.sn, self.start, self.tmp = sn, start, tmp
        self.raw_read = 0  # bytes read from the file (compressed for gzip): progress
        self.error: BaseException | None = None
        self.segments: queue.Queue[str | None] = queue.Queue()
        self._written = 0  # segment files made, for their names
        self._live: set[str] = set()  # segment files not yet done
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(self.OUTSTANDING)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, name="traceql-kineto-feed", daemon=True)
        self._t.start()

    def percent(self) -> float:
        return 100.0 * self.raw_read / max(1, self.sn.size)

    def done(self, path: str) -> None:
        """The consumer's query on segment `path` is closed: delete the file and free its slot."""
        with self._lock:
            if path not in self._live:
                return
            self._live.discard(path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self._slots.release()

    def close(self) -> None:
        """Stop (if still running) and wait; then delete every segment file left (announced or not)."""
        self._stop.set()
        self._t.join()
        with self._lock:
            left, self._live = self._live, set()
        for path in left:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def _next(self) -> tuple[str, int] | None:
        """A new segment file (path, fd) once a slot is free; None once close() was called."""
        while not self._slots.acquire(timeout=0.1):
            if self._stop.is_set():
                return None
        if self._stop.is_set():
            self._slots.release()
            return None
        path = os.path.join(self.tmp, f"events-{self._written}.json")
        self._written += 1
        with self._lock:
            self._live.add(path)
        try:
            return path, os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600
            )
        except OSError as e:
            self.done(path)
            raise self._no_room(e) from None
        except BaseException:
            self.done(path)
            raise

    def _write(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
        except OSError as e:
            raise self._no_room(e) from None

    def _no_room(self, e: OSError) -> GiveUp:
        """The temp folder refused a segment (full disk, quota): the ijson reader needs no segments."""
        return GiveUp(f"cannot write its temporary segments in {self.tmp} ({e.strerror or e})")

    def _run(self) -> None:
        seg: tuple[str, int] | None = None
        try:
            seg = self._next()
            size = 0
            for data in self._array():
                if seg is None or self._stop.is_set():
                    return
                while seg is not None:
                    m = _CUT.search(data, max(0, SEGMENT - size)) if size + len(data) >= SEGMENT else None
                    if m is None:
                        size += len(data)
                        self._write(seg[1], data)
                        break
                    self._write(seg[1], data[: m.start() + 1] + b"]")
                    self._announce(seg)
                    seg = self._next()
                    data, size = b"[" + data[m.end() - 1 :], 0
            if seg is not None:
                self._announce(seg)
                seg = None
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            self.error = e
        finally:
            if seg is not None:  # cut short: never read
                os.close(seg[1])
                self.done(seg[0])
            self.segments.put(None)

    def _announce(self, seg: tuple[str, int]) -> None:
        os.close(seg[1])
        self.segments.put(seg[0])

    def _chunks(self) -> Any:
        """Decompressed bytes of the file, BOM stripped."""
        import gzip
        import zlib

        fh = cj.open_stream(self.sn)  # the size/ratio/string limits apply here too
        raw = fh.fileobj
        pos = 0
        try:
            first = True
            while True:
                try:
                    data = fh.read(CHUNK)
                except (EOFError, OSError, zlib.error, gzip.BadGzipFile) as e:
                    raise cj.gzip_error(self.sn.path, e, pos) from None
                if not data:
                    return
                if first and data.startswith(cj.UTF8_BOM):
                    data = data[len(cj.UTF8_BOM) :]
                first = False
                pos += len(data)
                self.raw_read = raw.tell()
                yield data
        finally:
            fh.close()

    def _array(self) -> Any:
        """The events array: from the '[' at `start` to the ']' closing it, found at the end in the last TAIL
        bytes (held back until the stream ends)."""
        from collections import deque

        # the chunks read are passed on as they are, held back until TAIL bytes follow them: joining each one
        # onto a held-back buffer and slicing it again copied every byte ~5 times (and page-faulted a fresh
        # 2-3 MB buffer a chunk), 0.66 CPU-s per 250 MB on the feed thread, which holds the GIL meanwhile
        pending: deque[bytes] = deque()
        pending_len = 0
        skip = self.start
        total = 0
        for data in self._chunks():
            total += len(data)
            if skip:
                cut = min(skip, len(data))
                data, skip = data[cut:], skip - cut
            if not data:
                continue
            pending.append(data)
            pending_len += len(data)
            while pending_len - len(pending[0]) >= TAIL:
                first = pending.popleft()
                pending_len -= len(first)
                yield first
        held = b"".join(pending)
        end = array_end(held)
        if end is None:
            if not held.rstrip(b" \t\r\n\x00").endswith(b"}"):
                unit = "decompressed byte" if self.sn.gzip else "byte"
                raise BadTraceError(self.sn.path, f"truncated JSON: input ends at {unit} {total} before the "
                                       "top-level object closes (profiler killed mid-write?)")  # fmt: skip
            raise GiveUp(f"the end of the traceEvents array is not within the last {TAIL >> 20} MiB")
        yield held[: end + 1]


# ---------------------------------------------------------------------------------------------------
# JSON text (as DuckDB prints it) -> what the ijson reader has


_INT = r"^-?[0-9]+$"
_REAL = r"^-?[0-9]+[.eE]"
# an escape, a real number inside a list/object, or NaN/Infinity (DuckDB accepts them, ijson refuses the file)
_ODD = r"\\|^[\[{].*[\[,:]-?[0-9]+[.eE]|^-?(NaN|Infinity)|[\[,:]-?(NaN|Infinity)"


def _real(s: str) -> Decimal:
    d = float(s)
    if not abs(d) < PLAIN[1]:
        raise GiveUp(f"a real number of 1e16 or more ({s}): its digits as written are not known")
    return Decimal(repr(d))


def _constant(s: str) -> Any:
    raise GiveUp(f"{s} in the events: not JSON (the ijson reader reports where)")


def py(t: str | None) -> Any:
    """The value ijson gives for JSON text `t` (int, Decimal, str, bool, None, list, dict).

    `t` is DuckDB's JSON text of one arg value, so valid JSON: an integer is its digits (int() of them is what
    json.loads gives), a real goes to _real as json.loads would pass it, and a string without a backslash holds
    no escape (its characters between the quotes). Only the rest goes through json.loads, whose decoder set-up
    per call would cost more than the value (a CUPTI range event carries dozens of numeric counters)."""
    if t is None:
        return None
    c = t[:1]
    if c == '"' and "\\" not in t:
        return t[1:-1]
    if c and c in "-0123456789":
        if "." in t or "e" in t or "E" in t:
            return _real(t)
        try:
            return int(t)
        except ValueError:  # -Infinity: json.loads reports it
            pass
    return json.loads(t, parse_float=_real, parse_constant=_constant)


@functools.lru_cache(maxsize=256, typed=True)  # typed: 0 == 0.0 == False
def lit(v: Any) -> Any:
    """A typed Arrow scalar: pyarrow infers the type of a bare Python value by trying to import dateutil,
    which costs a failed import per call where it is not installed (0.3 s per 250 MB here)."""
    import pyarrow as pa

    types = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
    return pa.scalar(v, types[type(v)])


def _mask(a: Any) -> Any:
    import pyarrow.compute as pc

    return pc.fill_null(a, lit(False))


def _patch(out: Any, mask: Any, j: Any, fn: Any, type_: Any) -> Any:
    """out with the values at `mask` replaced by fn(JSON text) computed in Python."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pc.any(mask).as_py():
        return out
    vals = [fn(t) for t in j.filter(mask).to_pylist()]
    return pc.replace_with_mask(out, mask, pa.array(vals, type_))


def _match_where(j: Any, where: Any, pattern: str) -> Any:
    """match_substring_regex(j, pattern) where `where` (a mask without nulls), False elsewhere: a regex costs
    ~60 ns a value whatever the pattern, so it runs only on the values a cheaper kernel left undecided."""
    import pyarrow.compute as pc

    if not pc.any(where).as_py():
        return where
    return pc.replace_with_mask(where, where, pc.match_substring_regex(j.filter(where), pattern))


def _candidates(j: Any) -> tuple[Any, Any]:
    """(is_str, cand): values written as a string, and those that are neither a string nor a JSON null nor a
    run of ASCII digits (a non-negative integer as written: nothing in _ODD or _REAL matches one)."""
    import pyarrow.compute as pc

    is_str = _mask(pc.starts_with(j, '"'))
    digits = _mask(pc.ascii_is_decimal(j))
    other = _mask(pc.not_equal(j, lit("null")))
    return is_str, pc.and_(pc.and_(pc.invert(is_str), pc.invert(digits)), other)


def _inexact(v: Any) -> Any:
    """Per value of `v` (JSON texts, no nulls): True where cj.text must come from Python, because the text holds
    an escape, a real inside a list/object or NaN/Infinity (_ODD), or is a real DuckDB may print otherwise than
    Python's repr. Computed once per distinct text: the regexes cost ~60 ns a value whatever the pattern, and
    these values (shapes, grids, flags) repeat: per 250 MB of Kineto ~1.1M values, ~15k distinct."""
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = v.dictionary_encode()
    d = enc.dictionary
    slow = pc.match_substring_regex(d, _ODD)
    real = pc.match_substring_regex(d, _REAL)
    if pc.any(real).as_py():
        f = pc.abs(pc.cast(pc.if_else(real, d, lit("0")), pa.float64()))
        plain = pc.or_(
            pc.and_(pc.greater_equal(f, lit(PLAIN[0])), pc.less(f, lit(PLAIN[1]))), pc.equal(f, lit(0.0))
        )
        slow = pc.or_(slow, pc.and_(real, pc.invert(plain)))
    return slow.take(enc.indices)


def texts(j: Any) -> Any:
    """cj.text of each value, from DuckDB's JSON text of it (null: absent or JSON null).

    Computed once per distinct text where texts repeat (a host op's shapes, dtypes, flags: 250 MB of Kineto
    ~1.1M values, ~15k distinct; HTA's real traces 20-45% distinct): one hash pass instead of the ~8 passes
    over every value below."""
    import pyarrow as pa

    if len(j) == 0 or j.null_count == len(j):
        return j
    if isinstance(j, pa.ChunkedArray):
        j = j.combine_chunks()
    enc = j.dictionary_encode()  # a null value has a null index, and take gives it back as null
    if 2 * len(enc.dictionary) <= len(j):
        return _texts(enc.dictionary).take(enc.indices)
    return _texts(j)


def _texts(j: Any) -> Any:
    """texts() of an Array, value by value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    is_str, cand = _candidates(j)
    out = pc.if_else(is_str, pc.utf8_slice_codeunits(j, 1, -1), j)
    out = pc.if_else(_mask(pc.equal(j, lit("null"))), pa.scalar(None, pa.string()), out)
    # a string is exact as sliced unless it holds an escape; a digits-only integer always is; the rest is tested
    slow = cand
    if pc.any(cand).as_py():
        slow = pc.replace_with_mask(cand, cand, _inexact(j.filter(cand)))
    if pc.any(is_str).as_py():
        slow = pc.or_(slow, pc.and_(is_str, _mask(pc.match_substring(j, "\\"))))
    return _patch(out, slow, j, lambda t: cj.text(py(t)), pa.string())


def ints(j: Any) -> Any:
    """cj.to_int of each value (int64, null when not an integer)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return pc.cast(j, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    simple = _mask(pc.match_substring_regex(j, _INT))
    try:
        out = pc.cast(pc.if_else(simple, j, pa.scalar(None, pa.string())), pa.int64())
    except pa.ArrowInvalid:  # one beyond int64: every value per value (it alone becomes NULL, not the batch)
        out, simple = pa.nulls(len(j), pa.int64()), pa.array([False] * len(j))
    other = pc.and_(pc.invert(simple), _mask(pc.not_equal(j, lit("null"))))
    return _patch(out, other, j, lambda t: cj.to_int(py(t)), pa.int64())


def _decimal_ns(j: Any, scale: int) -> Any:
    """ns() of a column whose every value is a plain JSON number below MAX_REAL with at most 3 decimals (what
    Kineto writes: '5142431484056.641'), in one decimal cast (cj.decimal_times); None for any other column, which
    ns() then converts as before. The same values: below MAX_REAL a double has one shortest decimal of at most 3
    fractional digits (its spacing is under 0.001), so the text DuckDB prints for it is the written decimal, and
    its ns is that decimal times the scale, which is what ns() computes from the double (k / scale rounds back
    to it). The regexes, floor and round it replaces were ~18% of the mapping."""
    return cj.decimal_times(j, scale, bound=MAX_REAL)


def ns(j: Any, scale: int, offset: int = 0) -> Any:
    """cj.us_to_ns(value, scale) (+ offset where not null) of each value, exact (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(j) == 0 or j.null_count == len(j):
        return pa.nulls(len(j), pa.int64())
    if isinstance(j, pa.ChunkedArray):
        j = j.combine_chunks()
    fast = _decimal_ns(j, scale)
    if fast is not None:
        return pc.add_checked(fast, lit(offset)) if offset else fast
    # a run of digits is an integer as written (most durations); only the rest needs the regexes
    simple = _mask(pc.ascii_is_decimal(j))
    rest = pc.and_(pc.invert(simple), _mask(pc.not_equal(j, lit("null"))))
    simple = pc.or_(simple, _match_where(j, pc.and_(rest, _mask(pc.starts_with(j, "-"))), _INT))
    real = _match_where(j, rest, _REAL)
    null = pa.scalar(None, pa.string())
    try:
        out = pc.multiply_checked(pc.cast(pc.if_else(simple, j, null), pa.int64()), lit(scale))
    except pa.ArrowInvalid:  # beyond int64: us_to_ns gives None there, Python ints tell
        out, simple = pa.nulls(len(j), pa.int64()), pa.array([False] * len(j))
    if pc.any(real).as_py():
        d = pc.cast(pc.if_else(real, j, null), pa.float64())
        if not pc.all(pc.less(pc.abs(d), lit(float(MAX_REAL)))).as_py():
            raise GiveUp(
                f"a real ts/dur of 2**43 or more ({pc.max(pc.abs(d)).as_py()!r}): not exact as a double"
            )
        f = pc.floor(d)
        k = pc.add(
            pc.multiply(f, lit(float(scale))),
            pc.round(pc.multiply(pc.subtract(d, f), lit(float(scale))), 0, round_mode="half_up"),
        )
        back = pc.divide(k, lit(float(scale))) if scale != 1 else k
        if not pc.all(pc.equal(back, d)).as_py():
            bad = d.filter(_mask(pc.not_equal(back, d)))[0].as_py()
            raise GiveUp(f"a real ts/dur ({bad!r}) with more than {3 if scale == 1000 else 0} decimals")
        out = pc.coalesce(out, pc.cast(k, pa.int64()))
    other = pc.and_(pc.and_(pc.invert(simple), pc.invert(real)), _mask(pc.not_equal(j, lit("null"))))
    out = _patch(out, other, j, lambda t: cj.us_to_ns(py(t), scale), pa.int64())
    return pc.add_checked(out, lit(offset)) if offset else out


# ---------------------------------------------------------------------------------------------------
# DuckDB batches -> canonical tables


def _sql(segment: str) -> str:
    columns = {
        "ph": "VARCHAR", "name": "VARCHAR", "cat": "VARCHAR", "pid": "JSON", "tid": "JSON", "ts": "JSON",
        "dur": "JSON", "id": "JSON", "args": "JSON",
    }  # fmt: skip
    obj = "json_type(args) = 'OBJECT'"
    return f"""
    SELECT ph, name, cat, pid, tid, ts, dur, id, CASE WHEN {obj} THEN json_keys(args) END AS k,
           CASE WHEN {obj} THEN json_extract(args, '$.*')::VARCHAR[] END AS v
    FROM {cj.duck_source(Path(segment), columns)}"""


def _extra(kv: cj.ArgsKV, canonical: tuple[str, ...]) -> Any:
    """MAP(key -> cj.text(value)) of every arg not in `canonical`, in the order written."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keep = pc.invert(pc.is_in(kv.keys, value_set=pa.array(canonical, pa.string())))
    return kv.map_of(keep, texts(kv.vals.filter(keep)))


def _numbers(j: Any) -> tuple[Any, Any]:
    """(which JSON value texts are numbers, their values as doubles, null elsewhere): float(py(t)), as
    kn.device_row reads a metric (both round a long integer to the nearest double; int() reads -0 as 0). A real
    of 1e16 or more, or a value past the doubles, is refused as py() and cj.num refuse it (the exact reader
    takes the file)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    num = _mask(pc.match_substring_regex(j, r"^-?[0-9]"))
    real = _mask(pc.match_substring_regex(j, _REAL))
    try:
        x = pc.cast(pc.if_else(num, j, pa.scalar(None, pa.string())), pa.float64())
    except pa.ArrowInvalid as e:
        raise GiveUp(f"a numeric arg past the doubles: {e}") from None
    if (
        not pc.all(pc.fill_null(pc.is_finite(x), True)).as_py()
        or pc.any(_mask(pc.and_(real, pc.greater_equal(pc.abs(x), PLAIN[1])))).as_py()
    ):
        raise GiveUp("a real number of 1e16 or more in the args: its digits as written are not known")
    return num, pc.if_else(pc.and_(pc.invert(real), _mask(pc.equal(x, 0.0))), 0.0, x)


def _range_kernels(t: Any) -> dict[str, Any]:
    """kernels columns of cuda_profiler_range events as kn.device_row makes them, column-wise (a CUPTI
    range-profiler trace has one such event per kernel, its counters as dozens of numeric args): metrics = every
    arg whose value is a number, as a double; extra = the rest but stream, device and correlation, as text; HBM
    bytes and FLOPs from the counters device_row reads; no stream; the device from args only, never the pid."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kv = cj.ArgsKV(t.column("k"), t.column("v"))
    num, val = _numbers(kv.vals)
    other = pc.and_(
        pc.invert(num), pc.invert(pc.is_in(kv.keys, value_set=pa.array(KERNEL_CANON, pa.string())))
    )
    name = t.column("name")
    op_type = _per_unique(name, kn.kernel_class, pa.string())
    return {
        "device_id": ints(kv.get(lit("device"))), "name": name, "op_type": op_type, "task_type": t.column("cat"),
        "is_comm": pc.equal(op_type, lit("nccl")), "stream_id": pa.nulls(len(t), pa.int64()),
        "connection_id": ints(kv.get(lit("correlation"))), "ts_ns": t.column("ts_ns"),
        "dur_ns": t.column("dur_ns"), "block_dim": _per_unique(kv.get(lit("grid")), _block_dim, pa.int64()),
        "hbm_read_bytes": ints(kv.get(lit("dram__bytes_read.sum"))),
        "hbm_write_bytes": ints(kv.get(lit("dram__bytes_write.sum"))),
        "flops": _flops(kv, val), "metrics": kv.map_of(num, val.filter(num)),
        "extra": kv.map_of(other, texts(kv.vals.filter(other))),
    }  # fmt: skip


def _flops(kv: cj.ArgsKV, val: Any) -> Any:
    """kn._flops per row: add + mul + 2 x fma over the fp64/fp32/fp16 SASS counters present, summed in its
    order (the same doubles), null when none is. val: _numbers' doubles of kv's entries."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = pa.repeat(pa.scalar(0.0), kv.n)
    seen = pa.repeat(pa.scalar(False), kv.n)
    for prec in ("d", "f", "h"):
        for op, w in kn.FLOP_OPS.items():
            v = kv.get(lit(f"smsp__sass_thread_inst_executed_op_{prec}{op}_pred_on.sum"), values=val)
            present = pc.is_valid(v)
            total = pc.if_else(present, pc.add(total, pc.multiply(v, float(w))), total)
            seen = pc.or_(seen, present)
    return pc.if_else(seen, total, pa.scalar(None, pa.float64()))


def _per_unique(arr: Any, fn: Any, type_: Any) -> Any:
    """fn over the distinct values of `arr` (in Python), spread back: for columns with few distinct values."""
    import pyarrow as pa

    enc = arr.dictionary_encode()
    return pa.array([fn(v) for v in enc.dictionary.to_pylist()], type_).take(enc.indices)


def _block_dim(t: str | None) -> int | None:
    grid = py(t)
    if type(grid) is not list or not grid or not all(type(g) is int for g in grid):
        return None
    out = 1
    for g in grid:
        out *= g
    if not -(2**63) <= out < 2**63:
        raise GiveUp(f"grid {t} has a product beyond int64")
    return out


def _args(k: list[str] | None, v: list[str] | None) -> dict[str, Any]:
    return {} if k is None else dict(zip(k, map(py, v or []), strict=True))


# the columns of _Mapper.batch's table each handler reads
_READS = {
    "_host": ["name", "cat", "pid_i", "tid", "ts_ns", "dur_ns", "k", "v"],
    "_kernels": ["name", "cat", "lcat", "pid_i", "ts_ns", "dur_ns", "k", "v"],
    "_ranges": ["name", "cat", "lcat", "pid_i", "ts_ns", "dur_ns", "k", "v"],
    "_flows": ["cat", "name", "id", "ph", "pid_i", "tid", "ts_ns"],
    "_meta_counters": ["ph", "name", "pid", "ts_ns", "k", "v"],
    "_memory": ["ts_ns", "k", "v"],
}


class _Mapper:
    """Maps DuckDB batches (file order) to canonical rows; keeps what kineto._finish needs in a kn.Tally."""

    def __init__(self, out: Any, header: dict[str, Any], tmp: str, path: Path) -> None:
        self.out = out
        self.path = path
        self.tally = kn.Tally(base=cj.to_int(header.get("baseTimeNanoseconds")))
        self.flows = kn.FlowEnds(tmp)
        self.procs: dict[Any, str] = {}
        self._rows = cj.RowGroups(out, WRITE_ROWS, self.tally.rows)

    def _write(self, table: str, cols: dict[str, Any], reorder: bool = False) -> None:
        self._rows.add(table, cols, reorder=reorder)

    def flush(self) -> None:
        self._rows.flush()

    def _times(self, b: Any) -> tuple[Any, Any]:
        """ts_ns and dur_ns; the time unit is decided on the first non-M event with a ts (kineto's rule)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        ts, dur, unit = b.column("ts"), b.column("dur"), self.tally.unit
        split = 0
        if unit["scale"] is None:
            has = pc.and_(
                pc.fill_null(pc.not_equal(b.column("ph"), lit("M")), lit(True)),
                _mask(pc.not_equal(ts, lit("null"))),
            )
            first = pc.indices_nonzero(has)
            if len(first) == 0:
                return ns(ts, 1000), ns(dur, 1000)
            split = first[0].as_py()
            value = cj.num(json.loads(ts[split].as_py())) or 0.0
            self.tally.decide(value)
        scale, offset = unit["scale"], unit["base"]
        if split == 0:
            return ns(ts, scale, offset), ns(dur, scale)
        return (pa.concat_arrays([ns(ts.slice(0, split), 1000), ns(ts.slice(split), scale, offset)]),
                pa.concat_arrays([ns(dur.slice(0, split), 1000), ns(dur.slice(split), scale)]))  # fmt: skip

    def batch(self, b: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        ts_ns, dur_ns = self._times(b)
        ph, cat = b.column("ph"), b.column("cat")
        lcat = pc.utf8_lower(pc.fill_null(cat, lit("")))
        is_x = _mask(pc.equal(ph, lit("X")))
        pid = ints(b.column("pid"))
        cj.check_int_column(b.column("pid"), pid, self.path, "pid")  # past int64: refused, not dropped
        skip = pc.and_(
            is_x, pc.or_(pc.is_in(lcat, value_set=pa.array(sorted(kn.SKIP_CATS))), pc.is_null(pid))
        )
        keep_x = pc.and_(is_x, pc.invert(skip))
        dev = pc.and_(keep_x, pc.is_in(lcat, value_set=pa.array(sorted(kn.KERNEL_CATS))))
        rng = pc.and_(keep_x, pc.equal(lcat, lit(kn.RANGE_CAT)))
        host = pc.and_(keep_x, pc.invert(pc.or_(dev, rng)))
        flow = _mask(pc.is_in(ph, value_set=pa.array(["s", "f", "t"])))
        mc = _mask(pc.is_in(ph, value_set=pa.array(["M", "C"])))
        mem = pc.and_(pc.and_(_mask(pc.equal(ph, lit("i"))), _mask(pc.equal(b.column("name"), lit("[memory]")))),
                      _mask(pc.greater(pc.list_value_length(b.column("k")), lit(0))))  # fmt: skip
        other = pc.invert(pc.or_(pc.or_(is_x, flow), pc.or_(mc, mem)))
        # the few skipped events' labels, made for those rows only (not for every row, then filtered)
        if pc.any(skip).as_py():
            sc = cat.filter(skip)
            self._count_skipped(
                pc.if_else(_mask(pc.equal(sc, lit(""))), lit("?"), pc.fill_null(sc, lit("?")))
            )
        if pc.any(other).as_py():
            self._count_skipped(
                pc.binary_join_element_wise(lit("ph="), pc.fill_null(ph.filter(other), lit("None")), lit(""))
            )
        t = b.append_column("pid_i", pid).append_column("ts_ns", ts_ns).append_column("dur_ns", dur_ns)
        t = t.append_column("lcat", lcat)
        for mask, fn in ((host, self._host), (dev, self._kernels), (rng, self._ranges), (flow, self._flows),
                         (mc, self._meta_counters), (mem, self._memory)):  # fmt: skip
            if pc.any(mask).as_py():
                # only the columns the handler reads are filtered (copied): the text ts/dur/pid/ph the typed
                # columns replace were a third of the filters' bytes
                fn(t.select(_READS[fn.__name__]).filter(mask))

    def _count_skipped(self, keys: Any) -> None:
        for item in keys.value_counts().to_pylist():
            self.tally.skipped[item["values"]] = self.tally.skipped.get(item["values"], 0) + item["counts"]

    def _host(self, t: Any) -> None:
        import pyarrow.compute as pc

        kv = cj.ArgsKV(t.column("k"), t.column("v"))
        name = t.column("name")
        tid = ints(t.column("tid"))
        cj.check_int_column(t.column("tid"), tid, self.path, "tid")
        self._write("host_ops", {
            "name": name, "cat": t.column("cat"), "pid": t.column("pid_i"), "tid": tid,
            "ts_ns": t.column("ts_ns"), "dur_ns": t.column("dur_ns"),
            "correlation_id": ints(kv.get(lit("correlation"), lit("External id"))),  # JSON null is text 'null': presence wins
            "seq_num": ints(kv.get(lit("Sequence number"))), "input_shapes": texts(kv.get(lit("Input Dims"))),
            "input_dtypes": texts(kv.get(lit("Input type"))), "extra": _extra(kv, HOST_CANON),
        }, reorder=True)  # fmt: skip
        step = pc.and_(_mask(pc.starts_with(name, "ProfilerStep#")), pc.is_valid(t.column("ts_ns")))
        if pc.any(step).as_py():
            for r in t.filter(step).select(["name", "ts_ns", "dur_ns"]).to_pylist():
                self.tally.add_step(r["name"], r["ts_ns"], r["dur_ns"])

    def _kernels(self, t: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        kv = cj.ArgsKV(t.column("k"), t.column("v"))
        dev = pc.coalesce(ints(kv.get(lit("device"))), t.column("pid_i"))
        self._count_devices(dev)
        name, lcat = t.column("name"), t.column("lcat")
        op_type = _per_unique(name, kn.kernel_class, pa.string())
        for word in ("memcpy", "memset"):  # kernel_class(name, cat): the category decides these
            op_type = pc.if_else(pc.match_substring(lcat, word), lit(word), op_type)
        self._write("kernels", {
            "device_id": dev, "name": name, "op_type": op_type, "task_type": t.column("cat"),
            "is_comm": pc.equal(op_type, lit("nccl")), "stream_id": ints(kv.get(lit("stream"))),
            "connection_id": ints(kv.get(lit("correlation"))), "ts_ns": t.column("ts_ns"), "dur_ns": t.column("dur_ns"),
            "block_dim": _per_unique(kv.get(lit("grid")), _block_dim, pa.int64()), "extra": _extra(kv, KERNEL_CANON),
        })  # fmt: skip

    def _count_devices(self, dev: Any) -> None:
        """Add each device id's rows (an int column) to the tally."""
        for item in dev.value_counts().to_pylist():
            if item["values"] is not None:
                self.tally.devices[item["values"]] = (
                    self.tally.devices.get(item["values"], 0) + item["counts"]
                )

    def _ranges(self, t: Any) -> None:
        """cuda_profiler_range events (_range_kernels)."""
        cols = _range_kernels(t)
        self._count_devices(cols["device_id"])
        self.tally.n_ranges += len(t)
        self._write("kernels", cols)

    def _flows(self, t: Any) -> None:
        import pyarrow as pa

        self.flows.spill.add(pa.table({
            "cat": t.column("cat"), "name": t.column("name"), "fid": texts(t.column("id")), "ph": t.column("ph"),
            "pid": t.column("pid_i"), "tid": ints(t.column("tid")), "ts_ns": t.column("ts_ns"),
        }))  # fmt: skip

    def _meta_counters(self, t: Any) -> None:
        """M and C events in file order: a counter's track is the process name known when it comes."""
        rows = []
        for r in t.select(["ph", "name", "pid", "ts_ns", "k", "v"]).to_pylist():
            args, pid = _args(r["k"], r["v"]), py(r["pid"])
            if r["ph"] == "M":
                if r["name"] == "process_name" and isinstance(args.get("name"), str):
                    self.procs[pid] = args["name"]
                continue
            rows.extend(
                kn.counter_rows(self.procs.get(pid, cj.text(pid) or ""), r["name"] or "", r["ts_ns"], args)
            )
        if rows:
            self._write(
                "counters",
                dict(zip(kn.COUNTER_COLS, kn.columns("counters", kn.COUNTER_COLS, rows), strict=True)),
            )

    def _memory(self, t: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        kv = cj.ArgsKV(t.column("k"), t.column("v"))
        dtype, did = ints(kv.get(lit("Device Type"))), ints(kv.get(lit("Device Id")))
        codes = pa.array(list(kn.DEVICE_TYPES), pa.int64())
        tname = pc.coalesce(pa.array(list(kn.DEVICE_TYPES.values())).take(pc.index_in(dtype, value_set=codes)),
                            pc.binary_join_element_wise(lit("type"), pc.cast(dtype, pa.string()), lit("")))  # fmt: skip
        with_id = pc.binary_join_element_wise(tname, pc.cast(did, pa.string()), lit(":"))
        device = pc.if_else(_mask(pc.greater_equal(did, lit(0))), with_id, tname)
        n = t.num_rows
        self._write("memory", {
            "kind": cj.const("record", n), "component": cj.const("PyTorch", n), "device": device,
            "ts_ns": t.column("ts_ns"), "size_bytes": ints(kv.get(lit("Bytes"))),
            "allocated_bytes": ints(kv.get(lit("Total Allocated"))), "reserved_bytes": ints(kv.get(lit("Total Reserved"))),
            "extra": _extra(kv, MEM_CANON),
        })  # fmt: skip


class _Segments:
    """The DuckDB streams of the feed's segments, in order, each opened as soon as the feed announces it.

    Segment i+1's query starts while segment i's batches are still being mapped: DuckDB's JSON read of a
    segment runs on one thread and the mapping on this one, so opening the next query only after the last batch
    of the previous one was mapped left one core idle at every segment boundary. At most AHEAD streams are open
    at a time (memory: AHEAD x prefetch batches); each segment's file is handed back to the feed (done) when
    its stream is closed.
    """

    AHEAD = 2

    def __init__(self, feed: Feed, con: Any, path: Path) -> None:
        import queue

        self.feed, self.con, self.path = feed, con, path
        self._q: queue.Queue[Any] = queue.Queue()
        self._slots = threading.Semaphore(self.AHEAD)
        self._stop = threading.Event()
        self._current: cj.DuckStream | None = None
        self._t = threading.Thread(target=self._open_all, name="traceql-kineto-segments", daemon=True)
        self._t.start()

    def _open_all(self) -> None:
        try:
            for segment in iter(self.feed.segments.get, None):
                while not self._slots.acquire(timeout=0.1):
                    if self._stop.is_set():
                        return
                if self._stop.is_set():
                    return
                stream = cj.DuckStream(
                    self.con.cursor(), self.path, _sql(segment), BATCH_ROWS, prefetch=PREFETCH
                )
                self._q.put((segment, stream))
        except BaseException as e:  # noqa: BLE001 - raised where the streams are consumed
            self._q.put(e)
        finally:
            self._q.put(None)

    def __iter__(self) -> Any:
        while (item := self._q.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            segment, stream = item
            self._current = stream
            try:
                yield stream
            finally:
                stream.close()
                self.feed.done(segment)
                self._current = None
                self._slots.release()

    def close(self) -> None:
        """Stop opening streams, end the feed, close the stream being read and those opened ahead."""
        import queue

        self._stop.set()
        if self._current is not None:
            self._current.close()
        self.feed.close()  # its last announcement (None) ends _open_all's loop
        self._t.join()
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, tuple):
                item[1].close()  # its file: removed by feed.close() above


def read(sn: cj.Sniff, header: dict[str, Any], out: Any, tmp: str) -> kn.Tally:
    """Read the events of `sn` into `out` (a writer); raise GiveUp when the ijson reader must do it instead."""
    start = array_start(sn.head)
    if start is None:
        raise GiveUp(f'no top-level "traceEvents" array within the first {len(sn.head) >> 10} KiB')
    # cleanup in reverse order of setup, whatever fails (setup included): the progress line, the streams, the
    # connection (no query may still run on it), the feed
    with contextlib.ExitStack() as cleanup:
        feed = Feed(sn, start, tmp)
        cleanup.callback(feed.close)
        con = cj.duck_connection()
        cleanup.callback(con.close)
        # file order: the time unit and counter tracks need it
        con.execute("SET preserve_insertion_order=true")
        segments = _Segments(feed, con, sn.path)
        cleanup.callback(segments.close)
        shown = progress.Stream(sn.path, feed.percent)
        done = [False]
        cleanup.callback(lambda: shown.close(done=done[0]))
        mapper = _Mapper(out, header, tmp, sn.path)
        for stream in segments:
            try:
                for b in stream:
                    mapper.batch(b)
            except cj.DuckReadError as e:
                segments.close()  # the feed's own error (gzip cut off...) is the cause of DuckDB's
                if feed.error is not None:
                    raise feed.error from None
                # malformed JSON (ijson reports it with its byte offset), or an event too large for DuckDB
                raise GiveUp(f"DuckDB could not read the events: {e.detail}") from None
        segments.close()
        if feed.error is not None:
            raise feed.error
        mapper.flush()
        mapper.tally.n_flows = mapper.flows.finish(out, mapper.tally.warnings)
        done[0] = True
    return mapper.tally
