"""The shared Chrome-trace JSON reader: sniffing, exact time conversion, byte scans, bad input, helpers."""

from __future__ import annotations

import gzip
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceql.errors import BadTraceError
from traceql.parsers import _chrome_json as cj


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# ---- sniff ----------------------------------------------------------------------------------------


def test_sniff_array_with_string_ts_takes_the_duckdb_path(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.json", b'  [{"ph": "X", "ts": "1736408883704643.212", "dur": 1.5}]')
    sn = cj.sniff(p)
    assert (sn.root, sn.ts_kind, sn.gzip, sn.fast_path) == ("array", "string", False, True)


def test_sniff_numeric_ts_object_and_gzip_take_the_ijson_path(tmp_path: Path) -> None:
    num = cj.sniff(_write(tmp_path, "a.json", b'[{"ts": 1695835535123456.789}]'))
    assert (num.root, num.ts_kind, num.fast_path) == ("array", "number", False)
    obj = cj.sniff(_write(tmp_path, "b.json", b'{"schemaVersion": 1, "traceEvents": [{"ts": 5}]}'))
    assert (obj.root, obj.trace_events, obj.fast_path) == ("object", True, False)
    gz = cj.sniff(_write(tmp_path, "c.json.gz", gzip.compress(b'[{"ts": "1.000"}]')))
    assert (gz.gzip, gz.root, gz.ts_kind, gz.fast_path) == (True, "array", "string", False)


def test_sniff_skips_a_utf8_bom(tmp_path: Path) -> None:
    sn = cj.sniff(_write(tmp_path, "bom.json", b'\xef\xbb\xbf[{"ts": "1.0"}]'))
    assert sn.root == "array"


# ---- exact time conversion ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # expected values written out by hand: µs * 1000, digits moved three places
        ("1736408883704643.212", 1736408883704643212),
        (Decimal("1736408883704643.212"), 1736408883704643212),
        (Decimal("1695835535123456.789"), 1695835535123456789),
        (1695835542514261, 1695835542514261000),
        ("198093488368.463", 198093488368463),
        ("0.60003125", 600),  # sub-ns part rounded: 600.03125 -> 600
        ("24.4205", 24421),  # an exact .5 ns tie rounds away from zero (as DuckDB's DECIMAL round)
        (" 12 ", 12000),
        ("", None),
        ("N/A", None),
        (None, None),
        (True, None),
    ],
)
def test_us_to_ns_is_exact(value: object, expected: int | None) -> None:
    assert cj.us_to_ns(value) == expected


def test_dur_text_to_ns_matches_us_to_ns() -> None:
    """Durations as DuckDB prints JSON numbers (shortest form), converted column-wise == exact per value."""
    texts = ["0.00001", "1e-05", "24.4205", "79089.52021875", "1e-07", "155985.8", "3", "0.0004996", None]
    got = cj.dur_text_to_ns(pa.array(texts, pa.string())).to_pylist()
    assert got == [cj.us_to_ns(Decimal(t)) if t is not None else None for t in texts]
    # beyond decimal128(26,12): 16 integer digits -> per-value fallback, still exact
    assert cj.dur_text_to_ns(pa.array(["1234567890123456.5"])).to_pylist() == [1234567890123456500]


