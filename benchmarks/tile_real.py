"""Benchmark inputs made from a real dump file: its rows or events repeated until the file reaches a size.

traceql.synth writes the shapes the issue names with the profilers' column names, but its values, arg sets
and cell spellings are its own. A real file tiled keeps the real ones (a level1 kernel_details.csv's 46
columns, triple-quoted shape cells, N/A runs; a trace_view.json's call stacks with CRLF, string `ts`,
flow pairs), so a shape traceql was never tuned on is measured too. Each copy is moved later in time by the
source's span (plus 1 ms), so a source in time order gives a tiled file in time order; metadata events (ph M)
are kept once.

A JSON trace keeps its layout byte for byte (issue 48: a reader tuned on another layout is tuned on the wrong
input): a torch_npu trace_view.json stays one line of `}, {` with `},{` at its writer's seams, a Kineto trace
keeps its indentation and its keys around traceEvents; the first copy is the source's bytes. Only `ts` values
(exact: the integer part moves, the decimals stay as written) and flow ids change. Flow ids move by the span
in ns, so torch_npu's large ids (the device task's start in ns) stay that, and every numeric id stays within
int64 (checked, as is that no copy reuses an earlier copy's id). CSV rows are re-written by the csv module
(string timestamps exact via Decimal, integers stay integers, other numbers become floats).

    python benchmarks/tile_real.py SRC DST MB     # e.g. a level1 trace_view.json to 250 MB
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

START_COLUMNS = ("Start Time(us)", "Start Time")  # torch_npu kernel_details / op_summary-style tables
GAP_US = Decimal(1000)


def _shift(ts: Any, by: Decimal) -> Any:
    if isinstance(ts, str):
        d = Decimal(ts.strip())
        exp = d.as_tuple().exponent
        places = -exp if isinstance(exp, int) else 0
        return f"{d + by:.{max(0, places)}f}"
    if isinstance(ts, int) and by == by.to_integral_value():
        return ts + int(
            by
        )  # an integer stays one (a Kineto reader takes reals past 2**43 µs slowly: exactness)
    if isinstance(ts, (int, float)):
        return float(Decimal(repr(ts)) + by)
    return ts


def tile_csv(src: Path, dst: Path, target_bytes: int) -> dict[str, int]:
    """Repeat the data rows of the CSV `src` into `dst` until it holds >= target_bytes; the start-time
    column of each copy is moved past the previous copy's end."""
    with src.open(encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], [r for r in rows[1:] if r]
    start = next((header.index(c) for c in START_COLUMNS if c in header), None)
    if start is None:
        raise SystemExit(f"{src}: no start-time column (one of {', '.join(START_COLUMNS)})")
    dur = next((header.index(c) for c in ("Duration(us)", "Duration") if c in header), None)
    times = [Decimal(r[start]) for r in body if len(r) > start and _is_number(r[start])]
    ends = [
        Decimal(r[start]) + (Decimal(r[dur]) if dur is not None and _is_number(r[dur]) else 0)
        for r in body
        if len(r) > start and _is_number(r[start])
    ]
    span = (max(ends) - min(times) + GAP_US) if times else GAP_US
    dst.parent.mkdir(parents=True, exist_ok=True)
    copies = n = 0
    with dst.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        while fh.tell() < target_bytes:
            by = span * copies
            for r in body:
                if len(r) > start and _is_number(r[start]):
                    r = [*r[:start], _shift(r[start], by), *r[start + 1 :]]
                w.writerow(r)
                n += 1
            copies += 1
    return {"bytes": dst.stat().st_size, "rows": n, "copies": copies}


# ---------------------------------------------------------------------------------------------------------
# Chrome-trace JSON (trace_view.json, Kineto): the file's own bytes, events repeated

WS = re.compile(r"[ \t\r\n]*")
GAP = re.compile(r"[ \t\r\n]*,[ \t\r\n]*")
PLAIN = re.compile(r"(\d+)(\.\d*)?")  # a non-negative number without exponent: shifted on its integer part
INT64_MAX = 2**63 - 1
FLOW_PH = ("s", "f", "t")


@dataclass
class _Event:
    """One element of the event array as written: its text and where its `ts` / flow `id` values sit in it."""

    text: str
    meta: bool  # ph M: written once, in the first copy (a process has one name)
    slots: list[tuple[int, int, str]]  # (start, end, "ts" | "id") in text, in order


