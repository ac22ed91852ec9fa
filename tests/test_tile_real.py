"""benchmarks/tile_real.py keeps the real file layout (issue 48): a torch_npu trace_view.json is one line of
`}, {` with `},{` where its writer's chunks meet, and the tile must be that too, with every flow id a valid
int64; and traceql must read the tile as the original repeated.

Expected values are computed here from the raw bytes of the real file, independently of traceql: the gaps
between events by walking the array with json's raw_decode, the events' fields with json (numbers as Decimal,
exactly as written), durations in ns with the rounding of traceql's dur_text_to_ns (half away from zero,
`_chrome_json.py`) done in Decimal. traceql's stored rows are then compared to those numbers x copies."""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections import Counter
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import LEVEL1, ROOT, TRACELENS, real

from traceql.parsers import trace_view
from traceql.rank_writer import RankWriter

sys.path.insert(0, str(ROOT / "benchmarks"))
import tile_real  # noqa: E402

SRC = LEVEL1 / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
COPIES = 3


def _walk(raw: bytes) -> tuple[list[Any], list[bytes]]:
    """The events of a bare JSON array and the bytes between consecutive events (as written)."""
    text = raw.decode("utf-8")
    dec = json.JSONDecoder(parse_float=Decimal)
    i = text.index("[") + 1
    events: list[Any] = []
    gaps: list[bytes] = []
    while True:
        ev, end = dec.raw_decode(text, i)
        events.append(ev)
        m = re.compile(r"\s*,\s*").match(text, end)
        if m is None:
            assert text[end:].strip() == "]"
            return events, gaps
        gaps.append(m.group().encode())
        i = m.end()


def _ns(us: Any) -> int:
    """µs as written (a Decimal, or a string of one) -> ns, half away from zero (dur_text_to_ns's rule)."""
    d = Decimal(str(us).strip()) * 1000
    return int(d.quantize(Decimal(1), rounding=ROUND_HALF_UP))


@pytest.fixture(scope="module")
def tiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes, Path]:
    src = real(SRC)
    dst = tmp_path_factory.mktemp("tile") / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    # a target just past two copies' bytes makes the tiler write exactly three
    info = tile_real.tile(src, dst, 2 * src.stat().st_size + 1)
    assert info["copies"] == COPIES
    return src.read_bytes(), dst.read_bytes(), dst


def test_tile_keeps_the_real_layout(tiled: tuple[bytes, bytes, Path]) -> None:
    raw, out, _ = tiled
    src_events, src_gaps = _walk(raw)
    out_events, out_gaps = _walk(out)
    # the real file: one line, `}, {` between events, one `},{` seam (its two writers' chunks)
    assert b"\n" not in raw and Counter(src_gaps) == {b", ": len(src_gaps) - 1, b",": 1}
    # the tile: one line too; the first copy is the source's bytes (less its closing ']'), the same gaps
    assert b"\n" not in out and out.startswith(raw[:-1]) and out.endswith(b"}]")
    n_meta = sum(e["ph"] == "M" for e in src_events)
    assert len(out_events) == len(src_events) + (COPIES - 1) * (len(src_events) - n_meta)
    # each copy keeps the source's seam, and copies meet at a seam too: 2 x copies - 1 of them, the rest `}, {`
    assert Counter(out_gaps) == {b",": 2 * COPIES - 1, b", ": len(out_gaps) - (2 * COPIES - 1)}


def test_tile_ids_in_range_and_unique_per_copy(tiled: tuple[bytes, bytes, Path]) -> None:
    raw, out, _ = tiled
    src_events, _ = _walk(raw)
    out_events, _ = _walk(out)
    ints = [e["id"] for e in out_events if isinstance(e.get("id"), int)]
    assert ints and all(-(2**63) <= i < 2**63 for i in ints)  # within int64 (so within uint64 too)
    keys = {(e.get("cat"), str(e["id"])) for e in src_events if e.get("ph") in ("s", "f", "t")}
    out_keys = {(e.get("cat"), str(e["id"])) for e in out_events if e.get("ph") in ("s", "f", "t")}
    assert len(out_keys) == COPIES * len(keys)  # no copy reuses another's flow id