def test_dur_text_to_ns_rounds_ties_away_from_zero_like_decimals() -> None:
    """Exact half-ns values, where a float product could round either way (2.0005 is 2.000499999... as a
    double): the answers are the decimal ones, worked out by hand."""
    texts = ["2.0005", "0.0025", "24.4205", "-1.0005", "7.0015"]
    assert cj.dur_text_to_ns(pa.array(texts, pa.string())).to_pylist() == [2001, 3, 24421, -1001, 7002]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=2 * 10**11), min_size=1, max_size=200),
    st.lists(st.integers(min_value=10**7, max_value=1_099_000_000), min_size=1, max_size=10),
    st.lists(st.floats(min_value=0, max_value=1e8, allow_nan=False), min_size=1, max_size=50),
)
def test_dur_text_to_ns_equals_exact_decimal_conversion(
    halves: list[int], big: list[int], values: list[float]
) -> None:
    """Durations as DuckDB prints a JSON number (the shortest repr of its double): whole and half ns (n / 2000
    µs: ties, where a float product can round the wrong way), large values a hair off a half ns (the float
    error grows with magnitude: 67597223.0005 x 1000 is 67597223000.49999 in floats) and arbitrary doubles.
    The column conversion == Decimal arithmetic per value (the large ones each in a column of its own, so
    each takes the decimal path alone)."""
    columns = [[repr(float(f"{n / 2000:.4f}")) for n in halves], [repr(v) for v in values]]
    columns += [
        [repr(float(f"{i}.000{near}"))] for i in big for near in ("5", "4999", "5001", "49999", "500001")
    ]
    for texts in columns:
        got = cj.dur_text_to_ns(pa.array(texts, pa.string())).to_pylist()
        assert got == [cj.us_to_ns(Decimal(t)) for t in texts]


def test_us_to_ns_scale_one_keeps_ns() -> None:
    assert cj.us_to_ns(Decimal("1736408883704643212"), scale=1) == 1736408883704643212


def test_ts_text_to_ns_is_exact() -> None:
    """The column-wise conversion used on the DuckDB path: exact integers (no double in between)."""
    cases = {
        "1736408883704643.212": 1736408883704643212,
        "1736408883688177.930": 1736408883688177930,
        "1736408883704643.2": 1736408883704643200,  # 1 decimal: per-value fallback
        "1736408883704643": 1736408883704643000,
        "1736408883704643.2129": 1736408883704643213,  # 4 decimals: rounded to whole ns
    }
    fast = ["1736408883704643.212", "1736408883688177.930", None]
    assert cj.ts_text_to_ns(pa.array(fast)).to_pylist() == [1736408883704643212, 1736408883688177930, None]
    assert cj.ts_text_to_ns(pa.array(list(cases))).to_pylist() == list(cases.values())


