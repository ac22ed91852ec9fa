"""trace_view.json (torch_npu) / msprof_*.json: the event mapping, checked against real dumps.

Expected numbers come from an independent read of the same file in the test (`json.load` + counting), or
from the profiler's own summary files in the same dump (communication*.json), never from traceql's output.
"""

from __future__ import annotations

import gzip
import importlib
import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import LEVEL0, LEVEL1, SHARED, real

import traceql
from traceql.errors import BadTraceError
from traceql.parsers import detect
from traceql.parsers.trace_view import parse_trace_view
from traceql.rank_writer import RankWriter

TV1 = LEVEL1 / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
TV0 = [LEVEL0 / f"rank{r}_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json" for r in (0, 1)]
ADVISOR = SHARED / "Ascend__msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json"

# `traceql.ingest` the function is shadowed by the `traceql.ingest` module once that is imported elsewhere
# (see the helper's report); call the implementation directly.
ingest = importlib.import_module("traceql.ingest").ingest


def _events(path: Path) -> list[dict[str, Any]]:
    """Independent read: the whole file with json.load (fine for these small samples)."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _procs(evs: list[dict[str, Any]]) -> dict[int, str]:
    return {
        e["pid"]: e["args"]["name"] for e in evs if e.get("ph") == "M" and e.get("name") == "process_name"
    }


def _ingested(path: Path, tmp_path: Path, name: str = "tv") -> Any:
    store = tmp_path / "store"
    ingest(path, store=store, name=name)
    return traceql.connect(store)


def _one(con: Any, sql: str) -> Any:
    rows = con.execute(sql).fetchall()
    assert len(rows) == 1, rows
    row = rows[0]
    return row[0] if len(row) == 1 else row


# ---- level1 rank0: every table --------------------------------------------------------------------


@pytest.fixture(scope="module")
def level1(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[dict[str, Any]]]:
    path = real(TV1)
    evs = _events(path)
    return _ingested(path, tmp_path_factory.mktemp("l1")), evs


def test_level1_file_is_the_documented_sample() -> None:
    # formats.md §3 counts (grep-able: `grep -o '"ph": "X"' trace_view.json | wc -l` etc.)
    c = Counter(e["ph"] for e in _events(real(TV1)))
    assert (c["X"], c["C"], c["s"], c["f"], c["M"]) == (4384, 4431, 606, 611, 80)


def test_level1_row_counts(level1: tuple[Any, list[dict[str, Any]]]) -> None:
    con, evs = level1
    procs = _procs(evs)
    x = Counter(procs.get(e["pid"]) for e in evs if e["ph"] == "X")
    hccl_group = sum(1 for e in evs if e["ph"] == "X" and procs.get(e["pid"]) == "HCCL" and e["tid"] == 0)
    assert _one(con, "SELECT count(*) FROM host_ops") == x["Python"] + x["CANN"]  # 2460 + 707
    assert _one(con, "SELECT count(*) FROM host_ops WHERE cat = 'cann'") == x["CANN"]
    assert _one(con, "SELECT count(*) FROM kernels") == x["Ascend Hardware"]  # 535
    assert _one(con, "SELECT count(*) FROM comm_ops") == hccl_group == 4
    # one counter row per C event: every C event has one series (Acc PMU's acc_id is its channel)
    assert _one(con, "SELECT count(*) FROM counters") == sum(1 for e in evs if e["ph"] == "C")
    # every s has an f here, and one s may fan out to 2 f: one row per f
    assert _one(con, "SELECT count(*) FROM flows") == sum(1 for e in evs if e["ph"] == "f")
    assert _one(con, "SELECT count(*) FROM flows WHERE src_ts_ns IS NULL OR dst_ts_ns IS NULL") == 0


def test_level1_string_ts_is_exact_ns(level1: tuple[Any, list[dict[str, Any]]]) -> None:
    con, _ = level1
    # trans_TransData_0 on stream 2 is written with "ts": "1736408883704643.212", "dur": 53.7410625
    row = con.sql("SELECT ts_ns, dur_ns, stream_id FROM kernels WHERE name = 'trans_TransData_0'").fetchall()
    assert (1736408883704643212, 53741, 2) in row
    # the very first event: aten::empty "ts": "1736408883688177.930", "dur": 145.57
    assert _one(con, "SELECT min(ts_ns) FROM host_ops WHERE name = 'aten::empty'") == 1736408883688177930
    assert _one(con, "SELECT dur_ns FROM host_ops WHERE ts_ns = 1736408883688177930") == 145570


def test_level1_host_op_columns(level1: tuple[Any, list[dict[str, Any]]]) -> None:
    con, evs = level1
    # an enqueue event: args {"correlation_id": 8226} at ts "1736408883694756.090" (see formats.md sample)
    r = con.sql(
        "SELECT cat, correlation_id, extra FROM host_ops WHERE name = 'Enqueue' AND ts_ns = 1736408883694756090"
    ).fetchall()
    assert r == [("enqueue", 8226, {})]
    # CANN: level and connection_id
    r = con.sql(
        "SELECT level, correlation_id, extra['Mode'], extra['id'] FROM host_ops "
        "WHERE name = 'AscendCL@aclrtMemcpyAsync' AND ts_ns = 1736408883694795840"
    ).fetchall()
    assert r == [("acl", 936, "ACL_RTS", "aclrtMemcpyAsync")]
    # cpu_op: seq_num and the input dims/types with the \r\n separators removed; call stack kept in extra
    first = next(e for e in evs if e["ph"] == "X" and e["name"] == "aten::to")
    r = con.sql(
        f"SELECT seq_num, input_shapes, input_dtypes, extra['Call stack'] IS NOT NULL FROM host_ops "
        f"WHERE name = 'aten::to' AND ts_ns = {first['ts'].replace('.', '')}"
    ).fetchall()
    args = first["args"]
    assert r == [(args["Sequence number"], args["Input Dims"].replace("\r\n", ""),
                  args["Input type"].replace("\r\n", ""), True)]  # fmt: skip


def test_level1_kernel_columns(level1: tuple[Any, list[dict[str, Any]]]) -> None:
    con, evs = level1
    procs = _procs(evs)
    hw = [e for e in evs if e["ph"] == "X" and procs.get(e["pid"]) == "Ascend Hardware"]
    # task types as written, counted independently
    got = dict(con.sql("SELECT task_type, count(*) FROM kernels GROUP BY 1").fetchall())
    assert got == dict(Counter(e["args"]["Task Type"] for e in hw))
    e = hw[0]  # PROFILING_ENABLE on stream 0, Task Id 8, connection_id 1644, Subtask Id 4294967295
    r = con.sql(
        f"SELECT stream_id, task_id, model_id, connection_id, context_id, extra FROM kernels "
        f"WHERE name = {e['name']!r} AND ts_ns = {e['ts'].replace('.', '')}"
    ).fetchall()
    a = e["args"]
    assert r == [(e["tid"], a["Task Id"], a["Model Id"], a["connection_id"], None,
                  {"Physic Stream Id": str(a["Physic Stream Id"]), "Batch Id": str(a["Batch Id"])})]  # fmt: skip
    # HCCL sub-tasks carry Subtask Id 0, 1, 2... -> context_id
    assert _one(con, "SELECT count(*) FROM kernels WHERE context_id IS NOT NULL") == sum(
        1 for e in hw if e["args"]["Subtask Id"] != 4294967295
    )


def test_level1_counters_units(level1: tuple[Any, list[dict[str, Any]]]) -> None:
    con, evs = level1
    c = [e for e in evs if e["ph"] == "C"]
    hbm = next(e for e in c if e["name"] == "HBM 1/Read" and e["args"]["Read(MB/s)"] > 0)
    ts = hbm["ts"].replace(".", "")
    r = con.sql(
        f"SELECT track, channel, metric, unit, value FROM counters WHERE name = 'HBM 1/Read' AND ts_ns = {ts}"
    ).fetchall()
    assert r == [("HBM", "1", "read_bw", "bytes/s", pytest.approx(hbm["args"]["Read(MB/s)"] * 1e6))]
    mem = next(e for e in c if e["name"] == "Device/HBM")
    r = con.sql(
        f"SELECT channel, metric, unit, value FROM counters WHERE name = 'Device/HBM' AND ts_ns = {mem['ts'].replace('.', '')}"
    ).fetchall()
    assert r == [("Device", "hbm_used", "bytes", mem["args"]["KB"] * 1024)]
    # LLC "Hit Rate(%)" is written as a 0..1 fraction (max 0.927 in this file): kept as a ratio
    hits = [e["args"]["Hit Rate(%)"] for e in c if "Hit Rate" in e["name"]]
    assert max(hits) < 1
    assert _one(con, "SELECT max(value) FROM counters WHERE metric = 'read_hit_rate'") == max(hits)
    assert _one(con, "SELECT DISTINCT unit FROM counters WHERE metric = 'read_hit_rate'") == "ratio"
    # Acc PMU: {"value": v, "acc_id": n} -> channel n, one row per event
    acc = Counter(str(e["args"]["acc_id"]) for e in c if e["name"] == "read_bandwidth")
    assert (
        dict(
            con.sql(
                "SELECT channel, count(*) FROM counters WHERE name = 'read_bandwidth' GROUP BY 1"
            ).fetchall()
        )
        == acc
    )
    assert _one(con, "SELECT unit FROM counters WHERE track = 'AI Core Freq' LIMIT 1") == "MHz"


def test_level1_flows_keep_ids_as_text(level1: tuple[Any, list[dict[str, Any]]]) -> None:
    con, _ = level1
    # HostToDevice ids are strings, up to 20 digits (> int64): "40004068119343529983"
    r = con.sql(
        "SELECT src_pid, dst_tid, dst_ts_ns FROM flows WHERE cat = 'HostToDevice' AND flow_id = '40004068119343529983'"
    ).fetchall()
    assert r and all(x[2] == 1736408883704643212 for x in r)
    # torch_to_npu ids are big JSON integers: exact as text
    r = con.sql(
        "SELECT name, dst_ts_ns FROM flows WHERE cat = 'async_npu' AND flow_id = '1736408883704643212'"
    ).fetchall()
    assert r == [("torch_to_npu", 1736408883704643212)]
    # HostToDevice1404 has one s and two f events (one launch, two tasks)
    assert _one(con, "SELECT count(*) FROM flows WHERE cat = 'HostToDevice' AND flow_id = '1404'") == 2


def test_level1_comm_matches_the_profilers_communication_json(
    level1: tuple[Any, list[dict[str, Any]]],
) -> None:
    """Bytes/bandwidth aggregated from HCCL plane tasks equal what torch_npu wrote in communication*.json."""
    con, _ = level1
    out = real(TV1).parent
    comm = json.loads((out / "communication.json").read_text())["step50"]["collective"]
    for key, op in comm.items():
        if key == "Total Op Info":
            continue
        name = key.split("@")[0]
        hccs = op["Communication Bandwidth Info"]["HCCS"]
        row = con.execute(
            f"SELECT c.op_type, c.kind, c.group_name, c.bytes, b.bytes, b.transit_ns, b.bandwidth_bps "
            f"FROM comm_ops c JOIN comm_bandwidth b ON b.name = c.name AND b.transport = 'HCCS' WHERE c.name = '{name}'"
        ).fetchall()
        assert len(row) == 1, name
        row = row[0]
        op_type, kind, group, op_bytes, bw_bytes, transit_ns, bw = row
        assert (op_type, kind, group) == (
            "allreduce",
            "collective",
            "0",
        )  # thread name "Group 0 Communication"
        assert op_bytes == bw_bytes == round(hccs["Transit Size(MB)"] * 1e6)  # MB = 1e6 bytes in this file
        assert transit_ns == pytest.approx(hccs["Transit Time(ms)"] * 1e6, abs=50)  # ns rounding per task
        assert bw == pytest.approx(hccs["Bandwidth(GB/s)"] * 1e9, rel=1e-3)
    matrix = json.loads((out / "communication_matrix.json").read_text())["step50"]["collective"]
    checked = 0
    for links in matrix.values():
        for link, v in links.items():
            if "Op Name" not in v:
                continue
            src, dst = (int(x) for x in link.split("-"))
            got = con.sql(
                f"SELECT bytes, transport FROM comm_matrix WHERE op_name = '{v['Op Name']}' AND src_rank = {src} AND dst_rank = {dst}"
            ).fetchall()
            assert got == [(round(v["Transit Size(MB)"] * 1e6), v["Transport Type"])], (link, v)
            checked += 1
    assert checked > 20


def test_level1_step_window(level1: tuple[Any, list[dict[str, Any]]]) -> None:
    con, _ = level1
    # ProfilerStep#50: "ts": "1736408883686740.710", "dur": 155985.8
    assert con.sql("SELECT step, ts_ns, dur_ns FROM steps").fetchall() == [
        (50, 1736408883686740710, 155985800)
    ]


def test_parse_trace_view_flags_and_returned_meta(tmp_path: Path) -> None:
    w = RankWriter(tmp_path, "r", 0)
    meta = parse_trace_view(real(TV1), w, kernels=False, comm_ops=False, write_steps=False)
    w.close()
    assert meta["step_windows"] == {50: [1736408883686740710, 155985800]}
    assert meta["warnings"] == [] and meta["reader"] == "duckdb"
    assert "kernels" not in w.rows and "comm_ops" not in w.rows and "steps" not in w.rows
    assert "comm_matrix" not in w.rows and w.rows["host_ops"] == 3167


# ---- other real dumps --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [*TV0, ADVISOR], ids=["level0-rank0", "level0-rank1", "advisor"])
def test_other_real_dumps_row_counts(path: Path, tmp_path: Path) -> None:
    path = real(path)
    evs = _events(path)
    procs = _procs(evs)
    con = _ingested(path, tmp_path)
    x = Counter(procs.get(e["pid"]) for e in evs if e["ph"] == "X")
    host = sum(n for p, n in x.items() if p not in ("Ascend Hardware", "HCCL", "Overlap Analysis"))
    assert _one(con, "SELECT count(*) FROM host_ops") == host
    assert _one(con, "SELECT count(*) FROM kernels") == x["Ascend Hardware"]
    assert _one(con, "SELECT count(*) FROM counters") == sum(1 for e in evs if e["ph"] == "C")
    assert _one(con, "SELECT count(*) FROM comm_ops") == x["HCCL"]  # level0: only the group ops
    f_keys = Counter((e["cat"], str(e["id"])) for e in evs if e["ph"] == "f")
    s_keys = {(e["cat"], str(e["id"])) for e in evs if e["ph"] == "s"}
    expected_flows = sum(f_keys.values()) + len(s_keys - set(f_keys))
    assert _one(con, "SELECT count(*) FROM flows") == expected_flows
    steps = [e for e in evs if e["ph"] == "X" and e["name"].startswith("ProfilerStep#")]
    assert con.sql("SELECT step, ts_ns FROM steps").fetchall() == [
        (int(s["name"].split("#")[1]), int(s["ts"].replace(".", ""))) for s in steps
    ]


# ---- the ijson path gives the same rows ---------------------------------------------------------------


def _tables(path: Path, tmp: Path) -> dict[str, list[tuple[Any, ...]]]:
    w = RankWriter(tmp, "r", 0)
    parse_trace_view(path, w, kernels=True, comm_ops=True, write_steps=True)
    w.close(sort=False)
    import duckdb

    out = {}
    for table, rels in w.files.items():
        # `source` names the file (trace_view.json vs .json.gz): not part of the comparison
        cols = "* EXCLUDE (run_id, source)" if table in ("comm_ops", "steps") else "* EXCLUDE (run_id)"
        files = ", ".join(f"'{tmp / rel}'" for rel in rels)  # every part of the table
        rows = duckdb.sql(f"SELECT {cols} FROM read_parquet([{files}])").fetchall()
        out[table] = sorted(rows, key=repr)
    return out


def test_gzip_and_numeric_ts_take_ijson_and_agree_with_duckdb(tmp_path: Path) -> None:
    src = real(TV1)
    fast = _tables(src, tmp_path / "fast")
    gz = tmp_path / "trace_view.json.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    assert _tables(gz, tmp_path / "gz") == fast
    # the same file with numeric ts (as some writers do): exact through ijson's Decimal
    numeric = tmp_path / "numeric" / "trace_view.json"
    numeric.parent.mkdir()
    numeric.write_text(re.sub(r'"ts": "([0-9.]+)"', r'"ts": \1', src.read_text()))
    got = _tables(numeric, tmp_path / "num")
    assert got == fast


def test_numeric_ts_later_in_the_file_switches_to_ijson(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """String ts at the head but numeric ones further down: the pre-scan notices, ijson keeps them exact."""
    from traceql.parsers import _chrome_json as cj

    src = real(TV1)
    fast = _tables(src, tmp_path / "fast")
    text = src.read_text()
    half = len(text) // 2
    mixed = tmp_path / "mixed" / "trace_view.json"
    mixed.parent.mkdir()
    mixed.write_text(text[:half] + re.sub(r'"ts": "([0-9.]+)"', r'"ts": \1', text[half:]))
    monkeypatch.setattr(cj, "CHUNK", 1 << 16)  # the probe looks at the ends of each chunk
    w = RankWriter(tmp_path / "m", "r", 0)
    assert parse_trace_view(mixed, w, kernels=True, comm_ops=True, write_steps=True)["reader"] == "ijson"
    w.close(sort=False)
    assert _tables(mixed, tmp_path / "mixed2") == fast


def test_duckdb_out_of_memory_on_a_huge_event_falls_back_to_ijson(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One event holding a 20 MB string: with too little DuckDB memory the fast reader fails before any row
    is written, and the file is read with ijson instead (same rows as usual, a warning says so)."""
    from traceql.parsers import _chrome_json as cj

    evs = _events(real(ADVISOR))
    evs[5]["args"]["Call stack"] = "x" * 20_000_000
    p = tmp_path / "trace_view.json"
    p.write_text(json.dumps(evs))
    monkeypatch.setattr(cj, "DUCK_MEMORY_LIMIT", "64MB")
    w = RankWriter(tmp_path / "w", "r", 0)
    meta = parse_trace_view(p, w, kernels=True, comm_ops=True, write_steps=True)
    w.close(sort=False)
    assert meta["reader"] == "ijson" and "ran out of memory" in meta["warnings"][0]
    procs = _procs(evs)
    assert w.rows["host_ops"] == sum(
        1 for e in evs if e["ph"] == "X" and procs.get(e["pid"]) in ("Python", "CANN")
    )