@dataclass
class _Layout:
    head: str  # everything up to the first event ('[' or '{..., "traceEvents": [')
    events: list[_Event]
    gaps: list[str]  # gaps[i]: the bytes between events i and i+1 (', ' or ',' in a torch_npu file)
    tail: str  # from the closing ']' of the events to the end of the file


def _events_start(text: str, path: Path) -> int:
    """Offset of the event array's '[': the root itself, or the value of an object root's traceEvents key."""
    i = WS.match(text).end()  # type: ignore[union-attr]
    if text.startswith("[", i):
        return i
    m = re.search(r'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[', text)
    if not text.startswith("{", i) or m is None:
        raise SystemExit(f"{path}: expected a JSON array of trace events or an object with traceEvents")
    return m.end() - 1


def _layout(text: str, path: Path) -> _Layout:
    """Split the file into head, events (with their byte spans) and the gaps between them, by walking the array
    with json's raw_decode: the events' own text is kept, never re-serialized."""
    dec = json.JSONDecoder()
    start = _events_start(text, path)
    i = WS.match(text, start + 1).end()  # type: ignore[union-attr]
    events: list[_Event] = []
    gaps: list[str] = []
    last = i  # the end of the last event (the tail keeps the whitespace before ']')
    while not text.startswith("]", i):
        try:
            ev, end = dec.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise SystemExit(f"{path}: expected a trace event at character {i}: {e.msg}") from None
        events.append(_event(text[i:end], ev, dec))
        last = end
        gap = GAP.match(text, end)
        if gap is None:
            i = WS.match(text, end).end()  # type: ignore[union-attr]
            break
        gaps.append(gap.group())
        i = gap.end()
    if not text.startswith("]", i) or not events:
        raise SystemExit(f"{path}: expected ']' closing a non-empty event array at character {i}")
    return _Layout(text[: WS.match(text, start + 1).end()], events, gaps, text[last:])  # type: ignore[union-attr]


def _event(text: str, ev: Any, dec: json.JSONDecoder) -> _Event:
    if not isinstance(ev, dict):
        return _Event(text, False, [])
    slots = []
    if "ts" in ev:
        slots.append((*_value_span(text, "ts", ev, dec), "ts"))
    if "id" in ev and ev.get("ph") in FLOW_PH:
        slots.append((*_value_span(text, "id", ev, dec), "id"))
    return _Event(text, ev.get("ph") == "M", sorted(slots))


def _value_span(text: str, key: str, ev: dict[str, Any], dec: json.JSONDecoder) -> tuple[int, int]:
    """Where the event's own `key` value is written (not an args key of the same name: checked by putting a
    marker there and reading the event back)."""
    hits = list(re.finditer(rf'"{key}"[ \t\r\n]*:[ \t\r\n]*', text))
    for m in hits:
        _, end = dec.raw_decode(text, m.end())
        if len(hits) == 1 or json.loads(text[: m.end()] + '"\x00mark"' + text[end:]).get(key) == "\x00mark":
            return m.end(), end
    raise SystemExit(f"event without a readable {key!r}: {text[:200]}")


def _shift_number(s: str, by: int) -> str:
    """A JSON number's text moved by the integer `by`, its decimals as written (exact, no float)."""
    m = PLAIN.fullmatch(s)
    if m:
        return str(int(m.group(1)) + by) + (m.group(2) or "")
    d = Decimal(s) + by
    return f"{d:f}"


def _shift_ts(value: str, by_us: int) -> str:
    if value.startswith('"'):  # torch_npu writes ts as a string of µs with 3 decimals: kept a string
        inner = value[1:-1]
        core = inner.strip()
        lead = inner[: len(inner) - len(inner.lstrip())]
        trail = inner[len(inner.rstrip()) :]
        return f'"{lead}{_shift_number(core, by_us)}{trail}"'
    return _shift_number(value, by_us)


def _shift_id(value: str, copy: int, step: int) -> str:
    """A flow id in copy `copy`: a number (or a string of digits) moved by copy x step, other strings suffixed."""
    if value.startswith('"'):
        inner = value[1:-1]
        return f'"{int(inner) + copy * step}"' if inner.isascii() and inner.isdigit() else f'"{inner}-{copy}"'
    shifted = int(value) + copy * step
    if not -(2**63) <= shifted <= INT64_MAX:
        raise OverflowError(value)
    return str(shifted)


