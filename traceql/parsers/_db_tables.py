"""Canonical tables from the tables that ascend_pytorch_profiler_*.db and msprof_*.db share.

Both exports come from the same msprof DB writer (torch_npu adds PYTORCH_API, MEMORY_RECORD, OP_MEMORY,
STEP_TIME...), so one mapping serves both parsers. Units in these dbs are already canonical: times are ns
since the Unix epoch, memory bytes, bandwidth bytes/s, frequency MHz (MSPROF-DB-DOC "Units"), except where a
function says otherwise.

Which TASK rows are kernels (the rows kernel_details.csv / op_summary hold):
- every TASK row whose globalTaskId has a COMPUTE_TASK_INFO row (AI_CORE, AI_VECTOR_CORE, MIX_*, AI_CPU,
  DSA_SQE... with the accelerator type of COMPUTE_TASK_INFO.taskType, as kernel_details writes it), plus
- one row per COMMUNICATION_OP (the HCCL op: task_type 'HCCL', is_comm = true, stream/task ids null), which
  is what kernel_details writes for communication.
Other TASK rows (EVENT_RECORD/WAIT, MEMCPY_ASYNC, the per-link SDMA/Notify tasks of HCCL ops, the extra
AI_CORE task some aclnn ops launch without op info, PROFILING_ENABLE...) are not kernels; HCCL link tasks
feed comm_matrix/comm_bandwidth instead. Checked on the real level1 sample: 187 compute + 4 HCCL = 191 rows,
the same (name, accelerator core) multiset as the text export's kernel_details.csv.

2026 tables (MSPROF-DB-DOC, docs/formats-2026.md): META_DATA.SCHEMA_VERSION is gated first
(parsers._db_version); OVERLAP_ANALYSIS -> overlap; UB (UnifiedBus ports) and SIO -> counters; CCU and
DPU_TASK are said in the warnings, not mapped; COMMUNICATION_OP count x dataType -> comm_ops.data_bytes
(invalid types -> null) and rankSize -> comm_ops.rank_size; ProfilerStep#N mstx ranges give the steps when
there is no STEP_TIME.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _owned
from ..errors import BadTraceError
from ._db_pmu import load_pmu
from ._db_system import TRACKS as SYSTEM_TRACKS
from ._db_system import system_counter_specs, write_copies, write_pmu_summary
from ._db_version import check_version
from ._sqlite import SqliteDb, lit, q

if TYPE_CHECKING:  # pragma: no cover
    from ..rank_writer import RankWriter

SCRATCH_MEMORY = "1GB"  # per parsing process; DuckDB spills past it
UINT32_NONE = 4294967295  # "not applicable" in TASK.contextId, COMMUNICATION_TASK_INFO.dstRank...

# ---- declared column kinds (only what needs more than the declared SQLite type) ----------------------
TASK_KINDS = {"taskType": "str"}
COMPUTE_KINDS = {
    "name": "str", "taskType": "str", "opType": "str", "inputFormats": "str", "inputDataTypes": "str",
    "inputShapes": "str", "outputFormats": "str", "outputDataTypes": "str", "outputShapes": "str",
    "attrInfo": "str", "opState": "str", "hf32Eligible": "str", "gridDim": "str",
}  # fmt: skip
COMM_OP_KINDS = {
    "opName": "str", "groupName": "str", "opType": "str", "algType": "str",
    "dataType": "enum:ENUM_HCCL_DATA_TYPE", "count": "float", "opConnectionId": "text",
}  # fmt: skip
COMM_TASK_KINDS = {
    "name": "str", "taskType": "str", "groupName": "str", "rdmaType": "enum:ENUM_HCCL_RDMA_TYPE",
    "transportType": "enum:ENUM_HCCL_TRANSPORT_TYPE", "dataType": "enum:ENUM_HCCL_DATA_TYPE",
    "linkType": "enum:ENUM_HCCL_LINK_TYPE", "size": "int", "bandwidth": "float",
}  # fmt: skip
CANN_KINDS = {"type": "enum:ENUM_API_TYPE", "name": "str"}
PYTORCH_KINDS = {
    "startNs": "int", "endNs": "int", "name": "str", "inputDtypes": "str", "inputShapes": "str",
    "type": "enum:ENUM_API_TYPE",
}  # fmt: skip
MSTX_KINDS = {"eventType": "enum:ENUM_MSTX_EVENT_TYPE", "message": "str", "startNs": "int", "endNs": "int"}
MEM_WORDS = "allocate,release,app,device,read,write"

# CANN_API levels -> the prefix trace_view.json gives the same event ("AscendCL@aclrtMemcpyAsync", "Node@launch").
CANN_PREFIX = {
    "acl": "AscendCL",
    "node": "Node",
    "hccl": "Hccl",
    "communication": "Hccl",
    "runtime": "Runtime",
    "model": "Model",
}


class DbExport:
    """An opened export plus a scratch DuckDB connection; tables are copied into DuckDB once, on demand."""

    def __init__(self, db: SqliteDb) -> None:
        import duckdb

        self.db = db
        self.duck = duckdb.connect(":memory:")
        # ingest parses ranks in parallel processes, one scratch DuckDB each: cap it and let it spill to disk
        # (big exports hold tens of millions of TASK_PMU_INFO rows)
        self._tmp = _owned.TempDir("db")
        self.duck.execute(f"SET memory_limit = '{SCRATCH_MEMORY}'")
        self.duck.execute(f"SET temp_directory = {lit(self._tmp.name)}")
        self.duck.execute("SET preserve_insertion_order = false")
        self._loaded: dict[str, list[str]] = {}
        self.warnings: list[str] = []
        self._dev: int | None = None
        self._dev_known = False

    def close(self) -> None:
        self.duck.close()
        self.db.close()
        self._tmp.cleanup()

    @contextlib.contextmanager
    def errors(self, path: Path | None = None) -> Iterator[None]:
        """sqlite3 and DuckDB errors -> one BadTraceError naming the db (a value DuckDB cannot convert, a
        damaged page...): the shapes a hostile or broken export can take are too many to foresee one by one."""
        import duckdb

        with self.db.errors():
            try:
                yield
            except duckdb.Error as e:
                first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
                raise BadTraceError(
                    path or self.db.path, f"cannot map this export ({first}); expected {self.db.what}"
                ) from e

    def load(self, table: str, kinds: dict[str, str] | None = None) -> list[str]:
        if table not in self._loaded:
            self._loaded[table] = self.db.load(self.duck, table, kinds)
        return self._loaded[table]

    def has(self, table: str, *cols: str) -> bool:
        return self.db.has(table, *cols)

    def batches(self, sql: str) -> Iterator[Any]:
        from .._duck import arrow_reader

        yield from arrow_reader(self.duck.sql(sql))

    def write(self, out: RankWriter, table: str, sql: str) -> int:
        n = 0
        for b in self.batches(sql):
            out.write(table, b)
            n += b.num_rows
        return n

    def scalar(self, sql: str) -> Any:
        rows = self.duck.execute(
            sql
        ).fetchall()  # fetchall: a half-read result blocks the connection (DuckDB 2)
        return rows[0][0] if rows else None

    def default_device(self) -> int | None:
        """The device of a single-device export (torch_npu: always one), else None."""
        if not self._dev_known:
            self._dev_known = True
            if self.load("TASK", TASK_KINDS) and "deviceId" in self._loaded["TASK"]:
                n, d = self.duck.execute(
                    'SELECT count(DISTINCT "deviceId"), min("deviceId") FROM "TASK"'
                ).fetchall()[0]
                self._dev = int(d) if n == 1 else None
        return self._dev


# ---- small SQL helpers ------------------------------------------------------------------------------
def col_or_null(cols: list[str], name: str, alias: str, typ: str) -> str:
    return f"{alias}.{q(name)}" if name in cols else f"NULL::{typ}"


class Col:
    """`alias."name"`, or a typed NULL when this db version lacks the column (schemas vary by CANN release)."""

    def __init__(self, cols: list[str], alias: str, default_type: str) -> None:
        self.cols, self.alias, self.default_type = cols, alias, default_type

    def __call__(self, name: str, typ: str | None = None) -> str:
        return col_or_null(self.cols, name, self.alias, typ or self.default_type)


def text_map(entries: list[tuple[str, str]]) -> str:
    """MAP(VARCHAR,VARCHAR) of (key, SQL expr) pairs, nulls dropped (DuckDB): the CSV parsers' helper."""
    from ._csv import text_map_of

    return str(text_map_of(entries))


