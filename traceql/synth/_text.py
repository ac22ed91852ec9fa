"""Exact text formatting for synthetic dumps, and the render-once / replay-many machinery.

Times are rendered from int ns to decimal text, never through a float, so "1736408883000123.456" (µs)
round-trips to 1736408883000123456 ns exactly.

Replay: a repetition of a rank's timeline is rendered once as a *template* in which the wall-clock second,
the repetition number and the step ids are tokens; each repetition is then made by `str.replace`, which is
what lets the writers emit gigabytes at several hundred MB/s. Tokens are printable ASCII so `json.dumps`
leaves them alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache

NS_PER_S = 1_000_000_000
SEC = "~S~"  # the 10-digit wall-clock second of the repetition
REP = "~R~"  # 1-based repetition number, prefixing 6-digit local ids (connection ids)
_STEP = "~T{}~"  # a step id of the pattern


def us_text(abs_ns: int) -> str:
    """Absolute µs with exactly 3 decimals: 1736408883704643212 -> '1736408883704643.212'."""
    q, r = divmod(abs_ns, 1000)
    return f"{q}.{r:03d}"


def dur_text(ns: int) -> str:
    """A duration in µs as the profiler prints it (trailing zeros trimmed, at least one decimal):
    53741 -> '53.741', 6540 -> '6.54', 2000 -> '2.0'. Exact."""
    if ns < 0:
        return "-" + dur_text(-ns)
    q, r = divmod(ns, 1000)
    if r == 0:
        return f"{q}.0"
    return f"{q}.{r:03d}".rstrip("0")


def num(x: float, decimals: int | None = None) -> str:
    """A float as Python prints it (shortest round-trip), or rounded to `decimals`."""
    if decimals is not None:
        x = round(x, decimals)
    return repr(float(x))


@lru_cache(maxsize=65536)
def js(s: str) -> str:
    """JSON string literal."""
    return json.dumps(s)


class Clock:
    """Renders offsets (ns from base) as absolute text; in template mode the second is a token."""

    def __init__(self, base_ns: int, template: bool = False) -> None:
        self.base_ns = base_ns
        self.template = template
        self.sec = base_ns // NS_PER_S

    def _split(self, off_ns: int) -> int:
        sec, rem = divmod(self.base_ns + off_ns, NS_PER_S)
        if sec != self.sec:
            raise ValueError(
                f"event at offset {off_ns} ns leaves the repetition's wall-clock second: with repeat > 1 every event "
                "(host launches included, which start ~40 µs before their task) must lie in [0, 1 s) of the base"
            )
        return rem

    def us(self, off_ns: int) -> str:
        """Absolute µs text ('1736408883704643.212')."""
        if not self.template:
            return us_text(self.base_ns + off_ns)
        rem = self._split(off_ns)
        return f"{SEC}{rem // 1000:06d}.{rem % 1000:03d}"

    def ns(self, off_ns: int) -> str:
        """Absolute ns as an integer literal (torch_to_npu flow ids)."""
        if not self.template:
            return str(self.base_ns + off_ns)
        return f"{SEC}{self._split(off_ns):09d}"

    def cid(self, local: int) -> str:
        """A connection id, unique across repetitions in template mode."""
        if not self.template:
            return str(local)
        if not 0 <= local < 1_000_000:
            raise ValueError("connection ids must be < 1e6 in a repeated pattern")
        return f"{REP}{local:06d}"

    def step(self, step_id: int) -> str:
        return _STEP.format(step_id) if self.template else str(step_id)


class Replay:
    """Turns a template into the text of each repetition.

    The template is split once at its tokens; a repetition is then one list substitution and one join,
    which is what keeps replay near memory speed (~1 GB/s) however many tokens the text has."""

    _TOKEN = re.compile(r"(~S~|~R~|~T-?\d+~)")

    def __init__(self, base_ns: int, repeat: int, period_ns: int, step_ids: list[int]) -> None:
        if repeat > 1 and period_ns % NS_PER_S:
            raise ValueError("period_ns must be a whole number of seconds when repeat > 1")
        self.sec0 = base_ns // NS_PER_S
        self.repeat = repeat
        self.period_s = period_ns // NS_PER_S
        self.step_ids = step_ids
        self.steps_per_rep = len(step_ids)
        self._split: dict[int, tuple[str, list[str], list[str]]] = {}

    def _parts(self, template: str) -> tuple[list[str], list[str]]:
        key = id(template)
        hit = self._split.get(key)
        if hit is None or hit[0] is not template:
            parts = self._TOKEN.split(template)
            hit = (template, parts[0::2], parts[1::2])
            self._split[key] = hit
        return hit[1], hit[2]

    def rep(self, template: str, k: int) -> str:
        if self.repeat == 1:
            return template
        texts, tokens = self._parts(template)
        sub = {SEC: str(self.sec0 + k * self.period_s), REP: str(k + 1)}
        for sid in self.step_ids:
            sub[_STEP.format(sid)] = str(sid + k * self.steps_per_rep)
        out = [""] * (len(texts) + len(tokens))
        out[0::2] = texts
        out[1::2] = [sub[t] for t in tokens]
        return "".join(out)

    def all(self, template: str) -> Iterator[str]:
        for k in range(self.repeat):
            yield self.rep(template, k)

    def step_id(self, sid: int, k: int) -> int:
        return sid + k * self.steps_per_rep