def _ns_by_hand(text: str | None) -> int | None:
    """Independent of traceql: a plain ASCII decimal µs text -> ns by Decimal, half away from zero; None for
    anything else or past int64."""
    import re
    from decimal import ROUND_HALF_UP

    if text is None or not re.fullmatch(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?", text.strip()):
        return None
    ns = int((Decimal(text.strip()) * 1000).to_integral_value(rounding=ROUND_HALF_UP))
    return ns if -(2**63) <= ns < 2**63 else None


def test_ts_text_to_ns_mixed_forms_against_decimal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A column mixing the 3-decimal form with the other short forms real dumps print (a counter sample at a
    whole µs: '1736408883973810'; fewer decimals; a trailing dot; negative) and with forms only the per-value
    path takes (signs, spaces, exponents, >3 decimals, junk): every value against Decimal by hand, and only
    the latter through us_to_ns (the previous code sent the whole batch there for one whole-µs value)."""
    import random

    rnd = random.Random(7)
    short, other = [], []
    for _ in range(3000):
        i = str(
            rnd.choice([rnd.randrange(10 ** rnd.randint(1, 15)), rnd.randrange(17 * 10**14, 18 * 10**14)])
        )
        form = rnd.randrange(6)
        short.append([f"{i}.{rnd.randrange(1000):03d}", i, f"{i}.", f"{i}.{rnd.randrange(10)}",
                      f"{i}.{rnd.randrange(100):02d}", f"-{i}.{rnd.randrange(1000):03d}"][form])  # fmt: skip
    other = ["+5.5", " 7 ", "1e3", "9.9999", "2.0005", "x", "N/A", "", "1_000", "١٢٣", "-", ".", "nan",
             "99999999999999999.5", ".5"]  # fmt: skip
    texts: list[str | None] = [*short, *other, None]
    rnd.shuffle(texts)
    calls = []
    real = cj.us_to_ns
    monkeypatch.setattr(cj, "us_to_ns", lambda v, *a: (calls.append(v), real(v, *a))[1])
    got = cj.ts_text_to_ns(pa.array(texts, pa.string())).to_pylist()
    assert got == [_ns_by_hand(t) for t in texts]
    assert sorted(calls) == sorted(other)
    # one whole-µs value among 3-decimal ones: nothing per value
    calls.clear()
    col = [f"1736408883{n:06d}.{n % 1000:03d}" for n in range(20000)] + ["1736408883973810"]
    assert cj.ts_text_to_ns(pa.array(col)).to_pylist() == [_ns_by_hand(t) for t in col]
    assert calls == []
    # a value past int64 ns among short ones: NULL (through us_to_ns, which notes it), the rest exact
    col = ["9999999999999999.999", "1.5"]
    assert cj.ts_text_to_ns(pa.array(col)).to_pylist() == [None, 1500]


def test_ts_text_to_ns_whole_column_decimal_path_agrees_with_decimal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch Arrow's decimal parse takes whole (the 3-decimal form, whole µs, fewer decimals, and the odd but
    exact forms us_to_ns also takes: '+5', '.5', '5.', '1.5e3', '1.2340', '0005e-0003') converts in one column
    pass, nothing value by value, each value equal to Decimal by hand; one value it refuses ('1.2345': more
    than 3 decimals; ' 5'; '0x5', which Arrow's integer cast would read as 5) sends the batch to the paths
    above, still equal to Decimal by hand (rounded half away from zero, or NULL)."""
    exact = ["1736408883688177.930", "1736408883973810", "1736408883704643.2", "+5", ".5", "5.", "1.5e3",
             "1.2340", "0005e-0003", "-0.000", "-9223372036854775.808", None]  # fmt: skip
    calls: list[object] = []
    real = cj.us_to_ns
    monkeypatch.setattr(cj, "us_to_ns", lambda v, *a: (calls.append(v), real(v, *a))[1])
    assert cj.ts_text_to_ns(pa.array(exact, pa.string())).to_pylist() == [_ns_by_hand(t) for t in exact]
    assert calls == []
    for odd in ("1.2345", " 5", "0x5", "9223372036854775.808"):
        col = [*exact, odd]
        assert cj.ts_text_to_ns(pa.array(col, pa.string())).to_pylist() == [_ns_by_hand(t) for t in col], odd


def test_dur_text_to_ns_sends_only_the_doubtful_values_to_exact_arithmetic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Durations as a real level1 trace_view holds them (two decimals, float noise such as
    '8.569999999999999', a tie such as '27.0805') plus values no int64 ns holds: each against Decimal by hand;
    the float result kept for all but the tie and the non-finite, and `us_to_ns` called only where the
    decimal cast of those few cannot take them (the previous code converted the whole batch one by one)."""
    calls = []
    real = cj.us_to_ns
    monkeypatch.setattr(cj, "us_to_ns", lambda v, *a: (calls.append(v), real(v, *a))[1])
    col = [f"{n / 100:.2f}" for n in range(1, 20001)] + ["8.569999999999999", "27.0805", "-1.0005", None]
    assert cj.dur_text_to_ns(pa.array(col, pa.string())).to_pylist() == [_ns_by_hand(t) for t in col]
    assert calls == []  # the two ties went through decimal128, the float noise stayed on the float path
    col += ["nan", "inf", "1e400", "2000000000.0005"]
    assert cj.dur_text_to_ns(pa.array(col, pa.string())).to_pylist() == [_ns_by_hand(t) for t in col]
    assert sorted(calls) == sorted(["27.0805", "-1.0005", "nan", "inf", "1e400", "2000000000.0005"])


# ---- truncation / roots ------------------------------------------------------------------------------


def test_check_complete_names_the_byte_offset_of_a_cut_file(tmp_path: Path) -> None:
    data = b'[{"ph": "X", "ts": "1.000"}, {"ph": "X", "ts": "2.0'
    sn = cj.sniff(_write(tmp_path, "cut.json", data))
    with pytest.raises(BadTraceError) as ei:
        cj.check_complete(sn)
    msg = str(ei.value)
    assert "truncated" in msg and f"byte {len(data)}" in msg and "cut.json" in msg


def test_check_complete_accepts_trailing_whitespace(tmp_path: Path) -> None:
    cj.check_complete(cj.sniff(_write(tmp_path, "ok.json", b'[{"ts": "1.0"}]\n\n  ')))


@pytest.mark.parametrize(
    ("data", "want"),
    [
        (b"", "empty file"),
        (b"   \n", "empty file"),
        (b'{"a": [1, 2]}', 'without a "traceEvents" key'),
        (b'"just a string"', "expected a Chrome trace"),
    ],
)
def test_require_root_rejects_what_is_not_a_trace(tmp_path: Path, data: bytes, want: str) -> None:
    sn = cj.sniff(_write(tmp_path, "x.json", data))
    with pytest.raises(BadTraceError, match=want):
        cj.require_root(sn, want="events")


# ---- ijson path --------------------------------------------------------------------------------------


def test_iter_events_gives_exact_numbers(tmp_path: Path) -> None:
    p = _write(
        tmp_path, "k.json", b'{"traceEvents": [{"ts": 1695835535123456.789, "id": 1736408883700059821}]}'
    )
    (ev,) = list(cj.iter_events(cj.sniff(p)))
    assert ev["ts"] == Decimal("1695835535123456.789") and ev["id"] == 1736408883700059821


def test_iter_events_truncated_gzip_fails_fast(tmp_path: Path) -> None:
    full = gzip.compress(
        b'{"traceEvents": [' + b'{"ph": "X", "ts": 1, "name": "a"}, ' * 5000 + b'{"ts": 2}]}'
    )
    p = _write(tmp_path, "t.json.gz", full[: len(full) // 2])
    with pytest.raises(BadTraceError, match="truncated gzip") as ei:
        list(cj.iter_events(cj.sniff(p)))
    assert "t.json.gz" in str(ei.value)


def test_iter_events_truncated_json_inside_complete_gzip(tmp_path: Path) -> None:
    """The gzip stream is whole but the JSON inside was cut: reported as truncated JSON with the offset."""
    body = b'{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": "X", "ts'
    p = _write(tmp_path, "t.json.gz", gzip.compress(body))
    with pytest.raises(BadTraceError, match=rf"truncated JSON.*decompressed byte {len(body)}"):
        list(cj.iter_events(cj.sniff(p)))


def test_iter_events_non_utf8_names_the_offset(tmp_path: Path) -> None:
    p = _write(tmp_path, "bad.json", b'{"traceEvents": [{"ts": 1, "name": "a\xff\xfe"}]}')
    with pytest.raises(BadTraceError, match="not UTF-8"):
        list(cj.iter_events(cj.sniff(p)))


def test_iter_events_malformed_json(tmp_path: Path) -> None:
    p = _write(tmp_path, "bad.json", b'{"traceEvents": [{"ts": 1,, "name": "a"}]}')
    with pytest.raises(BadTraceError, match="malformed JSON"):
        list(cj.iter_events(cj.sniff(p)))


@pytest.mark.parametrize("nest", ["[" * 100_000 + "]" * 100_000, '{"a": ' * 50_000 + "1" + "}" * 50_000])
def test_absurdly_deep_nesting_is_refused_quickly(tmp_path: Path, nest: str) -> None:
    """ijson would need O(depth^2) memory (GBs for this 200 KB file); refused with one line instead."""
    import time

    p = _write(
        tmp_path,
        "deep.json",
        ('{"traceEvents": [{"ph": "X", "ts": 1, "args": {"x": ' + nest + "}}]}").encode(),
    )
    t0 = time.perf_counter()
    with pytest.raises(BadTraceError, match=f"nested deeper than {cj.MAX_NESTING} levels"):
        list(cj.iter_events(cj.sniff(p)))
    assert time.perf_counter() - t0 < 5


def test_ordinary_nesting_passes_the_depth_guard(tmp_path: Path) -> None:
    nest = "[" * 100 + "]" * 100
    p = _write(
        tmp_path, "ok.json", ('{"traceEvents": [{"ph": "X", "ts": 1, "args": {"x": ' + nest + "}}]}").encode()
    )
    assert len(list(cj.iter_events(cj.sniff(p)))) == 1


def test_read_header_stops_at_trace_events(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "h.json",
        b'{"schemaVersion": 1, "distributedInfo": {"rank": 3, "world_size": 8}, "deviceProperties": [{"id": 0, '
        b'"name": "GPU"}], "baseTimeNanoseconds": 1743521598000000000, "traceEvents": [{"ts": 1}], "traceName": "x"}',
    )
    h = cj.read_header(cj.sniff(p))
    assert h == {
        "schemaVersion": 1,
        "distributedInfo": {"rank": 3, "world_size": 8},
        "deviceProperties": [{"id": 0, "name": "GPU"}],
        "baseTimeNanoseconds": 1743521598000000000,
    }


def test_tail_bytes_of_gzip_is_the_decompressed_end(tmp_path: Path) -> None:
    data = b"x" * 300000 + b"END"
    p = _write(tmp_path, "t.json.gz", gzip.compress(data))
    assert cj.tail_bytes(cj.sniff(p), 10) == data[-10:]


# ---- byte scan for metadata events -------------------------------------------------------------------


def test_scan_objects_across_chunk_boundaries_and_near_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cj, "CHUNK", 4096)  # many small chunks: objects straddle boundaries
    events = [
        b'{"ph": "X", "name": "a", "ts": "1.0", "args": {"Call stack": "process_name in a string"}}'
    ] * 200
    meta = [
        b'{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "HCCL"}}',
        b'{"ph": "M", "name": "thread_name", "pid": 7, "tid": 0, "args": {"name": "Group 5 Communication"}}',
    ]
    data = b"[" + b", ".join(events[:100] + meta + events[100:] + [meta[0].replace(b"7", b"9")]) + b"]"
    p = _write(tmp_path, "m.json", data)
    found = [
        o for o in cj.scan_objects(cj.sniff(p), b"process_name", near=(b"thread_name",)) if o.get("ph") == "M"
    ]
    # each M event exactly once, wherever the 4 KiB chunks cut the file
    assert sorted((o["name"], o["pid"]) for o in found) == [
        ("process_name", 7),
        ("process_name", 9),
        ("thread_name", 7),
    ]


@pytest.mark.parametrize("cut", [1, 6, 11])
def test_scan_objects_finds_a_needle_cut_by_a_chunk_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut: int
) -> None:
    """Chunks larger than the scan's overlap, most of them without any hit (the scan then builds no context
    buffer): an M event whose `process_name` is cut `cut` bytes from its start by each chunk boundary is still
    found, once. Expected: the file's M events by json.loads of the whole file."""
    import json

    monkeypatch.setattr(cj, "CHUNK", 1 << 19)  # 512 KiB: above the 2 x ~320 KiB carried between chunks
    filler = b'{"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": "1.0", "dur": 2.0, "args": {}}'
    out = bytearray(b"[" + filler)
    for k, boundary in enumerate(range(1 << 19, 6 << 19, 1 << 19)):
        while len(out) < boundary - 4096:
            out += b", " + filler
        ev = b'{"ph": "M", "name": "process_name", "pid": %d, "tid": 0, "args": {"name": "P%d"}}' % (k, k)
        start = (
            boundary - cut - ev.index(b"process_name")
        )  # the needle starts `cut` bytes before the boundary
        out += b" " * (start - len(out) - 2) + b", " + ev
        assert out.index(b"process_name", start) == boundary - cut
    out += b", " + filler + b"]"
    p = _write(tmp_path, "cut.json", bytes(out))
    expected = sorted(e["pid"] for e in json.loads(out) if e["ph"] == "M")
    found = [o for o in cj.scan_objects(cj.sniff(p), b"process_name") if o.get("ph") == "M"]
    assert sorted(o["pid"] for o in found) == expected == [0, 1, 2, 3, 4]


