"""SQLite exports: torch_npu_db (ascend_pytorch_profiler_*.db + analysis.db) and msprof_db (msprof_*.db).

Where expected numbers come from (never from the parser's output):
- "sqlite3:" a direct query with Python's sqlite3 module inside the test (plain SQL over the file, no
  traceql code involved);
- "CLI:" a constant read with the sqlite3 command-line shell while writing the test (the query is quoted);
- "csv:" counted/summed from the text export with Python's csv module;
- "hand:" worked out in the comment.
"""

from __future__ import annotations

import csv
import shutil
import sqlite3
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DB_LEVEL1, LEVEL1, MSI, real

DB0_DIR = DB_LEVEL1 / "rank0_ascend_pt"
DB0 = DB0_DIR / "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
AN0 = DB0_DIR / "ASCEND_PROFILER_OUTPUT/analysis.db"
TEXT0 = LEVEL1 / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
MSPROF0 = MSI / "server/src/test/test_data/full_db/msprof_0.db"


# --------------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------------
def _ingest(path: Path, store: Path, name: str) -> dict[str, Any]:
    from traceql.ingest import ingest

    return ingest(path, store, name=name, workers=1)


def _q(store: Path, sql: str) -> list[dict[str, Any]]:
    import pyarrow as pa

    from traceql._duck import arrow_table
    from traceql.engine import connect
    from traceql.store import Store

    t = arrow_table(connect(Store(store)).sql(sql))
    maps = [f.name for f in t.schema if pa.types.is_map(f.type)]
    rows = t.to_pylist()
    for r in rows:  # Arrow gives maps as lists of (key, value) pairs
        for m in maps:
            r[m] = None if r[m] is None else dict(r[m])
    return rows


def _sq(db: Path, sql: str) -> list[tuple[Any, ...]]:
    """sqlite3: a plain read-only query on the export."""
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _us_ns(text: str) -> int:
    return int((Decimal(text.strip()) * 1000).to_integral_value())


def _make_db(path: Path, tables: dict[str, tuple[str, list[tuple[Any, ...]]]]) -> Path:
    """A tiny SQLite export: {table: (column definitions, rows)}."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    for name, (cols, rows) in tables.items():
        con.execute(f"CREATE TABLE {name} ({cols})")
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def rank0(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real level1 rank0 db export (ascend_pytorch_profiler_0.db + analysis.db), ingested once."""
    store = tmp_path_factory.mktemp("db0") / "store"
    _ingest(real(DB0_DIR), store, "db0")
    return store


# --------------------------------------------------------------------------------------------------------
# torch_npu db, real level1 rank0
# --------------------------------------------------------------------------------------------------------
@pytest.mark.real
def test_rank0_row_counts_per_table(rank0: Path) -> None:
    n = lambda sql: _sq(DB0, sql)[0][0]  # noqa: E731  sqlite3
    kernels = n("SELECT count(*) FROM COMPUTE_TASK_INFO c JOIN TASK t USING (globalTaskId)") + n(
        "SELECT count(*) FROM COMMUNICATION_OP"
    )
    assert kernels == 191  # and kernel_details.csv of the text export has 191 rows (csv, test below)
    host = n("SELECT count(*) FROM PYTORCH_API") + n("SELECT count(*) FROM CANN_API")  # 2460 + 710
    # counters: HBM 104 samples, LLC 26 x (hit rate, throughput), AICORE_FREQ 3, ACC_PMU 688 x 4 levels,
    # SOC_BANDWIDTH_LEVEL 16 x 2, NPU_MEM 28 x (ddr, hbm, ddr+hbm)
    counters = (
        n("SELECT count(*) FROM HBM")
        + 2 * n("SELECT count(*) FROM LLC")
        + n("SELECT count(*) FROM AICORE_FREQ")
        + 4 * n("SELECT count(*) FROM ACC_PMU")
        + 2 * n("SELECT count(*) FROM SOC_BANDWIDTH_LEVEL")
        + 3 * n("SELECT count(*) FROM NPU_MEM")
    )
    # memory: MEMORY_RECORD + the NPU_MEM 'app' samples (memory_record.csv's APP rows) + OP_MEMORY
    # + NPU_MODULE_MEM + NPU_OP_MEM
    app = n("SELECT count(*) FROM NPU_MEM m JOIN STRING_IDS s ON s.id = m.type WHERE s.value = 'app'")
    memory = sum(
        n(f"SELECT count(*) FROM {t}") for t in ("MEMORY_RECORD", "OP_MEMORY", "NPU_MODULE_MEM", "NPU_OP_MEM")
    )
    # flows: MindStudio Insight's own classification of the connection ids, stored in the db (connectionCats)
    flows = n("SELECT count(*) FROM connectionCats")
    got = {r["t"]: r["n"] for r in _q(rank0, """
        SELECT 'kernels' t, count(*) n FROM kernels UNION ALL SELECT 'host_ops', count(*) FROM host_ops
        UNION ALL SELECT 'counters', count(*) FROM counters UNION ALL SELECT 'memory', count(*) FROM memory
        UNION ALL SELECT 'flows', count(*) FROM flows UNION ALL SELECT 'comm_ops', count(*) FROM comm_ops
        UNION ALL SELECT 'comm_bandwidth', count(*) FROM comm_bandwidth UNION ALL SELECT 'comm_matrix', count(*) FROM comm_matrix
        UNION ALL SELECT 'steps', count(*) FROM steps""")}  # fmt: skip
    assert got == {
        "kernels": kernels,
        "host_ops": host,
        "counters": counters,
        "memory": memory + app,
        "flows": flows,
        # analysis.db: 4 ops; bandwidth one row per (op, transport) = 4 x (HCCS, SDMA); matrix 48 rows
        "comm_ops": n("SELECT count(*) FROM COMMUNICATION_OP"),
        "comm_bandwidth": _sq(AN0, "SELECT count(*) FROM (SELECT DISTINCT hccl_op_name, transport_type FROM CommAnalyzerBandwidth)")[0][0],
        "comm_matrix": _sq(AN0, "SELECT count(*) FROM CommAnalyzerMatrix")[0][0],
        "steps": 1,
    }  # fmt: skip
    assert (host, counters, memory + app, flows) == (3170, 3027, 2380, 568)