def _copy_text(layout: _Layout, copy: int, by_us: int, id_step: int, seam: str) -> tuple[str, set[str]]:
    """The events of one copy joined as the source joins them (its gaps; a dropped metadata event takes its
    gap with it), and the flow id values written (to check they are new)."""
    parts: list[str] = []
    ids: set[str] = set()
    gap = seam
    for k, ev in enumerate(layout.events):
        if copy and ev.meta:
            continue
        if parts or copy:
            parts.append(gap)
        pos = 0
        for a, b, kind in ev.slots:
            value = ev.text[a:b]
            if kind == "ts":
                new = _shift_ts(value, by_us) if copy else value
            else:
                new = _shift_id(value, copy, id_step) if copy else value
                ids.add(new.strip('"'))
            parts += (ev.text[pos:a], new)
            pos = b
        parts.append(ev.text[pos:])
        gap = layout.gaps[k] if k < len(layout.gaps) else seam
    return "".join(parts), ids


def _span_us(layout: _Layout) -> int:
    """The source's time span (first start to last end) plus GAP_US, in whole µs (ceiling)."""
    starts, ends = [], []
    for e in layout.events:
        ev = json.loads(e.text)
        if not isinstance(ev, dict) or ev.get("ph") == "M" or "ts" not in ev:
            continue
        t = Decimal(str(ev["ts"]).strip())
        starts.append(t)
        ends.append(t + Decimal(str(ev.get("dur", 0))))
    span = (max(ends) - min(starts) + GAP_US) if starts else GAP_US
    return int(span.to_integral_value(rounding="ROUND_CEILING"))


def tile_trace_json(src: Path, dst: Path, target_bytes: int) -> dict[str, int]:
    """Repeat the events of a Chrome-trace JSON array (trace_view.json) or object ({"traceEvents": [...]})
    into `dst` until it holds >= target_bytes, keeping the source's bytes: its head and tail (an object root's
    other keys), each event's text, the gaps between events (a torch_npu file is one line of `}, {` with `},{`
    where its writer's chunks meet); copies are joined by the source's rarest gap (its chunk seam). Only the
    `ts` values (moved by the span, decimals as written) and flow ids change: a number (or digit string) id
    moves by the span in ns (torch_npu's large flow ids are the device task's start in ns, so they move with
    it) and stays within int64, checked; other string ids get '-<copy>'."""
    raw = gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
    layout = _layout(raw.decode("utf-8"), src)
    counts = Counter(layout.gaps)
    seam = min(counts, key=lambda g: (counts[g], layout.gaps.index(g))) if counts else ", "
    by, n_events, n_meta = _span_us(layout), len(layout.events), sum(e.meta for e in layout.events)
    dst.parent.mkdir(parents=True, exist_ok=True)
    copies = n = 0
    seen: set[str] = set()
    with dst.open("w", encoding="utf-8", newline="") as fh:
        fh.write(layout.head)
        while copies == 0 or fh.tell() + len(layout.tail) < target_bytes:
            try:
                text, ids = _copy_text(layout, copies, by * copies, by * 1000, seam)
            except OverflowError as e:
                raise SystemExit(
                    f"{src}: flow id {e} would pass int64 in copy {copies}; tile to fewer MB"
                ) from None
            if ids & seen:
                raise SystemExit(
                    f"{src}: copy {copies} repeats flow ids of an earlier copy ({sorted(ids & seen)[:3]})"
                )
            seen |= ids
            fh.write(text)
            n += n_events if copies == 0 else n_events - n_meta
            copies += 1
        fh.write(layout.tail)
    return {"bytes": dst.stat().st_size, "rows": n, "copies": copies}


def tile(src: Path, dst: Path, target_bytes: int) -> dict[str, int]:
    if src.suffix == ".csv":
        return tile_csv(src, dst, target_bytes)
    if src.name.endswith((".json", ".json.gz")):
        return tile_trace_json(src, dst, target_bytes)
    raise SystemExit(f"{src}: expected a .csv table or a .json/.json.gz trace")


def _is_number(s: str) -> bool:
    try:
        Decimal(s.strip())
    except ArithmeticError:
        return False
    return bool(s.strip()) and s.strip().lower() not in ("nan", "inf", "-inf", "infinity")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    info = tile(Path(sys.argv[1]), Path(sys.argv[2]), int(float(sys.argv[3]) * 1e6))
    print(info)