# ---- vectorised args ---------------------------------------------------------------------------------


def test_args_kv_get_and_extra() -> None:
    s = pa.string()
    keys = pa.array([["a", "b", "c"], None, ["c"], ["b", "x"]], pa.list_(s))
    vals = pa.array([["1", "2", "3"], None, ["30"], ["20", None]], pa.list_(s))
    kv = cj.ArgsKV(keys, vals)
    assert kv.get("b").to_pylist() == ["2", None, None, "20"]
    assert kv.get("z", "c").to_pylist() == ["3", None, "30", None]
    assert kv.extra(["b"]).to_pylist() == [[("a", "1"), ("c", "3")], [], [("c", "30")], [("x", None)]]


def test_args_kv_drops_args_whose_keys_and_values_do_not_pair() -> None:
    s = pa.string()
    kv = cj.ArgsKV(pa.array([["a"], None], pa.list_(s)), pa.array([["1"], ["x", "y"]], pa.list_(s)))
    assert kv.get("a").to_pylist() == ["1", None]
    assert kv.extra([]).to_pylist() == [[("a", "1")], []]


def test_ints_and_floats_fall_back_for_odd_text() -> None:
    assert cj.ints(pa.array(["1", None, "4294967295"])).to_pylist() == [1, None, 4294967295]
    assert cj.ints(pa.array(["1", "1.0", "x"])).to_pylist() == [1, 1, None]
    assert cj.floats(pa.array(["1.5", "N/A"])).to_pylist() == [1.5, None]


