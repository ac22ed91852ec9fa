"""torch_npu (Ascend PyTorch Profiler) text export -> canonical tables.

Input: a `{worker}_{ts}_ascend_pt/` folder (or any folder) holding `ASCEND_PROFILER_OUTPUT/` (formats.md §1.1),
that output folder itself, or a lone `kernel_details.csv`. Every file is optional; a file that is present but
unreadable is a BadTraceError naming it. Unit conversions happen here, once (formats.md §0):

| file | table | units |
|---|---|---|
| kernel_details.csv | kernels (+ PMU metrics, derived HBM/UB/L2 bytes) | µs -> ns; GB/s x core µs -> bytes; KB -> 1024 B |
| trace_view.json | host_ops/flows/counters (+ kernels, comm_ops if no CSV/JSON) via parsers.trace_view | see there |
| step_trace_time.csv | steps (source='step_trace_time') | µs -> ns |
| communication.json | comm_ops, comm_bandwidth | ms -> ns, HCCL MB = 10^6 B, GB/s = 10^9 B/s |
| communication_matrix.json | comm_matrix | same |
| memory_record.csv / operator_memory.csv / npu_module_mem.csv | memory (kind record / op / module) | MB = 2^20 B, KB = 1024 B |
| l2_cache.csv | l2_cache (+ kernels.l2_hit_rate when the PMU has none) | ratio as written |
| op_statistic.csv / api_statistic.csv / operator_details.csv | op_stats | µs -> ns, % -> 0..1 |
| profiler_info_*.json / profiler_metadata.json | run_meta (dotted keys) | text |
| task_time.csv (2026) | kernels, only without kernel_details.csv (parsers._task_time) | µs -> ns |
| soc_pmu.csv (2026) | not read: named in the warnings (no source lists its columns) | |
| PROF_*/device_*/info.json, platform_config/*.ini | run_meta info.* / platform_config.* (parsers._device_info) | as written |

A dump of a torch_npu that writes ASCEND_PROFILER_OUTPUT/analyse.done (>= 2.10) without it is refused as still
being written (parsers._analyse_done). 2026 details and sources: docs/formats-2026.md.

Two "MB"s: HCCL's communication files use decimal MB (a 20 MiB send is written `20.97152`, packet sizes like
`2.064384` are whole bytes only x 10^6), while torch_npu's memory files use binary MB (`2109.6015625` is a whole
number of bytes only x 2^20). Both are checked against the real samples in tests/test_parse_torch_npu.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadTraceError
from ..units import KB, MB
from . import _analyse_done
from ._ascend_text import (
    SerialCsv,
    api_statistic_exprs,
    check_complete,
    comm_rows,
    flatten,
    json_object_items,
    matrix_rows,
    op_statistic_exprs,
    read_json,
    select_rows,
    step_dur,
    step_exprs,
    step_number,
    write_rows,
    write_select,
)
from ._csv import CsvFile, TaskCsv, comm_task_sql, text_map_of
from ._device_info import device_info_rows
from ._files import read_small
from ._pmu import aic_metrics_group, pmu_exprs
from ._task_time import task_time_kernel_exprs
from .base import Unit, check_rank, read_head

if TYPE_CHECKING:  # pragma: no cover
    from ..rank_writer import RankWriter

NAME = "torch_npu_text"
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"

# The text files this parser reads from ASCEND_PROFILER_OUTPUT/. A folder with none of them is not ours
# (db-only exports belong to the torch_npu_db parser).
KNOWN_FILES = (
    "kernel_details.csv",
    "task_time.csv",
    "trace_view.json",
    "step_trace_time.csv",
    "communication.json",
    "communication_matrix.json",
    "memory_record.csv",
    "operator_memory.csv",
    "npu_module_mem.csv",
    "l2_cache.csv",
    "op_statistic.csv",
    "api_statistic.csv",
    "operator_details.csv",
)

MEM_MB = MB  # memory_record / operator_memory / npu_module_mem "MB" (binary)

# torch_npu `_aic_metrics` (ACL names) -> the torch_npu AiCMetrics group name (formats.md §2.2)
AIC_METRICS_GROUPS = {
    "ACL_AICORE_PIPE_UTILIZATION": "PipeUtilization",
    "ACL_AICORE_ARITHMETIC_UTILIZATION": "ArithmeticUtilization",
    "ACL_AICORE_MEMORY_BANDWIDTH": "Memory",
    "ACL_AICORE_L0B_AND_WIDTH": "MemoryL0",
    "ACL_AICORE_MEMORY_UB": "MemoryUB",
    "ACL_AICORE_RESOURCE_CONFLICT_RATIO": "ResourceConflictRatio",
    "ACL_AICORE_L2_CACHE": "L2Cache",
    "ACL_AICORE_MEMORY_ACCESS": "MemoryAccess",
    "ACL_AICORE_NONE": "AiCoreNone",
}


# ---------------------------------------------------------------------------------------------------------
# kernel_details.csv
# ---------------------------------------------------------------------------------------------------------
# Base (non-PMU) columns with a canonical home; every other column is a PMU metric (metrics/extra).
_KERNEL_BASE = {
    "Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State", "Accelerator Core",
    "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim", "Block Num", "Mix Block Dim", "Mix Block Num",
    "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types", "Output Formats",
    "Context ID",
}  # fmt: skip
KERNEL_REQUIRED = ("Name", "Start Time(us)", "Duration(us)")


_KernelCsv = TaskCsv  # optionally joined to l2_cache.csv hit rates (see _csv.TaskCsv)


def _kernel_exprs(csv: CsvFile) -> dict[str, str]:
    shapes = {
        "input_shapes": "Input Shapes",
        "input_dtypes": "Input Data Types",
        "input_formats": "Input Formats",
        "output_shapes": "Output Shapes",
        "output_dtypes": "Output Data Types",
        "output_formats": "Output Formats",
    }
    task_type = csv.txt("Accelerator Core")
    name = csv.txt("Name")
    exprs = {
        "device_id": csv.int_("Device_id"),
        "step": csv.int_("Step Id"),
        "name": name,
        "op_type": csv.txt("Type"),
        "task_type": task_type,
        # level0 dumps write Type=N/A but keep Accelerator Core; older ones may lack both: fall back to the name
        "is_comm": comm_task_sql(task_type, name),
        "stream_id": csv.int_("Stream ID"),
        "task_id": csv.int_("Task ID"),
        "model_id": csv.int_("Model ID"),
        "context_id": csv.txt("Context ID"),
        "ts_ns": csv.us_ns("Start Time(us)"),
        "dur_ns": csv.us_ns("Duration(us)"),
        "wait_ns": csv.us_ns("Wait Time(us)"),
        "block_dim": csv.int_("Block Num", "Block Dim"),
        "mix_block_dim": csv.int_("Mix Block Num", "Mix Block Dim"),
        "op_state": csv.txt("OP State"),
    }
    for canon, col in shapes.items():
        # cells look like `"32,3,224,224"` (quotes inside the cell); strip every quote
        exprs[canon] = csv.shape_txt(col)
    # typed PMU columns + `metrics`: the derivation shared with msprof op_summary (parsers/_pmu.py)
    pmu, consumed = pmu_exprs(csv, dur_cols=("Duration(us)",))
    exprs.update(pmu)
    # `extra`: the columns with no canonical home that are not PMU metrics (HF32 Eligible...), verbatim. PMU
    # columns go to `metrics` only; their N/A cells mean "not measured" and are left out.
    exprs["extra"] = csv.text_map([c for c in csv.header if c not in _KERNEL_BASE and c not in consumed])
    return exprs


def parse_kernel_details(path: Path, out: RankWriter, l2_cache: Path | None = None) -> dict[str, Any]:
    csv = _KernelCsv(path)
    csv.require(*KERNEL_REQUIRED)
    exprs = _kernel_exprs(csv)
    joined = False
    if (
        l2_cache is not None
        and exprs["l2_hit_rate"] == "NULL::DOUBLE"
        and csv.has("Stream ID")
        and csv.has("Task ID")
    ):
        joined = _register_l2_hits(csv, l2_cache)
        if joined:
            csv.join_l2 = True
            exprs["l2_hit_rate"] = "__l2hit.h"
    n = write_select(out, "kernels", csv, exprs, apart_by="stream_id")
    if n == 0:
        raise BadTraceError(path, "no data rows (header only); expected one row per device task")
    return {"rows": n, "aic_metrics": aic_metrics_group(csv.header), "l2_hit_rate_from_l2_cache": joined}


def _register_l2_hits(kcsv: CsvFile, l2_path: Path) -> bool:
    """Register `__l2hit(s, t, h)`: l2_cache.csv hit rates for (stream, task) pairs that occur once and have a
    number (A2 writes N/A everywhere: then nothing is joined and this costs one small scan)."""
    l2 = CsvFile(l2_path, con=kcsv.con)
    l2.require("Stream Id", "Task Id")
    if not l2.has("Hit Rate"):
        return False
    sql = (
        f"SELECT {l2.int_('Stream Id')} AS s, {l2.int_('Task Id')} AS t, any_value({l2.num('Hit Rate')}) AS h "
        f"FROM {l2.from_clause()} GROUP BY ALL HAVING count(*) = 1 AND h IS NOT NULL"
    )
    import duckdb

    try:
        kcsv.con.execute(f"CREATE OR REPLACE TEMP TABLE __l2hit AS {sql}")
        n = kcsv.con.execute("SELECT count(*) FROM __l2hit").fetchall()[0][0]
    except duckdb.Error as e:
        raise BadTraceError(l2_path, f"malformed CSV: {str(e).strip().splitlines()[0]}") from e
    return bool(n)


# ---------------------------------------------------------------------------------------------------------
# the other files
# ---------------------------------------------------------------------------------------------------------
def parse_step_trace(path: Path, windows: dict[int, tuple[int, int]]) -> list[dict[str, Any]]:
    csv = CsvFile(path)
    csv.require("Step", "Computing")
    rows = select_rows(csv, step_exprs(csv))
    for r in rows:
        win = (
            windows.get(r["step"])
            if r["step"] is not None
            else (next(iter(windows.values())) if len(windows) == 1 else None)
        )
        r["ts_ns"], r["dur_ns"] = win if win else (None, step_dur(r))
        r["source"] = "step_trace_time"
    return rows


FLUSH_ROWS = 64 * 1024  # rows kept before a write to the store while streaming the communication files


def parse_communication(path: Path, out: RankWriter, source: str = "communication.json") -> tuple[int, int]:
    steps = json_object_items(
        path,
        "communication.json: {step: {p2p|collective: {op@group: {...}}}}",
        "expected a JSON object keyed by step (e.g. 'step50')",
    )
    ops: list[dict[str, Any]] = []
    bws: list[dict[str, Any]] = []
    n_ops = n_bws = 0
    for step_key, kinds in steps:
        if not isinstance(kinds, dict):
            raise BadTraceError(path, f"step {step_key!r}: expected an object with 'p2p'/'collective'")
        step = step_number(step_key)
        for kind, entries in kinds.items():
            if not isinstance(entries, dict):
                raise BadTraceError(path, f"step {step_key!r} {kind!r}: expected an object of ops")
            for op_key, op in entries.items():
                op_row, bw_rows = comm_rows(op_key, op, path=path, step=step, kind=kind, source=source)
                if op_row:
                    ops.append(op_row)
                bws.extend(bw_rows)
        if len(ops) + len(bws) >= FLUSH_ROWS:
            n_ops, n_bws = (
                n_ops + write_rows(out, "comm_ops", ops),
                n_bws + write_rows(out, "comm_bandwidth", bws),
            )
            ops, bws = [], []
    return n_ops + write_rows(out, "comm_ops", ops), n_bws + write_rows(out, "comm_bandwidth", bws)


def parse_communication_matrix(path: Path, out: RankWriter) -> int:
    steps = json_object_items(
        path,
        "communication_matrix.json: {step: {p2p|collective: {op@group: {'src-dst': {...}}}}}",
        "expected a JSON object keyed by step (e.g. 'step50')",
    )
    rows: list[dict[str, Any]] = []
    n = 0
    for step_key, kinds in steps:
        if not isinstance(kinds, dict):
            raise BadTraceError(path, f"step {step_key!r}: expected an object with 'p2p'/'collective'")
        for _kind, entries in kinds.items():
            if not isinstance(entries, dict):
                raise BadTraceError(path, f"step {step_key!r}: expected an object of ops")
            for op_key, links in entries.items():
                rows.extend(matrix_rows(op_key, links, path=path, step=step_number(step_key)))
        if len(rows) >= FLUSH_ROWS:
            n += write_rows(out, "comm_matrix", rows)
            rows = []
    return n + write_rows(out, "comm_matrix", rows)


def _mb(csv: CsvFile, col: str) -> str:
    return csv.scaled(col, float(MEM_MB))


def parse_memory_record(path: Path, out: RankWriter) -> int:
    csv = CsvFile(path)
    csv.require("Component", "Timestamp(us)")
    exprs = {
        "kind": "'record'",
        "component": csv.txt("Component"),
        "device": csv.txt("Device Type", "Device"),
        "ts_ns": csv.us_ns("Timestamp(us)"),
        "allocated_bytes": _mb(csv, "Total Allocated(MB)"),
        "reserved_bytes": _mb(csv, "Total Reserved(MB)"),
        "active_bytes": _mb(csv, "Total Active(MB)"),
        "extra": csv.text_map(["Stream Ptr", "Device_id"]),
    }
    return write_select(out, "memory", csv, exprs)


def parse_operator_memory(path: Path, out: RankWriter) -> int:
    csv = CsvFile(path)
    csv.require("Name", "Size(KB)")
    exprs = {
        "kind": "'op'",
        "component": csv.txt("Name"),
        "device": csv.txt("Device Type", "Device"),
        "ts_ns": csv.us_ns("Allocation Time(us)"),
        "size_bytes": csv.scaled("Size(KB)", float(KB)),
        "allocated_bytes": _mb(csv, "Allocation Total Allocated(MB)"),
        "reserved_bytes": _mb(csv, "Allocation Total Reserved(MB)"),
        "active_bytes": _mb(csv, "Allocation Total Active(MB)"),
        "release_ts_ns": csv.us_ns("Release Time(us)"),
        "dur_ns": csv.us_ns("Duration(us)"),
        "extra": csv.text_map(
            [
                "Active Release Time(us)", "Active Duration(us)", "Release Total Allocated(MB)",
                "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr", "Device_id",
            ]
        ),
    }  # fmt: skip
    return write_select(out, "memory", csv, exprs)


def parse_npu_module_mem(path: Path, out: RankWriter) -> int:
    csv = CsvFile(path)
    csv.require("Component", "Timestamp(us)")
    col = csv.first("Total Reserved(MB)", "Total Reserved(KB)")
    factor = float(MEM_MB) if col == "Total Reserved(MB)" else float(KB)
    raw = csv.num(col) if col else "NULL::DOUBLE"
    # -1 is a marker ("only the release was captured"), not a size: keep it verbatim in extra, not as bytes
    reserved = f"CASE WHEN {raw} < 0 THEN NULL ELSE {csv.scaled(col, factor)} END" if col else "NULL::BIGINT"
    exprs = {
        "kind": "'module'",
        "component": csv.txt("Component"),
        "device": csv.txt("Device", "Device Type"),
        "ts_ns": csv.us_ns("Timestamp(us)"),
        "reserved_bytes": reserved,
        "extra": text_map_of(
            ([(col, f"CASE WHEN {raw} < 0 THEN {csv.txt(col)} END")] if col else [])
            + ([("Device_id", csv.txt("Device_id"))] if csv.has("Device_id") else [])
        ),
    }
    return write_select(out, "memory", csv, exprs)


def parse_l2_cache(path: Path, out: RankWriter) -> int:
    csv = CsvFile(path)
    csv.require("Stream Id", "Task Id")
    exprs = {
        "stream_id": csv.int_("Stream Id"),
        "task_id": csv.int_("Task Id"),
        "op_name": csv.txt("Op Name"),
        "hit_rate": csv.num("Hit Rate"),
        "victim_rate": csv.num("Victim Rate"),
    }
    return write_select(out, "l2_cache", csv, exprs)


def parse_op_statistic(path: Path, out: RankWriter) -> int:
    csv = CsvFile(path)
    return write_select(out, "op_stats", csv, op_statistic_exprs(csv))


def parse_api_statistic(path: Path, out: RankWriter) -> int:
    csv = CsvFile(path)
    return write_select(out, "op_stats", csv, api_statistic_exprs(csv))


def parse_operator_details(path: Path, out: RankWriter) -> int:
    csv = SerialCsv(path)  # Call Stack cells span lines
    csv.require("Name")
    exprs = {
        "source": "'operator_details'",
        "name": csv.txt("Name"),
        "total_ns": csv.us_ns("Device Total Duration(us)"),
        "extra": csv.text_map([c for c in csv.header if c not in {"Name", "Device Total Duration(us)"}]),
    }
    return write_select(out, "op_stats", csv, exprs)


# ---------------------------------------------------------------------------------------------------------
# folder layout, rank, metadata
# ---------------------------------------------------------------------------------------------------------
def _layout(path: Path) -> tuple[Path, Path] | None:
    """(dump root holding profiler_info, output folder) for a folder we can parse, else None."""
    if path.name == OUTPUT_DIR:
        root, outdir = path.parent, path
    else:
        root, outdir = path, path / OUTPUT_DIR
    if not outdir.is_dir():
        return None
    if not any((outdir / f).is_file() for f in KNOWN_FILES):
        return None
    return root, outdir


def profiler_info_file(root: Path) -> Path | None:
    found = sorted(root.glob("profiler_info*.json"))
    return found[0] if found else None


def rank_of(root: Path) -> int | None:
    """profiler_info_{rank}.json `rank_id`, else the {rank} in its name, else None (single card / unknown)."""
    info = profiler_info_file(root)
    if info is None:
        return None
    try:
        rank = json.loads(read_small(info).decode("utf-8-sig")).get("rank_id")
    except (OSError, ValueError, AttributeError):
        rank = None  # claim() stays cheap and lenient; parse() reports a broken profiler_info
    if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
        return check_rank(rank, info, "rank_id")
    m = re.fullmatch(r"profiler_info_(\d+)\.json", info.name)
    return check_rank(int(m.group(1)), info, "the rank in the file name") if m else None


def _looks_like_kernel_details(path: Path) -> bool:
    if path.suffix.lower() != ".csv":
        return False
    if re.fullmatch(r"kernel_details.*\.csv", path.name, flags=re.IGNORECASE):
        return True
    first = read_head(path, 8192).split(b"\n", 1)[0]
    return b"Accelerator Core" in first and b"Start Time(us)" in first


def _meta_rows(root: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    facts: dict[str, Any] = {}
    info = profiler_info_file(root)
    if info is not None:
        data = read_json(info, "profiler_info JSON (config, start_info, end_info, rank_id)")
        if not isinstance(data, dict):
            raise BadTraceError(info, "expected a JSON object with 'config'")
        rows += [{"key": k, "value": v} for k, v in flatten(data)]
        exp = (data.get("config") or {}).get("experimental_config") or {}
        if isinstance(exp, dict):
            acl = exp.get("_aic_metrics")
            facts["aic_metrics"] = AIC_METRICS_GROUPS.get(str(acl), acl) if acl else None
            facts["profiler_level"] = exp.get("_profiler_level")
        for key in ("device", "device_name", "npu_name", "chip_name"):
            if isinstance(data.get(key), str):
                facts["device"] = data[key]
    meta = root / "profiler_metadata.json"
    if meta.is_file():
        data = read_json(meta, "profiler_metadata JSON object (ENV_VARIABLES, distributed_args...)")
        if not isinstance(data, dict):
            raise BadTraceError(meta, "expected a JSON object")
        rows += [{"key": k, "value": v} for k, v in flatten(data)]
    return rows, facts


def _device_from_db(outdir: Path) -> str | None:
    """NPU_INFO.name from an ascend_pytorch_profiler_*.db next to the text files (export_type text+db)."""
    import sqlite3
    import urllib.parse

    for db in sorted(outdir.glob("ascend_pytorch_profiler*.db")):
        try:
            # immutable: no -wal/-shm created beside the dump (the device name is in the main file)
            con = sqlite3.connect(
                "file:" + urllib.parse.quote(str(db.resolve())) + "?mode=ro&immutable=1", uri=True
            )
            try:
                row = con.execute("SELECT name FROM NPU_INFO LIMIT 1").fetchone()
            finally:
                con.close()
        except sqlite3.Error:
            continue
        if row and row[0]:
            return str(row[0])
    return None


def _trace_view(path: Path, out: RankWriter, *, kernels: bool, comm_ops: bool) -> dict[str, Any] | None:
    """parsers.trace_view on trace_view.json."""
    from .trace_view import parse_trace_view

    return dict(parse_trace_view(path, out, kernels=kernels, comm_ops=comm_ops, write_steps=False) or {})


def _windows(raw: Any) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for k, v in (raw or {}).items():
        step = step_number(k)
        if step is not None and isinstance(v, (list, tuple)) and len(v) == 2 and None not in v:
            out[step] = (int(v[0]), int(v[1]))
    return out


class TorchNpuTextParser:
    name = NAME
    description = "torch_npu Ascend PyTorch Profiler text export (*_ascend_pt/ASCEND_PROFILER_OUTPUT, kernel_details.csv)"

    def claim(self, path: Path) -> list[Unit] | None:
        if path.is_dir():
            lay = _layout(path)
            if lay is None:
                return None
            return [Unit(NAME, str(path), rank_of(lay[0]))]
        if path.is_file() and _looks_like_kernel_details(path):
            return [Unit(NAME, str(path), None)]
        return None

    def parse(self, unit: Unit, out: RankWriter) -> dict[str, Any]:
        path = Path(unit.path)
        if path.is_file():
            warns = check_complete([path])
            res = parse_kernel_details(path, out)
            if res["aic_metrics"]:
                write_rows(out, "run_meta", [{"key": "traceql.aic_metrics", "value": res["aic_metrics"]}])
            return {
                "device": None,
                "aic_metrics": res["aic_metrics"],
                "files": [path.name],
                "warnings": warns,
            }
        lay = _layout(path)
        if lay is None:
            raise BadTraceError(
                path, f"no {OUTPUT_DIR}/ with {', '.join(KNOWN_FILES[:2])} or the other text files"
            )
        root, outdir = lay
        # ("tables", "light"): traceql.tiers' light pass, which keeps only the light tables of this rank
        return _parse_folder(root, outdir, out, light=dict(unit.options).get("tables") == "light")


# the simple files that feed a light table (traceql.tiers.LIGHT: comm_ops, comm_matrix...)
_LIGHT_FILES = {"communication.json", "communication_matrix.json"}


def _parse_folder(root: Path, outdir: Path, out: RankWriter, light: bool = False) -> dict[str, Any]:
    """light: skip the files that feed only detail tables (kernel_details.csv, memory, L2, op statistics:
    traceql.tiers.LIGHT lists what is kept); trace_view.json is still read (counters and step windows), its
    kernels not. kernel_details.csv's header alone still gives the aic-metrics group (run_meta is light)."""
    _analyse_done.check(root, outdir)  # a marker-writing torch_npu without analyse.done: still being written
    fp = _Folder(root, outdir, out, light)
    fp.warnings += check_complete([p for name in KNOWN_FILES if (p := fp.f(name))])
    meta_rows, fp.facts = _meta_rows(root)
    kd = fp.kernel_details()
    fp.task_files(kd)
    windows = fp.trace_view(kd)
    fp.steps(windows)
    fp.simple_files()
    return fp.finish(meta_rows)