def na(expr: str) -> str:
    """'N/A' and '' -> NULL, like the CSV parsers do."""
    return f"NULLIF(NULLIF({expr}, 'N/A'), '')"


def unquote(expr: str) -> str:
    """Shapes are stored with literal quotes ('"32,3,224,224"'): strip them, as the CSV parser does."""
    return f"NULLIF(trim({na(expr)}, '\"'), '')"


def step_join(x: DbExport, ts: str) -> tuple[str, str]:
    """(join clause, step expr) assigning the STEP_TIME window that contains `ts` (alias st)."""
    if not x.load("STEP_TIME") or not x.has("STEP_TIME", "id", "startNs", "endNs"):
        return "", "NULL::BIGINT"
    join = f'ASOF LEFT JOIN "STEP_TIME" st ON {ts} >= st."startNs"'
    return join, f'CASE WHEN {ts} <= st."endNs" THEN st."id" END'


# ---- kernels -----------------------------------------------------------------------------------------
def write_kernels(x: DbExport, out: RankWriter) -> int:
    """kernels: compute tasks (TASK x COMPUTE_TASK_INFO x pivoted TASK_PMU_INFO) + HCCL ops (COMMUNICATION_OP)."""
    db = x.db
    db.require("TASK", "startNs", "endNs", "globalTaskId")
    tcols = x.load("TASK", TASK_KINDS)
    selects: list[str] = []

    if x.has("COMPUTE_TASK_INFO", "globalTaskId"):
        ccols = x.load("COMPUTE_TASK_INFO", compute_kinds(db))
        with_ts, plan = load_pmu(x)
        typed = plan.typed() if plan else {}
        pmu_join = ""
        if plan:
            cond = 'p."globalTaskId" = t."globalTaskId"'
            if with_ts:
                cond += ' AND p."timestampNs" BETWEEN t."startNs" AND t."endNs"'
            pmu_join = f"LEFT JOIN pmu p ON {cond}"
        sj, step = step_join(x, 't."startNs"')
        block = db.first("COMPUTE_TASK_INFO", "blockNum", "blockDim", "block_dim")
        mix = db.first("COMPUTE_TASK_INFO", "mixBlockNum", "mixBlockDim")
        c = Col(ccols, "c", "VARCHAR")
        t = Col(tcols, "t", "BIGINT")
        known_c = {"name", "globalTaskId", "taskType", "opType", "inputFormats", "inputDataTypes", "inputShapes",
                   "outputFormats", "outputDataTypes", "outputShapes", "waitNs", "opState", block, mix}  # fmt: skip
        known_t = {
            "startNs",
            "endNs",
            "deviceId",
            "connectionId",
            "streamId",
            "taskId",
            "modelId",
            "contextId",
        }
        extra = [("hw_task_type", t("taskType", "VARCHAR")), ("global_task_id", t("globalTaskId"))]
        extra += [
            ("HF32 Eligible" if k == "hf32Eligible" else k, f"c.{q(k)}") for k in ccols if k not in known_c
        ]
        extra += [(k, f"t.{q(k)}") for k in tcols if k not in known_t | {"taskType", "globalTaskId"}]
        if (
            block == "blockNum" and "blockDim" in ccols
        ):  # Ascend 950: blockDim became the SIMT thread-block size
            extra = [(("simt_block_dim" if k == "blockDim" else k), e) for k, e in extra]
        typed_sql = "".join(f", {e} AS {k}" for k, e in typed.items())
        selects.append(
            f"""SELECT {t("deviceId", "INTEGER")}::INTEGER AS device_id, {step} AS step,
              {na(c("name"))} AS name, {na(c("opType"))} AS op_type,
              COALESCE({na(c("taskType"))}, {t("taskType", "VARCHAR")}) AS task_type, false AS is_comm,
              {t("streamId")} AS stream_id, {t("taskId")} AS task_id, {t("modelId")} AS model_id,
              CASE WHEN {t("contextId")} IS NULL OR {t("contextId")} = {UINT32_NONE} THEN NULL
                   ELSE CAST({t("contextId")} AS VARCHAR) END AS context_id,
              {t("connectionId")} AS connection_id, t."startNs" AS ts_ns, t."endNs" - t."startNs" AS dur_ns,
              {c("waitNs", "BIGINT")} AS wait_ns,
              {c(block, "BIGINT") if block else "NULL::BIGINT"} AS block_dim,
              {c(mix, "BIGINT") if mix else "NULL::BIGINT"} AS mix_block_dim,
              {na(c("opState"))} AS op_state,
              {unquote(c("inputShapes"))} AS input_shapes, {na(c("inputDataTypes"))} AS input_dtypes,
              {na(c("inputFormats"))} AS input_formats, {unquote(c("outputShapes"))} AS output_shapes,
              {na(c("outputDataTypes"))} AS output_dtypes, {na(c("outputFormats"))} AS output_formats
              {typed_sql}, {"p.metrics" if plan else "NULL::MAP(VARCHAR, DOUBLE)"} AS metrics,
              {text_map(extra)} AS extra
            FROM "TASK" t JOIN "COMPUTE_TASK_INFO" c ON c."globalTaskId" = t."globalTaskId"
            {pmu_join} {sj}"""
        )
    else:
        x.warnings.append(f"{db.path.name}: no COMPUTE_TASK_INFO table: kernels hold no compute tasks")

    if x.has("COMMUNICATION_OP", "opName", "startNs", "endNs"):
        ocols = x.load("COMMUNICATION_OP", COMM_OP_KINDS)
        o = Col(ocols, "o", "VARCHAR")
        dev = x.default_device()
        sj, step = step_join(x, 'o."startNs"')
        known = {"opName", "startNs", "endNs", "connectionId", "opType", "waitNs", "deviceId"}
        extra = [(k, f"o.{q(k)}") for k in ocols if k not in known]
        selects.append(
            f"""SELECT COALESCE({o("deviceId", "INTEGER")}::INTEGER, {dev if dev is not None else "NULL"}::INTEGER) AS device_id,
              {step} AS step, o."opName" AS name, {o("opType")} AS op_type, 'HCCL' AS task_type, true AS is_comm,
              {o("connectionId", "BIGINT")} AS connection_id, o."startNs" AS ts_ns, o."endNs" - o."startNs" AS dur_ns,
              {o("waitNs", "BIGINT")} AS wait_ns, {text_map(extra)} AS extra
            FROM "COMMUNICATION_OP" o {sj}"""
        )
    if not selects:
        return 0
    sql = " UNION ALL BY NAME ".join(f"({s})" for s in selects) + " ORDER BY ts_ns"
    return x.write(out, "kernels", sql)


def compute_kinds(db: SqliteDb) -> dict[str, str]:
    kinds = dict(COMPUTE_KINDS)
    for c in ("blockNum", "mixBlockNum", "blockDim", "mixBlockDim", "block_dim", "waitNs"):
        kinds[c] = "int"
    if db.has("COMPUTE_TASK_INFO", "blockNum") and db.has("COMPUTE_TASK_INFO", "blockDim"):
        kinds["blockDim"] = "str"  # Ascend 950 SIMT thread-block size, a STRING_IDS reference
    return kinds


# ---- host ops and flows ------------------------------------------------------------------------------
def _conn_list(x: DbExport) -> str:
    """Table expression: PYTORCH_API.connectionId -> its list of real connection ids (CONNECTION_IDS)."""
    if x.has("CONNECTION_IDS", "id", "connectionId") and x.load("CONNECTION_IDS"):
        return '(SELECT "id", list("connectionId" ORDER BY "connectionId") AS ids FROM "CONNECTION_IDS" GROUP BY 1)'
    return ""


