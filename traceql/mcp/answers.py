"""The envelope every MCP answer shares (format `traceql.mcp/1`), numbers written for reading, and the size cap.

An agent reads each answer into its context: an answer is one JSON object of at most `cap` characters. When the
full answer would be longer, `fit` drops rows from the end of the answer's lists (the ones `shrink` names, in
that order: the least important first), then clips long strings, and says what it left out under `truncated`
with how to get the rest. Nothing here knows what a verdict is: the tools hand it their finished dicts.
"""

from __future__ import annotations

import json
import math
from typing import Any

FORMAT_ID = "traceql.mcp/1"
#: default answer cap in characters (the issue's bound: every answer on the real dumps stays under it)
DEFAULT_CAP = 8000
#: the smallest cap the server accepts: below it even an error-free truncation note cannot fit
MIN_CAP = 1000
#: a string longer than this (a SQL cell, a message) is clipped before rows are dropped
MAX_STRING = 600


def envelope(tool: str, **fields: Any) -> dict[str, Any]:
    """An answer: format id, tool name, the fields in order, and truncated=false until `fit` says otherwise."""
    return {"format": FORMAT_ID, "tool": tool, **fields, "truncated": False}


def dumps(answer: dict[str, Any]) -> str:
    # compact separators: the cap counts characters the agent pays for, indentation included
    return json.dumps(answer, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=str)


def readable(value: float | int | None, unit: str = "") -> str | None:
    """A number as a reader wants it: 3 significant digits, with its unit; shares (unit '%') as percent."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if unit == "%":
        return f"{value * 100:.3g}%"
    if unit == "ns":  # times: the unit a performance engineer reads
        for div, u in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
            if abs(value) >= div:
                return f"{value / div:.3g} {u}"
        return f"{value:.3g} ns"
    if unit in ("bytes", "B/s"):
        for div, u in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
            if abs(value) >= div:
                return f"{value / div:.3g} {u}{'B' if unit == 'bytes' else 'B/s'}"
        return f"{value:.3g} {'B' if unit == 'bytes' else 'B/s'}"
    return f"{value:.3g}" + (f" {unit}" if unit else "")


def number(name: str, value: Any, unit: str, grade: str, detail: str = "", **extra: Any) -> dict[str, Any]:
    """One stated number: the exact value, how it reads, and the grade of what it rests on."""
    v = clean_number(value)
    out: dict[str, Any] = {"name": name, "value": v, "unit": unit, "shown": readable(v, unit), "grade": grade}
    if detail:
        out["grade_detail"] = detail
    out.update(extra)
    return out


def clean_number(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _clip_strings(v: Any, limit: int) -> tuple[Any, int]:
    """A copy with every string longer than `limit` clipped (an ellipsis says so); and how many were."""
    if isinstance(v, str):
        return (v[: limit - 1] + "…", 1) if len(v) > limit else (v, 0)
    if isinstance(v, dict):
        n, out = 0, {}
        for k, x in v.items():
            out[k], c = _clip_strings(x, limit)
            n += c
        return out, n
    if isinstance(v, list):
        n, lst = 0, []
        for x in v:
            y, c = _clip_strings(x, limit)
            lst.append(y)
            n += c
        return lst, n
    return v, 0


def fit(
    answer: dict[str, Any],
    cap: int,
    shrink: tuple[str, ...] = (),
    more: str = "",
    counts: dict[str, str] | None = None,
) -> str:
    """The answer's JSON text, at most `cap` characters. Over the cap: long strings clipped, then the last
    items of the top-level lists named in `shrink` dropped (first named first), then shorter strings; the
    answer's `truncated` says what went and `more` says how to get it. counts: list key -> the answer's field
    holding that list's length (rows -> returned_rows), kept true as items go."""
    text = dumps(answer)
    if len(text) <= cap:
        return text
    work, clipped = _clip_strings(answer, MAX_STRING)
    dropped: dict[str, int] = {}
    note: dict[str, Any] = {"cap_chars": cap}

    def render() -> str:
        note.update(
            {"dropped_items": dict(dropped), "clipped_strings": clipped, "how_to_get_more": more or None}
        )
        work["truncated"] = note
        return dumps(work)

    text = render()
    for key in shrink:
        items = work.get(key)
        while len(text) > cap and isinstance(items, list) and items:
            # drop a share at a time: one pop per render is quadratic on a 500-row answer
            over = len(text) - cap
            per = max(1, len(json.dumps(items, default=str)) // max(1, len(items)))
            k = min(len(items), max(1, over // per))
            del items[len(items) - k :]
            dropped[key] = dropped.get(key, 0) + k
            if counts and key in counts:
                work[counts[key]] = len(items)
            text = render()
    for limit in (200, 80, 30):
        if len(text) <= cap:
            break
        work, more_clipped = _clip_strings(work, limit)
        clipped += more_clipped
        text = render()
    if len(text) > cap:
        # nothing left to drop: say so in an answer that fits rather than break the cap
        work = envelope(str(answer.get("tool")))
        work["error"] = "the answer does not fit the size cap even with its lists emptied"
        text = render()
    return text
