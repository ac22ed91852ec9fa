"""traceql.jsonsafe.json_safe (the one JSON-safe conversion) and traceql.units (the one set of unit constants).
Expected values: by hand."""

from __future__ import annotations

import datetime
import decimal
import json
import math

from traceql import units
from traceql.jsonsafe import json_safe


def test_nan_and_inf_become_null_everywhere() -> None:
    v = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": (2, math.nan), 3: {"d": float("inf")}}
    assert json_safe(v) == {"a": None, "b": [None, None, 1.5], "c": [2, None], "3": {"d": None}}
    json.dumps(json_safe(v), allow_nan=False)  # never trips


def test_other_values_become_json_types() -> None:
    assert json_safe(decimal.Decimal("1.25")) == 1.25
    assert json_safe(decimal.Decimal("NaN")) is None
    assert json_safe(datetime.date(2026, 1, 2)) == "2026-01-02"
    assert json_safe(b"\x01\xff") == "01ff"
    assert json_safe(True) is True and json_safe(None) is None and json_safe("x") == "x"
    assert json_safe(object.__new__(type("Odd", (), {"__str__": lambda self: "odd"}))) == "odd"


def test_arrow_maps_become_objects_only_when_asked() -> None:
    pairs = [("k", 1.0), ("j", math.nan)]
    assert json_safe(pairs) == [["k", 1.0], ["j", None]]
    assert json_safe(pairs, arrow_maps=True) == {"k": 1.0, "j": None}


def test_units() -> None:
    assert units.KB == 1024 and units.MB == 1024 * 1024 and units.MiB == 1 << 20
    assert units.GB == 1_000_000_000 and units.GB_PER_S == 1e9 and units.MB_PER_S == 1e6