def write_host_ops(x: DbExport, out: RankWriter) -> int:
    n = 0
    if x.has("PYTORCH_API", "startNs", "endNs"):
        pcols = x.load("PYTORCH_API", PYTORCH_KINDS)
        p = Col(pcols, "p", "BIGINT")
        conn = _conn_list(x)
        join = (
            f'LEFT JOIN {conn} ci ON ci."id" = p."connectionId"' if conn and "connectionId" in pcols else ""
        )
        ids = (
            "ci.ids"
            if join
            else f"CASE WHEN {p('connectionId')} IS NULL THEN NULL ELSE [{p('connectionId')}] END"
        )
        stack_join, stack = "", "NULL::VARCHAR"
        if (
            "callchainId" in pcols
            and x.has("PYTORCH_CALLCHAINS", "id", "stack")
            and x.load("PYTORCH_CALLCHAINS", {"stack": "str", "id": "int", "stackDepth": "int"})
        ):
            order = ' ORDER BY "stackDepth"' if x.has("PYTORCH_CALLCHAINS", "stackDepth") else ""
            stack_join = (
                f'LEFT JOIN (SELECT "id", string_agg("stack", \';\r\n\'{order}) AS s FROM "PYTORCH_CALLCHAINS" GROUP BY 1) cc '
                'ON cc."id" = p."callchainId"'
            )
            stack = "cc.s"
        gtid = p("globalTid")
        extra = [
            ("Fwd thread id", p("fwdThreadId")),
            ("Call stack", stack),
            ("connection_ids", f"CASE WHEN len({ids}) > 1 THEN array_to_string({ids}, ',') END"),
            ("depth", p("depth")),
        ]
        typ = p("type", "VARCHAR")
        # The 2025 torch_npu writer stores the dims in inputDtypes and the types in inputShapes (level1 sample:
        # aten::conv2d inputDtypes = "32,3,224,224;...", inputShapes = "float;..."; the same op's trace_view
        # args have Input Dims = "32,3,224,224;..."). Swap per row when the columns are visibly reversed.
        shapes, dtypes = p("inputShapes", "VARCHAR"), p("inputDtypes", "VARCHAR")
        dims_like = "regexp_matches({0}, '^[0-9,;\\s]*$')"
        swapped = f"({dims_like.format(dtypes)} AND NOT {dims_like.format(shapes)})"
        n += x.write(
            out,
            "host_ops",
            f"""SELECT p."name" AS name,
                CASE WHEN {typ} = 'op' THEN 'cpu_op' WHEN {typ} = 'trace' THEN 'python_function'
                     WHEN {typ} = 'queue' AND starts_with(p."name", 'Enqueue') THEN 'enqueue'
                     WHEN {typ} = 'queue' AND starts_with(p."name", 'Dequeue') THEN 'dequeue'
                     WHEN {typ} IN ('pta', 'pytorch') THEN 'cpu_op' ELSE COALESCE({typ}, 'cpu_op') END AS cat,
                {gtid} >> 32 AS pid, {gtid} & 4294967295 AS tid,
                p."startNs" AS ts_ns, p."endNs" - p."startNs" AS dur_ns, list_min({ids}) AS correlation_id,
                {p("sequenceNumber")} AS seq_num,
                CASE WHEN {swapped} THEN {dtypes} ELSE {shapes} END AS input_shapes,
                CASE WHEN {swapped} THEN {shapes} ELSE {dtypes} END AS input_dtypes, {text_map(extra)} AS extra
            FROM "PYTORCH_API" p {join} {stack_join} ORDER BY p."startNs" """,
        )
    if x.has("CANN_API", "startNs", "endNs", "name"):
        ccols = x.load("CANN_API", CANN_KINDS)
        c = Col(ccols, "c", "BIGINT")
        lvl = (
            f"CASE WHEN {c('type', 'VARCHAR')} = 'communication' THEN 'hccl' ELSE {c('type', 'VARCHAR')} END"
        )
        prefix = (
            "CASE lvl "
            + " ".join(f"WHEN {lit(k)} THEN {lit(v + '@')}" for k, v in CANN_PREFIX.items())
            + " ELSE '' END"
        )
        extra = [("api", 'c."name"'), ("depth", c("depth"))]
        n += x.write(
            out,
            "host_ops",
            f"""SELECT {prefix} || c."name" AS name, 'cann' AS cat, lvl AS level,
                {c("globalTid")} >> 32 AS pid, {c("globalTid")} & 4294967295 AS tid,
                c."startNs" AS ts_ns, c."endNs" - c."startNs" AS dur_ns, {c("connectionId")} AS correlation_id,
                {text_map(extra)} AS extra
            FROM (SELECT *, {lvl} AS lvl FROM "CANN_API" c) c ORDER BY c."startNs" """,
        )
    if x.has("MSTX_EVENTS", "startNs"):
        mcols = x.load("MSTX_EVENTS", MSTX_KINDS)
        m = Col(mcols, "m", "BIGINT")
        known = {"startNs", "endNs", "message", "globalTid", "connectionId"}
        extra = [(k, f"m.{q(k)}") for k in mcols if k not in known]
        n += x.write(
            out,
            "host_ops",
            f"""SELECT {m("message", "VARCHAR")} AS name, 'mstx' AS cat, {m("globalTid")} >> 32 AS pid,
                {m("globalTid")} & 4294967295 AS tid, m."startNs" AS ts_ns,
                GREATEST(COALESCE({m("endNs")} - m."startNs", 0), 0) AS dur_ns, {m("connectionId")} AS correlation_id,
                {text_map(extra)} AS extra
            FROM "MSTX_EVENTS" m ORDER BY m."startNs" """,
        )
    return n


def write_flows(x: DbExport, out: RankWriter) -> int:
    """flows rebuilt from connection ids, with the categories trace_view.json uses.

    async_npu (PyTorch op -> first device task with that connection id), HostToDevice (CANN node launch ->
    task), async_task_queue (Enqueue -> Dequeue: the two queue rows sharing an id), fwdbwd (the two op rows
    sharing an id that no task has). Device endpoints: dst_pid is null, dst_tid the stream id.
    """
    if not x.has("TASK", "connectionId", "startNs"):
        return 0
    tcols = x.load("TASK", TASK_KINDS)
    stream = 'arg_min("streamId", "startNs")' if "streamId" in tcols else "NULL::BIGINT"
    x.duck.execute(
        f'CREATE OR REPLACE TABLE first_task AS SELECT "connectionId" AS cid, min("startNs") AS ts, {stream} AS stream '
        'FROM "TASK" WHERE "connectionId" IS NOT NULL GROUP BY 1'
    )
    parts = []
    if x.has("CANN_API", "connectionId", "globalTid", "startNs"):
        x.load("CANN_API", CANN_KINDS)
        parts.append(
            """SELECT 'HostToDevice' AS cat, 'HostToDevice' || c."connectionId" AS name, CAST(c."connectionId" AS VARCHAR) AS flow_id,
                c."globalTid" >> 32 AS src_pid, c."globalTid" & 4294967295 AS src_tid, c."startNs" AS src_ts_ns,
                NULL::BIGINT AS dst_pid, f.stream AS dst_tid, f.ts AS dst_ts_ns
            FROM "CANN_API" c JOIN first_task f ON f.cid = c."connectionId" WHERE c."type" = 'node'"""
        )
    if x.has("PYTORCH_API", "connectionId", "globalTid", "startNs", "type"):
        x.load("PYTORCH_API", PYTORCH_KINDS)
        conn = _conn_list(x)
        ends = (
            f'SELECT unnest(ci.ids) AS cid, p.* FROM "PYTORCH_API" p JOIN {conn} ci ON ci."id" = p."connectionId"'
            if conn
            else 'SELECT p."connectionId" AS cid, p.* FROM "PYTORCH_API" p WHERE p."connectionId" IS NOT NULL'
        )
        x.duck.execute(f"CREATE OR REPLACE TABLE py_ends AS {ends}")
        parts.append(
            """SELECT 'async_npu' AS cat, 'torch_to_npu' AS name, CAST(e.cid AS VARCHAR) AS flow_id,
                e."globalTid" >> 32 AS src_pid, e."globalTid" & 4294967295 AS src_tid, e."startNs" AS src_ts_ns,
                NULL::BIGINT AS dst_pid, f.stream AS dst_tid, f.ts AS dst_ts_ns
            FROM py_ends e JOIN first_task f ON f.cid = e.cid WHERE e."type" = 'op'"""
        )
        for cat, name, where in (
            ("async_task_queue", "enqueue_to_dequeue", "\"type\" = 'queue'"),
            ("fwdbwd", "fwdbwd", "\"type\" = 'op' AND cid NOT IN (SELECT cid FROM first_task)"),
        ):
            parts.append(
                f"""SELECT {lit(cat)} AS cat, {lit(name)} AS name, CAST(cid AS VARCHAR) AS flow_id,
                    arg_min("globalTid", "startNs") >> 32 AS src_pid, arg_min("globalTid", "startNs") & 4294967295 AS src_tid,
                    min("startNs") AS src_ts_ns, arg_max("globalTid", "startNs") >> 32 AS dst_pid,
                    arg_max("globalTid", "startNs") & 4294967295 AS dst_tid, max("startNs") AS dst_ts_ns
                FROM py_ends WHERE {where} GROUP BY cid HAVING count(*) = 2"""
            )
    if not parts:
        return 0
    return x.write(out, "flows", " UNION ALL ".join(f"({p})" for p in parts) + " ORDER BY src_ts_ns")


