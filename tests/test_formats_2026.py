"""2026 profiler formats (issue 19): msprof DB SCHEMA_VERSION gate, torch_npu's analyse.done marker, MFU from
`mfu_flops` mstx ranges, OVERLAP_ANALYSIS vs traceql's step split, AI Core frequency, rankSize bus bandwidth.

Every fixture here is written by this file in the real format it imitates (column names verbatim from the
source named beside it); expected values are computed by hand or independently from the fixture's own event
list (plain Python / Decimal), never from traceql's output.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DB_LEVEL1, real

T0 = 1_736_410_576_000_000_000  # ns since the epoch, like the real 2025 samples


# --------------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------------
def _ingest(path: Path, store: Path, name: str) -> dict[str, Any]:
    from traceql.ingest import ingest

    return ingest(path, store, name=name, workers=1)


def _q(store: Path, sql: str) -> list[dict[str, Any]]:
    from traceql._duck import arrow_table
    from traceql.engine import connect
    from traceql.store import Store

    return arrow_table(connect(Store(store)).sql(sql)).to_pylist()


def _db(path: Path, tables: dict[str, tuple[str, list[tuple[Any, ...]]]]) -> Path:
    """A small SQLite export: {table: (column definitions as the writer declares them, rows)}."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    for name, (cols, rows) in tables.items():
        con.execute(f"CREATE TABLE {name} ({cols})")
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    con.commit()
    con.close()
    return path


# Column declarations as the real torch_npu 2025 export declares them (ascend_pytorch_profiler_0.db of
# Ascend__msinsight/test/data/pytorch/db/level1, read with sqlite3 `SELECT sql FROM sqlite_master`).
TASK_COLS = (
    "startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER, "
    "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER"
)
COMPUTE_COLS = (
    "name INTEGER, globalTaskId INTEGER, blockDim INTEGER, mixBlockDim INTEGER, taskType INTEGER, opType INTEGER, "
    "inputFormats INTEGER, inputDataTypes INTEGER, inputShapes INTEGER, outputFormats INTEGER, "
    "outputDataTypes INTEGER, outputShapes INTEGER, attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER"
)
META_COLS = "name TEXT, value TEXT"


def _meta(version: str | None) -> tuple[str, list[tuple[Any, ...]]]:
    if version is None:
        return (META_COLS, [("ENV_VARIABLES", "{}")])
    parts = (version.split(".") + ["0", "0"])[:3]
    return (
        META_COLS,
        [
            ("SCHEMA_VERSION_MICRO", parts[2]),
            ("SCHEMA_VERSION_MINOR", parts[1]),
            ("SCHEMA_VERSION_MAJOR", parts[0]),
            ("SCHEMA_VERSION", version),
        ],
    )


def _tiny_msprof_db(path: Path, version: str | None) -> Path:
    """One AI_CORE task, STRING_IDS, and META_DATA with the given SCHEMA_VERSION."""
    return _db(
        path,
        {
            "STRING_IDS": (
                "id INTEGER PRIMARY KEY, value TEXT",
                [(1, "MatMul_1"), (2, "AI_CORE"), (3, "MatMul")],
            ),
            "TASK": (TASK_COLS, [(T0, T0 + 1000, 0, 1, 1, 0, 2, 4294967295, 2, 1, 4294967295)]),
            "COMPUTE_TASK_INFO": (COMPUTE_COLS, [(1, 1, 8, 0, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0)]),
            "META_DATA": _meta(version),
        },
    )


# --------------------------------------------------------------------------------------------------------
# SCHEMA_VERSION gate (parsers._db_version)
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["1.0.0", "1.2.0"])
def test_known_major_schema_versions_ingest(tmp_path: Path, version: str) -> None:
    db = _tiny_msprof_db(tmp_path / "msprof_20260101000000.db", version)
    info = _ingest(db, tmp_path / "s", "v")
    assert info["format"] == "msprof_db"
    (k,) = _q(tmp_path / "s", "SELECT name, dur_ns FROM kernels")
    assert (k["name"], k["dur_ns"]) == ("MatMul_1", 1000)
    meta = {r["key"]: r["value"] for r in _q(tmp_path / "s", "SELECT key, value FROM run_meta")}
    assert meta["META_DATA.SCHEMA_VERSION"] == version
    warned = [w for w in info.get("warnings", []) if "schema version" in w]
    assert bool(warned) == (version != "1.0.0")  # 1.0.0 is the version of the real exports: no warning