@pytest.mark.real
def test_rank0_hand_checked_kernel(rank0: Path) -> None:
    # CLI: SELECT t.*, c.* FROM COMPUTE_TASK_INFO c JOIN TASK t USING(globalTaskId) JOIN STRING_IDS s ON s.id=c.name
    #      WHERE s.value='Conv2D1'; TASK_PMU_INFO of that task (globalTaskId 5)
    (k,) = _q(rank0, "SELECT * FROM kernels WHERE name = 'Conv2D1'")
    assert (k["ts_ns"], k["dur_ns"], k["wait_ns"]) == (
        1736410576404719328,
        1736410576405033995 - 1736410576404719328,
        93102,
    )
    assert (k["op_type"], k["task_type"], k["stream_id"], k["task_id"], k["connection_id"]) == (
        "Conv2D",
        "AI_CORE",
        2,
        11065,
        964,
    )
    assert (k["block_dim"], k["mix_block_dim"], k["model_id"], k["context_id"], k["step"]) == (
        16,
        0,
        4294967295,
        None,
        50,
    )
    assert (
        k["input_shapes"] == "32,1,224,224,8;121,4,16,8;64"
    )  # STRING_IDS '"32,1,224,224,8;..."', quotes stripped
    assert (k["input_formats"], k["output_shapes"]) == ("NC1HWC0;FRACTAL_Z;NCHW", "32,8,55,55,8")
    assert k["aicore_time_ns"] == 311573  # aic_total_time 311573.402777778 (ns in the db)
    assert k["aiv_time_ns"] == 0
    assert k["mac_ratio"] == pytest.approx(
        162227.777777778 / 311573.402777778, rel=1e-9
    )  # aic_mac_time / total
    assert k["mte2_ratio"] == pytest.approx(284970.625 / 311573.402777778, rel=1e-9)
    assert k["metrics"]["aic_total_cycles"] == 8973314
    assert k["hbm_read_bytes"] is None  # PipeUtilization has no memory metrics
    assert k["extra"]["hw_task_type"] == "KERNEL_AICORE" and not k["is_comm"]


@pytest.mark.real
def test_rank0_hccl_ops_are_kernels_and_comm_ops(rank0: Path) -> None:
    # CLI: SELECT s.value, startNs, endNs, waitNs, connectionId FROM COMMUNICATION_OP JOIN STRING_IDS s ON s.id=opName
    k = _q(rank0, "SELECT * FROM kernels WHERE is_comm ORDER BY ts_ns")
    assert [r["name"] for r in k] == [f"hcom_allReduce__210_{i}_1" for i in range(4)]
    assert (k[0]["ts_ns"], k[0]["dur_ns"], k[0]["wait_ns"], k[0]["connection_id"]) == (
        1736410576431631806,
        88750993,
        693394,
        1175,
    )
    assert {r["task_type"] for r in k} == {"HCCL"} and {r["op_type"] for r in k} == {"hcom_allReduce_"}
    c = _q(rank0, "SELECT * FROM comm_ops ORDER BY ts_ns")[0]
    # analysis.db CommAnalyzerTime (ms): elapse 88.75099321875, transit 0.22856459375, wait 3.56889128125,
    # synchronization 3.51773028125, idle 84.95353734375 -> ns rounded (hand)
    assert (c["dur_ns"], c["transit_ns"], c["wait_ns"], c["sync_ns"], c["idle_ns"]) == (
        88750993,
        228565,
        3568891,
        3517730,
        84953537,
    )
    assert (
        c["ts_ns"] == 1736410576431631806
    )  # from COMMUNICATION_OP (analysis start_timestamp is a rounded double)
    assert (c["op_type"], c["kind"], c["group_name"], c["step"]) == (
        "allreduce",
        "collective",
        "17148521525495523210",
        50,
    )
    assert (
        c["bytes"] == 28647232
    )  # HCCS transit_size 28.647232 MB (SDMA row is the same bytes again: not added)
    assert c["source"].startswith("analysis.db")


@pytest.mark.real
def test_rank0_step_split_from_analysis_db_in_microseconds(rank0: Path) -> None:
    (s,) = _q(rank0, "SELECT * FROM steps")
    # CLI analysis.db: StepTraceTime 50|8903.431|98071.947|4036.153|102108.1|25258.144|132233.522|0|98071.947|18055.693
    # STEP_TIME: 50|1736410576386409710|1736410576538298460
    assert s["step"] == 50
    assert (s["ts_ns"], s["dur_ns"]) == (1736410576386409710, 1736410576538298460 - 1736410576386409710)
    assert (s["computing_ns"], s["comm_not_overlapped_ns"], s["overlapped_ns"], s["comm_ns"]) == (
        8903431,
        98071947,
        4036153,
        102108100,
    )
    assert (s["free_ns"], s["stage_ns"], s["bubble_ns"], s["preparing_ns"]) == (
        25258144,
        132233522,
        0,
        18055693,
    )
    # µs is the unit: computing = the compute kernels' total, communication = the HCCL ops' total (sqlite3)
    compute = _sq(
        DB0, "SELECT sum(t.endNs - t.startNs) FROM COMPUTE_TASK_INFO c JOIN TASK t USING (globalTaskId)"
    )[0][0]
    comm = _sq(DB0, "SELECT sum(endNs - startNs) FROM COMMUNICATION_OP")[0][0]
    assert (s["computing_ns"], s["comm_ns"]) == (compute, comm)