# ---- communication from the main db (used when no analysis.db gives the profiler's own split) ----------
def comm_link_sql(x: DbExport) -> str | None:
    """Per HCCL link task: op, ranks, transport, bytes, duration. None when the db has no such tasks."""
    if not x.has("COMMUNICATION_TASK_INFO", "globalTaskId", "size") or not x.has("TASK", "globalTaskId"):
        return None
    kcols = x.load("COMMUNICATION_TASK_INFO", COMM_TASK_KINDS)
    k = Col(kcols, "k", "BIGINT")
    cond = 't."globalTaskId" = k."globalTaskId"'
    if "timestampNs" in kcols:
        cond += ' AND k."timestampNs" BETWEEN t."startNs" AND t."endNs"'
    op_join, op_name, op_start = "", k("name", "VARCHAR"), 't."startNs"'
    if x.has("COMMUNICATION_OP", "opId", "opName") and "opId" in kcols:
        x.load("COMMUNICATION_OP", COMM_OP_KINDS)
        op_join = 'LEFT JOIN "COMMUNICATION_OP" o ON o."opId" = k."opId"'
        op_name, op_start = (
            f'COALESCE(o."opName", {k("name", "VARCHAR")})',
            'COALESCE(o."startNs", t."startNs")',
        )
    src, dst = k("srcRank"), k("dstRank")
    link, tr = k("linkType", "VARCHAR"), k("transportType", "VARCHAR")
    # "dst rank 4294967295 means local" (formats.md); srcRank 4294967295 is the same UINT32 "n/a" marker (level0
    # db dumps write it): NULL, never an INTEGER overflow. ON_CHIP links are local copies; SDMA tasks are labelled
    # with their physical link (HCCS/PCIE/SIO), as analysis.db and communication_matrix.json do.
    transport = f"""CASE WHEN {dst} = {UINT32_NONE} OR {dst} = {src} OR {link} = 'ON_CHIP' THEN 'LOCAL'
                         WHEN {tr} = 'RDMA' THEN 'RDMA'
                         WHEN {link} IN ('HCCS', 'PCIE', 'SIO', 'HCCS_SW', 'UB', 'ROCE') THEN {link}
                         ELSE {tr} END"""
    return f"""SELECT {op_name} AS op_name, {k("opId")} AS op_id, {k("groupName", "VARCHAR")} AS group_name,
                 {op_start} AS op_start,
                 CAST(CASE WHEN {src} <> {UINT32_NONE} THEN {src} END AS INTEGER) AS src_rank,
                 CAST(CASE WHEN {dst} <> {UINT32_NONE} THEN {dst}
                           WHEN {src} <> {UINT32_NONE} THEN {src} END AS INTEGER) AS dst_rank,
                 {transport} AS transport, {tr} AS raw_transport, {k("size")} AS size, t."endNs" - t."startNs" AS dur_ns
               FROM "COMMUNICATION_TASK_INFO" k JOIN "TASK" t ON {cond} {op_join}"""


def op_type_sql(name_expr: str) -> str:
    """'hcom_allReduce_' / 'hcom_allReduce__586_0_1' -> 'allreduce'."""
    return f"lower(NULLIF(regexp_extract({name_expr}, '^(?:hcom_)?([A-Za-z0-9]+)', 1), ''))"


def kind_sql(op_type: str) -> str:
    return f"CASE WHEN {op_type} IN ('send', 'receive', 'recv', 'batchsendrecv') THEN 'p2p' ELSE 'collective' END"


# HCCL data types (ENUM_HCCL_DATA_TYPE, MSPROF-DB-DOC: Ascend/msprof docs/en/user_guide/
# profile_data_file_references_db.md) -> bytes per element. RESERVED (255), N/A (65534) and INVALID_TYPE (65535)
# mean the profiler did not know the type: the op's data size is then invalid (null), never a guess.
HCCL_DTYPE_BYTES = {
    "INT8": 1, "INT16": 2, "INT32": 4, "FP16": 2, "FP32": 4, "INT64": 8, "UINT64": 8, "UINT8": 1, "UINT16": 2,
    "UINT32": 4, "FP64": 8, "BFP16": 2, "INT128": 16, "HIF8": 1, "FP8E4M3": 1, "FP8E5M2": 1, "FP8E8M0": 1,
}  # fmt: skip
HCCL_INVALID_TYPES = ("RESERVED", "N/A", "INVALID_TYPE")


def comm_op_sizes_sql(x: DbExport) -> str | None:
    """Per COMMUNICATION_OP opName: data_type, data_bytes (count x element size: the op's buffer, what
    bus-bandwidth formulas call S; null when the type or count is invalid: count <= 0, count = UINT32/UINT64
    max, or a RESERVED/N/A/INVALID_TYPE dataType) and rank_size (the `rankSize` column newer exports add per
    op, the communicator's size; null when absent). None when the table lacks opName."""
    if not x.has("COMMUNICATION_OP", "opName"):
        return None
    cols = x.load("COMMUNICATION_OP", COMM_OP_KINDS)
    dt = col_or_null(cols, "dataType", "o", "VARCHAR")
    size = (
        "CASE upper(CAST("
        + dt
        + " AS VARCHAR)) "
        + " ".join(f"WHEN {lit(k)} THEN {v}" for k, v in HCCL_DTYPE_BYTES.items())
        + " END"
    )
    cnt = col_or_null(cols, "count", "o", "DOUBLE")
    rank_col = next((c for c in cols if c.lower() == "ranksize"), None)
    rank_size = f'TRY_CAST(o."{rank_col}" AS INTEGER)' if rank_col else "NULL::INTEGER"
    return f"""SELECT o."opName" AS op_name, any_value(CAST({dt} AS VARCHAR)) AS data_type,
            any_value(CASE WHEN {cnt} > 0 AND {cnt} < 4294967295 THEN TRY_CAST({cnt} * {size} AS BIGINT) END)
                AS data_bytes,
            any_value(CASE WHEN {rank_size} > 0 AND {rank_size} < 65535 THEN {rank_size} END) AS rank_size
        FROM "COMMUNICATION_OP" o GROUP BY 1"""


