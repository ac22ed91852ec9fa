"""torch_npu DB export (export_type=db): ascend_pytorch_profiler_{rank}.db (+ analysis.db) -> canonical tables.

Claims:
- a `*_ascend_pt` folder (or its ASCEND_PROFILER_OUTPUT) whose ASCEND_PROFILER_OUTPUT holds
  ascend_pytorch_profiler[_{rank}].db and NOT kernel_details.csv / trace_view.json: when both exports are
  there the text parser (torch_npu_text) owns the folder;
- an ascend_pytorch_profiler[_{rank}].db or an analysis.db given on its own (only that file is read).
Rank: the db file name, else profiler_info_{rank}.json beside ASCEND_PROFILER_OUTPUT, else
RANK_DEVICE_MAP.rankId (when not -1), else profiler_info*.json "rank_id", else assigned by order.

analysis.db (the profiler's communication analysis of the same rank). Units, settled against the db itself
and against the text export's communication.json / step_trace_time.csv:
- CommAnalyzerTime: elapse/transit/wait/synchronization/idle in **ms** (elapse_time 88.75099321875 =
  COMMUNICATION_OP endNs-startNs 88750993 ns); start_timestamp in **µs**, stored as a double (so rounded to
  ~0.25 µs), and taken ~13 µs after COMMUNICATION_OP.startNs; ts_ns therefore comes from COMMUNICATION_OP
  (matched by op name) when the main db is there, which is also what communication.json's
  "Start Timestamp(us)" equals in the text export.
- CommAnalyzerBandwidth / CommAnalyzerMatrix: transit_size in **MB = 10^6 bytes** (package_size 2.064384 =
  COMMUNICATION_TASK_INFO.size 2064384), transit_time in ms, bandwidth in GB/s = 10^9 bytes/s
  (28.647232 MB / 1.82189634375 ms = 15.7239), total_duration ms.
- StepTraceTime: **µs**, like step_trace_time.csv (computing 8903.431 = the sum of the 187 compute kernels'
  durations, 8903431 ns; communication 102108.1 = the 4 HCCL ops, 102108100 ns).
Dedup: comm_ops come from CommAnalyzerTime when analysis.db has it (it has the transit/wait/sync/idle split;
COMMUNICATION_OP has only elapse and wait), else from COMMUNICATION_OP; comm_matrix/comm_bandwidth from
CommAnalyzerMatrix/CommAnalyzerBandwidth when present, else aggregated from COMMUNICATION_TASK_INFO. Never
both. steps: one row per step, the STEP_TIME window joined with the StepTraceTime split on the step id.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadTraceError
from ..units import GB_PER_S
from . import _analyse_done
from ._db_tables import (
    DbExport,
    comm_op_sizes_sql,
    flatten_json,
    kind_sql,
    op_type_sql,
    write_common,
    write_run_meta,
    write_step_windows,
)
from ._device_info import device_info_rows
from ._files import read_small
from ._sqlite import SqliteDb, decode_text, lit, looks_like_sqlite, q
from .base import Unit, check_rank

if TYPE_CHECKING:  # pragma: no cover
    from ..rank_writer import RankWriter

DB_RE = re.compile(r"^ascend_pytorch_profiler(?:_(\d+))?\.db$")
TEXT_MARKERS = ("kernel_details.csv", "trace_view.json")
WHAT_MAIN = "an ascend_pytorch_profiler_{rank}.db (torch_npu export_type=db) with a TASK table"
WHAT_ANALYSIS = (
    "a torch_npu analysis.db (CommAnalyzerTime/CommAnalyzerBandwidth/CommAnalyzerMatrix/StepTraceTime)"
)
ANALYSIS_TABLES = ("CommAnalyzerTime", "CommAnalyzerBandwidth", "CommAnalyzerMatrix", "StepTraceTime")
MB = 1_000_000  # analysis.db sizes: decimal MB (see module doc)
MS = 1_000_000
US = 1_000


def _output_dir(path: Path) -> Path | None:
    if path.name == "ASCEND_PROFILER_OUTPUT" and path.is_dir():
        return path
    d = path / "ASCEND_PROFILER_OUTPUT"
    return d if d.is_dir() else None


def _rank_from_info(root: Path) -> int | None:
    infos = sorted(root.glob("profiler_info*.json"))
    for p in infos:
        m = re.match(r"^profiler_info_(\d+)\.json$", p.name)
        if m:
            return check_rank(int(m.group(1)), p, "the rank in the file name")
    for p in infos:
        try:
            rank = json.loads(read_small(p).decode("utf-8")).get("rank_id")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
            return check_rank(rank, p, "rank_id")
    return None


def rank_from_db(db_path: Path) -> int | None:
    """RANK_DEVICE_MAP.rankId when it says something (the doc fixes it at -1 on some versions)."""
    import sqlite3
    import urllib.parse

    if not looks_like_sqlite(db_path):
        return None
    conn = None
    try:  # claim() must never fail: a damaged db is reported by parse(), naming the file
        uri = "file:" + urllib.parse.quote(str(db_path.resolve())) + "?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True)
        conn.text_factory = decode_text
        rows = conn.execute("SELECT DISTINCT rankId FROM RANK_DEVICE_MAP WHERE rankId >= 0").fetchall()
        rank = int(rows[0][0]) if len(rows) == 1 else None
    except (sqlite3.Error, UnicodeDecodeError, ValueError, TypeError, OverflowError, OSError):
        return None
    finally:
        if conn is not None:
            conn.close()
    return rank if rank is None or rank < 2**31 else None


def _rank(db_path: Path, root: Path | None) -> int | None:
    m = DB_RE.match(db_path.name)
    if m and m.group(1) is not None:
        return int(m.group(1))
    from_info = _rank_from_info(root) if root is not None else None
    return from_info if from_info is not None else rank_from_db(db_path)


class TorchNpuDbParser:
    name = "torch_npu_db"
    description = (
        "torch_npu Ascend PyTorch Profiler DB export: ascend_pytorch_profiler_{rank}.db and analysis.db"
    )

    def claim(self, path: Path) -> list[Unit] | None:
        if path.is_file():
            if DB_RE.match(path.name):
                return [Unit(self.name, str(path), _rank(path, None))]
            if path.name == "analysis.db":
                return [
                    Unit(
                        self.name, str(path), _rank_from_info(path.parent.parent), (("analysis", str(path)),)
                    )
                ]
            return None
        if not path.is_dir():
            return None
        out_dir = _output_dir(path)
        if out_dir is None or any((out_dir / m).exists() for m in TEXT_MARKERS):
            return None
        dbs = sorted(p for p in out_dir.iterdir() if DB_RE.match(p.name) and p.is_file())
        if not dbs:
            return None
        root = out_dir.parent
        analysis = out_dir / "analysis.db"
        opts: tuple[tuple[str, str], ...] = (("root", str(root)),)
        if analysis.is_file():
            opts += (("analysis", str(analysis)),)
        return [Unit(self.name, str(db), _rank(db, root), opts) for db in dbs]

    def parse(self, unit: Unit, out: RankWriter) -> dict[str, Any]:
        opts = dict(unit.options)
        path = Path(unit.path)
        if opts.get("root"):  # a folder ingest: refuse a dump still being written (parsers._analyse_done)
            _analyse_done.check(Path(opts["root"]), path.parent)
        analysis_path = opts.get("analysis")
        main = None if analysis_path == unit.path else SqliteDb(path, WHAT_MAIN)
        adb = SqliteDb(analysis_path, WHAT_ANALYSIS) if analysis_path else None
        x: DbExport | None = None
        try:
            if main is None:
                assert adb is not None
                if not any(t in adb.schema for t in ANALYSIS_TABLES):
                    raise BadTraceError(
                        adb.path, f"none of the tables {', '.join(ANALYSIS_TABLES)}; expected {WHAT_ANALYSIS}"
                    )
                x = DbExport(adb)
                meta: dict[str, Any] = {"rows": [("analysis.path", str(adb.path))]}
            else:
                main.require("TASK", "startNs", "endNs", "globalTaskId")
                x = DbExport(main)
                meta = write_common(
                    x,
                    out,
                    "torch_npu",
                    comm_ops=not (adb and "CommAnalyzerTime" in adb.schema),
                    comm_matrix=not (adb and "CommAnalyzerMatrix" in adb.schema),
                    comm_bandwidth=not (adb and "CommAnalyzerBandwidth" in adb.schema),
                )
            if adb is not None:
                with x.errors(adb.path), adb.errors():
                    write_analysis(x, adb, out, with_main=main is not None)
                meta["rows"].append(("analysis.path", str(adb.path)))
            else:
                with x.errors():
                    write_step_windows(x, out)
            rows = meta.pop("rows")
            root = opts.get("root")
            if root:
                rows += _profiler_info_rows(Path(root))
                dev_rows, dev_warnings = device_info_rows(Path(root))
                rows += dev_rows
                x.warnings.extend(dev_warnings)
            write_run_meta(out, rows)
            meta["warnings"] = x.warnings
            meta["export"] = "db"
            return meta
        finally:
            if x is not None:
                x.close()
            if main is not None:
                main.close()
            if adb is not None:
                adb.close()


def _profiler_info_rows(root: Path) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for name in sorted(p.name for p in root.glob("profiler_info*.json")) + ["profiler_metadata.json"]:
        p = root / name
        if not p.is_file():
            continue
        try:
            data = json.loads(read_small(p).decode("utf-8"))
        except (OSError, ValueError):
            continue  # metadata only: a broken file must not fail the ingest of the db itself
        prefix = "" if name.startswith("profiler_info") else "metadata"
        rows += flatten_json(data, prefix)
    return rows


def write_analysis(x: DbExport, adb: SqliteDb, out: RankWriter, with_main: bool) -> None:
    """analysis.db -> comm_ops, comm_bandwidth, comm_matrix, steps (units: module doc)."""
    # every number in analysis.db is a measurement with fractions (ms, MB, GB/s, µs): load them as doubles
    loaded = {
        t: adb.load(
            x.duck,
            t,
            {c: ("float" if adb.default_kind(t, c) != "text" else "text") for c in adb.cols(t)},
            dst="a_" + t,
        )
        for t in ANALYSIS_TABLES
    }
    if loaded["CommAnalyzerTime"]:
        _analysis_comm_ops(x, out, with_main, with_bandwidth=bool(loaded["CommAnalyzerBandwidth"]))
    if loaded["CommAnalyzerBandwidth"]:
        _analysis_bandwidth(x, out)
    if loaded["CommAnalyzerMatrix"]:
        _analysis_matrix(x, out)
    if loaded["StepTraceTime"]:
        _analysis_steps(x, out, set(loaded["StepTraceTime"]), with_main)
    elif with_main:
        write_step_windows(x, out)


# the step number at the end of analysis.db's step text ('step12' -> 12)
_STEP_NUM = "TRY_CAST(regexp_extract({0}, '(\\d+)\\s*$', 1) AS BIGINT)"


def _ns(col: str, scale: int) -> str:
    # via the double's shortest decimal text, then DECIMAL: a µs epoch timestamp x 1000 exceeds a double's
    # integer precision (2^53), and DuckDB's direct DOUBLE->DECIMAL cast is not exact either
    return f"TRY_CAST(round(TRY_CAST(CAST({col} AS VARCHAR) AS DECIMAL(38, 9)) * {scale}) AS BIGINT)"


def _analysis_comm_ops(x: DbExport, out: RankWriter, with_main: bool, with_bandwidth: bool) -> None:
    """CommAnalyzerTime -> comm_ops: start from COMMUNICATION_OP and sizes where the main db has them, bytes
    from CommAnalyzerBandwidth."""
    op_start = "NULL::BIGINT"
    join = ""
    if with_main and x.has("COMMUNICATION_OP", "opName", "startNs"):
        join = 'LEFT JOIN (SELECT "opName", min("startNs") AS s FROM "COMMUNICATION_OP" GROUP BY 1) co ON co."opName" = t.hccl_op_name'
        op_start = "co.s"
    bw = ""
    nbytes = "NULL::BIGINT"
    sizes = comm_op_sizes_sql(x) if with_main else None  # data type/size and rankSize from COMMUNICATION_OP
    if sizes:
        join += f" LEFT JOIN ({sizes}) sz ON sz.op_name = t.hccl_op_name"
    if with_bandwidth:
        # SDMA is the aggregate of the HCCS/PCIE/SIO links (same size as their sum in communication.json
        # and here), so bytes over all transports = the non-SDMA rows (or SDMA + RDMA when only those exist)
        bw = """LEFT JOIN (SELECT hccl_op_name, group_name, step, "type",
                     greatest(COALESCE(sum(sz) FILTER (WHERE transport_type <> 'SDMA'), 0),
                              COALESCE(sum(sz) FILTER (WHERE transport_type IN ('SDMA', 'RDMA')), 0)) AS b FROM
                   (SELECT hccl_op_name, group_name, step, "type", transport_type, max(transit_size) AS sz
                    FROM a_CommAnalyzerBandwidth GROUP BY ALL) GROUP BY ALL) b
                 ON b.hccl_op_name = t.hccl_op_name AND b.group_name IS NOT DISTINCT FROM t.group_name
                    AND b.step IS NOT DISTINCT FROM t.step AND b."type" IS NOT DISTINCT FROM t."type" """
        nbytes = _ns("b.b", MB)
    opt = op_type_sql("t.hccl_op_name")
    x.write(
        out,
        "comm_ops",
        f"""SELECT {_STEP_NUM.format("t.step")} AS step, t.hccl_op_name AS name, {opt} AS op_type,
            t.group_name, COALESCE(t."type", {kind_sql(opt)}) AS kind,
            COALESCE({op_start}, {_ns("t.start_timestamp", US)}) AS ts_ns, {_ns("t.elapse_time", MS)} AS dur_ns,
            {_ns("t.transit_time", MS)} AS transit_ns, {_ns("t.wait_time", MS)} AS wait_ns,
            {_ns("t.synchronization_time", MS)} AS sync_ns, {_ns("t.idle_time", MS)} AS idle_ns,
            {nbytes} AS bytes, {"sz.data_type" if sizes else "NULL::VARCHAR"} AS data_type,
            {"sz.data_bytes" if sizes else "NULL::BIGINT"} AS data_bytes,
            {"sz.rank_size" if sizes else "NULL::INTEGER"} AS rank_size, 'analysis.db:CommAnalyzerTime' AS source
        FROM a_CommAnalyzerTime t {join} {bw}
        WHERE t.hccl_op_name IS DISTINCT FROM 'Total Op Info' ORDER BY ts_ns""",
    )


def _analysis_bandwidth(x: DbExport, out: RankWriter) -> None:
    """CommAnalyzerBandwidth -> comm_bandwidth (one row per op and transport, its packet-size histogram)."""
    x.write(
        out,
        "comm_bandwidth",
        f"""SELECT {_STEP_NUM.format("step")} AS step, hccl_op_name AS name, group_name, transport_type AS transport,
            {_ns("max(transit_size)", MB)} AS bytes, {_ns("max(transit_time)", MS)} AS transit_ns,
            max(bandwidth) * {GB_PER_S!r} AS bandwidth_bps, max(large_packet_ratio) AS large_packet_ratio,
            map_from_entries(list({{'k': CAST({_ns("package_size", MB)} AS VARCHAR), 'v': CAST("count" AS DOUBLE)}})
                             FILTER (WHERE "count" > 0 AND package_size IS NOT NULL)) AS packet_sizes
        FROM a_CommAnalyzerBandwidth GROUP BY step, hccl_op_name, group_name, transport_type, "type"
        ORDER BY step, hccl_op_name, transport_type""",
    )


def _analysis_matrix(x: DbExport, out: RankWriter) -> None:
    """CommAnalyzerMatrix -> comm_matrix (one row per op and link)."""
    x.write(
        out,
        "comm_matrix",
        f"""SELECT {_STEP_NUM.format("step")} AS step, hccl_op_name AS name, op_name, group_name,
            TRY_CAST(src_rank AS INTEGER) AS src_rank, TRY_CAST(dst_rank AS INTEGER) AS dst_rank,
            transport_type AS transport, {_ns("transit_size", MB)} AS bytes, {_ns("transit_time", MS)} AS transit_ns,
            bandwidth * {GB_PER_S!r} AS bandwidth_bps
        FROM a_CommAnalyzerMatrix ORDER BY step, hccl_op_name, TRY_CAST(src_rank AS INTEGER), TRY_CAST(dst_rank AS INTEGER)""",
    )


def _analysis_steps(x: DbExport, out: RankWriter, cols: set[str], with_main: bool) -> None:
    """StepTraceTime -> steps: its breakdown columns, windows from the main db's STEP_TIME where it has them."""

    def us(c: str) -> str:
        return _ns(f"s.{q(c)}", US) if c in cols else "NULL::BIGINT"

    win_join, ts, dur = "", "NULL::BIGINT", "NULL::BIGINT"
    if with_main and x.has("STEP_TIME", "id", "startNs", "endNs") and x.load("STEP_TIME"):
        win_join = f'LEFT JOIN "STEP_TIME" w ON w."id" = {_STEP_NUM.format("s.step")}'
        ts, dur = 'w."startNs"', 'w."endNs" - w."startNs"'
    parts = [us(c) for c in ("computing", "communication_not_overlapped", "free")]
    x.write(
        out,
        "steps",
        f"""SELECT {_STEP_NUM.format("s.step")} AS step, {ts} AS ts_ns,
            COALESCE({dur}, {" + ".join(parts)}) AS dur_ns,
            {us("computing")} AS computing_ns, {us("communication_not_overlapped")} AS comm_not_overlapped_ns,
            {us("overlapped")} AS overlapped_ns, {us("communication")} AS comm_ns, {us("free")} AS free_ns,
            {us("stage")} AS stage_ns, {us("bubble")} AS bubble_ns,
            {us("communication_not_overlapped_and_exclude_receive")} AS comm_not_overlapped_excl_recv_ns,
            {us("preparing")} AS preparing_ns,
            {lit("analysis.db:StepTraceTime" + ("+STEP_TIME" if win_join else ""))} AS source
        FROM a_StepTraceTime s {win_join} ORDER BY step""",
    )


PARSERS = [TorchNpuDbParser()]
