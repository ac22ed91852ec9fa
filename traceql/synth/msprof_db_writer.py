"""A small msprof_{timestamp}.db with the tables MSPROF-DB-DOC added by 2026-03 (the parsers._db_system tests'
exact answers): MEMCPY_INFO, NETDEV_STATS, SAMPLE_PMU_SUMMARY, CPU_USAGE, HOST_MEM_USAGE, HOST_DISK_USAGE,
HOST_NETWORK_USAGE, beside one AI_CORE task so the export is a valid msprof db.

Column names and order are those of MSPROF-DB-DOC (Ascend/msprof docs/en/user_guide/
profile_data_file_references_db.md, commit 0290a495); TASK / COMPUTE_TASK_INFO declarations are the real
2025 export's. Times are ns since the epoch (the db's unit); usage columns are percent, as the db writes them.

    from traceql.synth.msprof_db_writer import MsprofDb2026, write_msprof_db
    db = MsprofDb2026()
    db.memcpy(start_ns=T0 + 10, dur_ns=500, size=4096, operation=1, task_id=7)
    db.cpu_usage.append((T0, 0, 37.5))
    write_msprof_db(db, "PROF_x/msprof_20260301000000.db")
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

T0 = 1_772_323_200_000_000_000  # 2026-03-01 00:00:00 UTC, ns
TASK_COLS = (
    "startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER, "
    "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER"
)
COMPUTE_COLS = (
    "name INTEGER, globalTaskId INTEGER, blockNum INTEGER, mixBlockNum INTEGER, taskType INTEGER, opType INTEGER, "
    "inputFormats INTEGER, inputDataTypes INTEGER, inputShapes INTEGER, outputFormats INTEGER, "
    "outputDataTypes INTEGER, outputShapes INTEGER, attrInfo INTEGER, opState INTEGER, hf32Eligible INTEGER"
)
NETDEV_COLS = (
    "macTxPfcPkt", "macRxPfcPkt", "macTxByte", "macTxBandwidth", "macRxByte", "macRxBandwidth", "macTxBadByte",
    "macRxBadByte", "roceTxPkt", "roceRxPkt", "roceTxErrPkt", "roceRxErrPkt", "roceTxCnpPkt", "roceRxCnpPkt",
    "roceNewPktRty", "nicTxByte", "nicTxBandwidth", "nicRxByte", "nicRxBandwidth",
)  # fmt: skip
MEMCPY_OPERATIONS = {0: "host to host", 1: "host to device", 2: "device to host", 3: "device to device"}


@dataclass
class MsprofDb2026:
    device_id: int = 0
    tasks: list[tuple[Any, ...]] = field(default_factory=list)
    memcpys: list[tuple[int, int, int]] = field(default_factory=list)  # (globalTaskId, size, memcpyOperation)
    netdev: list[dict[str, Any]] = field(default_factory=list)  # deviceId, timestampNs + NETDEV_COLS subset
    pmu_summary: list[tuple[int, str, float, int, str]] = field(
        default_factory=list
    )  # dev, metric, value, core, type
    cpu_usage: list[tuple[int, int, float]] = field(default_factory=list)  # (timestampNs, cpuId, usage %)
    mem_usage: list[tuple[int, float]] = field(default_factory=list)  # (timestampNs, usage %)
    disk_usage: list[tuple[int, float, float, float]] = field(
        default_factory=list
    )  # (ts, readRate, writeRate, usage %)
    net_usage: list[tuple[int, float, float]] = field(default_factory=list)  # (ts, usage %, speed)
    comm_ops: list[tuple[int, int]] = field(default_factory=list)  # (startNs, endNs) of hcom_allReduce_ ops
    enum_table: bool = True  # write ENUM_MEMCPY_OPERATION (else the parser falls back to the documented ids)

    def __post_init__(self) -> None:
        # one AI_CORE compute task (globalTaskId 1) so the db is an ordinary msprof export
        self.tasks.append((T0, T0 + 1_000, self.device_id, 1, 1, 0, 2, 4294967295, 2, 1, 4294967295))

    def memcpy(
        self, start_ns: int, dur_ns: int, size: int, operation: int, task_id: int, stream: int = 5
    ) -> None:
        gid = 100 + len(self.memcpys)
        self.tasks.append((start_ns, start_ns + dur_ns, self.device_id, 50 + gid, gid, 0, 3, 4294967295, stream,
                           task_id, 4294967295))  # fmt: skip
        self.memcpys.append((gid, size, operation))


def write_msprof_db(db: MsprofDb2026, path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.unlink(missing_ok=True)
    strings = {"MatMul_1": 1, "AI_CORE": 2, "MEMCPY_ASYNC": 3, "MatMul": 4, "hcom_allReduce__1_0_1": 5,
               "group0": 6, "hcom_allReduce_": 7}  # fmt: skip
    for _, metric, _, _, core_type in db.pmu_summary:
        strings.setdefault(metric, len(strings) + 1)
        strings.setdefault(core_type, len(strings) + 1)
    con = sqlite3.connect(p)
    try:
        con.execute("CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT)")
        con.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", [(i, s) for s, i in strings.items()])
        con.execute("CREATE TABLE META_DATA (name TEXT, value TEXT)")
        con.executemany("INSERT INTO META_DATA VALUES (?, ?)", [("SCHEMA_VERSION", "1.0.2"), ("SCHEMA_VERSION_MAJOR", "1"),
                                                                ("SCHEMA_VERSION_MINOR", "0"), ("SCHEMA_VERSION_MICRO", "2")])  # fmt: skip
        con.execute(f"CREATE TABLE TASK ({TASK_COLS})")
        con.executemany(f"INSERT INTO TASK VALUES ({', '.join('?' * 11)})", db.tasks)
        con.execute(f"CREATE TABLE COMPUTE_TASK_INFO ({COMPUTE_COLS})")
        con.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (1, 1, 8, 0, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0)")
        if db.enum_table:
            con.execute("CREATE TABLE ENUM_MEMCPY_OPERATION (id INTEGER PRIMARY KEY, name TEXT)")
            con.executemany(
                "INSERT INTO ENUM_MEMCPY_OPERATION VALUES (?, ?)", sorted(MEMCPY_OPERATIONS.items())
            )
        con.execute("CREATE TABLE MEMCPY_INFO (globalTaskId NUMERIC, size NUMERIC, memcpyOperation NUMERIC)")
        con.executemany("INSERT INTO MEMCPY_INFO VALUES (?, ?, ?)", db.memcpys)
        ncols = ", ".join(f"{c} {'NUMERIC' if c.endswith('Bandwidth') else 'INTEGER'}" for c in NETDEV_COLS)
        con.execute(f"CREATE TABLE NETDEV_STATS (deviceId INTEGER, timestampNs INTEGER, {ncols})")
        for row in db.netdev:
            con.execute(f"INSERT INTO NETDEV_STATS ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                        list(row.values()))  # fmt: skip
        # COMMUNICATION_OP as MSPROF-DB-DOC lists it (dataType 4 = FP32, count elements)
        con.execute("CREATE TABLE COMMUNICATION_OP (opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER, "
                    "groupName INTEGER, opId INTEGER, relay INTEGER, retry INTEGER, dataType INTEGER, algType INTEGER, "
                    "count NUMERIC, opType INTEGER, deviceId INTEGER)")  # fmt: skip
        con.executemany("INSERT INTO COMMUNICATION_OP VALUES (5, ?, ?, 900, 6, ?, 0, 0, 4, 0, 1024, 7, ?)",
                        [(a, b, i, db.device_id) for i, (a, b) in enumerate(db.comm_ops)])  # fmt: skip
        con.execute(
            "CREATE TABLE SAMPLE_PMU_SUMMARY (deviceId INTEGER, metric INTEGER, value NUMERIC, coreId INTEGER, coreType INTEGER)"
        )
        con.executemany("INSERT INTO SAMPLE_PMU_SUMMARY VALUES (?, ?, ?, ?, ?)",
                        [(d, strings[m], v, c, strings[t]) for d, m, v, c, t in db.pmu_summary])  # fmt: skip
        con.execute("CREATE TABLE CPU_USAGE (timestampNs NUMERIC, cpuId NUMERIC, usage NUMERIC)")
        con.executemany("INSERT INTO CPU_USAGE VALUES (?, ?, ?)", db.cpu_usage)
        con.execute("CREATE TABLE HOST_MEM_USAGE (timestampNs NUMERIC, usage NUMERIC)")
        con.executemany("INSERT INTO HOST_MEM_USAGE VALUES (?, ?)", db.mem_usage)
        con.execute(
            "CREATE TABLE HOST_DISK_USAGE (timestampNs NUMERIC, readRate NUMERIC, writeRate NUMERIC, usage NUMERIC)"
        )
        con.executemany("INSERT INTO HOST_DISK_USAGE VALUES (?, ?, ?, ?)", db.disk_usage)
        con.execute("CREATE TABLE HOST_NETWORK_USAGE (timestampNs NUMERIC, usage NUMERIC, speed NUMERIC)")
        con.executemany("INSERT INTO HOST_NETWORK_USAGE VALUES (?, ?, ?)", db.net_usage)
        con.commit()
    finally:
        con.close()
    return p