@pytest.mark.real
def test_rank0_string_ids_lookups(rank0: Path) -> None:
    # sqlite3: names, op types and core types through STRING_IDS, as a multiset
    want = Counter(
        _sq(DB0, """SELECT n.value, o.value, tt.value FROM COMPUTE_TASK_INFO c JOIN TASK t USING (globalTaskId)
                    JOIN STRING_IDS n ON n.id = c.name JOIN STRING_IDS o ON o.id = c.opType
                    JOIN STRING_IDS tt ON tt.id = c.taskType""")
    )  # fmt: skip
    got = Counter(
        (r["name"], r["op_type"], r["task_type"])
        for r in _q(rank0, "SELECT * FROM kernels WHERE NOT is_comm")
    )
    assert got == want
    levels = dict(
        _sq(DB0, "SELECT e.name, count(*) FROM CANN_API c JOIN ENUM_API_TYPE e ON e.id = c.type GROUP BY 1")
    )
    got_levels = {
        r["level"]: r["n"]
        for r in _q(rank0, "SELECT level, count(*) n FROM host_ops WHERE cat = 'cann' GROUP BY 1")
    }
    assert got_levels == levels == {"acl": 515, "hccl": 4, "node": 191}
    # names carry trace_view.json's level prefix (text export: 'Node@launch', 'AscendCL@...', 'Hccl@Launch_Ffts')
    names = Counter(r["name"] for r in _q(rank0, "SELECT name FROM host_ops WHERE cat = 'cann'"))
    # CLI: SELECT count(*) FROM CANN_API JOIN STRING_IDS s ON s.id = name WHERE s.value = launch / Launch_Ffts / ...
    assert (names["Node@launch"], names["Hccl@Launch_Ffts"], names["AscendCL@aclrtMemcpyAsync"]) == (
        191,
        4,
        2,
    )


@pytest.mark.real
def test_rank0_pytorch_api_text_times_are_exact(rank0: Path) -> None:
    # sqlite3: PYTORCH_API.startNs/endNs are TEXT; int() of the text is the exact ns value
    rows = _sq(DB0, "SELECT startNs, endNs FROM PYTORCH_API")
    assert all(isinstance(a, str) for a, _ in rows)
    want = sorted((int(a), int(b) - int(a)) for a, b in rows)
    got = sorted(
        (r["ts_ns"], r["dur_ns"])
        for r in _q(
            rank0,
            "SELECT ts_ns, dur_ns FROM host_ops WHERE cat IN ('cpu_op', 'enqueue', 'dequeue', 'python_function')",
        )
    )
    assert got == want
    # dims and types: this writer stores them swapped (inputDtypes holds the dims); trace_view's
    # 'Input Dims' of aten::conv2d in the text export of the same job starts with 32,3,224,224
    (conv,) = _q(rank0, "SELECT * FROM host_ops WHERE name = 'aten::conv2d' LIMIT 1")
    assert conv["input_shapes"].startswith("32,3,224,224;") and conv["input_dtypes"].startswith("float;")
    assert conv["seq_num"] == 1350 and "Call stack" in conv["extra"]


@pytest.mark.real
def test_rank0_flows_match_msinsight_connection_categories(rank0: Path) -> None:
    # sqlite3: connectionCats is MindStudio Insight's own categorisation of the same connection ids
    want = dict(_sq(DB0, "SELECT cat, count(*) FROM connectionCats GROUP BY 1"))
    got = {r["cat"]: r["n"] for r in _q(rank0, "SELECT cat, count(*) n FROM flows GROUP BY 1")}
    assert got == want == {"HostToDevice": 191, "async_npu": 191, "async_task_queue": 159, "fwdbwd": 27}
    # and per id, the same category
    ids = {(str(c), cat) for c, cat in _sq(DB0, "SELECT connectionId, cat FROM connectionCats")}
    assert {(r["flow_id"], r["cat"]) for r in _q(rank0, "SELECT flow_id, cat FROM flows")} == ids


@pytest.mark.real
def test_rank0_counters_units(rank0: Path) -> None:
    # sqlite3: HBM bandwidth is bytes/s already; LLC hitRate is a percentage (85.9) -> ratio
    hbm = sorted(
        (ts, str(i), v)
        for ts, i, v in _sq(
            DB0,
            "SELECT timestampNs, hbmId, bandwidth FROM HBM h JOIN STRING_IDS s ON s.id = h.type WHERE s.value = 'read'",
        )
    )
    got = sorted(
        (r["ts_ns"], r["channel"], r["value"])
        for r in _q(
            rank0, "SELECT * FROM counters WHERE track = 'HBM' AND metric = 'read_bw' AND unit = 'bytes/s'"
        )
    )
    assert got == hbm
    llc = sorted(h / 100 for (h,) in _sq(DB0, "SELECT hitRate FROM LLC"))
    got_llc = sorted(
        r["value"]
        for r in _q(rank0, "SELECT value FROM counters WHERE track = 'LLC' AND metric = 'read_hit_rate'")
    )
    assert got_llc == pytest.approx(llc) and max(got_llc) <= 1
    (mem,) = _q(
        rank0,
        "SELECT max(value) m FROM counters WHERE track = 'NPU MEM' AND channel = 'APP' AND metric = 'hbm_used'",
    )
    assert (
        mem["m"]
        == _sq(
            DB0, "SELECT max(hbm) FROM NPU_MEM m JOIN STRING_IDS s ON s.id = m.type WHERE s.value = 'app'"
        )[0][0]
    )