def write_comm_from_db(
    x: DbExport, out: RankWriter, ops: bool = True, matrix: bool = True, bandwidth: bool = True
) -> dict[str, int]:
    """comm_ops from COMMUNICATION_OP (elapse, wait, bytes; no transit/sync/idle split: only analysis.db has
    it) and comm_matrix/comm_bandwidth aggregated from the link tasks (bytes and summed task time per
    src->dst/transport; packet-size histogram per transport). Checked against analysis.db on the real sample."""
    n: dict[str, int] = {}
    links_sql = comm_link_sql(x)
    if links_sql:
        x.duck.execute(f"CREATE OR REPLACE TABLE comm_links AS {links_sql}")
    if ops and x.has("COMMUNICATION_OP", "opName", "startNs", "endNs"):
        ocols = x.load("COMMUNICATION_OP", COMM_OP_KINDS)
        sj, step = step_join(x, 'o."startNs"')
        opt = op_type_sql(col_or_null(ocols, "opType", "o", "VARCHAR") if "opType" in ocols else 'o."opName"')
        bytes_join, nbytes = "", "NULL::BIGINT"
        sizes = comm_op_sizes_sql(x)
        if sizes:
            bytes_join += f' LEFT JOIN ({sizes}) sz ON sz.op_name = o."opName"'
        if links_sql and "opId" in ocols:
            bytes_join += (
                " LEFT JOIN (SELECT op_id, sum(size) AS b FROM comm_links WHERE transport <> 'LOCAL' AND size > 0 "
                'GROUP BY 1) lb ON lb.op_id = o."opId"'
            )
            nbytes = "lb.b"
        n["comm_ops"] = x.write(
            out,
            "comm_ops",
            f"""SELECT {step} AS step, o."opName" AS name, {opt} AS op_type,
                {col_or_null(ocols, "groupName", "o", "VARCHAR")} AS group_name, {kind_sql(opt)} AS kind,
                o."startNs" AS ts_ns, o."endNs" - o."startNs" AS dur_ns,
                {col_or_null(ocols, "waitNs", "o", "BIGINT")} AS wait_ns, TRY_CAST({nbytes} AS BIGINT) AS bytes,
                {"sz.data_type" if sizes else "NULL::VARCHAR"} AS data_type,
                {"sz.data_bytes" if sizes else "NULL::BIGINT"} AS data_bytes,
                {"sz.rank_size" if sizes else "NULL::INTEGER"} AS rank_size,
                'db:COMMUNICATION_OP' AS source
            FROM "COMMUNICATION_OP" o {bytes_join} {sj} ORDER BY o."startNs" """,
        )
    sj, step = step_join(x, "l.op_start")
    if matrix and links_sql:
        n["comm_matrix"] = x.write(
            out,
            "comm_matrix",
            f"""SELECT any_value({step}) AS step, l.op_name AS name, l.op_name AS op_name, any_value(l.group_name) AS group_name,
                l.src_rank, l.dst_rank, l.transport, TRY_CAST(sum(l.size) AS BIGINT) AS bytes, TRY_CAST(sum(l.dur_ns) AS BIGINT) AS transit_ns,
                sum(l.size) / NULLIF(sum(l.dur_ns), 0) * 1e9 AS bandwidth_bps
            FROM comm_links l {sj} WHERE l.size > 0 GROUP BY l.op_name, l.op_id, l.src_rank, l.dst_rank, l.transport
            ORDER BY min(l.op_start), l.src_rank, l.dst_rank""",
        )
    if bandwidth and links_sql:
        n["comm_bandwidth"] = x.write(
            out,
            "comm_bandwidth",
            # per link type, plus an SDMA row aggregating the SDMA-driven links (HCCS/PCIE/SIO), as
            # communication.json and analysis.db report them
            f"""WITH src AS (SELECT op_name, op_id, transport, group_name, op_start, size, dur_ns FROM comm_links
                           WHERE size > 0 AND transport <> 'LOCAL'
                           UNION ALL
                           SELECT op_name, op_id, 'SDMA', group_name, op_start, size, dur_ns FROM comm_links
                           WHERE size > 0 AND transport NOT IN ('LOCAL', 'SDMA') AND raw_transport = 'SDMA'),
                 per AS (SELECT l.op_name, l.op_id, l.transport, any_value(l.group_name) AS group_name,
                       min(l.op_start) AS op_start, l.size, count(*) AS cnt, sum(l.dur_ns) AS dur
                     FROM src l GROUP BY ALL)
            SELECT any_value({step}) AS step, l.op_name AS name, any_value(l.group_name) AS group_name, l.transport,
                TRY_CAST(sum(l.size * l.cnt) AS BIGINT) AS bytes, TRY_CAST(sum(l.dur) AS BIGINT) AS transit_ns,
                sum(l.size * l.cnt) / NULLIF(sum(l.dur), 0) * 1e9 AS bandwidth_bps,
                map_from_entries(list({{'k': CAST(l.size AS VARCHAR), 'v': CAST(l.cnt AS DOUBLE)}})) AS packet_sizes
            FROM per l {sj} GROUP BY l.op_name, l.op_id, l.transport
            ORDER BY min(l.op_start), l.transport""",
        )
    return n


# ---- counters ----------------------------------------------------------------------------------------
# (table, kinds, channel expr, [(metric, SQL value expr, unit, name expr)]). Track/channel/metric/unit follow
# parsers.trace_view._counter_spec for the same series in trace_view.json (HBM read_bw, LLC read_bw and
# read_hit_rate, NPU MEM hbm_used..., Acc PMU raw levels), so db and text runs can be queried alike.
def _counter_specs(x: DbExport) -> list[tuple[str, dict[str, str], str, list[tuple[str, str, str, str]]]]:
    return [
        ("HBM", {"type": "word:ENUM_MEMORY:" + MEM_WORDS}, 'CAST("hbmId" AS VARCHAR)', [
            ("lower(\"type\") || '_bw'", '"bandwidth"', "bytes/s",
             "'HBM ' || \"hbmId\" || '/' || CASE lower(\"type\") WHEN 'read' THEN 'Read' WHEN 'write' THEN 'Write' ELSE \"type\" END"),
        ]),
        ("LLC", {"mode": "word:ENUM_MEMORY:" + MEM_WORDS}, 'CAST("llcId" AS VARCHAR)', [
            ("lower(\"mode\") || '_hit_rate'", '"hitRate" / 100.0', "ratio", "'LLC ' || \"llcId\" || ' ' || upper(left(\"mode\", 1)) || lower(substr(\"mode\", 2)) || '/Hit Rate'"),
            ("lower(\"mode\") || '_bw'", '"throughput"', "bytes/s", "'LLC ' || \"llcId\" || ' ' || upper(left(\"mode\", 1)) || lower(substr(\"mode\", 2)) || '/Throughput'"),
        ]),
        ("AICORE_FREQ", {}, "''", [("'freq'", '"freq"', "MHz", "'AI Core Freq'")]),
        ("ACC_PMU", {}, 'CAST("accId" AS VARCHAR)', [
            ("'read_bandwidth'", '"readBwLevel"', "raw", "'read_bandwidth'"),
            ("'write_band_width'", '"writeBwLevel"', "raw", "'write_band_width'"),
            ("'read_ost'", '"readOstLevel"', "raw", "'read_ost'"),
            ("'write_ost'", '"writeOstLevel"', "raw", "'write_ost'"),
        ]),
        ("SOC_BANDWIDTH_LEVEL", {}, "''", [
            ("'l2_buffer_bw_level'", '"l2BufferBwLevel"', "level", "'L2 Buffer Bw Level'"),
            ("'mata_bw_level'", '"mataBwLevel"', "level", "'Mata Bw Level'"),
        ]),
        ("QOS", {"eventName": "str"}, 'CAST("eventName" AS VARCHAR)', [("'value'", '"bandwidth"', "bytes/s", "'QoS ' || \"eventName\"")]),
        ("DDR", {}, "''", [("'read_bw'", '"read"', "bytes/s", "'DDR/Read'"), ("'write_bw'", '"write"', "bytes/s", "'DDR/Write'")]),
        ("HCCS", {}, "''", [("'tx_bw'", '"txThroughput"', "bytes/s", "'HCCS/Tx'"), ("'rx_bw'", '"rxThroughput"', "bytes/s", "'HCCS/Rx'")]),
        # 2026 sys_interconnection tables (MSPROF-DB-DOC "UB", "SIO"). UB here is the UnifiedBus interconnect
        # port (rxUdmaBind/txUdmaBind per portId), NOT the AI Core's Unified Buffer that kernels.ub_*_bytes and
        # ub_l2_rates measure; SIO is the die-to-die channel, one series per flow class and die channel (name).
        ("UB", {"portId": "int"}, 'CAST("portId" AS VARCHAR)', [("'rx_bw'", '"rxUdmaBind"', "bytes/s", "'UB ' || \"portId\" || '/Rx'"),
                                                  ("'tx_bw'", '"txUdmaBind"', "bytes/s", "'UB ' || \"portId\" || '/Tx'")]),
        ("SIO", {"name": "str"}, 'CAST("name" AS VARCHAR)', [
            (lit(f"{d}_{c.lower()}_bw"), q(f"{d}{c}"), "bytes/s", f"\"name\" || {lit(f'/{d.upper()} {c}')}")
            for d in ("rx", "tx") for c in ("Req", "Rsp", "Snp", "Dat")
        ]),
        *system_counter_specs(x),  # 2026 NETDEV_STATS and host usage tables (parsers._db_system)
    ]  # fmt: skip


