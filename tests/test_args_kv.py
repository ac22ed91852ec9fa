"""_chrome_json.ArgsKV.get: the value of the first present key per row, whether every row has the same keys in
the same order (the fixed-layout path, issue 18) or not (the general search). Expected values are computed
here from the rows as Python dicts."""

from __future__ import annotations

import pyarrow as pa
import pytest

from traceql.parsers import _chrome_json as cj

SAME = [
    {"Task Type": "AI_CORE", "Task Id": "1", "Model Id": None},
    {"Task Type": "HCCL", "Task Id": "2", "Model Id": "7"},
    {"Task Type": None, "Task Id": "3", "Model Id": "8"},
]


def _kv(rows: list[dict[str, str | None] | None]) -> cj.ArgsKV:
    keys = pa.array([None if r is None else list(r) for r in rows], pa.list_(pa.string()))
    vals = pa.array([None if r is None else list(r.values()) for r in rows], pa.list_(pa.string()))
    return cj.ArgsKV(keys, vals)


def _expected(rows: list[dict[str, str | None] | None], names: tuple[str, ...]) -> list[str | None]:
    out = []
    for r in rows:
        v = None
        for n in names:  # first present key whose value is not null (get coalesces over the names)
            if r is not None and n in r and r[n] is not None:
                v = r[n]
                break
        out.append(v)
    return out


@pytest.mark.parametrize(
    "rows, fixed",
    [
        (SAME, True),
        ([SAME[0], {"Task Id": "2", "Task Type": "HCCL", "Model Id": "7"}], False),  # another key order
        ([SAME[0], {"Task Type": "X"}], False),  # fewer keys
        ([SAME[0], None, SAME[1]], False),  # a row without args
        ([{"a": "1"}], True),
    ],
)
@pytest.mark.parametrize(
    "names", [("Task Type",), ("Model Id", "Task Id"), ("absent",), ("absent", "Task Id")]
)
def test_get_matches_the_rows(rows: list, fixed: bool, names: tuple[str, ...]) -> None:
    kv = _kv(rows)
    assert (kv._fixed is not None) == fixed
    assert kv.get(*names).to_pylist() == _expected(rows, names)
    # the Kineto reader passes the names as typed Arrow scalars
    assert kv.get(*(pa.scalar(n, pa.string()) for n in names)).to_pylist() == _expected(rows, names)


# The fixed-layout test compares the key text and the key lengths as buffers: the same bytes split into other
# keys ("ab","c" vs "a","bc") is not the same layout, nor is a sliced batch read from its own offset.
SPLIT = [{"ab": "1", "c": "2"}, {"a": "3", "bc": "4"}]


@pytest.mark.parametrize("names", [("ab",), ("a",), ("bc",), ("c",)])
def test_same_bytes_other_keys_is_not_fixed(names: tuple[str, ...]) -> None:
    kv = _kv(SPLIT)
    assert kv._fixed is None
    assert kv.get(*names).to_pylist() == _expected(SPLIT, names)


def test_fixed_layout_of_a_slice() -> None:
    rows = [{"x": "0", "yy": "0"}, *SAME, {"Task Type": "AI_CPU", "Task Id": "4", "Model Id": "9"}]
    keys = pa.array([list(r) for r in rows], pa.list_(pa.string())).slice(1)
    vals = pa.array([list(r.values()) for r in rows], pa.list_(pa.string())).slice(1)
    kv = cj.ArgsKV(keys, vals)
    assert kv._fixed is not None and kv.width == 3
    assert kv.get("Task Id").to_pylist() == _expected(rows[1:], ("Task Id",))


@pytest.mark.parametrize(
    "rows", [SAME, [SAME[0], {"Task Id": "2", "Task Type": "HCCL", "Model Id": "7"}], SPLIT]
)
def test_extra_is_every_other_arg_in_order(rows: list) -> None:
    """extra() drops the canonical keys and keeps the rest in the order written, on both paths; expected from
    the dicts."""
    canonical = ("Task Type", "ab")
    got = _kv(rows).extra(canonical).to_pylist()
    assert got == [[(k, v) for k, v in r.items() if k not in canonical] for r in rows]
