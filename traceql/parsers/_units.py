"""Unit conversion at the parser edge: the only place µs/ms/MB/KB/GB/s become ns/bytes/bytes/s.

Timestamps are parsed from their decimal *text* into exact int64 ns (never via float: 1.7e15 µs with three
decimals has ~19 significant digits, more than a double holds).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from ._numtext import note, plain

NA = {"", "N/A", "NA", "n/a", "None", "null", "-"}  # NaN is no "missing" marker: counted (._numtext)


def clean(cell: object) -> str | None:
    """Strip whitespace, the trailing TAB torch_npu appends to start times, and quotes; N/A -> None."""
    if cell is None:
        return None
    s = str(cell).strip().strip("\t").strip()
    if s in NA:
        return None
    return s


def dec_to_ns(text: object, scale: int) -> int | None:
    """Exact decimal text in some unit -> int ns. scale = ns per unit (1000 for µs, 1_000_000 for ms)."""
    s = clean(text)
    if s is None:
        return None
    if not plain(
        s
    ):  # '1_000', '١٢٣', 'Infinity', '0x10': Decimal() takes some of them; no profiler writes them
        note(s)
        return None
    try:
        d = Decimal(s)
    except InvalidOperation:
        note(s)
        return None
    v = int((d * scale).to_integral_value())
    if abs(v) >= 2**63:
        note(s)
        return None
    return v


def us_to_ns(text: object) -> int | None:
    """'1736408883704643.212' (µs) -> 1736408883704643212 exactly."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text * 1000
    return dec_to_ns(text, 1000)


def ms_to_ns(text: object) -> int | None:
    return dec_to_ns(text, 1_000_000)


def to_float(text: object) -> float | None:
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        try:
            f = float(text)
        except OverflowError:  # an int past the float range
            f = float("inf")
        if f == f and f not in (float("inf"), float("-inf")):
            return f
        note(text)
        return None
    s = clean(text)
    if s is None:
        return None
    if not plain(s):
        note(s)
        return None
    f = float(s)
    if f != f or f in (float("inf"), float("-inf")):  # '1e400'
        note(s)
        return None
    return f


def to_int(text: object) -> int | None:
    if isinstance(text, int) and not isinstance(text, bool):
        if abs(text) < 2**63:
            return text
        note(text)
        return None
    s = clean(text)
    if s is None:
        return None
    if not plain(s):
        note(s)
        return None
    try:
        v = int(s)
    except ValueError:  # '12.0', '1e3'
        f = to_float(s)
        if f is None:
            return None
        if abs(f) >= 2**63:
            note(s)
            return None
        v = int(f)
    if abs(v) < 2**63:
        return v
    note(s)
    return None


def scaled_int(text: object, factor: float) -> int | None:
    """A number in some unit -> int in base units (e.g. MB -> bytes with factor=MB)."""
    f = to_float(text)
    if f is None:
        return None
    v = f * factor
    if abs(v) >= 2**63:
        note(text)
        return None
    return int(round(v))


def percent_to_ratio(text: object) -> float | None:
    f = to_float(text)
    return None if f is None else f / 100.0
