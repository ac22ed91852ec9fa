"""One big trace_view.json on every core (issue 18): pieces of whole events parsed in worker processes must
store exactly what the serial reader stores (the current path, the reference here), table by table and row for
row (as multisets: the pieces write their own file parts), every file time-sorted; a cut that falls inside a
string makes a piece fail, and the file is then read serially (same rows again)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from traceql.parsers import _json_pieces, trace_view
from traceql.rank_writer import RankWriter
from traceql.synth import write_cluster

OUT = "ASCEND_PROFILER_OUTPUT"


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A full torch_npu rank's trace_view.json (~6 MB: host, CANN, device, HCCL, counters, flows, steps)."""
    root = tmp_path_factory.mktemp("tv") / "job"
    write_cluster(root, 2, 6_000_000, seed=5)
    return root / "rank0_ascend_pt" / OUT / "trace_view.json"


def _parse(path: Path, run_dir: Path) -> tuple[dict, dict[str, list[tuple]]]:
    w = RankWriter(run_dir, "r", 0)
    meta = trace_view.parse_trace_view(path, w, kernels=True, comm_ops=True, write_steps=True)
    w.close()
    tables: dict[str, list[tuple]] = {}
    for table, rels in w.files.items():
        rows = []
        for rel in rels:
            t = pq.read_table(run_dir / rel)
            if "ts_ns" in t.column_names:
                ts = [x for x in t.column("ts_ns").to_pylist() if x is not None]
                assert ts == sorted(ts), rel
            rows += [
                tuple(json.dumps(v, sort_keys=True, default=str) for v in r.values()) for r in t.to_pylist()
            ]
        tables[table] = sorted(rows)
    assert {t: len(r) for t, r in tables.items()} == dict(w.rows)
    return meta, tables


def _force_pieces(monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    monkeypatch.setattr(trace_view, "PIECES_MIN_BYTES", 1 << 20)
    monkeypatch.setattr(trace_view, "PIECE_MIN_BYTES", 1 << 20)
    monkeypatch.setenv("TRACEQL_PARSE_WORKERS", str(workers))


def test_pieces_store_what_the_serial_reader_stores(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACEQL_PARSE_WORKERS", "1")
    serial_meta, serial = _parse(trace, tmp_path / "serial")
    assert "pieces" not in serial_meta
    assert {"kernels", "host_ops", "counters", "flows"} <= set(serial)
    _force_pieces(monkeypatch, 3)
    meta, pieces = _parse(trace, tmp_path / "pieces")
    assert meta.get("pieces") == 3
    assert pieces == serial
    for key in ("step_windows", "tracks", "rows", "reader"):
        assert meta[key] == serial_meta[key], key


def test_plan_cuts_between_events(trace: Path) -> None:
    data = trace.read_bytes()
    ranges = _json_pieces.plan(trace, len(data), 4)
    assert len(ranges) == 4 and ranges[0][0] == 0 and ranges[-1][1] == len(data)
    events = 0
    for k, (a, b) in enumerate(ranges):
        text = (b"" if k == 0 else b"[") + data[a:b] + (b"" if k == len(ranges) - 1 else b"]")
        events += len(json.loads(text))
    assert events == len(json.loads(data))  # every event in exactly one piece


def test_a_cut_inside_a_string_falls_back_to_the_serial_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name holding '}, {' where the planner cuts: piece 0 ends inside an open string, fails, and the file
    is read serially: the same rows as a serial read, and no piece's files left behind."""
    evil = 'x"}, {"ph": "X", "name": "forged", "pid": 2, "tid": 2, "ts": "1.000", "dur": 1, "args": {"a": "'
    events = [
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "Ascend Hardware"}},
        *[
            {"ph": "X", "name": f"op{i}", "pid": 2, "tid": 2, "ts": f"1736408883{i:06d}.000", "dur": 1.5,
             "args": {"Task Type": "AI_CORE", "Task Id": i}}
            for i in range(2000)
        ],
    ]  # fmt: skip
    events[1000]["name"] = evil
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(events))
    data = path.read_bytes()
    cut = data.rindex(b"}, {", 0, data.index(b"forged")) + 1  # inside the evil name (its quotes escaped)
    monkeypatch.setenv("TRACEQL_PARSE_WORKERS", "1")
    _, serial = _parse(path, tmp_path / "serial")
    _force_pieces(monkeypatch, 2)
    monkeypatch.setattr(_json_pieces, "plan", lambda p, size, n: [(0, cut), (cut + 2, size)])
    meta, got = _parse(path, tmp_path / "pieces")
    assert "pieces" not in meta  # read serially
    assert got == serial
    assert len(serial["kernels"]) == 2000 and any("forged" in "".join(r) for r in got["kernels"])
    assert not list((tmp_path / "pieces").rglob("*p0*")) and not list((tmp_path / "pieces").rglob("*p1*"))