# ---- claim / detection -------------------------------------------------------------------------------


def test_standalone_parser_claims_trace_view_and_msprof_json(tmp_path: Path) -> None:
    assert [u.parser for u in detect(real(TV1))] == ["trace_view"]
    m = tmp_path / "msprof_20250101.json"
    shutil.copy(real(TV1), m)
    assert [u.parser for u in detect(m)] == ["trace_view"]


def test_unrelated_json_array_is_not_claimed(tmp_path: Path) -> None:
    from traceql.parsers.trace_view import looks_like_trace_view

    p = tmp_path / "data.json"
    p.write_text('[{"a": 1}, {"b": 2}]')
    assert not looks_like_trace_view(p)


# ---- bad input -----------------------------------------------------------------------------------------


def _tv(tmp_path: Path, data: bytes, name: str = "trace_view.json") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_truncated_trace_view_fails_fast_with_offset(tmp_path: Path) -> None:
    data = real(TV1).read_bytes()
    p = _tv(tmp_path, data[: len(data) // 2])
    with pytest.raises(BadTraceError, match=rf"truncated JSON: the file ends at byte {len(data) // 2}") as ei:
        ingest(p, store=tmp_path / "s")
    assert str(p) in str(ei.value)


def test_truncated_gzip_trace_view(tmp_path: Path) -> None:
    z = gzip.compress(real(TV1).read_bytes())
    p = _tv(tmp_path, z[: len(z) * 2 // 3], "trace_view.json.gz")
    with pytest.raises(BadTraceError, match="truncated gzip"):
        ingest(p, store=tmp_path / "s")


def test_non_utf8_byte_in_trace_view(tmp_path: Path) -> None:
    data = real(TV1).read_bytes().replace(b'"aten::empty"', b'"aten::em\xffpty"', 1)
    p = _tv(tmp_path, data)
    with pytest.raises(BadTraceError, match="not UTF-8") as ei:
        ingest(p, store=tmp_path / "s")
    assert str(p) in str(ei.value)


def test_malformed_middle_of_trace_view(tmp_path: Path) -> None:
    data = real(TV1).read_bytes().replace(b'"cat": "cpu_op"', b'"cat" "cpu_op"', 1)
    with pytest.raises(BadTraceError, match="malformed JSON"):
        ingest(_tv(tmp_path, data), store=tmp_path / "s")


@pytest.mark.parametrize(
    ("data", "want"),
    [
        (b"", "empty file"),
        (b'{"not": "a trace"}', "expected a Chrome trace"),
        (b"[]", "no trace events"),
    ],
)
def test_wrong_root_or_empty_trace_view(tmp_path: Path, data: bytes, want: str) -> None:
    w = RankWriter(tmp_path, "r", 0)
    with pytest.raises(BadTraceError, match=want):
        parse_trace_view(_tv(tmp_path, data), w, kernels=True, comm_ops=True, write_steps=True)


def test_wrong_root_through_ingest_is_one_clear_error(tmp_path: Path) -> None:
    p = _tv(tmp_path, b'{"not": "a trace"}')
    with pytest.raises(BadTraceError, match="not a recognised profiler dump"):
        ingest(p, store=tmp_path / "s")


# ---- counters: one time-ordered part per track instead of the post-write sort ------------------------


def _counter_blocks(blocks: list[tuple[int, list[str]]]) -> bytes:
    """C events of two counter processes (HBM, QoS), written in blocks that interleave, each process's samples
    in time order (as a real level1 trace_view writes them)."""
    evs: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "HBM"}},
        {"ph": "M", "name": "process_name", "pid": 20, "tid": 0, "args": {"name": "QoS"}},
    ]
    for pid, stamps in blocks:
        name, key = ("HBM 0/Read", "Read(MB/s)") if pid == 10 else ("QoS 0", "value")
        evs += [
            {"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": ts, "args": {key: 1.5}} for ts in stamps
        ]
    return json.dumps(evs).encode()


def test_interleaved_counter_tracks_go_to_ordered_parts_without_a_sort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expected values by hand: HBM samples at 1.000, 3.000, 5.000, 7.000 us, QoS at 2.000, 4.000, 6.000 us, in
    blocks HBM(1,3) QoS(2,4) HBM(5,7) QoS(6): out of order as a whole, in order per track."""
    import pyarrow.parquet as pq

    import traceql.rank_writer as rw_mod

    sorted_files: list[str] = []
    real_sort = rw_mod.sort_parquet_by_time
    monkeypatch.setattr(
        rw_mod, "sort_parquet_by_time", lambda p, *more: (sorted_files.append(str(p)), real_sort(p, *more))
    )
    blocks = [(10, ["1.000", "3.000"]), (20, ["2.000", "4.000"]), (10, ["5.000", "7.000"]), (20, ["6.000"])]
    path = _tv(tmp_path, _counter_blocks(blocks))
    w = RankWriter(tmp_path / "run", "r", 0)
    parse_trace_view(path, w, kernels=True, comm_ops=True, write_steps=False)
    w.close()
    assert sorted_files == []
    by_file = {
        rel: pq.read_table(tmp_path / "run" / rel).select(["track", "ts_ns"]).to_pylist()
        for rel in w.files["counters"]
    }
    assert sorted(by_file.values(), key=lambda rows: rows[0]["track"]) == [
        [{"track": "HBM", "ts_ns": t} for t in (1000, 3000, 5000, 7000)],
        [{"track": "QoS", "ts_ns": t} for t in (2000, 4000, 6000)],
    ]


def test_counter_tracks_in_time_order_keep_one_file(tmp_path: Path) -> None:
    """Samples in time order across both tracks: one counters file, as before parts existed (by hand)."""
    path = _tv(tmp_path, _counter_blocks([(10, ["1.000"]), (20, ["2.000"]), (10, ["3.000"])]))
    w = RankWriter(tmp_path / "run", "r", 0)
    parse_trace_view(path, w, kernels=True, comm_ops=True, write_steps=False)
    w.close()
    assert w.files["counters"] == ["counters/r0-0.parquet"] and w.rows["counters"] == 3


def test_level1_counters_are_parts_in_time_order(tmp_path: Path) -> None:
    """The real level1 file: 7 counter processes whose blocks interleave. Every counters file is in time order
    as written (read back with close(sort=False)) and together they hold every C sample of the file (counted
    with json.load)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = real(TV1)
    c_events = sum(1 for e in _events(path) if e["ph"] == "C")
    w = RankWriter(tmp_path / "run", "r", 0)
    parse_trace_view(path, w, kernels=True, comm_ops=True, write_steps=False)
    w.close(sort=False)
    assert len(w.files["counters"]) > 2  # the tracks' parts and the `(%)` part
    total = 0
    for rel in w.files["counters"]:
        ts = pq.read_table(tmp_path / "run" / rel).column("ts_ns").combine_chunks()
        total += len(ts)
        assert pc.all(pc.greater_equal(ts.slice(1), ts.slice(0, len(ts) - 1))).as_py(), rel
    assert total == c_events


# ---- host ops: end-time order, written in start-time order through RankWriter's reorder window ---------------


def _host_calls(steps: int, very_late: bool) -> bytes:
    """X events of a Python host process as a profiler writes them: when each call ends, so a parent comes after
    its children (end-time order) and out of start-time order. Each step: 40 top-level calls of 2 children of
    1 grandchild each, then the step's own ProfilerStep event, which starts before all of them. very_late: one
    call spanning every step, written at the very end (a parent far behind the rest)."""
    evs: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "Python"}}
    ]

    def call(name: str, ts: int, dur: int) -> None:
        evs.append({"ph": "X", "name": name, "pid": 7, "tid": 1, "ts": f"{ts}.125", "dur": f"{dur}.5"})

    t = 1000
    for s in range(steps):
        step_start = t
        for c in range(40):
            top = t
            for k in range(2):
                call(f"grand{s}.{c}.{k}", t + 2, 3)  # inside its child
                call(f"child{s}.{c}.{k}", t + 1, 10)
                t += 12
            call(f"top{s}.{c}", top, t - top)
            t += 5
        call(f"ProfilerStep#{s}", step_start, t - step_start)
        t += 100
    if very_late:
        call("epoch", 500, t - 500)
    return json.dumps(evs).encode()


