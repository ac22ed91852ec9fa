"""Numbers for people: thousands separated, decimals by size, never scientific notation.

Tables, the report and compare's text show these; the exact values stay in JSON and CSV."""

from __future__ import annotations


def human_number(v: float, signed: bool = False) -> str:
    """`v` with 3 or more significant digits: 12,900 / 10.5 / 1.25 / 0.125; below 0.001 it says "<0.001"
    (never 1.8e-06); '+' kept for a positive delta when `signed`."""
    sign = "+" if signed and v > 0 else ""
    a = abs(v)
    if a == 0:
        return "0"
    if a < 0.001:
        return ("+" if signed else "") + "<0.001" if v > 0 else ">-0.001"
    decimals = 0 if a >= 100 else 1 if a >= 10 else 2 if a >= 1 else 3
    return sign + f"{v:,.{decimals}f}"