TRACK_NAMES = {"UB": "UB (UnifiedBus)", "AICORE_FREQ": "AI Core Freq", "ACC_PMU": "Acc PMU", "SOC_BANDWIDTH_LEVEL": "Stars Soc Info", "QOS": "QoS",
               "NPU_MEM": "NPU MEM", "ROCE": "RoCE", "SAMPLE_PMU_TIMELINE": "AI Core PMU", **SYSTEM_TRACKS}  # fmt: skip
# tables with timestampNs that are not counters (memory events) or are handled above
NOT_COUNTERS = {
    "NPU_OP_MEM",
    "NPU_MODULE_MEM",
    "MEMORY_RECORD",
    "OP_MEMORY",
    "TASK_PMU_INFO",
    "COMMUNICATION_TASK_INFO",
    "NPU_MEM",
}
CHANNEL_COLS = ("funcId", "portId", "coreType", "coreId", "cpuId", "dieId", "name", "eventName")
NOT_METRICS = {"deviceId", "timestampNs", *CHANNEL_COLS, "id"}


def _generic_unit(table: str, col: str) -> str:
    low = col.lower()
    if "latency" in low:
        return "ns"
    if low in ("usage",) or low.endswith("usage"):
        return "percent"
    if low == "freq":
        return "MHz"
    if "packetrate" in low:
        return "packets/s"
    if (
        "byterate" in low
        or "bandwidth" in low
        or "throughput" in low
        or low.endswith("rate")
        or table == "PCIE"
    ):
        return "bytes/s"
    if low.endswith("bytes") or low.endswith("byte"):
        return "bytes"
    if low.endswith("packets") or low.endswith("pkt") or low.endswith("errors") or low.endswith("dropped"):
        return "count"
    return ""


def write_counters(x: DbExport, out: RankWriter) -> int:
    n = 0
    handled = set()
    for table, kinds, channel, series in _counter_specs(x):
        handled.add(table)
        if not x.has(table, "timestampNs"):
            continue
        cols = x.load(table, kinds)
        used = {m.group(1) for _, v, _, nm in series for m in re.finditer(r'"(\w+)"', v + nm + channel)}
        if not used <= set(cols):
            x.warnings.append(f"{table}: columns {sorted(used - set(cols))} missing; table skipped")
            continue
        n += _write_series(x, out, table, TRACK_NAMES.get(table, table), channel, series)
    if x.has("NPU_MEM", "timestampNs", "type"):
        cols = x.load("NPU_MEM", {"type": "word:ENUM_MEMORY:" + MEM_WORDS})
        who = "CASE lower(\"type\") WHEN 'app' THEN 'APP' WHEN 'device' THEN 'Device' ELSE \"type\" END"
        series = [(lit(m.lower() + "_used"), v, "bytes", f"{who} || '/{m}'") for m, v in (("DDR", '"ddr"'), ("HBM", '"hbm"'))
                  if v.strip('"') in cols]  # fmt: skip
        if {"ddr", "hbm"} <= set(cols):
            series.append(("'memory_used'", '"ddr" + "hbm"', "bytes", f"{who} || '/Memory'"))
        n += _write_series(x, out, "NPU_MEM", "NPU MEM", who, series)
    for table in sorted(x.db.schema):
        if table in handled or table in NOT_COUNTERS or not x.has(table, "timestampNs"):
            continue
        kinds = {c: "str" for c in ("coreType", "name", "eventName") if x.has(table, c)}
        cols = x.load(table, kinds)
        chan_cols = [c for c in CHANNEL_COLS if c in cols]
        channel = (
            "concat_ws('/', " + ", ".join(f"CAST({q(c)} AS VARCHAR)" for c in chan_cols) + ")"
            if chan_cols
            else "''"
        )
        decl = {c: x.db.default_kind(table, c) for c in cols}
        metrics = [c for c in cols if c not in NOT_METRICS and decl[c] in ("int", "float") and c not in kinds]
        series = [(lit(c), q(c), _generic_unit(table, c), lit(c)) for c in metrics]
        if series:
            n += _write_series(x, out, table, TRACK_NAMES.get(table, table), channel, series)
    return n


def _write_series(x: DbExport, out: RankWriter, table: str, track: str, channel: str,
                  series: list[tuple[str, str, str, str]]) -> int:  # fmt: skip
    if not series:
        return 0
    cols = x.load(table)
    # one db may hold several devices (msprof on a multi-card host): keep them apart in the channel
    multi = "deviceId" in cols and (x.scalar(f'SELECT count(DISTINCT "deviceId") FROM {q(table)}') or 0) > 1
    chan = f"CAST(\"deviceId\" AS VARCHAR) || ':' || {channel}" if multi else channel
    parts = [
        f"""SELECT {lit(track)} AS track, {chan} AS channel, {metric} AS metric, {lit(unit)} AS unit, {name} AS name,
            "timestampNs" AS ts_ns, CAST({value} AS DOUBLE) AS value FROM {q(table)}"""
        for metric, value, unit, name in series
    ]
    return x.write(out, "counters", " UNION ALL ".join(parts) + " ORDER BY ts_ns, channel, metric")


# ---- memory -----------------------------------------------------------------------------------------
def write_memory(x: DbExport, out: RankWriter, flavor: str = "torch_npu") -> int:
    """memory rows shaped like the text export of the same tool, so db and text runs compare:
    flavor 'torch_npu': device 'NPU:<id>'; NPU_MEM app samples as kind 'record' component 'APP' (what
    memory_record.csv holds: Total Reserved = the app's HBM, checked on level1: 2109.6015625 MB = hbm
    2212077568 B; its 1004 rows = 990 MEMORY_RECORD + 14 NPU_MEM app rows).
    flavor 'msprof': device '<id>'; NPU_MEM as kind 'npu_mem', components APP/DDR, APP/HBM, APP/Memory,
    Device/... with allocated_bytes (what the msprof text parser makes of npu_mem_*.csv)."""
    n = 0
    if x.has("MEMORY_RECORD", "timestamp"):
        n += _memory_record(x, out, flavor)
    if flavor == "msprof" and x.has("NPU_MEM", "timestampNs", "type"):
        n += _npu_mem_msprof(x, out)
    if flavor == "torch_npu" and x.has("NPU_MEM", "timestampNs", "type", "hbm"):
        n += _npu_mem_torch_npu(x, out)
    if x.has("OP_MEMORY", "allocationTime"):
        n += _op_memory(x, out, flavor)
    if x.has("NPU_MODULE_MEM", "timestampNs", "moduleId"):
        n += _npu_module_mem(x, out, flavor)
    if x.has("NPU_OP_MEM", "timestampNs"):
        n += _npu_op_mem(x, out, flavor)
    return n


