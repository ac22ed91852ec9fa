"""Column headers for people: `bw_utilization` -> "bandwidth utilisation", `measured_over_modeled` -> "measured /
modeled". The report shows these and keeps the SQL name as the header's tooltip (title attribute)."""

from __future__ import annotations

# whole names whose words do not read well on their own
_NAMES = {
    "measured_over_modeled": "measured / modeled",
    "op_type": "operator type",
    "op_name": "operator",
    "n": "count",
    "ts_ns": "start",
    "dur_ns": "duration",
}
# word by word
_WORDS = {
    "bw": "bandwidth",
    "util": "utilisation",
    "utilization": "utilisation",
    "hbm": "HBM",
    "ub": "UB",
    "l2": "L2",
    "op": "operator",
    "ops": "operators",
    "pct": "%",
    "gbps": "GB/s",
    "gb": "GB",
    "aic": "AI Core",
    "aiv": "AI Vector",
    "frac": "fraction",
    "src": "source",
    "dst": "destination",
    "avg": "average",
    "max": "max",
    "min": "min",
}
# a unit suffix becomes the quantity's word (the cell carries the unit itself: "1.2 ms", "3.4 GB", "5.6 GB/s")
_UNIT_SUFFIXES = {"_ns": "time", "_ms": "time", "_bytes": "bytes", "_bps": "bandwidth"}


def human_header(name: str) -> str:
    """A readable header for a result column name (the name itself stays in the tooltip and in JSON/CSV)."""
    if name in _NAMES:
        return _NAMES[name]
    base, quantity = name, ""
    for suffix, word in _UNIT_SUFFIXES.items():
        if base.endswith(suffix) and len(base) > len(suffix):
            base, quantity = base[: -len(suffix)], word
            break
    words = [_WORDS.get(w, w) for w in base.split("_") if w]
    if quantity and quantity not in words:
        words.append(quantity)
    return " ".join(words) or name


def important_first(cols: list[str]) -> list[str]:
    """The columns in display order: the row's name first, then a note that it cannot be true (implausible),
    then the rest as the query returns them; a narrow card scrolls the right-hand ones, never these."""
    first = [c for c in cols if c in ("name", "op_type", "op_name", "pattern", "rank")][:1]
    note = [c for c in cols if c == "implausible"]
    return first + note + [c for c in cols if c not in first and c not in note]
