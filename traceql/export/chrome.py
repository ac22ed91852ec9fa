"""Chrome trace JSON writer (loads in Perfetto UI, chrome://tracing / about:tracing, MindStudio Insight), and
reads back through traceql's own Kineto reader (object form with `traceEvents`).

Only the phases every viewer accepts: X (complete slices), C (counters), M (process/thread names and sort
order), s/f (flow arrows). One process per rank (pid = rank), one thread per track (tids numbered in order
of appearance, named by `thread_name`).

Time: `ts`/`dur` are microseconds written as decimal text with exactly three decimals from integer ns (never
through a double: 1.7e15 us with ns digits does not fit one), relative to `baseTimeNanoseconds` (a top-level
key; Kineto's convention, which traceql's reader applies), so a viewer's doubles hold them exactly too. Every
slice keeps the store's exact start as the string arg `ts_ns` (JS numbers cannot hold an epoch ns).

Strings (names, args) go through json.dumps with ensure_ascii, and `<`, `>`, `&` are then written as \\u escapes
(legal only inside JSON strings, where they mean the same character): a dump's names cannot end a string, add
an event, or close a <script> element of a viewer that embeds the file.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import IO, Any

from ..jsonsafe import json_safe

_HTML = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})
FLUSH_EVENTS = 4096
PHASES = ("X", "C", "M", "s", "f")


@lru_cache(maxsize=1 << 16)
def js(s: str) -> str:
    """A JSON string literal, inert in any viewer."""
    return json.dumps(s, ensure_ascii=True).translate(_HTML)


def js_obj(d: dict[str, Any]) -> str:
    return json.dumps(
        {k: json_safe(v) for k, v in d.items()},
        ensure_ascii=True,
        allow_nan=False,
        separators=(",", ":"),
        default=str,
    ).translate(_HTML)


def us(ns: int) -> str:
    """Integer ns -> microseconds as exact decimal text ('-1.234', '12.000')."""
    if ns < 0:
        return "-" + us(-ns)
    return f"{ns // 1000}.{ns % 1000:03d}"


def num(v: float) -> str:
    """A counter value as JSON number text (ints stay ints; non-finite values are dropped by the caller)."""
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


class ChromeWriter:
    def __init__(self, fh: IO[str], origin_ns: int, header: dict[str, Any]) -> None:
        self.fh = fh
        self.origin = origin_ns
        self.buf: list[str] = []
        self.first = True
        self.tids: dict[tuple[int, str], int] = {}
        self.next_tid: dict[int, int] = {}
        self.counts: dict[str, int] = dict.fromkeys(PHASES, 0)
        # no displayTimeUnit: some Perfetto versions read it as the unit of ts, not of the display
        head = {"baseTimeNanoseconds": origin_ns, **header}
        fh.write(
            "{"
            + ", ".join(
                f"{js(k)}: {js_obj(v) if isinstance(v, dict) else json.dumps(v)}" for k, v in head.items()
            )
            + ',\n"traceEvents": [\n'
        )

    def _emit(self, line: str, ph: str) -> None:
        self.counts[ph] += 1
        self.buf.append(line)
        if len(self.buf) >= FLUSH_EVENTS:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.fh.write(("" if self.first else ",\n") + ",\n".join(self.buf))
            self.first = False
            self.buf = []

    def process(self, rank: int, name: str, sort_index: int) -> None:
        self._emit(
            f'{{"ph":"M","pid":{rank},"tid":0,"name":"process_name","args":{{"name":{js(name)}}}}}', "M"
        )
        self._emit(
            f'{{"ph":"M","pid":{rank},"tid":0,"name":"process_sort_index","args":{{"sort_index":{sort_index}}}}}',
            "M",
        )

    def tid(self, rank: int, track: str, sort_index: int) -> int:
        key = (rank, track)
        t = self.tids.get(key)
        if t is None:
            t = self.next_tid.get(rank, 1)
            self.next_tid[rank] = t + 1
            self.tids[key] = t
            self._emit(
                f'{{"ph":"M","pid":{rank},"tid":{t},"name":"thread_name","args":{{"name":{js(track)}}}}}', "M"
            )
            self._emit(
                f'{{"ph":"M","pid":{rank},"tid":{t},"name":"thread_sort_index","args":{{"sort_index":{sort_index}}}}}',
                "M",
            )
        return t

    def slice(
        self,
        rank: int,
        track: str,
        sort_index: int,
        ts: int,
        dur: int,
        name: str,
        cat: str,
        args: dict[str, Any],
        flow_in: list[str] | None,
        flow_out: list[str] | None,
    ) -> None:
        t = self.tid(rank, track, sort_index)
        self._emit(
            f'{{"ph":"X","pid":{rank},"tid":{t},"ts":{us(ts - self.origin)},"dur":{us(dur)},'
            f'"name":{js(name)},"cat":{js(cat)},"args":{js_obj(args)}}}',
            "X",
        )

    def end(self, rank: int, track: str, end_ns: int) -> None:
        """Complete events carry their duration: nothing to close."""

    def counter(self, rank: int, track: str, unit: str, ts: int, value: float) -> None:
        self._emit(
            f'{{"ph":"C","pid":{rank},"tid":0,"ts":{us(ts - self.origin)},"name":{js(track)},'
            f'"args":{{"value":{num(value)}}}}}',
            "C",
        )

    def flow(
        self,
        rank: int,
        fid: str,
        cat: str,
        name: str,
        src_track: str,
        src_ts: int,
        dst_track: str,
        dst_ts: int,
        sort_index: int,
    ) -> None:
        s, d = self.tid(rank, src_track, sort_index), self.tid(rank, dst_track, sort_index)
        base = f'"id":{js(fid)},"cat":{js(cat)},"name":{js(name)},"pid":{rank}'
        self._emit(f'{{"ph":"s",{base},"tid":{s},"ts":{us(src_ts - self.origin)}}}', "s")
        self._emit(f'{{"ph":"f","bp":"e",{base},"tid":{d},"ts":{us(dst_ts - self.origin)}}}', "f")

    def finish(self, other: dict[str, Any]) -> None:
        self.flush()
        self.fh.write(f'\n],\n"otherData": {js_obj(other)}\n}}\n')