def _mem_device(cols: list[str], alias: str, flavor: str) -> str:
    """The memory row's device as the flavor's text export writes it: 'NPU:<id>' (torch_npu) or '<id>'."""
    if "deviceId" not in cols:
        return "NULL::VARCHAR"
    return (
        f"'NPU:' || {alias}.\"deviceId\"" if flavor == "torch_npu" else f'CAST({alias}."deviceId" AS VARCHAR)'
    )


def _mem_extra(cols: list[str], alias: str, known: set[str], rename: dict[str, str] | None = None) -> str:
    """The columns not mapped to a memory column, as the row's extra map (streamPtr named as the CSV does)."""
    rename = rename or {}
    rename = {"streamPtr": "Stream Ptr", **rename}
    return text_map([(rename.get(k, k), f"{alias}.{q(k)}") for k in cols if k not in known])


def _memory_record(x: DbExport, out: RankWriter, flavor: str) -> int:
    """MEMORY_RECORD -> kind 'record' (a component's allocated/reserved/active totals over time)."""
    cols = x.load("MEMORY_RECORD", {"component": "str"})
    r = Col(cols, "r", "BIGINT")
    known = {"component", "timestamp", "totalAllocated", "totalReserved", "totalActive", "deviceId"}
    return x.write(
        out,
        "memory",
        f"""SELECT 'record' AS kind, {r("component", "VARCHAR")} AS component, {_mem_device(cols, "r", flavor)} AS device,
            r."timestamp" AS ts_ns, {r("totalAllocated")} AS allocated_bytes, {r("totalReserved")} AS reserved_bytes,
            {r("totalActive")} AS active_bytes, {_mem_extra(cols, "r", known)} AS extra
        FROM "MEMORY_RECORD" r ORDER BY r."timestamp" """,
    )


def _npu_mem_msprof(x: DbExport, out: RankWriter) -> int:
    """NPU_MEM -> kind 'npu_mem', one row per sample and component (APP/DDR, APP/HBM, APP/Memory, Device/...)."""
    n = 0
    cols = x.load("NPU_MEM", {"type": "word:ENUM_MEMORY:" + MEM_WORDS})
    who = "CASE lower(m.\"type\") WHEN 'app' THEN 'APP' WHEN 'device' THEN 'Device' ELSE m.\"type\" END"
    parts = [
        (k, v) for k, v in (("DDR", 'm."ddr"'), ("HBM", 'm."hbm"')) if v.split(".")[1].strip('"') in cols
    ]
    if len(parts) == 2:
        parts.append(("Memory", 'm."ddr" + m."hbm"'))
    for k, v in parts:
        n += x.write(
            out,
            "memory",
            f"""SELECT 'npu_mem' AS kind, {who} || '/{k}' AS component, {_mem_device(cols, "m", "msprof")} AS device,
                m."timestampNs" AS ts_ns, TRY_CAST(round({v}) AS BIGINT) AS allocated_bytes
            FROM "NPU_MEM" m ORDER BY m."timestampNs" """,
        )
    return n


def _npu_mem_torch_npu(x: DbExport, out: RankWriter) -> int:
    """NPU_MEM's app samples -> kind 'record' component 'APP' (as memory_record.csv holds them)."""
    cols = x.load("NPU_MEM", {"type": "word:ENUM_MEMORY:" + MEM_WORDS})
    return x.write(
        out,
        "memory",
        f"""SELECT 'record' AS kind, 'APP' AS component, {_mem_device(cols, "m", "torch_npu")} AS device, m."timestampNs" AS ts_ns,
            TRY_CAST(round(m."hbm") AS BIGINT) AS reserved_bytes,
            {text_map([("ddr_bytes", 'TRY_CAST(round(m."ddr") AS BIGINT)')] if "ddr" in cols else [])} AS extra
        FROM "NPU_MEM" m WHERE lower(m."type") = 'app' ORDER BY m."timestampNs" """,
    )


def _op_memory(x: DbExport, out: RankWriter, flavor: str) -> int:
    """OP_MEMORY -> kind 'op' (one row per allocation)."""
    cols = x.load("OP_MEMORY", {"name": "str"})
    o = Col(cols, "o", "BIGINT")
    known = {"name", "size", "allocationTime", "releaseTime", "duration", "allocationTotalAllocated",
             "allocationTotalReserved", "allocationTotalActive", "deviceId"}  # fmt: skip
    return x.write(
        out,
        "memory",
        f"""SELECT 'op' AS kind, {o("name", "VARCHAR")} AS component, {_mem_device(cols, "o", flavor)} AS device,
            o."allocationTime" AS ts_ns, {o("size")} AS size_bytes, {o("allocationTotalAllocated")} AS allocated_bytes,
            {o("allocationTotalReserved")} AS reserved_bytes, {o("allocationTotalActive")} AS active_bytes,
            {o("releaseTime")} AS release_ts_ns, {o("duration")} AS dur_ns, {_mem_extra(cols, "o", known)} AS extra
        FROM "OP_MEMORY" o ORDER BY o."allocationTime" """,
    )


def _npu_module_mem(x: DbExport, out: RankWriter, flavor: str) -> int:
    """NPU_MODULE_MEM -> kind 'module' (reserved bytes per module, moduleId as its ENUM_MODULE name)."""
    cols = x.load("NPU_MODULE_MEM", {"moduleId": "enum:ENUM_MODULE"})
    reserved = 'TRY_CAST(round(m."totalReserved") AS BIGINT)' if "totalReserved" in cols else "NULL::BIGINT"
    return x.write(
        out,
        "memory",
        f"""SELECT 'module' AS kind, m."moduleId" AS component, {_mem_device(cols, "m", flavor)} AS device, m."timestampNs" AS ts_ns,
            {reserved} AS reserved_bytes
        FROM "NPU_MODULE_MEM" m ORDER BY m."timestampNs" """,
    )


def _npu_op_mem(x: DbExport, out: RankWriter, flavor: str) -> int:
    """NPU_OP_MEM -> kind 'npu_op' (one row per operator sample, with the running totals)."""
    cols = x.load(
        "NPU_OP_MEM", {"operatorName": "str", "type": "word:ENUM_MEMORY:" + MEM_WORDS, "component": "str"}
    )
    o = Col(cols, "o", "BIGINT")
    known = {"operatorName", "timestampNs", "size", "totalAllocate", "totalReserve", "deviceId"}
    return x.write(
        out,
        "memory",
        f"""SELECT 'npu_op' AS kind, {o("operatorName", "VARCHAR")} AS component, {_mem_device(cols, "o", flavor)} AS device,
            o."timestampNs" AS ts_ns, {o("size")} AS size_bytes,
            TRY_CAST(round({o("totalAllocate", "DOUBLE")}) AS BIGINT) AS allocated_bytes,
            TRY_CAST(round({o("totalReserve", "DOUBLE")}) AS BIGINT) AS reserved_bytes, {_mem_extra(cols, "o", known)} AS extra
        FROM "NPU_OP_MEM" o ORDER BY o."timestampNs" """,
    )


# ---- steps and run metadata --------------------------------------------------------------------------
# OVERLAP_ANALYSIS.type -> the names msprof gives the four series. MSPROF-DB-DOC's ENUM_OVERLAP_ANALYSIS_TYPE:
# 0 COMPUTE, 1 COMMUNICATION, 2 COMM_NOT_OVERLAP_COMP, 3 FREE (65535 RESERVE, kept as text). The order is msprof's
# analysis/csrc/application/timeline/overlap_analysis_assembler.cpp (COMP_NAME "Computing", COMM_NAME
# "Communication", COMM_NOT_OVERLAP_COMP_NAME "Communication(Not Overlapped)", FREE_NAME "Free"), and the real
# level1 rank0 export confirms it: the per-type sums 8903431 / 102108100 / 98071947 / 25258144 ns equal its
# analysis.db StepTraceTime computing / communication / communication_not_overlapped / free (8903.431 us...).
OVERLAP_TYPES = {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)", 3: "Free"}