def test_ints_converts_odd_values_one_by_one_and_the_rest_as_a_column(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Integer args with a few odd values among them: the integers cast as a column (expected values by hand:
    the text is the integer), only the odd ones through to_int (the previous code took the whole batch)."""
    calls = []
    real = cj.to_int
    monkeypatch.setattr(cj, "to_int", lambda v: (calls.append(v), real(v))[1])
    col = [str(n * 7919 - 50000) for n in range(10000)] + ["1.0", "1e3", "x", "1_000", " 12", None]
    col += ["9223372036854775807", "9223372036854775808", "-007"]
    got = cj.ints(pa.array(col, pa.string())).to_pylist()
    assert got[:10000] == [n * 7919 - 50000 for n in range(10000)]
    assert got[10000:] == [1, 1000, None, None, 12, None, 9223372036854775807, None, -7]
    assert sorted(calls) == sorted(
        ["1.0", "1e3", "x", "1_000", " 12", "9223372036854775807", "9223372036854775808"]
    )


def test_floats_keeps_plain_decimals_and_nulls_the_rest_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counter values with an N/A, a NaN and an overflow among plain decimals: the decimals as written (by hand:
    float() of the text), the others NULL through num (which notes them); a column Arrow parses whole but with
    a 'nan' in it is no exception (it used to store NaN)."""
    calls = []
    real = cj.num
    monkeypatch.setattr(cj, "num", lambda v: (calls.append(v), real(v))[1])
    col = [f"{n / 8:.3f}" for n in range(5000)] + ["N/A", "+5", ".5", "1E5", None, "1_0", "1e400"]
    got = cj.floats(pa.array(col, pa.string())).to_pylist()
    assert got == [n / 8 for n in range(5000)] + [None, 5.0, 0.5, 100000.0, None, None, None]
    assert sorted(calls) == sorted(["N/A", "1_0", "1e400"])
    calls.clear()
    assert cj.floats(pa.array(["1.5", "nan", "inf"])).to_pylist() == [1.5, None, None]
    assert sorted(calls) == ["inf", "nan"]


def test_background_writer_reraises_the_writer_error() -> None:
    class Boom:
        def write(self, table: str, data: object, part: str = "", apart_by: str | None = None) -> None:
            raise ValueError("disk full")

    bw = cj.BackgroundWriter(Boom())
    bw.write("kernels", {})
    with pytest.raises(ValueError, match="disk full"):
        bw.close()


@pytest.mark.parametrize("pair_rows", [3, 1_000_000], ids=["many passes", "one pass"])
def test_pair_flows_pairs_the_same_in_one_pass_or_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pair_rows: int
) -> None:
    """Flow ends are paired in passes over disjoint hash ranges of (cat, id) so memory stays bounded; the pairs
    must not depend on how many passes. Expected rows written out by hand from the ends below."""
    monkeypatch.setattr(cj, "FLOW_PAIR_ROWS", pair_rows)
    ends = [  # cat, name, fid, ph, pid, tid, ts_ns
        ("async_npu", "torch_to_npu", "1", "s", 10, 1, 100),
        ("async_npu", "torch_to_npu", "1", "f", 20, 2, 150),
        ("async_npu", "torch_to_npu", "2", "s", 10, 1, 200),
        ("async_npu", "torch_to_npu", "2", "f", 20, 2, 250),
        ("async_npu", "torch_to_npu", "2", "t", 20, 3, 260),  # fan-out: one s, two ends
        ("HostToDevice", "HostToDevice7", "1", "s", 11, 4, 300),  # same id, other category: its own pair
        ("HostToDevice", "HostToDevice7", "1", "f", 21, 5, 350),
        ("async_npu", "torch_to_npu", "3", "s", 10, 1, 400),  # start without an end
        (None, "x", "4", "f", 22, 6, 500),  # end without a start, no category
        ("async_npu", "torch_to_npu", None, "s", 10, 1, 600),  # no id: never paired
    ]
    sp = cj.Spill(tmp_path, "flows")
    sp.add(
        pa.table(
            {c: [e[i] for e in ends] for i, c in enumerate(cj.FLOW_ENDS)},
            schema=pa.schema(
                [
                    ("cat", pa.string()),
                    ("name", pa.string()),
                    ("fid", pa.string()),
                    ("ph", pa.string()),
                    ("pid", pa.int64()),
                    ("tid", pa.int64()),
                    ("ts_ns", pa.int64()),
                ]
            ),
        )
    )
    path = sp.close()
    assert path is not None
    rows = []
    for b in cj.pair_flows(path, batch_rows=2):
        rows.extend(tuple(r.values()) for r in b.to_pylist())
    # cat, name, flow_id, src_pid, src_tid, src_ts_ns, dst_pid, dst_tid, dst_ts_ns
    assert sorted(rows, key=repr) == sorted(
        [
            ("async_npu", "torch_to_npu", "1", 10, 1, 100, 20, 2, 150),
            ("async_npu", "torch_to_npu", "2", 10, 1, 200, 20, 2, 250),
            ("async_npu", "torch_to_npu", "2", 10, 1, 200, 20, 3, 260),
            ("HostToDevice", "HostToDevice7", "1", 11, 4, 300, 21, 5, 350),
            ("async_npu", "torch_to_npu", "3", 10, 1, 400, None, None, None),
            (None, "x", "4", None, None, None, 22, 6, 500),
            ("async_npu", "torch_to_npu", None, 10, 1, 600, None, None, None),
        ],
        key=repr,
    )