class _Folder:
    """One ASCEND_PROFILER_OUTPUT folder being parsed: its files in the order they are read (the order rows
    reach each table), what was parsed, the warnings and the facts (device, aic_metrics, profiler_level)."""

    def __init__(self, root: Path, outdir: Path, out: RankWriter, light: bool) -> None:
        self.root, self.outdir, self.out, self.light = root, outdir, out, light
        self.warnings: list[str] = []
        self.parsed: list[str] = []
        self.facts: dict[str, Any] = {}

    def f(self, name: str) -> Path | None:
        p = self.outdir / name
        return p if p.is_file() else None

    def kernel_details(self) -> Path | None:
        """kernel_details.csv (light: its header only, for the aic-metrics group); the file, or None."""
        kd = self.f("kernel_details.csv")
        if kd and self.light:
            from ._csv import read_header

            self.facts["aic_metrics"] = self.facts.get("aic_metrics") or aic_metrics_group(read_header(kd))
        elif kd:
            res = parse_kernel_details(kd, self.out, l2_cache=self.f("l2_cache.csv"))
            self.facts["aic_metrics"] = self.facts.get("aic_metrics") or res["aic_metrics"]
            self.parsed.append(kd.name)
        return kd

    def task_files(self, kd: Path | None) -> None:
        """task_time.csv (msprof's task_time rows, newer torch_npu): the same tasks as kernel_details.csv, so
        read only without it (a Level_none / task-only dump); soc_pmu.csv: its columns are not in any source
        we read (the bean copies msprof's soc_pmu headers verbatim, which the msprof docs we searched do not
        list), so it is named in the warnings, not guessed at; then the other files this parser leaves."""
        tt = self.f("task_time.csv")
        if tt and kd:
            self.warnings.append(f"{tt}: not read: the same tasks as kernel_details.csv")
        elif tt and not self.light:
            tcsv = CsvFile(tt)
            if not tcsv.has("kernel_name"):
                raise BadTraceError(
                    tt, "expected msprof's task_time columns (kernel_name, task_start(us), task_time(us)...)"
                )
            dev = (
                f"TRY_CAST({tcsv.int_('Device_id')} AS INTEGER)" if tcsv.has("Device_id") else "NULL::INTEGER"
            )
            write_select(self.out, "kernels", tcsv, task_time_kernel_exprs(tcsv, dev), apart_by="stream_id")
            self.parsed.append(tt.name)
        sp = self.f("soc_pmu.csv")
        if sp:
            self.warnings.append(
                f"{sp}: not read: its column layout (msprof soc_pmu) is not documented in the sources traceql was built from"
            )
        self.warnings += unread_beside_text(self.outdir)

    def trace_view(self, kd: Path | None) -> dict[int, tuple[int, int]]:
        """trace_view.json (its kernels only without kernel_details.csv); the step windows it gives."""
        windows: dict[int, tuple[int, int]] = {}
        tv = self.f("trace_view.json")
        if tv:
            tv_meta = _trace_view(
                tv,
                self.out,
                kernels=kd is None and not self.light,
                comm_ops=self.f("communication.json") is None,
            )
            if tv_meta is None:
                self.warnings.append(f"{tv}: not parsed (traceql.parsers.trace_view is not available)")
            else:
                self.parsed.append(tv.name)
                windows = _windows(tv_meta.get("step_windows"))
                self.facts["device"] = self.facts.get("device") or tv_meta.get("device")
                self.warnings.extend(tv_meta.get("warnings") or [])
        return windows

    def steps(self, windows: dict[int, tuple[int, int]]) -> None:
        """step_trace_time.csv, else the trace's ProfilerStep windows."""
        st = self.f("step_trace_time.csv")
        if st:
            write_rows(self.out, "steps", parse_step_trace(st, windows))
            self.parsed.append(st.name)
        elif windows:
            write_rows(
                self.out,
                "steps",
                [
                    {"step": s, "ts_ns": ts, "dur_ns": d, "source": "trace_view"}
                    for s, (ts, d) in sorted(windows.items())
                ],
            )

    def simple_files(self) -> None:
        """The files one function each reads into its table (light: only those of a light table)."""
        simple: list[tuple[str, Callable[[Path, RankWriter], Any]]] = [
            ("communication.json", parse_communication),
            ("communication_matrix.json", parse_communication_matrix),
            ("memory_record.csv", parse_memory_record),
            ("operator_memory.csv", parse_operator_memory),
            ("npu_module_mem.csv", parse_npu_module_mem),
            ("l2_cache.csv", parse_l2_cache),
            ("op_statistic.csv", parse_op_statistic),
            ("api_statistic.csv", parse_api_statistic),
            ("operator_details.csv", parse_operator_details),
        ]
        for fname, fn in simple:
            p = self.f(fname)
            if p and self.light and fname not in _LIGHT_FILES:
                continue
            if p:
                fn(p, self.out)
                self.parsed.append(fname)

    def finish(self, meta_rows: list[dict[str, Any]]) -> dict[str, Any]:
        """run_meta (with the device's own files: PROF_*/device_*/info.json, platform_config/*.ini) and the
        parse's summary."""
        facts = self.facts
        if not facts.get("device"):
            facts["device"] = _device_from_db(self.outdir)
        if facts.get("aic_metrics"):
            meta_rows.append({"key": "traceql.aic_metrics", "value": facts["aic_metrics"]})
        dev_rows, dev_warnings = device_info_rows(self.root)
        meta_rows += [{"key": k, "value": v} for k, v in dev_rows]
        self.warnings += dev_warnings
        write_rows(self.out, "run_meta", meta_rows)
        return {
            "device": facts.get("device"),
            "aic_metrics": facts.get("aic_metrics"),
            "profiler_level": facts.get("profiler_level"),
            "files": self.parsed,
            # present but not read (task_time.csv, data_preprocess.csv, static_op_mem.csv, hccs.csv, *.db...)
            "skipped_files": sorted(
                p.name for p in self.outdir.iterdir() if p.is_file() and p.name not in KNOWN_FILES
            ),
            "warnings": self.warnings,
        }


PARSERS = [TorchNpuTextParser()]

__all__ = ["NAME", "PARSERS", "TorchNpuTextParser"]


def unread_beside_text(outdir: Path) -> list[str]:
    """What a torch_npu 2.8+ text export holds that this parser does not read, said once each (issue 50).

    - data_preprocess.csv (Level2, host data-loader timings): not a device or step table traceql maps yet;
    - ascend_pytorch_profiler[_N].db / analysis.db beside the text files (export_type=[text, db], and the
      2.10 Level2 listing in vipshop/cache-dit PR #1093): the same collection; the text files are read, the db
      is not read a second time (ingest the db on its own to use its 2026 tables: copies, NETDEV...)."""
    notes = []
    dp = outdir / "data_preprocess.csv"
    if dp.is_file():
        notes.append(f"{dp}: not read: data-loader timings (Level2) have no canonical table yet")
    dbs = sorted(p.name for p in outdir.glob("*.db") if p.is_file())
    if dbs:
        notes.append(
            f"{outdir}: {', '.join(dbs)} beside the text export: not read (the same collection; the text files "
            "are); ingest the .db file on its own for the db-only tables (copies, NETDEV_STATS, host usage)"
        )
    return notes