@pytest.mark.real
def test_rank0_memory_matches_text_export_row_counts(rank0: Path) -> None:
    got = {r["kind"]: r["n"] for r in _q(rank0, "SELECT kind, count(*) n FROM memory GROUP BY 1")}
    # csv: the text export of the same job has memory_record 1004 rows (990 allocator + 14 APP), operator_memory
    # 184, npu_module_mem 1078
    if TEXT0.exists():
        assert got["record"] == len(_csv_rows(TEXT0 / "memory_record.csv"))
        assert got["op"] == len(_csv_rows(TEXT0 / "operator_memory.csv"))
        assert got["module"] == len(_csv_rows(TEXT0 / "npu_module_mem.csv"))
    (app,) = _q(
        rank0, "SELECT * FROM memory WHERE kind = 'record' AND component = 'APP' ORDER BY ts_ns LIMIT 1"
    )
    assert app["reserved_bytes"] == 2212077568 and app["device"] == "NPU:0"  # CLI: NPU_MEM first app hbm


@pytest.mark.real
def test_text_and_db_exports_of_the_same_job_agree(rank0: Path, tmp_path: Path) -> None:
    """Same job, two profiling sessions (text at 1736408883 s, db at 1736410576 s: 28 minutes apart).

    The kernels tables hold the same set of device kernels: same count, same (name, accelerator core)
    multiset. Total kernel time cannot agree to 0.1% across two sessions (the first all-reduce waits 79.1 ms
    for its peers in one and 88.8 ms in the other), so each side's total is checked against its own step
    breakdown (Computing + Communication, which the profiler computes from the same kernels) to 0.1%, and the
    compute kernels' total (no peer wait in it) across the two sessions to 1%.
    """
    text_rows = _csv_rows(real(TEXT0 / "kernel_details.csv"))  # csv
    db = _q(rank0, "SELECT name, task_type, dur_ns, is_comm FROM kernels")
    assert len(db) == len(text_rows) == 191
    assert Counter((r["name"].replace("_210_", "_586_"), r["task_type"]) for r in db) == Counter(
        (r["Name"], r["Accelerator Core"]) for r in text_rows
    )  # HCCL op names embed a per-session index (210 vs 586)
    text_total = sum(_us_ns(r["Duration(us)"]) for r in text_rows)
    db_total = sum(r["dur_ns"] for r in db)
    (step,) = _csv_rows(TEXT0 / "step_trace_time.csv")
    text_split = _us_ns(step["Computing"]) + _us_ns(step["Communication"])
    (db_split,) = _sq(AN0, "SELECT (computing + communication) * 1000 FROM StepTraceTime")
    assert abs(text_total - text_split) <= 0.001 * text_split
    assert abs(db_total - db_split[0]) <= 0.001 * db_split[0]
    text_compute = sum(_us_ns(r["Duration(us)"]) for r in text_rows if r["Accelerator Core"] != "HCCL")
    db_compute = sum(r["dur_ns"] for r in db if not r["is_comm"])
    assert abs(db_compute - text_compute) <= 0.01 * text_compute  # 8903431 vs 8873737 ns: 0.33%
    from traceql.parsers import registry

    if "torch_npu_text" in registry():  # the text parser's kernels table agrees with the csv module's numbers
        _ingest(TEXT0.parent, tmp_path / "s", "text")
        (t,) = _q(tmp_path / "s", "SELECT count(*) n, sum(dur_ns) d FROM kernels")
        assert (t["n"], t["d"]) == (len(text_rows), text_total)


@pytest.mark.real
def test_comm_tables_from_tasks_match_analysis_db(tmp_path: Path) -> None:
    """Without analysis.db (the .db file given alone) comm_matrix/comm_bandwidth are aggregated from
    COMMUNICATION_TASK_INFO; they must reproduce the profiler's own analysis.db numbers."""
    store = tmp_path / "s"
    info = _ingest(real(DB0), store, "alone")
    assert info["ranks"] == [0]
    op = "hcom_allReduce__210_2_1"
    # sqlite3 on analysis.db: the matrix rows of that op (MB, ms)
    want = {
        (int(s), int(d), tr): (round(sz * 1e6), tt * 1e6)
        for s, d, tr, sz, tt in _sq(AN0, f"SELECT src_rank, dst_rank, transport_type, transit_size, transit_time FROM CommAnalyzerMatrix WHERE op_name = '{op}'")
    }  # fmt: skip
    got = {
        (r["src_rank"], r["dst_rank"], r["transport"]): (r["bytes"], r["transit_ns"])
        for r in _q(store, f"SELECT * FROM comm_matrix WHERE op_name = '{op}'")
    }
    assert set(got) == set(want)
    for key, (b, t) in want.items():
        assert got[key][0] == b and abs(got[key][1] - t) <= 10, key
    bw = {r["transport"]: r for r in _q(store, f"SELECT * FROM comm_bandwidth WHERE name = '{op}'")}
    # analysis.db: HCCS 264.241152 MB, packets {18.890752 MB: 12, 18.776064 MB: 2}; SDMA the same bytes
    assert bw["HCCS"]["bytes"] == bw["SDMA"]["bytes"] == 264241152
    assert bw["HCCS"]["packet_sizes"] == {"18890752": 12.0, "18776064": 2.0}
    (c,) = _q(store, f"SELECT * FROM comm_ops WHERE name = '{op}'")
    assert (c["source"], c["bytes"], c["transit_ns"]) == ("db:COMMUNICATION_OP", 264241152, None)
    assert c["group_name"] == "90.91.105.46%enp189s0f0_60000_0_1736410538306028"  # COMMUNICATION_OP.groupName
    assert _q(store, "SELECT source FROM steps")[0]["source"] == "db:STEP_TIME"