def _wait_for(cond, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    import time

    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_duck_stream_bounds_the_waiting_batches_by_count_and_bytes(tmp_path: Path) -> None:
    """20,000 events read 1,000 a batch: with a byte bound below one batch, one batch waits (never zero: a
    batch larger than the bound still moves); raised to 5 batches with no byte bound, five wait; every event
    then arrives once, in file order (counted by hand: ts 0..19999); close() stops a producer that waits."""
    import time

    src = tmp_path / "t.json"
    src.write_text("[" + ",".join(f'{{"ph":"X","ts":"{i}"}}' for i in range(20_000)) + "]", encoding="utf-8")
    sql = f"SELECT ph, ts FROM {cj.duck_source(src, {'ph': 'VARCHAR', 'ts': 'VARCHAR'})}"
    s = cj.DuckStream(cj.duck_connection(1), src, sql, batch_rows=1000, prefetch=16, prefetch_bytes=1)
    try:
        _wait_for(lambda: s.waiting()[0] >= 1)
        time.sleep(0.3)  # the producer had time to queue more, were it allowed to
        assert s.waiting()[0] == 1
        s.set_prefetch(5)
        _wait_for(lambda: s.waiting()[0] == 5)
        time.sleep(0.3)
        assert s.waiting()[0] == 5
        ts = [int(v) for b in s for v in b.column("ts").to_pylist()]
        assert ts == list(range(20_000))
    finally:
        s.close()
    s = cj.DuckStream(cj.duck_connection(1), src, sql, batch_rows=1000, prefetch=1)
    _wait_for(lambda: s.waiting()[0] == 1)
    t0 = time.monotonic()
    s.close()
    assert time.monotonic() - t0 < 5 and s.waiting() == (0, 0)
