"""msprof / torch_npu db tables documented since 2026-03 (MSPROF-DB-DOC, Ascend/msprof
docs/en/user_guide/profile_data_file_references_db.md, commit 0290a495): copies, link statistics, host usage,
sample-mode PMU totals.

| db table                                   | canonical   | mapping |
|--------------------------------------------|-------------|---------|
| MEMCPY_INFO(globalTaskId, size, memcpyOperation) x TASK | copies | bytes = size, direction = ENUM_MEMCPY_OPERATION name, times/stream/task/connection from TASK |
| NETDEV_STATS(deviceId, timestampNs, macTxPfcPkt, macRxPfcPkt, macTxByte, macTxBandwidth, macRxByte, macRxBandwidth, macTxBadByte, macRxBadByte, roceTxPkt, roceRxPkt, roceTxErrPkt, roceRxErrPkt, roceTxCnpPkt, roceRxCnpPkt, roceNewPktRty, nicTxByte, nicTxBandwidth, nicRxByte, nicRxBandwidth) | counters track NETDEV | metric = the column in snake case (mac_tx_pfc_pkt...), unit: *Pkt / *PktRty count, *Byte bytes, *Bandwidth bytes/s; values as written (the doc does not say whether the counts are per sample or running totals) |
| CPU_USAGE(timestampNs, cpuId, usage %)     | counters track Host CPU | channel = cpuId, metric usage, ratio = usage / 100 |
| HOST_MEM_USAGE(timestampNs, usage %)       | counters track Host Memory | metric usage, ratio |
| HOST_DISK_USAGE(timestampNs, readRate, writeRate, usage %) | counters track Host Disk | read_bw / write_bw bytes/s, usage ratio |
| HOST_NETWORK_USAGE(timestampNs, usage %, speed) | counters track Host Network | usage ratio, throughput bytes/s (speed) |
| SAMPLE_PMU_SUMMARY(deviceId, metric, value, coreId, coreType) | pmu_summary | metric / coreType from STRING_IDS, value as written |

Before this module the generic counter fallback (_db_tables.write_counters) stored the timestamped ones with
the table name as track and `usage` in percent; these specs give them canonical names and units.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ._sqlite import lit, q

if TYPE_CHECKING:  # pragma: no cover
    from ..rank_writer import RankWriter
    from ._db_tables import DbExport

Spec = tuple[str, dict[str, str], str, list[tuple[str, str, str, str]]]

NETDEV_COLS = (
    "macTxPfcPkt", "macRxPfcPkt", "macTxByte", "macTxBandwidth", "macRxByte", "macRxBandwidth", "macTxBadByte",
    "macRxBadByte", "roceTxPkt", "roceRxPkt", "roceTxErrPkt", "roceRxErrPkt", "roceTxCnpPkt", "roceRxCnpPkt",
    "roceNewPktRty", "nicTxByte", "nicTxBandwidth", "nicRxByte", "nicRxBandwidth",
)  # fmt: skip


def snake(col: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", col).lower()


def netdev_unit(col: str) -> str:
    if col.endswith("Bandwidth"):
        return "bytes/s"
    if col.endswith("Byte"):
        return "bytes"
    return "count"  # *Pkt, *PktRty


def _pct(col: str) -> str:
    return f'"{col}" / 100.0'


def system_counter_specs(x: DbExport) -> list[Spec]:
    """Counter specs (the _db_tables._counter_specs shape) for the tables above that this db has."""
    netdev = [c for c in NETDEV_COLS if x.has("NETDEV_STATS", c)]
    specs: list[Spec] = [
        ("NETDEV_STATS", {}, "''", [(lit(snake(c)), q(c), netdev_unit(c), lit(f"NETDEV/{c}")) for c in netdev]),
        ("CPU_USAGE", {"cpuId": "int"}, 'CAST("cpuId" AS VARCHAR)', [("'usage'", _pct("usage"), "ratio", "'CPU ' || \"cpuId\" || '/Usage'")]),
        ("HOST_MEM_USAGE", {}, "''", [("'usage'", _pct("usage"), "ratio", "'Host Memory/Usage'")]),
        ("HOST_DISK_USAGE", {}, "''", [
            ("'read_bw'", '"readRate"', "bytes/s", "'Host Disk/Read'"),
            ("'write_bw'", '"writeRate"', "bytes/s", "'Host Disk/Write'"),
            ("'usage'", _pct("usage"), "ratio", "'Host Disk/Usage'"),
        ]),
        ("HOST_NETWORK_USAGE", {}, "''", [
            ("'usage'", _pct("usage"), "ratio", "'Host Network/Usage'"),
            ("'throughput'", '"speed"', "bytes/s", "'Host Network/Speed'"),
        ]),
    ]  # fmt: skip
    return [s for s in specs if x.has(s[0], "timestampNs") and s[3]]


TRACKS = {"NETDEV_STATS": "NETDEV", "CPU_USAGE": "Host CPU", "HOST_MEM_USAGE": "Host Memory",
          "HOST_DISK_USAGE": "Host Disk", "HOST_NETWORK_USAGE": "Host Network"}  # fmt: skip


def write_copies(x: DbExport, out: RankWriter) -> int:
    """copies: MEMCPY_INFO rows with their TASK's device, stream, task, connection and times."""
    if not x.has("MEMCPY_INFO", "globalTaskId", "size") or not x.has(
        "TASK", "globalTaskId", "startNs", "endNs"
    ):
        return 0
    mc = x.load(
        "MEMCPY_INFO",
        {"memcpyOperation": "enum:ENUM_MEMCPY_OPERATION"} if x.has("MEMCPY_INFO", "memcpyOperation") else {},
    )
    tc = x.load("TASK")

    def t(col: str, typ: str) -> str:
        return f't."{col}"' if col in tc else f"NULL::{typ}"

    direction = 'm."memcpyOperation"' if "memcpyOperation" in mc else "NULL::VARCHAR"
    sql = f"""
        SELECT {t('deviceId', 'INTEGER')} AS device_id, {t('streamId', 'BIGINT')} AS stream_id,
               {t('taskId', 'BIGINT')} AS task_id, {t('connectionId', 'BIGINT')} AS connection_id,
               t."startNs" AS ts_ns, t."endNs" - t."startNs" AS dur_ns, CAST(m."size" AS BIGINT) AS bytes,
               {direction} AS direction, 'db:MEMCPY_INFO' AS source
        FROM "MEMCPY_INFO" m JOIN "TASK" t ON t."globalTaskId" = m."globalTaskId"
        ORDER BY ts_ns, task_id"""  # fmt: skip
    n = x.write(out, "copies", sql)
    unmatched = x.scalar(
        'SELECT count(*) FROM "MEMCPY_INFO" m ANTI JOIN "TASK" t ON t."globalTaskId" = m."globalTaskId"'
    )
    if unmatched:
        x.warnings.append(
            f"MEMCPY_INFO: {unmatched} row(s) with no TASK row (globalTaskId): no time, not stored"
        )
    return n


def write_pmu_summary(x: DbExport, out: RankWriter) -> int:
    if not x.has("SAMPLE_PMU_SUMMARY", "metric", "value"):
        return 0
    cols = x.load(
        "SAMPLE_PMU_SUMMARY", {k: "str" for k in ("metric", "coreType") if x.has("SAMPLE_PMU_SUMMARY", k)}
    )

    def c(col: str, typ: str) -> str:
        return f'"{col}"' if col in cols else f"NULL::{typ}"

    sql = f"""
        SELECT {c('deviceId', 'INTEGER')} AS device_id, CAST({c('coreType', 'VARCHAR')} AS VARCHAR) AS core_type,
               {c('coreId', 'BIGINT')} AS core_id, CAST("metric" AS VARCHAR) AS metric,
               CAST("value" AS DOUBLE) AS value, 'db:SAMPLE_PMU_SUMMARY' AS source
        FROM "SAMPLE_PMU_SUMMARY" ORDER BY device_id, core_type, core_id, metric"""  # fmt: skip
    return x.write(out, "pmu_summary", sql)