def test_newer_major_schema_version_is_refused_store_unchanged(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = _tiny_msprof_db(tmp_path / "msprof_20260101000000.db", "2.0.0")
    store = tmp_path / "s"
    r = cli("ingest", str(db), "--store", str(store), "-q")
    assert r.code == 1, r
    assert str(db) in r.err and "schema version 2.0.0 is newer" in r.err and "1.0.0" in r.err, r
    assert "Traceback" not in r.err
    assert not (store / "runs").exists() or not any((store / "runs").iterdir())


def test_unreadable_schema_version_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = _tiny_msprof_db(tmp_path / "msprof_20260101000000.db", "v-next")
    r = cli("ingest", str(db), "--store", str(tmp_path / "s"), "-q")
    assert r.code == 1 and "not a version number" in r.err and str(db) in r.err, r


def test_db_without_meta_data_still_ingests(tmp_path: Path) -> None:
    # the 2023 msprof_0.db sample has no META_DATA table: such exports map by their columns as before
    db = _db(
        tmp_path / "msprof_1.db",
        {
            "STRING_IDS": ("id INTEGER PRIMARY KEY, value TEXT", [(1, "Add_1"), (2, "AI_VECTOR_CORE")]),
            "TASK": (TASK_COLS, [(T0, T0 + 5, 0, 1, 1, 0, 2, 4294967295, 2, 1, 4294967295)]),
            "COMPUTE_TASK_INFO": (COMPUTE_COLS, [(1, 1, 8, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0)]),
        },
    )
    _ingest(db, tmp_path / "s", "old")
    assert _q(tmp_path / "s", "SELECT count(*) AS n FROM kernels")[0]["n"] == 1


@pytest.mark.real
def test_real_db_export_schema_version_is_known() -> None:
    from traceql.parsers._db_version import KNOWN_VERSIONS, check_version
    from traceql.parsers._sqlite import SqliteDb

    path = real(DB_LEVEL1 / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db")
    with SqliteDb(path, "torch_npu db") as db:
        assert check_version(db) == ("1.0.0", [])
    assert "1.0.0" in KNOWN_VERSIONS


# --------------------------------------------------------------------------------------------------------
# analyse.done (parsers._analyse_done)
# --------------------------------------------------------------------------------------------------------
# Level0 kernel_details.csv header of the real 2025 Level0 sample (Ascend__msinsight/test/data/pytorch/text/
# level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv), trailing TAB on the start time.
LEVEL0_HEADER = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim"


def _text_dump(root: Path, torch_npu_version: str | None, done: bool) -> Path:
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    info: dict[str, Any] = {
        "config": {"common_config": {}, "experimental_config": {"_profiler_level": "Level0"}},
        "rank_id": 0,
    }
    if torch_npu_version is not None:
        info["torch_npu_version"] = torch_npu_version
        info["cann_version"] = "9.0.0"
    (root / "profiler_info_0.json").write_text(json.dumps(info))
    (out / "kernel_details.csv").write_text(
        LEVEL0_HEADER + "\r\n" + "1,MatMul_1,N/A,N/A,1736410576000000.000\t,2.500,0,8\r\n", encoding="utf-8"
    )
    if done:
        (out / "analyse.done").write_text("")
    return root


@pytest.mark.parametrize(
    ("version", "done", "ok"),
    [
        ("2.10.0", True, True),
        ("2.10.0", False, False),  # a marker-writing version without the marker: still being written
        ("2.11.0.post1", False, False),
        ("2.7.1", False, True),  # older versions never write it (the real samples have none)
        (None, False, True),  # version not recorded (pre-2025 profiler_info)
    ],
)
def test_analyse_done_rule(cli, tmp_path: Path, version: str | None, done: bool, ok: bool) -> None:  # type: ignore[no-untyped-def]
    root = _text_dump(tmp_path / "w_123_20260101_ascend_pt", version, done)
    store = tmp_path / "s"
    r = cli("ingest", str(root), "--store", str(store), "-q")
    if ok:
        assert r.code == 0, r
        (k,) = _q(store, "SELECT name, ts_ns, dur_ns FROM kernels")
        assert (k["name"], k["ts_ns"], k["dur_ns"]) == ("MatMul_1", 1736410576000000000, 2500)
    else:
        assert r.code == 1, r
        assert "no analyse.done" in r.err and "still being written" in r.err
        assert str(root / "ASCEND_PROFILER_OUTPUT") in r.err and "Traceback" not in r.err
        assert not (
            root / "ASCEND_PROFILER_OUTPUT" / "analyse.done"
        ).exists()  # nothing written into the dump


@pytest.mark.real
def test_real_text_dumps_without_marker_still_ingest(tmp_path: Path) -> None:
    from tests.conftest import LEVEL0

    info = _ingest(real(LEVEL0 / "rank0_ascend_pt"), tmp_path / "s", "l0")
    assert info["format"] == "torch_npu_text"


# --------------------------------------------------------------------------------------------------------
# MFU from mstx `mfu_flops` ranges (queries/mfu.sql)
# --------------------------------------------------------------------------------------------------------
PID, TID = 3136, 3137
GTID = (PID << 32) | TID  # globalTid: pid in the high 32 bits, tid in the low (MSPROF-DB-DOC)

# (range start, range end, message as torch_npu/profiler/_flops_hook.py writes it: f"{flops}-{op_name}",
#  host op start, kernel start, kernel duration), ns after T0
MFU_OPS = [
    (1_000, 21_000, "4000000000-aten::mm", 2_000, 100_000, 100_000),
    (200_000, 221_000, "6000000000-aten::mm", 201_000, 300_000, 100_000),
    (400_000, 420_000, "1000000000-aten::bmm", 401_000, 500_000, 40_000),
]
STEP_NS = 1_000_000


def _mfu_db(path: Path) -> Path:
    """A torch_npu db export (tables and column declarations as the real 2025 export declares them, MSTX_EVENTS
    as the msprof_0.db sample declares it) holding three FLOPs ranges, the aten ops inside them, one kernel each,
    linked PYTORCH_API.connectionId -> CONNECTION_IDS -> TASK.connectionId, and one STEP_TIME window."""
    strings = {"aten::mm": 1, "aten::bmm": 2, "MatMul_1": 3, "AI_CORE": 4, "MatMul": 5, "KERNEL_AICORE": 6}
    for i, (_, _, msg, *_rest) in enumerate(MFU_OPS):
        strings[msg] = 10 + i
    mstx, py, conn, task, compute = [], [], [], [], []
    for i, (rs, re_, msg, hs, ks, kd) in enumerate(MFU_OPS):
        op = msg.split("-", 1)[1]
        mstx.append((T0 + rs, T0 + re_, 2, i + 1, 4294967295, strings[msg], GTID, GTID, 99, 4294967295, None))
        py.append(
            (str(T0 + hs), str(T0 + hs + 8_000), GTID, i, strings[op], None, None, None, None, None, 50001, 1)
        )
        conn.append((i, 1000 + i))
        task.append((T0 + ks, T0 + ks + kd, 0, 1000 + i, i, PID, 6, 4294967295, 2, 20 + i, 4294967295, 0))
        compute.append((3, i, 24, 0, 4, 5, 0, 0, 0, 0, 0, 0, 0, 0))
    return _db(
        path,
        {
            "STRING_IDS": ("id INTEGER PRIMARY KEY, value TEXT", [(v, k) for k, v in strings.items()]),
            "ENUM_API_TYPE": (
                "id INTEGER PRIMARY KEY,name TEXT",
                [
                    (5000, "runtime"),
                    (10000, "node"),
                    (20000, "acl"),
                    (50001, "op"),
                    (50002, "queue"),
                    (50004, "mstx"),
                ],
            ),
            "ENUM_MSTX_EVENT_TYPE": (
                "id INTEGER PRIMARY KEY,name TEXT",
                [(0, "marker"), (1, "push/pop"), (2, "start/end")],
            ),
            "NPU_INFO": ("id INTEGER,name TEXT", [(0, "Ascend910B")]),
            "META_DATA": _meta("1.0.0"),
            "MSTX_EVENTS": (
                "startNs INTEGER, endNs INTEGER, eventType INTEGER, rangeId INTEGER, category INTEGER, message INTEGER, "
                "globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER, connectionId INTEGER, depth integer",
                mstx,
            ),
            "PYTORCH_API": (
                "startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER, name INTEGER, sequenceNumber INTEGER, "
                "fwdThreadId INTEGER, inputDtypes INTEGER, inputShapes INTEGER, callchainId INTEGER, type INTEGER, "
                "depth integer",
                py,
            ),
            "CONNECTION_IDS": ("id INTEGER, connectionId INTEGER", conn),
            "TASK": (
                "startNs INTEGER,endNs INTEGER,deviceId INTEGER,connectionId INTEGER,globalTaskId INTEGER,"
                "globalPid INTEGER,taskType INTEGER,contextId INTEGER,streamId INTEGER,taskId INTEGER,modelId INTEGER, "
                "depth integer",
                task,
            ),
            "COMPUTE_TASK_INFO": (
                "name INTEGER,globalTaskId INTEGER PRIMARY KEY,blockDim INTEGER,mixBlockDim INTEGER,taskType INTEGER,"
                "opType INTEGER,inputFormats INTEGER,inputDataTypes INTEGER,inputShapes INTEGER,outputFormats INTEGER,"
                "outputDataTypes INTEGER,outputShapes INTEGER,attrInfo INTEGER, waitNs INTEGER",
                compute,
            ),
            "STEP_TIME": ("id INTEGER, startNs INTEGER, endNs INTEGER", [(7, T0, T0 + STEP_NS)]),
        },
    )


def test_mfu_per_operator_and_step_equals_hand_computation(tmp_path: Path) -> None:
    from traceql import queries

    store = tmp_path / "s"
    _ingest(_mfu_db(tmp_path / "ascend_pytorch_profiler_0.db"), store, "mfu")
    peak = 1e14  # FLOP/s, given explicitly so the hand numbers are round
    rows = queries.run("mfu", store, run_id="mfu", params={"peak_flops": peak}).to_pylist()
    by = {(r["scope"], r["step"], r["op_name"]): r for r in rows}
    # hand: aten::mm declares 4e9 + 6e9 = 1e10 FLOPs; its two kernels run 100 us + 100 us = 2e-4 s
    #   -> 1e10 / 2e-4 = 5e13 FLOP/s -> MFU 5e13 / 1e14 = 0.5
    mm = by[("op", None, "aten::mm")]
    assert (mm["ranges"], mm["flops"], mm["time_ns"], mm["time_basis"]) == (
        2,
        1e10,
        200_000,
        "device_kernels",
    )
    assert mm["achieved_flops_per_s"] == pytest.approx(5e13) and mm["mfu"] == pytest.approx(0.5)
    # aten::bmm: 1e9 FLOPs over 40 us -> 2.5e13 FLOP/s -> 0.25
    bmm = by[("op", None, "aten::bmm")]
    assert (bmm["flops"], bmm["time_ns"]) == (1e9, 40_000) and bmm["mfu"] == pytest.approx(0.25)
    # step 7 (STEP_TIME window of 1 ms): 1.1e10 FLOPs / 1e-3 s = 1.1e13 FLOP/s -> 0.11; the run is the one step
    st = by[("step", 7, None)]
    assert (st["ranges"], st["flops"], st["time_ns"]) == (3, 1.1e10, STEP_NS) and st["mfu"] == pytest.approx(
        0.11
    )
    run = by[("run", None, None)]
    assert run["mfu"] == pytest.approx(0.11) and run["time_basis"] == "step_window"


def test_mfu_without_a_peak_or_ranges(tmp_path: Path) -> None:
    from traceql import queries

    store = tmp_path / "s"
    _ingest(_mfu_db(tmp_path / "ascend_pytorch_profiler_0.db"), store, "mfu")
    rows = queries.run("mfu", store, run_id="mfu", params={"peak_flops": None}).to_pylist()
    assert rows and all(r["mfu"] is None for r in rows)  # no peak: no utilisation, never a guessed one
    # the device's preset peak (ascend910b, 313 TFLOPS fp16: devices.py, with its source) fills it by default
    rows = queries.run("mfu", store, run_id="mfu", device="ascend910b").to_pylist()
    run = next(r for r in rows if r["scope"] == "run")
    assert run["mfu"] == pytest.approx(1.1e13 / 313e12)
    # a dump without FLOPs ranges: no rows
    db = _tiny_msprof_db(tmp_path / "msprof_20260101000000.db", "1.0.0")
    _ingest(db, tmp_path / "s2", "plain")
    assert queries.run("mfu", tmp_path / "s2", run_id="plain").num_rows == 0


# --------------------------------------------------------------------------------------------------------
# OVERLAP_ANALYSIS: the profiler's own split vs traceql's (queries/overlap_check.sql)
# --------------------------------------------------------------------------------------------------------
# One set of events, ns after T0: compute kernels on two streams (overlapping each other) and HCCL ops.
OV_COMPUTE = [(0, 100_000, 2), (50_000, 150_000, 3), (300_000, 400_000, 2), (650_000, 700_000, 2)]
OV_COMM = [(120_000, 350_000), (500_000, 600_000)]
OV_STEP = (0, 1_000_000)


def _union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _minus(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Intervals of a not covered by b (both unions)."""
    out = []
    for s, e in a:
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return out


def _overlap_rows() -> list[tuple[int, int, int, int]]:
    """OVERLAP_ANALYSIS rows (deviceId, startNs, endNs, type) as msprof's assembler defines the four series,
    computed here by plain interval arithmetic from OV_COMPUTE / OV_COMM."""
    comp = _union([(s, e) for s, e, _ in OV_COMPUTE])
    comm = _union(OV_COMM)
    busy = _union(comp + comm)
    free = _minus([(busy[0][0], busy[-1][1])], busy)
    rows = []
    for typ, ivs in ((0, comp), (1, comm), (2, _minus(comm, comp)), (3, free)):
        rows += [(0, T0 + s, T0 + e, typ) for s, e in ivs]
    return rows


def _overlap_db(path: Path) -> Path:
    strings = {"MatMul_1": 1, "AI_CORE": 2, "MatMul": 3, "KERNEL_AICORE": 4, "hcom_allReduce__1_0_1": 5,
               "group_1": 6, "allreduce": 7}  # fmt: skip
    task = [
        (T0 + s, T0 + e, 0, 4294967295, i, 1, 4, 4294967295, st, i, 4294967295, 0)
        for i, (s, e, st) in enumerate(OV_COMPUTE)
    ]
    compute = [(1, i, 24, 0, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0) for i in range(len(OV_COMPUTE))]
    comm = [
        (5, T0 + s, T0 + e, 4294967295, 6, 100 + i, 0, 0, 0, 0, 1024, 7, 0)
        for i, (s, e) in enumerate(OV_COMM)
    ]
    return _db(
        path,
        {
            "STRING_IDS": ("id INTEGER PRIMARY KEY, value TEXT", [(v, k) for k, v in strings.items()]),
            "META_DATA": _meta("1.0.0"),
            "NPU_INFO": ("id INTEGER,name TEXT", [(0, "Ascend910B")]),
            "TASK": (
                "startNs INTEGER,endNs INTEGER,deviceId INTEGER,connectionId INTEGER,globalTaskId INTEGER,"
                "globalPid INTEGER,taskType INTEGER,contextId INTEGER,streamId INTEGER,taskId INTEGER,modelId INTEGER, "
                "depth integer",
                task,
            ),
            "COMPUTE_TASK_INFO": (
                "name INTEGER,globalTaskId INTEGER PRIMARY KEY,blockDim INTEGER,mixBlockDim INTEGER,taskType INTEGER,"
                "opType INTEGER,inputFormats INTEGER,inputDataTypes INTEGER,inputShapes INTEGER,outputFormats INTEGER,"
                "outputDataTypes INTEGER,outputShapes INTEGER,attrInfo INTEGER, waitNs INTEGER",
                compute,
            ),
            # COMMUNICATION_OP as the real rank0 export declares it (plus waitNs)
            "COMMUNICATION_OP": (
                "opName INTEGER,startNs INTEGER,endNs INTEGER,connectionId INTEGER,groupName INTEGER,opId INTEGER "
                "PRIMARY KEY,relay INTEGER,retry INTEGER,dataType INTEGER,algType INTEGER,count NUMERIC,opType INTEGER, "
                "waitNs INTEGER",
                comm,
            ),
            "OVERLAP_ANALYSIS": (
                "id INTEGER PRIMARY KEY AUTOINCREMENT, deviceId integer, startNs integer, endNs integer, type integer",
                [(None, *r) for r in _overlap_rows()],
            ),
            "STEP_TIME": (
                "id INTEGER, startNs INTEGER, endNs INTEGER",
                [(3, T0 + OV_STEP[0], T0 + OV_STEP[1])],
            ),
        },
    )


def test_overlap_analysis_agrees_with_traceql_step_split(tmp_path: Path) -> None:
    from traceql import queries

    store = tmp_path / "s"
    _ingest(_overlap_db(tmp_path / "ascend_pytorch_profiler_0.db"), store, "ov")
    stored = _q(store, "SELECT type, sum(dur_ns) AS ns, count(*) AS n FROM overlap GROUP BY 1 ORDER BY 1")
    # by hand from OV_COMPUTE / OV_COMM: compute union [0,150k) [300k,400k) [650k,700k) = 300 us;
    # comm [120k,350k) [500k,600k) = 330 us; comm without compute [150k,300k) [500k,600k) = 250 us;
    # free between first and last busy instant (0 .. 700k) = [400k,500k) [600k,650k) = 150 us
    assert {r["type"]: r["ns"] for r in stored} == {
        "Computing": 300_000,
        "Communication": 330_000,
        "Communication(Not Overlapped)": 250_000,
        "Free": 150_000,
    }
    rows = queries.run("overlap_check", store, run_id="ov").to_pylist()
    assert len(rows) == 4 and all(r["step"] == 3 for r in rows)
    for r in rows:
        assert r["rel_diff"] <= 0.001 and r["agrees"], r  # the issue's 0.1% bound
    # and step_breakdown (the split every report shows) carries the same numbers
    (sb,) = queries.run("step_breakdown", store, run_id="ov").to_pylist()
    assert (sb["computing_ns"], sb["comm_ns"], sb["comm_not_overlapped_ns"], sb["free_ns"]) == (
        300_000,
        330_000,
        250_000,
        150_000,
    )


def test_overlap_check_flags_a_disagreement(tmp_path: Path) -> None:
    from traceql import queries

    db = _overlap_db(tmp_path / "ascend_pytorch_profiler_0.db")
    con = sqlite3.connect(db)  # the profiler counted 10 us more compute than the tasks show
    con.execute("UPDATE OVERLAP_ANALYSIS SET endNs = endNs + 10000 WHERE type = 0 AND startNs = ?", (T0,))
    con.commit()
    con.close()
    _ingest(db, tmp_path / "s", "ov")
    rows = {r["part"]: r for r in queries.run("overlap_check", tmp_path / "s", run_id="ov").to_pylist()}
    assert rows["Computing"]["profiler_ns"] == 310_000 and rows["Computing"]["traceql_ns"] == 300_000
    assert (
        rows["Computing"]["rel_diff"] == pytest.approx(10_000 / 310_000) and not rows["Computing"]["agrees"]
    )
    assert rows["Free"]["agrees"]


@pytest.mark.real
def test_real_overlap_analysis_equals_step_trace_time_and_traceql(tmp_path: Path) -> None:
    from traceql import queries

    root = real(DB_LEVEL1 / "rank0_ascend_pt")
    an = root / "ASCEND_PROFILER_OUTPUT/analysis.db"
    con = sqlite3.connect(f"file:{an}?mode=ro&immutable=1", uri=True)
    (c, cno, comm, free) = con.execute(
        "SELECT computing, communication_not_overlapped, communication, free FROM StepTraceTime"
    ).fetchone()
    con.close()
    _ingest(root, tmp_path / "s", "r0")
    rows = {r["part"]: r for r in queries.run("overlap_check", tmp_path / "s", run_id="r0").to_pylist()}
    # analysis.db StepTraceTime is in us (8903.431): the db's OVERLAP_ANALYSIS sums are the same numbers in ns
    for part, us in (
        ("Computing", c),
        ("Communication(Not Overlapped)", cno),
        ("Communication", comm),
        ("Free", free),
    ):
        assert rows[part]["profiler_ns"] == round(us * 1000)
        assert rows[part]["agrees"], rows[part]


# --------------------------------------------------------------------------------------------------------
# AI Core frequency throttling (queries/aicore_freq.sql, rule aicore_freq)
# --------------------------------------------------------------------------------------------------------
# (kernel name, op type, start, duration) ns after T0; AICORE_FREQ samples (ts, MHz): 1800 at T0, 1500 from 200 us
FREQ_KERNELS = [("MatMul_1", "MatMul", 0, 100_000), ("MatMul_2", "MatMul", 300_000, 100_000),
                ("Add_1", "Add", 500_000, 50_000)]  # fmt: skip
FREQ_SAMPLES = [(0, 1800), (200_000, 1500)]


def _freq_dump(
    root: Path, info_json: bool, rated: str = "1800", samples: list[tuple[int, int]] = FREQ_SAMPLES
) -> Path:
    """A torch_npu db-export folder: profiler_info, ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db with
    AICORE_FREQ (declared as the real export declares it: deviceId INTEGER, timestampNs NUMERIC, freq INTEGER),
    and, optionally, the raw PROF_*/device_0/info.json.0 with DeviceInfo aic_frequency (msprof's layout)."""
    out = root / "ASCEND_PROFILER_OUTPUT"
    (root / "profiler_info_0.json").parent.mkdir(parents=True, exist_ok=True)
    (root / "profiler_info_0.json").write_text(
        json.dumps({"config": {}, "rank_id": 0, "torch_npu_version": "2.10.0"})
    )
    strings = {"AI_CORE": 1, "KERNEL_AICORE": 2}
    for name, typ, *_ in FREQ_KERNELS:
        strings.setdefault(name, len(strings) + 1)
        strings.setdefault(typ, len(strings) + 1)
    task = [(T0 + s, T0 + s + d, 0, 4294967295, i, 1, 2, 4294967295, 2, i, 4294967295, 0)
            for i, (_, _, s, d) in enumerate(FREQ_KERNELS)]  # fmt: skip
    compute = [
        (strings[n], i, 24, 0, 1, strings[t], 0, 0, 0, 0, 0, 0, 0, 0)
        for i, (n, t, _, _) in enumerate(FREQ_KERNELS)
    ]
    _db(
        out / "ascend_pytorch_profiler_0.db",
        {
            "STRING_IDS": ("id INTEGER PRIMARY KEY, value TEXT", [(v, k) for k, v in strings.items()]),
            "META_DATA": _meta("1.0.0"),
            "NPU_INFO": ("id INTEGER,name TEXT", [(0, "Ascend910B")]),
            "TASK": (
                "startNs INTEGER,endNs INTEGER,deviceId INTEGER,connectionId INTEGER,globalTaskId INTEGER,"
                "globalPid INTEGER,taskType INTEGER,contextId INTEGER,streamId INTEGER,taskId INTEGER,modelId INTEGER, "
                "depth integer",
                task,
            ),
            "COMPUTE_TASK_INFO": (
                "name INTEGER,globalTaskId INTEGER PRIMARY KEY,blockDim INTEGER,mixBlockDim INTEGER,taskType INTEGER,"
                "opType INTEGER,inputFormats INTEGER,inputDataTypes INTEGER,inputShapes INTEGER,outputFormats INTEGER,"
                "outputDataTypes INTEGER,outputShapes INTEGER,attrInfo INTEGER, waitNs INTEGER",
                compute,
            ),
            "AICORE_FREQ": (
                "deviceId INTEGER,timestampNs NUMERIC,freq INTEGER",
                [(0, T0 + t, f) for t, f in samples],
            ),
            "STEP_TIME": ("id INTEGER, startNs INTEGER, endNs INTEGER", [(1, T0, T0 + 1_000_000)]),
        },
    )
    (out / "analyse.done").write_text("")
    if info_json:
        dev = root / "PROF_000001_20260101000000000_ABCDEFGHIJKLMNOP" / "device_0"
        dev.mkdir(parents=True)
        (dev / "info.json.0").write_text(
            json.dumps(
                {"DeviceInfo": [{"id": 0, "ai_core_num": 24, "aic_frequency": rated, "hwts_frequency": "50"}]}
            )
        )
    return root


def test_aicore_freq_against_the_rated_clock_from_info_json(tmp_path: Path) -> None:
    from traceql import queries

    store = tmp_path / "s"
    _ingest(_freq_dump(tmp_path / "w_1_20260101_ascend_pt", info_json=True), store, "f")
    rows = queries.run("aicore_freq", store, run_id="f").to_pylist()
    by = {(r["scope"], r["op_type"]): r for r in rows}
    # hand: MatMul_1 starts at 1800 MHz, MatMul_2 and Add_1 after the 1500 MHz sample; weighted by device time
    #   rank: (1800 x 100 + 1500 x 100 + 1500 x 50) / 250 = 1620 MHz -> (1800 - 1620) / 1800 = 0.1
    rk = by[("rank", None)]
    assert (rk["kernels"], rk["dur_ns"], rk["min_mhz"], rk["max_mhz"]) == (3, 250_000, 1500, 1800)
    assert rk["avg_mhz"] == pytest.approx(1620) and rk["decrease_ratio"] == pytest.approx(0.1)
    assert (rk["rated_mhz"], rk["rated_source"], rk["throttled"]) == (1800, "info.json", True)
    mm, add = by[("op", "MatMul")], by[("op", "Add")]
    assert mm["avg_mhz"] == pytest.approx(1650) and mm["decrease_ratio"] == pytest.approx(150 / 1800)
    assert add["avg_mhz"] == pytest.approx(1500) and add["decrease_ratio"] == pytest.approx(300 / 1800)
    # rated clock given: 1620 MHz rated -> nothing lost on the rank
    rows = queries.run("aicore_freq", store, run_id="f", params={"rated_mhz": 1620.0}).to_pylist()
    rk = next(r for r in rows if r["scope"] == "rank")
    assert (
        rk["decrease_ratio"] == pytest.approx(0.0) and not rk["throttled"] and rk["rated_source"] == "param"
    )


def test_aicore_freq_at_a_clock_that_never_changed(tmp_path: Path) -> None:
    """Samples that all say 1800 MHz, the first at 100 us: the kernels from it on ran at 1800 (no look-up needed,
    the query's path for a rank whose clock never changed); MatMul_1, at 0, started before any sample and is
    left out, as under a changing clock."""
    from traceql import queries

    store = tmp_path / "s"
    dump = _freq_dump(
        tmp_path / "w_1_20260101_ascend_pt", info_json=True, samples=[(100_000, 1800), (400_000, 1800)]
    )
    _ingest(dump, store, "f")
    by = {(r["scope"], r["op_type"]): r for r in queries.run("aicore_freq", store, run_id="f").to_pylist()}
    # hand: MatMul_2 (300 us, 100 us long) and Add_1 (500 us, 50 us long), both at 1800 MHz
    rk = by[("rank", None)]
    assert (rk["kernels"], rk["dur_ns"], rk["min_mhz"], rk["max_mhz"]) == (2, 150_000, 1800, 1800)
    assert rk["avg_mhz"] == pytest.approx(1800) and rk["decrease_ratio"] == pytest.approx(0.0)
    assert (by[("op", "MatMul")]["kernels"], by[("op", "Add")]["kernels"]) == (1, 1)


def test_aicore_freq_finding(tmp_path: Path) -> None:
    from traceql.findings import evaluate

    store = tmp_path / "s"
    _ingest(_freq_dump(tmp_path / "w_1_20260101_ascend_pt", info_json=True), store, "f")
    f = evaluate(store, "f").finding("aicore_freq")
    assert f.fired, f
    assert "1620 MHz against 1800 MHz rated (info.json), 10.0% lower" in f.message
    # saving (model): 250 us of compute x 0.1 lost = 25 us in the one step
    assert f.saving["value"] == pytest.approx(0.025)
    # rated 1500 MHz: the kernels ran at or above it (mean 1620), nothing throttled
    store2 = tmp_path / "s2"
    _ingest(_freq_dump(tmp_path / "w_2_20260101_ascend_pt", info_json=True, rated="1500"), store2, "f")
    g = evaluate(store2, "f").finding("aicore_freq")
    assert not g.fired and g.evidence["outcome"] == "ok" and "1620 of 1500 MHz" in g.message


def test_aicore_freq_without_a_rated_clock(tmp_path: Path) -> None:
    from traceql import queries

    store = tmp_path / "s"
    _ingest(_freq_dump(tmp_path / "w_1_20260101_ascend_pt", info_json=False), store, "f")
    rk = next(r for r in queries.run("aicore_freq", store, run_id="f").to_pylist() if r["scope"] == "rank")
    assert rk["rated_mhz"] is None and rk["decrease_ratio"] is None and rk["rated_source"] == "unknown"
    assert rk["avg_mhz"] == pytest.approx(1620) and not rk["throttled"]


# --------------------------------------------------------------------------------------------------------
# rankSize -> bus bandwidth; HCCL sizes marked invalid (queries/comm_bus_bandwidth.sql)
# --------------------------------------------------------------------------------------------------------
# ENUM_HCCL_DATA_TYPE as MSPROF-DB-DOC lists it (Ascend/msprof docs/en/user_guide/profile_data_file_references_db.md)
HCCL_TYPES = [(0, "INT8"), (3, "FP16"), (4, "FP32"), (11, "BFP16"), (255, "RESERVED"), (65534, "N/A"),
              (65535, "INVALID_TYPE")]  # fmt: skip
# (op name, op type, dataType id, count, rankSize, start, duration) ns after T0
BUS_OPS = [
    ("hcom_allReduce__1_0_1", "hcom_allReduce_", 3, 1_048_576, 8, 0, 1_000_000),
    ("hcom_allGather__2_0_1", "hcom_allGather_", 11, 4096, 8, 2_000_000, 100_000),
    ("hcom_broadcast__3_0_1", "hcom_broadcast_", 65535, 4096, 8, 3_000_000, 50_000),
]


def _bus_db(path: Path, rank_size: bool = True) -> Path:
    strings: dict[str, int] = {"group_a": 1}
    for name, typ, *_ in BUS_OPS:
        strings.setdefault(name, len(strings) + 1)
        strings.setdefault(typ, len(strings) + 1)
    cols = (
        "opName INTEGER,startNs INTEGER,endNs INTEGER,connectionId INTEGER,groupName INTEGER,opId INTEGER PRIMARY KEY,"
        "relay INTEGER,retry INTEGER,dataType INTEGER,algType INTEGER,count NUMERIC,opType INTEGER, waitNs INTEGER, "
        "deviceId INTEGER"
    )
    rows = []
    for i, (name, typ, dt, cnt, rs, s, d) in enumerate(BUS_OPS):
        row: tuple[Any, ...] = (
            strings[name],
            T0 + s,
            T0 + s + d,
            4294967295,
            1,
            i,
            0,
            0,
            dt,
            0,
            cnt,
            strings[typ],
            0,
            0,
        )
        rows.append((*row, rs) if rank_size else row)
    if rank_size:
        cols += ", rankSize INTEGER"  # the 2026 column (issue 19); name as the issue gives it [I]
    return _db(
        path,
        {
            "STRING_IDS": ("id INTEGER PRIMARY KEY, value TEXT", [(v, k) for k, v in strings.items()]),
            "ENUM_HCCL_DATA_TYPE": ("id INTEGER PRIMARY KEY,name TEXT", HCCL_TYPES),
            "META_DATA": _meta("1.0.0"),
            "TASK": (TASK_COLS, [(T0, T0 + 5, 0, 1, 99, 0, 2, 4294967295, 2, 1, 4294967295)]),
            "COMMUNICATION_OP": (cols, rows),
        },
    )


def test_bus_bandwidth_from_rank_size_equals_hand_computation(tmp_path: Path) -> None:
    from traceql import queries

    store = tmp_path / "s"
    _ingest(_bus_db(tmp_path / "msprof_20260101000000.db"), store, "bus")
    rows = {r["name"]: r for r in queries.run("comm_bus_bandwidth", store, run_id="bus").to_pylist()}
    ar = rows["hcom_allReduce__1_0_1"]
    # hand: 1048576 FP16 elements x 2 B = 2097152 B over 1 ms -> 2.097152e9 B/s; x 2(8-1)/8 = 1.75 -> 3.670016e9
    assert (ar["data_type"], ar["data_bytes"], ar["rank_size"], ar["rank_size_source"]) == (
        "FP16",
        2_097_152,
        8,
        "rankSize",
    )
    assert ar["alg_bw_bps"] == pytest.approx(2.097152e9) and ar["bus_factor"] == pytest.approx(1.75)
    assert ar["bus_bw_bps"] == pytest.approx(3.670016e9) and ar["size_status"] == "ok"
    ag = rows["hcom_allGather__2_0_1"]
    # 4096 BFP16 x 2 B = 8192 B over 100 us -> 8.192e7 B/s; x (8-1)/8 -> 7.168e7
    assert ag["data_bytes"] == 8192 and ag["bus_bw_bps"] == pytest.approx(7.168e7)
    bc = rows["hcom_broadcast__3_0_1"]  # dataType 65535 = INVALID_TYPE: the size is not known, never guessed
    assert (bc["data_type"], bc["data_bytes"], bc["alg_bw_bps"], bc["size_status"]) == (
        "INVALID_TYPE",
        None,
        None,
        "invalid",
    )
    stored = _q(store, "SELECT name, data_bytes, rank_size FROM comm_ops ORDER BY ts_ns")
    assert [(r["data_bytes"], r["rank_size"]) for r in stored] == [(2_097_152, 8), (8192, 8), (None, 8)]


def test_bus_bandwidth_without_rank_size_uses_the_ranks_in_the_dump(tmp_path: Path) -> None:
    from traceql import queries

    store = tmp_path / "s"
    _ingest(_bus_db(tmp_path / "msprof_20260101000000.db", rank_size=False), store, "bus")
    ar = next(
        r
        for r in queries.run("comm_bus_bandwidth", store, run_id="bus").to_pylist()
        if "allReduce" in r["name"]
    )
    # one rank in the dump: n = 1 (a lower bound, labelled), factor 2(1-1)/1 = 0
    assert (ar["rank_size"], ar["rank_size_source"], ar["bus_factor"]) == (1, "ranks_in_dump", 0.0)
    assert ar["alg_bw_bps"] == pytest.approx(2.097152e9)


@pytest.mark.real
def test_real_db_comm_op_sizes_from_count_and_data_type(tmp_path: Path) -> None:
    db = real(DB_LEVEL1 / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db")
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    expect = {
        name: int(cnt) * {"INT8": 1, "FP16": 2, "FP32": 4, "BFP16": 2, "INT32": 4, "INT64": 8}[dt]
        for name, dt, cnt in con.execute(
            """SELECT s.value, e.name, o.count FROM COMMUNICATION_OP o JOIN STRING_IDS s ON s.id = o.opName
               JOIN ENUM_HCCL_DATA_TYPE e ON e.id = o.dataType"""
        )
    }
    con.close()
    _ingest(DB_LEVEL1 / "rank0_ascend_pt", tmp_path / "s", "r0")
    got = {r["name"]: r["data_bytes"] for r in _q(tmp_path / "s", "SELECT name, data_bytes FROM comm_ops")}
    assert expect and got == expect


# --------------------------------------------------------------------------------------------------------
# 2026 sys_interconnection / task tables: UB, SIO -> counters; CCU, DPU_TASK -> said, not ingested
# --------------------------------------------------------------------------------------------------------
def test_ub_sio_counters_and_ccu_dpu_notes(tmp_path: Path) -> None:
    # column declarations verbatim from MSPROF-DB-DOC (Ascend/msprof docs/en/user_guide/
    # profile_data_file_references_db.md, sections UB, SIO, CCU, DPU_TASK)
    strings = {"MatMul_1": 1, "AI_CORE": 2, "MatMul": 3, "die0_ch1": 4, "ccu_reduce": 5, "{}": 6, "dpu_op": 7}
    db = _db(
        tmp_path / "msprof_20260101000000.db",
        {
            "STRING_IDS": ("id INTEGER PRIMARY KEY, value TEXT", [(v, k) for k, v in strings.items()]),
            "META_DATA": _meta("1.0.0"),
            "TASK": (TASK_COLS, [(T0, T0 + 1000, 0, 1, 1, 0, 2, 4294967295, 2, 1, 4294967295)]),
            "COMPUTE_TASK_INFO": (COMPUTE_COLS, [(1, 1, 8, 0, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0)]),
            "UB": (
                "deviceId NUMERIC, portId NUMERIC, timestampNs NUMERIC, rxUdmaBind NUMERIC, txUdmaBind NUMERIC",
                [(0, 3, T0, 1.5e9, 2.5e9), (0, 3, T0 + 20_000_000, 1.0e9, 0.0)],
            ),
            "SIO": (
                "deviceId NUMERIC, name INTEGER, timestampNs NUMERIC, rxReq NUMERIC, rxRsp NUMERIC, rxSnp NUMERIC, "
                "rxDat NUMERIC, txReq NUMERIC, txRsp NUMERIC, txSnp NUMERIC, txDat NUMERIC",
                [(0, 4, T0, 1, 2, 3, 4e9, 5, 6, 7, 8e9)],
            ),
            "CCU": (
                "deviceId NUMERIC, globalTaskId NUMERIC, name INTEGER, startNs NUMERIC, endNs NUMERIC, args INTEGER",
                [(0, 7, 5, T0, T0 + 10, 6), (0, 7, 5, T0 + 20, T0 + 30, 6)],
            ),
            "DPU_TASK": (
                "dpuDeviceId NUMERIC, globalTid NUMERIC, startNs NUMERIC, endNs NUMERIC, globalTaskId NUMERIC, "
                "streamId NUMERIC, taskId NUMERIC, opName INTEGER, args INTEGER",
                [(0, 1, T0, T0 + 5, 9, 1, 1, 7, 6)],
            ),
        },
    )
    info = _ingest(db, tmp_path / "s", "io")
    c = _q(
        tmp_path / "s",
        "SELECT track, channel, metric, unit, name, ts_ns, value FROM counters ORDER BY track, ts_ns, metric",
    )
    ub = [r for r in c if r["track"] == "UB (UnifiedBus)"]
    assert [(r["channel"], r["metric"], r["name"], r["ts_ns"] - T0, r["value"]) for r in ub] == [
        ("3", "rx_bw", "UB 3/Rx", 0, 1.5e9),
        ("3", "tx_bw", "UB 3/Tx", 0, 2.5e9),
        ("3", "rx_bw", "UB 3/Rx", 20_000_000, 1.0e9),
        ("3", "tx_bw", "UB 3/Tx", 20_000_000, 0.0),
    ]
    sio = {r["metric"]: r for r in c if r["track"] == "SIO"}
    assert len(sio) == 8 and sio["rx_dat_bw"]["value"] == 4e9 and sio["tx_dat_bw"]["value"] == 8e9
    assert sio["rx_req_bw"]["name"] == "die0_ch1/RX Req" and sio["rx_req_bw"]["unit"] == "bytes/s"
    assert (
        _q(tmp_path / "s", "SELECT count(*) AS n FROM kernels")[0]["n"] == 1
    )  # CCU / DPU rows are not kernels
    notes = " ".join(info.get("warnings", []))
    assert "CCU: 2 rows not ingested" in notes and "DPU_TASK: 1 rows not ingested" in notes


# --------------------------------------------------------------------------------------------------------
# device peaks: sources, CANN platform_config ini, observed ceiling
# --------------------------------------------------------------------------------------------------------
def test_every_preset_cites_its_source_and_910b_says_no_ub_l2_source() -> None:
    from traceql import devices

    for d in devices.PRESETS:
        assert d.source.strip(), d.key
    for d in devices.PRESETS:
        if d.key.startswith("ascend910b"):
            assert d.peak_ub_bps is None and d.peak_l2_bps is None  # never an invented number
            assert "no source found" in d.source


# A platform_config ini in CANN's layout ([version] / [SoCInfo] / [AICoreSpec] / [AICoreMemoryRates], keys as
# CANN's GetPlatformRes reads them). The NUMBERS ARE THIS TEST'S OWN, round for hand arithmetic, not any
# chip's: no real Ascend910B ini was available to copy from, and none is needed to test the arithmetic.
INI = """[version]
SoC_version=Ascend910B_fixture
[SoCInfo]
ai_core_cnt=20
cube_core_cnt=20
vector_core_cnt=40
[AICoreSpec]
cube_freq=1000
cube_m_size=16
cube_n_size=16
cube_k_size=16
[AICoreMemoryRates]
ddr_rate=50
l2_rate=100
ub_to_ddr_rate=21474836480/680000000
"""


def test_platform_config_peaks_by_hand() -> None:
    from traceql import devices

    meta = {"platform_config.file": "x.ini"}
    for line_section in INI.split("["):
        if not line_section.strip():
            continue
        head, *lines = line_section.strip().splitlines()
        for ln in lines:
            k, v = ln.split("=", 1)
            meta[f"platform_config.{head.rstrip(']')}.{k}"] = v
    got = devices.platform_peaks(meta)
    assert got is not None
    peaks, note = got
    # hand: 1000 MHz x 20 cores x 50 B/cycle = 1e12 B/s HBM; x 100 B/cycle = 2e12 B/s L2;
    #       2 x 16^3 MACs x 20 cube cores x 1e9 Hz = 1.6384e14 FLOP/s; no single UB rate in the ini
    assert peaks == {"peak_hbm_bps": 1e12, "peak_l2_bps": 2e12, "peak_ub_bps": None, "peak_flops": 1.6384e14}
    assert "Ascend910B_fixture" in note and "platform_config" in note
    assert devices.platform_peaks({"device": "Ascend910B"}) is None


def test_dump_with_platform_config_uses_its_peaks_labelled(tmp_path: Path) -> None:
    from traceql import queries

    root = _freq_dump(tmp_path / "w_1_20260101_ascend_pt", info_json=False)
    (root / "platform_config").mkdir()
    (root / "platform_config" / "Ascend910B_fixture.ini").write_text(INI)
    store = tmp_path / "s"
    _ingest(root, store, "pc")
    t = queries.run("roofline", store, run_id="pc")
    meta = {k.decode(): v.decode() for k, v in (t.schema.metadata or {}).items()}
    peaks = json.loads(meta["traceql.peaks"])
    assert peaks["peak_hbm_bps"] == 1e12 and peaks["peak_flops"] == 1.6384e14  # not the ascend910b preset's
    assert "platform_config (Ascend910B_fixture)" in meta["traceql.peaks_note"]
    # an explicit --device still wins over the ini
    t = queries.run("roofline", store, run_id="pc", device="ascend910b")
    assert json.loads(t.schema.metadata[b"traceql.peaks"])["peak_hbm_bps"] == 1.6e12
    # AI Core rated clock from the same ini when the dump has no info.json: cube_freq 1000 MHz
    rk = next(r for r in queries.run("aicore_freq", store, run_id="pc").to_pylist() if r["scope"] == "rank")
    assert (rk["rated_mhz"], rk["rated_source"]) == (1000.0, "platform_config")


def test_observed_ceiling_above_the_preset(tmp_path: Path) -> None:
    from traceql import checks
    from traceql.rank_writer import RankWriter
    from traceql.store import Store

    s = Store(tmp_path / "s")
    staging = s.new_staging()
    w = RankWriter(staging, "c", 0)
    # ascend910b preset: 1.6e12 B/s HBM. Kernel fast: 4e6 B PMU bytes in 1 us = 4e12 B/s = 2.5x the preset;
    # slow: 1e6 B in 1 us = 1e12 (below it); silly: 1e9 B in 1 us = 1e15 (625x: a unit error, not a ceiling)
    w.write(
        "kernels",
        {
            "name": ["slow", "fast", "silly"],
            "ts_ns": [T0, T0 + 10_000, T0 + 20_000],
            "dur_ns": [1000, 1000, 1000],
            "hbm_read_bytes": [1_000_000, 3_000_000, 10**9],
            "hbm_write_bytes": [0, 1_000_000, 0],
        },
    )
    w.close()
    s.commit(staging, "c", {"source": "t", "format": "canonical", "device": "Ascend910B", "ranks": [0],
                            "ranks_count": 1, "rows": w.rows, "files": w.files})  # fmt: skip
    res = {r["name"]: r for r in checks.run_checks(s, "c", names=["observed_ceiling_above_preset"])}
    r = res["observed_ceiling_above_preset"]
    assert r["error"] is None and r["failures"] == 1, r
    (row,) = r["sample"]
    # "silly" (625x) is a unit error left to hbm_bandwidth_above_peak; the ceiling is "fast" at 2.5x
    assert (row["level"], row["name"], row["ceiling_bps"], row["preset_peak_bps"]) == (
        "HBM",
        "fast",
        4e12,
        1.6e12,
    )
    assert row["times_peak"] == pytest.approx(2.5)


# --------------------------------------------------------------------------------------------------------
# torch_npu ASCEND_PROFILER_OUTPUT/task_time.csv and soc_pmu.csv
# --------------------------------------------------------------------------------------------------------
# msprof's task_time columns (MSPROF-DOC task_time; torch_npu copies them verbatim: _task_time_bean.py)
TASK_TIME = (
    "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)\r\n"
    "0,MatMul_1,AI_CORE,2,11,12.345,1736410576000000.100,1736410576000012.445\r\n"
    "0,hcom_allReduce__1_0_1,HCCL,3,12,100.000,1736410576000020.000,1736410576000120.000\r\n"
)


def test_task_time_only_dump_gives_kernels(tmp_path: Path) -> None:
    root = tmp_path / "w_1_20260101_ascend_pt"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "task_time.csv").write_text(TASK_TIME)
    (out / "soc_pmu.csv").write_text("Device_id,whatever\r\n0,1\r\n")
    info = _ingest(root, tmp_path / "s", "tt")
    k = _q(
        tmp_path / "s",
        "SELECT name, task_type, is_comm, stream_id, task_id, ts_ns, dur_ns FROM kernels ORDER BY ts_ns",
    )
    # hand: 1736410576000000.100 us = 1736410576000000100 ns; 12.345 us = 12345 ns
    assert [tuple(r.values()) for r in k] == [
        ("MatMul_1", "AI_CORE", False, 2, 11, 1736410576000000100, 12345),
        ("hcom_allReduce__1_0_1", "HCCL", True, 3, 12, 1736410576000020000, 100000),
    ]
    assert any("soc_pmu.csv: not read" in w for w in info.get("warnings", []))


def test_task_time_beside_kernel_details_is_not_counted_twice(tmp_path: Path) -> None:
    root = _text_dump(tmp_path / "w_1_20260101_ascend_pt", "2.10.0", done=True)
    (root / "ASCEND_PROFILER_OUTPUT" / "task_time.csv").write_text(TASK_TIME)
    info = _ingest(root, tmp_path / "s", "tt")
    assert _q(tmp_path / "s", "SELECT count(*) AS n FROM kernels")[0]["n"] == 1  # kernel_details' one row
    assert any("task_time.csv: not read: the same tasks" in w for w in info.get("warnings", []))


def test_profiler_step_mstx_ranges_give_steps_without_step_time(tmp_path: Path) -> None:
    # record_steps=True: torch_npu calls mstx.range_start("ProfilerStep#N", current_stream()) every step; the
    # host ranges land in MSTX_EVENTS (columns as the msprof_0.db sample declares them)
    strings = {
        "ProfilerStep#3": 1,
        "ProfilerStep#4": 2,
        "dataloader": 3,
        "MatMul_1": 4,
        "AI_CORE": 5,
        "MatMul": 6,
    }
    mstx = [
        (T0, T0 + 400_000, 2, 1, 4294967295, 1, GTID, GTID, 0, 4294967295, None),
        (T0 + 400_000, T0 + 900_000, 2, 2, 4294967295, 2, GTID, GTID, 0, 4294967295, None),
        (T0 + 10, T0 + 50, 2, 3, 4294967295, 3, GTID, GTID, 0, 4294967295, None),  # not a step
    ]
    db = _db(
        tmp_path / "msprof_20260101000000.db",
        {
            "STRING_IDS": ("id INTEGER PRIMARY KEY, value TEXT", [(v, k) for k, v in strings.items()]),
            "ENUM_MSTX_EVENT_TYPE": (
                "id INTEGER PRIMARY KEY,name TEXT",
                [(0, "marker"), (1, "push/pop"), (2, "start/end")],
            ),
            "META_DATA": _meta("1.0.0"),
            "TASK": (TASK_COLS, [(T0 + 1000, T0 + 2000, 0, 1, 1, 0, 2, 4294967295, 2, 1, 4294967295)]),
            "COMPUTE_TASK_INFO": (COMPUTE_COLS, [(4, 1, 8, 0, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0)]),
            "MSTX_EVENTS": (
                "startNs INTEGER, endNs INTEGER, eventType INTEGER, rangeId INTEGER, category INTEGER, message INTEGER, "
                "globalTid INTEGER, endGlobalTid INTEGER, domainId INTEGER, connectionId INTEGER, depth integer",
                mstx,
            ),
        },
    )
    _ingest(db, tmp_path / "s", "st")
    st = _q(tmp_path / "s", "SELECT step, ts_ns, dur_ns, source FROM steps ORDER BY ts_ns")
    assert [(r["step"], r["ts_ns"] - T0, r["dur_ns"]) for r in st] == [(3, 0, 400_000), (4, 400_000, 500_000)]
    assert {r["source"] for r in st} == {"db:MSTX_EVENTS ProfilerStep"}


# --------------------------------------------------------------------------------------------------------
# outputs traceql knows of but does not ingest: Execution Trace, Perfetto protobuf (cupti_monitor)
# --------------------------------------------------------------------------------------------------------
def test_execution_trace_and_pftrace_are_refused_by_name(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # the top-level keys PyTorch's ExecutionTraceObserver writes (torch/csrc/profiler/standalone/
    # execution_trace_observer.cpp: schema, pid, time, start_ts, nodes, finish_ts)
    et = tmp_path / "rank0_et.json"
    et.write_text(json.dumps({"schema": "1.1.1-chakra.0.0.4", "pid": 7, "time": "2026-01-01 00:00:00",
                              "start_ts": 1, "nodes": [{"id": 1, "name": "[pytorch|profiler|execution_trace|process]",
                                                        "ctrl_deps": 0}], "finish_ts": 2}))  # fmt: skip
    r = cli("ingest", str(et), "--store", str(tmp_path / "s"), "-q")
    assert r.code == 1 and str(et) in r.err and "Execution Trace" in r.err and "Traceback" not in r.err, r
    # a Perfetto TracePacket stream written with the perfetto package's own protos
    pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    t = pb.Trace()
    p = t.packet.add()
    p.timestamp = 1000
    p.track_event.type = pb.TrackEvent.TYPE_SLICE_BEGIN
    p.track_event.name = "cudaLaunchKernel"
    pf = tmp_path / "cupti_monitor.pftrace"
    pf.write_bytes(t.SerializeToString())
    r = cli("ingest", str(pf), "--store", str(tmp_path / "s"), "-q")
    assert r.code == 1 and str(pf) in r.err and "Perfetto protobuf" in r.err and "Traceback" not in r.err, r


def test_findings_and_report_say_the_preset_is_wrong(tmp_path: Path) -> None:
    from traceql.findings import evaluate
    from traceql.rank_writer import RankWriter
    from traceql.store import Store

    s = Store(tmp_path / "s")
    staging = s.new_staging()
    w = RankWriter(staging, "c", 0)
    # ascend910b preset HBM peak 1.6e12 B/s; kernel fast: 4e6 PMU bytes in 1 us = 4e12 B/s = 2.5x
    w.write("kernels", {"name": ["fast"], "ts_ns": [T0], "dur_ns": [1000], "hbm_read_bytes": [4_000_000],
                        "hbm_write_bytes": [0], "task_type": ["AI_CORE"]})  # fmt: skip
    w.close()
    s.commit(staging, "c", {"source": "t", "format": "canonical", "device": "Ascend910B", "ranks": [0],
                            "ranks_count": 1, "rows": w.rows, "files": w.files})  # fmt: skip
    rep = evaluate(s, "c", device="ascend910b")
    (row,) = rep.device["observed_ceiling"]
    assert (row["name"], row["level"]) == ("fast", "HBM") and row["times_peak"] == pytest.approx(2.5)
    assert "the device preset is wrong for this device" in rep.device["note"]
    assert "2.50x the preset's peak" in rep.device["note"]


def test_level0_kernel_details_with_shapes(tmp_path: Path) -> None:
    # a Level0 header (the real 2025 Level0 sample's columns) plus the shape/type columns newer torch_npu adds
    # with record_shapes [I: no 2026 Level0 sample]: read by name, like Level1's
    root = tmp_path / "w_1_20260101_ascend_pt"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "kernel_details.csv").write_text(
        LEVEL0_HEADER + ",Input Shapes,Input Data Types,Output Shapes\r\n"
        '1,MatMul_1,N/A,N/A,1736410576000000.000\t,2.500,0,8,"""16,32;32,8""",FLOAT16;FLOAT16,"""16,8"""\r\n'
    )
    _ingest(root, tmp_path / "s", "l0")
    (k,) = _q(tmp_path / "s", "SELECT input_shapes, input_dtypes, output_shapes, block_dim FROM kernels")
    assert (k["input_shapes"], k["input_dtypes"], k["output_shapes"], k["block_dim"]) == (
        "16,32;32,8",
        "FLOAT16;FLOAT16",
        "16,8",
        8,
    )