def write_mstx_steps(x: DbExport, out: RankWriter) -> int:
    """steps from `ProfilerStep#N` mstx ranges when the export has no STEP_TIME. torch_npu's schedule with
    record_steps=True calls `mstx.range_start("ProfilerStep#N", current_stream())` every step (recorded when
    mstx / msprof_tx is on), which lands in MSTX_EVENTS as a host range with that message."""
    if not x.has("MSTX_EVENTS", "startNs", "endNs", "message"):
        return 0
    x.load("MSTX_EVENTS", MSTX_KINDS)
    return x.write(
        out,
        "steps",
        r"""SELECT TRY_CAST(regexp_extract("message", '^ProfilerStep#(\d+)$', 1) AS BIGINT) AS step,
                  "startNs" AS ts_ns, "endNs" - "startNs" AS dur_ns, 'db:MSTX_EVENTS ProfilerStep' AS source
           FROM "MSTX_EVENTS" WHERE regexp_matches("message", '^ProfilerStep#\d+$') AND "endNs" > "startNs"
           ORDER BY "startNs" """,
    )


def write_overlap(x: DbExport, out: RankWriter) -> int:
    """overlap: OVERLAP_ANALYSIS intervals (an independent cross-check of traceql's step split)."""
    if not x.has("OVERLAP_ANALYSIS", "startNs", "endNs", "type"):
        return 0
    cols = x.load("OVERLAP_ANALYSIS")
    sj, step = step_join(x, 'o."startNs"')
    names = " ".join(f"WHEN {k} THEN {lit(v)}" for k, v in OVERLAP_TYPES.items())
    typ = f'CASE TRY_CAST(o."type" AS BIGINT) {names} ELSE CAST(o."type" AS VARCHAR) END'
    return x.write(
        out,
        "overlap",
        f"""SELECT {step} AS step, {col_or_null(cols, "deviceId", "o", "INTEGER")} AS device_id, {typ} AS type,
            o."startNs" AS ts_ns, o."endNs" - o."startNs" AS dur_ns, 'db:OVERLAP_ANALYSIS' AS source
        FROM "OVERLAP_ANALYSIS" o {sj} ORDER BY o."startNs" """,
    )


# 2026 task tables traceql reads but does not map (MSPROF-DB-DOC): CCU holds the small operators the
# collective communication unit runs for an HCCL op (globalTaskId of the CCU op, name, startNs/endNs, args JSON):
# sub-steps of a communication op already in comm_ops, so adding them to kernels would count that time twice;
# DPU_TASK holds operators run on a DPU device (dpuDeviceId), another device than the NPU whose timeline the
# kernels table is. Both are said in the ingest's warnings with their row counts.
UNMAPPED_TASK_TABLES = {
    "CCU": "CCU small operators (sub-steps of the communication ops in comm_ops; not added to kernels to avoid counting that time twice)",
    "DPU_TASK": "operators on a DPU device (not the NPU timeline kernels holds)",
}


def note_unmapped(x: DbExport) -> None:
    for table, why in UNMAPPED_TASK_TABLES.items():
        if table in x.db.schema:
            n = x.db.rows(f"SELECT count(*) FROM {q(table)}")[0][0]
            if n:
                x.warnings.append(f"{x.db.path}: {table}: {n} rows not ingested: {why}")


def write_step_windows(x: DbExport, out: RankWriter) -> int:
    if not x.has("STEP_TIME", "id", "startNs", "endNs") or not x.load("STEP_TIME"):
        return write_mstx_steps(x, out)
    return x.write(
        out,
        "steps",
        """SELECT "id" AS step, "startNs" AS ts_ns, "endNs" - "startNs" AS dur_ns, 'db:STEP_TIME' AS source
           FROM "STEP_TIME" ORDER BY "startNs" """,
    )


def run_meta(x: DbExport) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """(run_meta rows, parse metadata) from META_DATA, NPU_INFO, HOST_INFO, SESSION_TIME_INFO, RANK_DEVICE_MAP."""
    db = x.db
    rows: list[tuple[str, str]] = [("db.path", str(db.path)), ("db.tables", json.dumps(sorted(db.schema)))]
    meta: dict[str, Any] = {}
    if db.has("META_DATA", "name", "value"):
        for k, v in db.rows('SELECT "name", "value" FROM "META_DATA"'):
            rows.append((f"META_DATA.{k}", "" if v is None else str(v)))
    if db.has("NPU_INFO", "id", "name"):
        devs = db.rows('SELECT "id", "name" FROM "NPU_INFO" ORDER BY "id"')
        for i, name in devs:
            rows.append((f"NPU_INFO.{i}", "" if name is None else str(name)))
        want = x.default_device()
        names = [str(n) for i, n in devs if n and (want is None or i == want)] or [
            str(n) for _, n in devs if n
        ]
        if names:
            meta["device"] = names[0]
            rows.append(("device", names[0]))
    if db.has("COMMUNICATION_TASK_INFO", "srcRank", "dstRank"):
        # every rank id the link tasks name, timed or not: evidence of the job's size (capture_coverage), kept
        # even where a task has no TASK row to time it and so never reaches comm_matrix
        ids = db.rows(
            'SELECT DISTINCT r FROM (SELECT "srcRank" AS r FROM "COMMUNICATION_TASK_INFO" UNION ALL '
            'SELECT "dstRank" FROM "COMMUNICATION_TASK_INFO") WHERE r IS NOT NULL AND r >= 0 AND r <> '
            f"{UINT32_NONE} ORDER BY r"
        )
        if ids:
            rows.append(("COMMUNICATION_TASK_INFO.ranks", json.dumps([int(r) for (r,) in ids])))
    for table in ("HOST_INFO", "SESSION_TIME_INFO", "RANK_DEVICE_MAP"):
        if table in db.schema:
            cols = db.cols(table)
            for i, r in enumerate(db.rows(f"SELECT * FROM {q(table)}")):
                suffix = "" if i == 0 else f".{i}"
                for c, v in zip(cols, r, strict=True):
                    rows.append((f"{table}.{c}{suffix}", "" if v is None else str(v)))
    return rows, meta


def write_run_meta(out: RankWriter, rows: list[tuple[str, str]]) -> int:
    if not rows:
        return 0
    out.write("run_meta", {"key": [k for k, _ in rows], "value": [v for _, v in rows]})
    return len(rows)


def flatten_json(obj: Any, prefix: str = "") -> list[tuple[str, str]]:
    """{"config": {"a": 1}} -> [("config.a", "1")]; lists and scalars as JSON text."""
    if isinstance(obj, dict):
        out: list[tuple[str, str]] = []
        for k, v in obj.items():
            out.extend(flatten_json(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return [(prefix, obj if isinstance(obj, str) else json.dumps(obj))]


def write_common(
    x: DbExport,
    out: RankWriter,
    flavor: str,
    comm_ops: bool = True,
    comm_matrix: bool = True,
    comm_bandwidth: bool = True,
) -> dict[str, Any]:
    """Everything both exports share. The comm_* flags are False where analysis.db supplies that table."""
    # gate on META_DATA.SCHEMA_VERSION before anything is written (parsers._db_version)
    with x.db.errors():
        schema_version, version_warnings = check_version(x.db)
    x.warnings.extend(version_warnings)
    with x.errors():
        write_kernels(x, out)
        write_host_ops(x, out)
        write_flows(x, out)
        write_counters(x, out)
        write_memory(x, out, flavor)
        write_comm_from_db(x, out, ops=comm_ops, matrix=comm_matrix, bandwidth=comm_bandwidth)
        write_overlap(x, out)
        write_copies(x, out)
        write_pmu_summary(x, out)
        note_unmapped(x)
        rows, meta = run_meta(x)
    if schema_version:
        meta["schema_version"] = schema_version
    return {"rows": rows, **meta}