@pytest.mark.parametrize("very_late", [False, True])
def test_host_ops_in_end_time_order_are_written_in_time_order_without_a_spill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, very_late: bool
) -> None:
    """Host ops in end-time order, over ~25 writes of 2048 rows (a step: 201 rows, so the stream goes back in time
    by less than one write): every row is written to host_ops/r0-0.parquet in start-time order as it comes, none
    spilled and the file not sorted afterwards (the spill and the post-write sort took every row of a real
    trace_view's host ops). very_late: the one call that starts before everything written is the only row of the
    late part, spilled and sorted on its own. Expected rows: the JSON read with json.load, `ts`/`dur` text to ns
    with Decimal; not traceql's output."""
    from decimal import Decimal

    import pyarrow.parquet as pq

    import traceql.parsers.trace_view as tv
    import traceql.rank_writer as rw_mod

    monkeypatch.setattr(tv, "BATCH_ROWS", 2048)
    monkeypatch.setattr(tv, "WRITE_ROWS", 2048)
    spilled: list[tuple[str, int]] = []
    real_spill = RankWriter._spill
    monkeypatch.setattr(
        RankWriter,
        "_spill",
        lambda self, rel, t: (spilled.append((rel, t.num_rows)), real_spill(self, rel, t)),
    )
    sorted_files: list[str] = []
    real_sort = rw_mod.sort_parquet_by_time
    monkeypatch.setattr(
        rw_mod, "sort_parquet_by_time", lambda p, *more: (sorted_files.append(p.name), real_sort(p, *more))
    )
    writes: list[int] = []
    real_write = RankWriter.write
    monkeypatch.setattr(
        RankWriter,
        "write",
        lambda self, table, data, *a, **k: (
            writes.append(len(data)) if table == "host_ops" else None,
            real_write(self, table, data, *a, **k),
        ),
    )
    path = _tv(tmp_path, _host_calls(250, very_late))
    w = RankWriter(tmp_path / "run", "r", 0)
    parse_trace_view(path, w, kernels=True, comm_ops=True, write_steps=False)
    w.close()

    def ns(text: str) -> int:
        return int(Decimal(text) * 1000)

    expected = sorted((e["name"], ns(e["ts"]), ns(e["dur"])) for e in _events(path) if e["ph"] == "X")
    late = [r for r in expected if r[0] == "epoch"]
    assert len(expected) == 250 * 201 + len(late) and len(writes) > 20
    got: dict[str, list[tuple[str, int, int]]] = {}
    for rel in w.files["host_ops"]:
        rows = pq.read_table(tmp_path / "run" / rel, columns=["name", "ts_ns", "dur_ns"]).to_pylist()
        got[rel] = [(r["name"], r["ts_ns"], r["dur_ns"]) for r in rows]
        assert [r[1] for r in got[rel]] == sorted(r[1] for r in got[rel]), rel  # each file in time order
    assert sorted(r for rows in got.values() for r in rows) == expected
    if very_late:
        assert list(got) == ["host_ops/r0-0.parquet", "host_ops/r0-0-late.parquet"]
        assert got["host_ops/r0-0-late.parquet"] == late
        assert spilled == [("host_ops/r0-0-late.parquet", 1)] and sorted_files == ["r0-0-late.parquet"]
    else:
        assert list(got) == ["host_ops/r0-0.parquet"] and spilled == [] and sorted_files == []