def _expected_one_copy(raw: bytes) -> dict[str, Any]:
    """From the raw file: X events per canonical table (by their process's name), their dur sum in ns, the
    first start and last end in ns, and the flow rows traceql's (cat, id) pairing makes."""
    events, _ = _walk(raw)
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    out: dict[str, Any] = {"kernels": [0, 0], "host_ops": [0, 0]}
    spans: list[tuple[int, int]] = []  # (start, end) ns of the X events of those two tables
    for e in events:
        if e["ph"] != "X":
            continue
        track = names.get(e["pid"])
        table = "kernels" if track == "Ascend Hardware" else None
        table = "host_ops" if track not in ("Ascend Hardware", "HCCL", "Overlap Analysis") else table
        if table:
            out[table][0] += 1
            out[table][1] += _ns(e["dur"])
            spans.append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])))
    out["first_ns"], out["last_end_ns"] = min(a for a, _ in spans), max(b for _, b in spans)
    timed = [e for e in events if e["ph"] != "M"]
    ends = Counter((e.get("cat") or "", str(e["id"]), e["ph"] == "s") for e in events if e["ph"] in "sft")
    keys = {(c, i) for c, i, _ in ends}
    out["flows"] = sum(
        ends[(c, i, True)] * ends[(c, i, False)] or ends[(c, i, True)] + ends[(c, i, False)] for c, i in keys
    )
    # the tiler's shift: the source's span (first start to last end) + 1 ms, in whole µs
    first = min(Decimal(e["ts"]) for e in timed)
    last = max(Decimal(e["ts"]) + e.get("dur", 0) for e in timed)
    span_us = (last - first + 1000).to_integral_value(ROUND_CEILING)
    out["shift_ns"] = int(span_us) * 1000
    return out


def test_traceql_reads_the_tile_as_the_original_repeated(
    tiled: tuple[bytes, bytes, Path], tmp_path: Path
) -> None:
    raw, _, dst = tiled
    want = _expected_one_copy(raw)
    w = RankWriter(tmp_path / "run", "r", 0)
    trace_view.parse_trace_view(dst, w, kernels=True, comm_ops=True, write_steps=True)
    w.close()
    tables = {t: [pq.read_table(tmp_path / "run" / rel) for rel in rels] for t, rels in w.files.items()}
    for table in ("kernels", "host_ops"):
        n, dur = want[table]
        got = [x for t in tables[table] for x in t.column("dur_ns").to_pylist()]
        assert (len(got), sum(got)) == (COPIES * n, COPIES * dur), table
    ts = [x for t in tables["host_ops"] + tables["kernels"] for x in t.column("ts_ns").to_pylist()]
    assert min(ts) == want["first_ns"]
    last = max(
        s + d
        for t in tables["host_ops"] + tables["kernels"]
        for s, d in zip(t.column("ts_ns").to_pylist(), t.column("dur_ns").to_pylist(), strict=True)
    )
    assert last == want["last_end_ns"] + (COPIES - 1) * want["shift_ns"]
    assert sum(t.num_rows for t in tables["flows"]) == COPIES * want["flows"]


def test_tile_refuses_ids_past_int64(tmp_path: Path) -> None:
    """A flow id that one more copy would move past 2**63 - 1: a one-line error naming the file."""
    src = tmp_path / "trace_view.json"
    src.write_text(
        '[{"ph": "s", "id": 9223372036854775000, "pid": 1, "tid": 1, "ts": "1.000", "cat": "c", "name": "n"}, '
        '{"ph": "f", "id": 9223372036854775000, "pid": 1, "tid": 1, "ts": "2.000", "cat": "c", "name": "n"}]'
    )
    with pytest.raises(SystemExit, match=r"trace_view\.json: flow id .* would pass int64"):
        tile_real.tile(src, tmp_path / "out.json", 10_000)


def test_kineto_tile_keeps_its_indented_layout(tmp_path: Path) -> None:
    """A Kineto trace (object root, indented over many lines, deviceProperties etc. after traceEvents): one copy
    is the decompressed source byte for byte; two keep its head and tail and read back as 2x the timed events."""
    src = real(TRACELENS / "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    raw = gzip.decompress(src.read_bytes())
    one = tmp_path / "one.json"
    assert tile_real.tile(src, one, 1)["copies"] == 1
    assert one.read_bytes() == raw
    two = tmp_path / "two.json"
    assert tile_real.tile(src, two, len(raw) + 1)["copies"] == 2
    out = two.read_bytes()
    head = raw[: raw.index(b'"traceEvents"')]
    tail = raw[
        raw.index(b'}\n  ],\n  "schemaVersion"') :
    ]  # the last event's close, the array's, the keys after
    assert out.startswith(head) and out.endswith(tail)
    doc, copies = json.loads(raw), json.loads(out)
    assert {k: v for k, v in copies.items() if k != "traceEvents"} == {
        k: v for k, v in doc.items() if k != "traceEvents"
    }
    timed = [e for e in doc["traceEvents"] if e.get("ph") != "M"]
    assert len(copies["traceEvents"]) == len(doc["traceEvents"]) + len(timed)