@pytest.mark.real
def test_analysis_db_alone(tmp_path: Path) -> None:
    store = tmp_path / "s"
    info = _ingest(real(AN0), store, "an")
    assert info["format"] == "torch_npu_db" and info["ranks"] == [0]  # profiler_info_0.json beside it
    rows = _q(store, "SELECT * FROM comm_ops ORDER BY ts_ns")
    assert len(rows) == 4
    # sqlite3: start_timestamp is µs stored as a double (1736410576431645.2 for the first op): its decimal text
    # x 1000, exactly (a double multiply would land on the 256 ns grid at this magnitude)
    want = sorted(
        int(Decimal(repr(v)) * 1000) for (v,) in _sq(AN0, "SELECT start_timestamp FROM CommAnalyzerTime")
    )
    assert [r["ts_ns"] for r in rows] == want and want[0] == 1736410576431645200
    assert rows[0]["dur_ns"] == 88750993
    (s,) = _q(store, "SELECT * FROM steps")
    assert s["ts_ns"] is None and s["dur_ns"] == 8903431 + 98071947 + 25258144  # computing + comm n.o. + free


@pytest.mark.real
def test_level1_db_folder_is_one_run_with_two_ranks(cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("ingest", str(real(DB_LEVEL1)), "--store", str(store), "--name", "dbl1", "-q", "--no-check")
    assert r.code == 0, r
    rows = _q(store, "SELECT run_id, format, ranks, device FROM runs")
    assert rows == [{"run_id": "dbl1", "format": "torch_npu_db", "ranks": 2, "device": "Ascend910B"}]
    per_rank = {r["rank"]: r["n"] for r in _q(store, "SELECT rank, count(*) n FROM kernels GROUP BY 1")}
    rank1_db = DB_LEVEL1 / "rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_1.db"
    n1 = _sq(rank1_db, "SELECT (SELECT count(*) FROM COMPUTE_TASK_INFO c JOIN TASK USING (globalTaskId)) + (SELECT count(*) FROM COMMUNICATION_OP)")[0][0]  # fmt: skip
    assert per_rank == {0: 191, 1: n1}


# --------------------------------------------------------------------------------------------------------
# msprof db (2023 sample, 8 x Ascend910B)
# --------------------------------------------------------------------------------------------------------
@pytest.mark.real
def test_msprof_db_sample(tmp_path: Path) -> None:
    store = tmp_path / "s"
    info = _ingest(real(MSPROF0), store, "msprof")
    assert info["format"] == "msprof_db" and info["device"] == "Ascend910B"
    want = Counter(
        _sq(MSPROF0, """SELECT n.value, (t.endNs - t.startNs) FROM COMPUTE_TASK_INFO c JOIN TASK t USING (globalTaskId)
                       JOIN STRING_IDS n ON n.id = c.name""")
    )  # fmt: skip
    got = Counter((r["name"], r["dur_ns"]) for r in _q(store, "SELECT * FROM kernels"))
    assert got == want and sum(want.values()) == 11
    assert {r["device_id"] for r in _q(store, "SELECT device_id FROM kernels")} == {2}
    # NPU_OP_MEM.type is an ENUM_MEMORY id in this 2023 export (5 allocate, 6 release)
    want_types = dict(
        _sq(
            MSPROF0,
            "SELECT e.name, count(*) FROM NPU_OP_MEM m JOIN ENUM_MEMORY e ON e.id = m.type GROUP BY 1",
        )
    )
    got_types = Counter(
        r["extra"]["type"] for r in _q(store, "SELECT extra FROM memory WHERE kind = 'npu_op'")
    )
    assert dict(got_types) == want_types
    n = lambda t: _sq(MSPROF0, f"SELECT count(*) FROM {t}")[0][0]  # noqa: E731
    (c,) = _q(store, "SELECT count(*) n FROM counters")
    assert c["n"] == n("HBM") + 2 * n("LLC") + 2 * n("DDR")  # DDR read/write, LLC hit rate/throughput
    cats = {r["cat"]: r["n"] for r in _q(store, "SELECT cat, count(*) n FROM host_ops GROUP BY 1")}
    assert cats == {"cann": n("CANN_API"), "mstx": n("MSTX_EVENTS")}
    # no ENUM_MSTX_EVENT_TYPE table in this export: the documented enum (2 = start/end) is used
    assert {r["extra"]["eventType"] for r in _q(store, "SELECT extra FROM host_ops WHERE cat = 'mstx'")} == {
        "start/end"
    }


# --------------------------------------------------------------------------------------------------------
# tiny synthetic exports
# --------------------------------------------------------------------------------------------------------
GIB = 1024**3
PY_TS = "1736410575999999999"  # not representable as a double: float() would give ...576000000000


def _tiny_npu_db(path: Path) -> Path:
    """A CANN 2026 shape: blockNum/mixBlockNum, blockDim = Ascend 950 SIMT size (a STRING_IDS id), opState,
    a globalTaskId reused by two executions with PMU rows told apart by timestampNs, Memory-group bandwidth
    stored in bytes/s (msprof multiplies GB/s by 1024^3), PYTORCH_API times as TEXT."""
    s = ["MatMul_1", "MatMulV3", "AI_CORE", '"16,32;32,8"', "FLOAT16;FLOAT16", "ND;ND", "static", '"128"',
         "aic_total_time", "aic_main_mem_read_bw", "aic_main_mem_write_bw", "aic_mac_time", "aic_mac_ratio",
         "aten::mm", "KERNEL_AICORE", "op"]  # fmt: skip
    sid = {v: i + 1 for i, v in enumerate(s)}
    t0 = 1736410576000000000
    return _make_db(
        path,
        {
            "STRING_IDS": ("id INTEGER PRIMARY KEY, value TEXT", [(i, v) for v, i in sid.items()]),
            "ENUM_API_TYPE": ("id INTEGER, name TEXT", [(50001, "op")]),
            "TASK": (
                "startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER, "
                "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER",
                [
                    (t0, t0 + 10000, 3, 7, 100, 999, sid["KERNEL_AICORE"], 4294967295, 5, 42, 4294967295),
                    (
                        t0 + 50000,
                        t0 + 55000,
                        3,
                        8,
                        100,
                        999,
                        sid["KERNEL_AICORE"],
                        4294967295,
                        5,
                        43,
                        4294967295,
                    ),
                ],
            ),  # fmt: skip
            "COMPUTE_TASK_INFO": (
                "name INTEGER, globalTaskId INTEGER, blockNum INTEGER, mixBlockNum INTEGER, taskType INTEGER, "
                "opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, inputShapes INTEGER, outputFormats INTEGER, "
                "outputDataTypes INTEGER, outputShapes INTEGER, opState INTEGER, blockDim INTEGER, waitNs INTEGER",
                [
                    (
                        sid["MatMul_1"],
                        100,
                        24,
                        12,
                        sid["AI_CORE"],
                        sid["MatMulV3"],
                        sid["ND;ND"],
                        sid["FLOAT16;FLOAT16"],
                        sid['"16,32;32,8"'],
                        sid["ND;ND"],
                        sid["FLOAT16;FLOAT16"],
                        sid['"16,32;32,8"'],
                        sid["static"],
                        sid['"128"'],
                        1500,
                    )
                ],
            ),  # fmt: skip
            "TASK_PMU_INFO": (
                "globalTaskId INTEGER, name INTEGER, value NUMERIC, timestampNs INTEGER",
                [
                    (100, sid["aic_total_time"], 8000.0, t0 + 9000),
                    (100, sid["aic_main_mem_read_bw"], 100 * GIB, t0 + 9000),
                    (100, sid["aic_main_mem_write_bw"], 50 * GIB, t0 + 9000),
                    (100, sid["aic_mac_time"], 2000.0, t0 + 9000),
                    (
                        100,
                        sid["aic_mac_ratio"],
                        0,
                        t0 + 9000,
                    ),  # a truncated integer ratio: the times give 0.25
                    (100, sid["aic_total_time"], 4000.0, t0 + 54000),
                    (100, sid["aic_main_mem_read_bw"], 10 * GIB, t0 + 54000),
                ],
            ),  # fmt: skip
            "PYTORCH_API": (
                "startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER, name INTEGER, sequenceNumber INTEGER, "
                "fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER, callchainId INTEGER, type INTEGER, depth INTEGER",
                [
                    (
                        PY_TS,
                        "1736410576000020001",
                        (12345 << 32) | 678,
                        0,
                        sid["aten::mm"],
                        7,
                        0,
                        None,
                        None,
                        None,
                        50001,
                        0,
                    )
                ],
            ),  # fmt: skip
            "CONNECTION_IDS": ("id INTEGER, connectionId INTEGER", [(0, 7), (0, 8)]),
        },
    )


def test_tiny_db_block_num_pmu_and_text_times(tmp_path: Path) -> None:
    db = _tiny_npu_db(tmp_path / "ascend_pytorch_profiler_3.db")
    store = tmp_path / "s"
    info = _ingest(db, store, "tiny")
    assert info["format"] == "torch_npu_db" and info["ranks"] == [3]  # rank from the file name
    k = _q(store, "SELECT * FROM kernels ORDER BY ts_ns")
    assert len(k) == 2
    a, b = k
    assert (a["block_dim"], a["mix_block_dim"], a["op_state"], a["wait_ns"]) == (24, 12, "static", 1500)
    assert a["extra"]["simt_block_dim"] == '"128"'  # 950: blockDim is the SIMT size, not the block count
    assert (a["input_shapes"], a["input_dtypes"], a["task_type"], a["device_id"]) == (
        "16,32;32,8",
        "FLOAT16;FLOAT16",
        "AI_CORE",
        3,
    )
    # hand: 100 GB/s (stored 100 x 1024^3 B/s) x 8000 ns = 100e9 x 8e-6 = 800000 bytes; write 50 GB/s -> 400000
    assert (a["aicore_time_ns"], a["hbm_read_bytes"], a["hbm_write_bytes"]) == (8000, 800000, 400000)
    assert a["mac_ratio"] == pytest.approx(0.25)  # 2000 / 8000, not the stored truncated 0
    # the second execution of the same globalTaskId gets its own PMU rows (timestampNs inside its window):
    # 10 GB/s x 4000 ns = 40000 bytes; no write metric for it
    assert (b["aicore_time_ns"], b["hbm_read_bytes"], b["hbm_write_bytes"]) == (4000, 40000, None)
    (h,) = _q(store, "SELECT * FROM host_ops")
    assert h["ts_ns"] == int(PY_TS) and h["dur_ns"] == 1736410576000020001 - int(PY_TS)  # exact, from TEXT
    assert (h["pid"], h["tid"], h["cat"], h["seq_num"]) == (12345, 678, "cpu_op", 7)
    assert h["correlation_id"] == 7 and h["extra"]["connection_ids"] == "7,8"
    flows = _q(store, "SELECT * FROM flows ORDER BY dst_ts_ns")
    assert [(f["cat"], f["flow_id"], f["dst_tid"], f["dst_ts_ns"]) for f in flows] == [
        ("async_npu", "7", 5, a["ts_ns"]),
        ("async_npu", "8", 5, b["ts_ns"]),
    ]


def test_tiny_db_block_dim_only_is_the_block_count(tmp_path: Path) -> None:
    db = _make_db(
        tmp_path / "msprof_20250101.db",
        {
            "STRING_IDS": ("id INTEGER PRIMARY KEY, value TEXT", [(1, "Add_1"), (2, "AI_VECTOR_CORE")]),
            "TASK": ("startNs INTEGER, endNs INTEGER, deviceId INTEGER, globalTaskId INTEGER", [(10**18, 10**18 + 5, 0, 1)]),
            "COMPUTE_TASK_INFO": ("name INTEGER, globalTaskId INTEGER, blockDim INTEGER, mixBlockDim INTEGER, taskType INTEGER",
                                  [(1, 1, 40, 0, 2)]),
        },
    )  # fmt: skip
    store = tmp_path / "s"
    info = _ingest(db, store, "old")
    assert info["format"] == "msprof_db"
    (k,) = _q(store, "SELECT * FROM kernels")
    assert (k["name"], k["task_type"], k["block_dim"], k["mix_block_dim"], k["dur_ns"]) == (
        "Add_1",
        "AI_VECTOR_CORE",
        40,
        0,
        5,
    )
    assert "simt_block_dim" not in (k["extra"] or {})


# --------------------------------------------------------------------------------------------------------
# claims: exactly one parser per folder
# --------------------------------------------------------------------------------------------------------
def _tiny_task_db(path: Path) -> Path:
    return _make_db(path, {"TASK": ("startNs INTEGER, endNs INTEGER, globalTaskId INTEGER", [(1, 2, 0)])})


def test_claims_db_folders_and_files(tmp_path: Path) -> None:
    from traceql.parsers import detect
    from traceql.parsers.msprof_db import MsprofDbParser
    from traceql.parsers.torch_npu_db import TorchNpuDbParser

    p = TorchNpuDbParser()
    pt = tmp_path / "host_1_ascend_pt"
    _tiny_task_db(pt / "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_4.db")
    (pt / "ASCEND_PROFILER_OUTPUT/analysis.db").write_bytes(b"")
    (u,) = p.claim(pt) or []
    assert (u.rank, Path(u.path).name, dict(u.options)["analysis"].endswith("analysis.db")) == (
        4,
        "ascend_pytorch_profiler_4.db",
        True,
    )
    assert p.claim(pt / "ASCEND_PROFILER_OUTPUT") == [u]
    assert [(x.parser, x.rank) for x in detect(pt)] == [("torch_npu_db", 4)]
    # single card: no rank in the db name -> profiler_info_{rank}.json beside ASCEND_PROFILER_OUTPUT
    one = tmp_path / "one_ascend_pt"
    _tiny_task_db(one / "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler.db")
    (one / "profiler_info_6.json").write_text("{}", encoding="utf-8")
    assert [x.rank for x in p.claim(one) or []] == [6]
    # text and db in one folder: the text parser's (torch_npu_db declines)
    (pt / "ASCEND_PROFILER_OUTPUT/kernel_details.csv").write_text(
        "Name,Type,Accelerator Core,Start Time(us),Duration(us)\nA,B,AI_CORE,1.5,2\n", encoding="utf-8"
    )
    assert p.claim(pt) is None
    assert p.claim(tmp_path / "nothing") is None
    m = MsprofDbParser()
    prof = tmp_path / "PROF_000001_20250101_abc"
    _tiny_task_db(prof / "msprof_20250101.db")
    assert [x.parser for x in detect(prof)] == ["msprof_db"]
    (prof / "mindstudio_profiler_output").mkdir()
    (prof / "mindstudio_profiler_output/op_summary_20250101.csv").write_text(
        "Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us)\nA,B,AI_CORE,1.5,2\n",
        encoding="utf-8",
    )
    assert m.claim(prof) is None  # text output present: the msprof text parser's
    assert m.claim(prof / "msprof_20250101.db")  # the db file itself is still claimable on its own
    assert m.claim(tmp_path / "x.db") is None


# --------------------------------------------------------------------------------------------------------
# bad inputs: exit 1, one line naming the file
# --------------------------------------------------------------------------------------------------------
def test_bad_not_sqlite(cli, tmp_path: Path, store: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "ascend_pytorch_profiler_0.db"
    f.write_text("Name,Type\nA,B\n", encoding="utf-8")
    r = cli("ingest", str(f), "--store", str(store), "-q")
    assert r.code == 1 and str(f) in r.err and "not an SQLite database" in r.err, r
    assert "Traceback" not in r.err


def test_bad_empty_db(cli, tmp_path: Path, store: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "msprof_1.db"
    f.write_bytes(b"")
    r = cli("ingest", str(f), "--store", str(store), "-q")
    assert r.code == 1 and str(f) in r.err and "empty file" in r.err, r


@pytest.mark.real
@pytest.mark.parametrize("keep", [5000, 200_000])
def test_bad_truncated_db(cli, tmp_path: Path, store: Path, keep: int) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "ascend_pytorch_profiler_0.db"
    with open(real(DB0), "rb") as src:
        f.write_bytes(src.read(keep))
    r = cli("ingest", str(f), "--store", str(store), "-q")
    assert r.code == 1 and str(f) in r.err and "corrupt or truncated" in r.err, r
    assert "Traceback" not in r.err


def test_bad_db_without_task(cli, tmp_path: Path, store: Path) -> None:  # type: ignore[no-untyped-def]
    f = _make_db(tmp_path / "msprof_2.db", {"STRING_IDS": ("id INTEGER PRIMARY KEY, value TEXT", [(1, "x")])})
    r = cli("ingest", str(f), "--store", str(store), "-q")
    assert r.code == 1 and str(f) in r.err and "no TASK table" in r.err, r
    g = _make_db(tmp_path / "ascend_pytorch_profiler_1.db", {"TASK": ("startNs INTEGER", [(1,)])})
    r = cli("ingest", str(g), "--store", str(store), "-q")
    assert r.code == 1 and str(g) in r.err and "lacks column(s) endNs, globalTaskId" in r.err, r


@pytest.mark.real
def test_bad_analysis_db_next_to_a_good_db(cli, tmp_path: Path, store: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "r_ascend_pt/ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copy(real(DB0), out / "ascend_pytorch_profiler_0.db")
    (out / "analysis.db").write_text("not a db", encoding="utf-8")
    r = cli("ingest", str(out.parent), "--store", str(store), "-q")
    assert r.code == 1 and str(out / "analysis.db") in r.err and "not an SQLite database" in r.err, r


def test_damaged_values_do_not_stop_the_ingest(tmp_path: Path) -> None:
    """A name that is not UTF-8 (a damaged page) and a link size beyond int64 are data problems in one cell,
    not reasons to lose the run: the name reads with U+FFFD, the unconvertible byte total is null."""
    db = _make_db(
        tmp_path / "msprof_7.db",
        {
            "STRING_IDS": ("id INTEGER PRIMARY KEY, value TEXT", [(1, b"Mat\xffMul".decode("latin-1")), (2, "AI_CORE")]),
            "TASK": ("startNs INTEGER, endNs INTEGER, deviceId INTEGER, globalTaskId INTEGER, connectionId INTEGER",
                     [(10**18, 10**18 + 5, 0, 1, 1), (10**18 + 10, 10**18 + 20, 0, 2, 2), (10**18 + 30, 10**18 + 40, 0, 3, 2)]),
            "COMPUTE_TASK_INFO": ("name INTEGER, globalTaskId INTEGER, taskType INTEGER", [(1, 1, 2)]),
            "COMMUNICATION_TASK_INFO": ("globalTaskId INTEGER, srcRank INTEGER, dstRank INTEGER, size NUMERIC, opId INTEGER",
                                        [(2, 0, 1, 9.9e300, 5), (3, 0, 1, 9.9e300, 5)]),
        },
    )  # fmt: skip
    con = sqlite3.connect(db)  # store raw non-UTF-8 bytes in a TEXT cell, as a flipped bit would
    con.execute("UPDATE STRING_IDS SET value = CAST(X'4d6174ff4d756c' AS TEXT) WHERE id = 1")
    con.commit()
    con.close()
    store = tmp_path / "s"
    _ingest(db, store, "damaged")
    (k,) = _q(store, "SELECT name, task_type FROM kernels")
    assert k == {"name": "Mat\ufffdMul", "task_type": "AI_CORE"}
    (m,) = _q(store, "SELECT bytes, transit_ns FROM comm_matrix")
    assert m == {"bytes": None, "transit_ns": 20}  # two 10 ns link tasks; 2 x 9.9e300 bytes do not fit int64


def test_src_rank_na_marker_is_null(tmp_path: Path) -> None:
    """torch_npu db level0 dumps write srcRank 4294967295 (UINT32 "n/a", as dstRank) on some link tasks: the
    ingest must not fail casting it to INTEGER. Expected by hand: the n/a task has no source rank (NULL) and,
    with no destination either, no destination rank; the other task keeps 0 -> 1."""
    na = 4294967295
    db = _make_db(
        tmp_path / "msprof_8.db",
        {
            "STRING_IDS": ("id INTEGER PRIMARY KEY, value TEXT", [(1, "MatMul"), (2, "AI_CORE")]),
            "TASK": ("startNs INTEGER, endNs INTEGER, deviceId INTEGER, globalTaskId INTEGER, connectionId INTEGER",
                     [(10**18, 10**18 + 5, 0, 1, 1), (10**18 + 10, 10**18 + 20, 0, 2, 2), (10**18 + 30, 10**18 + 40, 0, 3, 2)]),
            "COMPUTE_TASK_INFO": ("name INTEGER, globalTaskId INTEGER, taskType INTEGER", [(1, 1, 2)]),
            "COMMUNICATION_TASK_INFO": ("globalTaskId INTEGER, srcRank INTEGER, dstRank INTEGER, size NUMERIC, opId INTEGER",
                                        [(2, na, na, 64, 5), (3, 0, 1, 128, 5)]),
        },
    )  # fmt: skip
    store = tmp_path / "s"
    _ingest(db, store, "na")
    rows = _q(store, "SELECT src_rank, dst_rank, bytes FROM comm_matrix ORDER BY bytes NULLS FIRST")
    assert {(r["src_rank"], r["dst_rank"]) for r in rows} == {(None, None), (0, 1)}, rows