# ---- HCCL plane tasks -> bytes per group op, comm_matrix, comm_bandwidth ---------------------------------


def test_plane_tasks_assigned_to_their_group_op_by_hand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two allReduce ops on one HCCL group thread (10-20 us, 30-40 us) and plane tasks: data tasks inside each,
    a notify task (size 0), a local copy (dst rank 4294967295 -> LOCAL, not link bytes) and a task between the
    ops (no op). Expected by hand: op 1 moves 100 bytes over HCCS, op 2 40 over HCCS plus 60 over RDMA; the
    local copy is a LOCAL matrix cell only. Tasks are turned into rows one slice at a time: a 2-row slice puts
    the slice boundaries between the tasks of one op."""
    import duckdb

    import traceql.parsers.trace_view as tv

    def task(ts: str, dur: float, size: int, dst: int, transport: str, link: str) -> dict[str, Any]:
        args = {
            "src rank": 0,
            "dst rank": dst,
            "size(Byte)": size,
            "transport type": transport,
            "link type": link,
        }
        return {"ph": "X", "name": "Memcpy", "pid": 5, "tid": 1, "ts": ts, "dur": dur, "args": args}

    evs: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 5, "tid": 0, "args": {"name": "HCCL"}},
        {"ph": "M", "name": "thread_name", "pid": 5, "tid": 0, "args": {"name": "Group 7 Communication"}},
        {"ph": "M", "name": "thread_name", "pid": 5, "tid": 1, "args": {"name": "Plane 0"}},
        {"ph": "X", "name": "hcom_allReduce__1_0_1", "pid": 5, "tid": 0, "ts": "10.000", "dur": 10.0},
        {"ph": "X", "name": "hcom_allReduce__2_0_1", "pid": 5, "tid": 0, "ts": "30.000", "dur": 10.0},
        task("11.000", 1.0, 60, 1, "SDMA", "HCCS"),
        task("12.000", 0.5, 0, 1, "SDMA", "HCCS"),  # notify: no bytes
        task("13.000", 1.0, 40, 1, "SDMA", "HCCS"),
        task("14.000", 2.0, 50, 4294967295, "SDMA", "ON_CHIP"),  # local copy
        task("25.000", 1.0, 999, 1, "SDMA", "HCCS"),  # between the ops: no op
        task("31.000", 1.0, 40, 1, "SDMA", "HCCS"),
        task("32.000", 3.0, 60, 2, "RDMA", "INVALID_TYPE"),
    ]
    path = _tv(tmp_path, json.dumps(evs).encode())
    real_rows_of = tv._rows_of
    monkeypatch.setattr(tv, "_rows_of", lambda table, slice_rows=2: real_rows_of(table, slice_rows))
    w = RankWriter(tmp_path / "run", "r", 0)
    parse_trace_view(path, w, kernels=True, comm_ops=True, write_steps=False)
    w.close()

    def rows(table: str, cols: str) -> list[tuple[Any, ...]]:
        files = ", ".join(f"'{tmp_path / 'run' / rel}'" for rel in w.files[table])
        return duckdb.sql(f"SELECT {cols} FROM read_parquet([{files}]) ORDER BY ALL").fetchall()

    assert rows("comm_ops", "name, group_name, bytes") == [
        ("hcom_allReduce__1_0_1", "7", 100),
        ("hcom_allReduce__2_0_1", "7", 100),
    ]
    assert rows("comm_matrix", "op_name, src_rank, dst_rank, transport, bytes, transit_ns") == [
        ("hcom_allReduce__1_0_1", 0, 0, "LOCAL", 50, 2000),
        ("hcom_allReduce__1_0_1", 0, 1, "HCCS", 100, 2000),
        ("hcom_allReduce__2_0_1", 0, 1, "HCCS", 40, 1000),
        ("hcom_allReduce__2_0_1", 0, 2, "RDMA", 60, 3000),
    ]
    assert rows("comm_bandwidth", "name, transport, bytes, transit_ns") == [
        ("hcom_allReduce__1_0_1", "HCCS", 100, 2000),
        ("hcom_allReduce__1_0_1", "SDMA", 100, 2000),
        ("hcom_allReduce__2_0_1", "HCCS", 40, 1000),
        ("hcom_allReduce__2_0_1", "RDMA", 60, 3000),
        ("hcom_allReduce__2_0_1", "SDMA", 40, 1000),
    ]
