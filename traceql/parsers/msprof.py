"""msprof CLI (CANN) text export -> canonical tables. Parser name: msprof_text.

Claims (formats.md §1.2):
- a `PROF_*` folder (or any folder) holding `mindstudio_profiler_output/` with CSV/JSON files: one unit.
  A PROF folder with only `msprof_*.db` is left to the msprof_db parser.
- a `mindstudio_profiler_output/` folder given itself: one unit.
- the older layout `PROF_*/device_{id}/{summary,timeline}/` (CANN <= 6.x): one unit per device folder.
- an `op_summary_*.csv` given on its own (or any CSV whose header has `Op Name` and `Task Start Time(us)`).
Rank is None (assigned by order) because msprof text output does not say which rank wrote it.

File names are `<module>_{timestamp}.csv`, split files `<module>_slice_{n}_{timestamp}.csv`, some versions add
a device suffix (`op_summary_0_1.csv`): all files of one module are parts of one table and are all read.

| file | table | units / decision |
|---|---|---|
| op_summary_* | kernels (+ PMU typed columns via _pmu, l2_hit_rate from l2_cache when PMU has none) | µs -> ns exact |
| task_time_* (new form: kernel_name, task_start(us)...) | kernels, only when there is no op_summary (else skipped: same tasks) | µs -> ns |
| task_time_* (legacy aggregate form: Time(%), Count...) | op_stats source='task_time' | µs -> ns |
| msprof_*.json | parsers.trace_view (host_ops, flows, counters, comm_ops; kernels only with no op_summary/task_time) | see there |
| op_statistic_* / api_statistic_* / communication_statistic_* | op_stats (source = module name) | µs -> ns, % -> 0..1 |
| memory_record_* / operator_memory_* / npu_module_mem_* | memory kind record / op / module | **KB** x 1024 (§9 item 9) |
| npu_mem_* | memory kind 'npu_mem', component `APP/HBM`, `APP/DDR`, `APP/Memory`, `Device/...` | KB x 1024 |
|          | + counters track 'NPU MEM' (channel APP/Device, metric hbm_used/ddr_used/memory_used, unit bytes: trace_view's naming) only when no msprof_*.json was parsed (the JSON carries the same samples as `NPU MEM` counters) | |
| hbm_* / ddr_* | run_meta `msprof.hbm.<device>.<Metric>.read_bps` / `.write_bps`: a per-run summary (one average per HBM unit), not a time series, so not counters | MB/s x 1e6 |
| l2_cache_* | l2_cache | ratio as written |
| step_trace_*.csv | steps source='step_trace' (ts = Iteration End - Iteration Time) | µs -> ns |
Anything else (ai_core_utilization, llc_read_write, msprof_tx...) is listed in the metadata as not parsed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadTraceError
from ..units import KB
from ._ascend_text import api_statistic_exprs, check_complete, op_statistic_exprs
from ._csv import CsvFile, TaskCsv, comm_task_sql, text_map_of
from ._pmu import aic_metrics_group, pmu_exprs
from ._task_time import task_time_kernel_exprs
from .base import Unit, read_head

if TYPE_CHECKING:  # pragma: no cover
    from ..rank_writer import RankWriter

NAME = "msprof_text"
OUTPUT_DIR = "mindstudio_profiler_output"
MB_PER_S = 1_000_000  # hbm/ddr Read(MB/s): decimal MB, as the rest of msprof's bandwidths (_units.MB_PER_S)

# `<module>[_slice_<n>][_<digits>[_<digits>...]].csv|json`; the module part is the shortest that fits.
_FILE_RE = re.compile(
    r"^(?P<mod>[a-z][a-z0-9_]*?)(?:_slice_(?P<slice>\d+))?(?:_(?P<suffix>\d+(?:_\d+)*))?\.(?P<ext>csv|json)$",
    re.IGNORECASE,
)
# modules this parser reads (others are reported as not parsed)
PARSED_MODULES = {
    "op_summary", "task_time", "msprof", "op_statistic", "api_statistic", "communication_statistic",
    "memory_record", "operator_memory", "npu_module_mem", "npu_mem", "hbm", "ddr", "l2_cache", "step_trace",
}  # fmt: skip

# op_summary base columns with a canonical home (both the msprof and the torch_npu spelling; formats.md §2)
_KERNEL_COLS = {
    "name": ("Op Name", "Name"),
    "op_type": ("OP Type", "Type"),
    "task_type": ("Task Type", "Accelerator Core"),
    "ts": ("Task Start Time(us)", "Start Time(us)"),
    "dur": ("Task Duration(us)", "Duration(us)"),
    "wait": ("Task Wait Time(us)", "Wait Time(us)"),
    "block": ("Block Num", "Block Dim"),
    "mix_block": ("Mix Block Num", "Mix Block Dim"),
}
_SHAPES = {
    "input_shapes": "Input Shapes",
    "input_dtypes": "Input Data Types",
    "input_formats": "Input Formats",
    "output_shapes": "Output Shapes",
    "output_dtypes": "Output Data Types",
    "output_formats": "Output Formats",
}
_OTHER_BASE = {"Device_id", "Model ID", "Task ID", "Stream ID", "OP State", "Context ID", "Step Id"}
_KERNEL_BASE = {c for alts in _KERNEL_COLS.values() for c in alts} | set(_SHAPES.values()) | _OTHER_BASE


def split_name(name: str) -> tuple[str, int, str] | None:
    """'op_summary_slice_1_2025.csv' -> ('op_summary', 1, 'csv'); None for names that are not msprof output."""
    m = _FILE_RE.match(name)
    if not m:
        return None
    return m.group("mod").lower(), int(m.group("slice") or 0), m.group("ext").lower()


def _group_files(dirs: list[Path]) -> dict[tuple[str, str], list[Path]]:
    """(module, ext) -> files, slices in order."""
    found: dict[tuple[str, str], list[tuple[int, str, Path]]] = {}
    for d in dirs:
        if not d.is_dir():
            continue
        for p in d.iterdir():
            parts = split_name(p.name) if p.is_file() else None
            if parts:
                mod, sl, ext = parts
                found.setdefault((mod, ext), []).append((sl, p.name, p))
    return {k: [p for _, _, p in sorted(v)] for k, v in found.items()}


def _is_blank(p: Path) -> bool:
    try:
        with open(p, "rb") as fh:
            return not fh.read(4096).strip()
    except OSError:
        return False  # unreadable: let the reader say so, naming the file


def has_text_output(d: Path) -> bool:
    return d.is_dir() and any(p.is_file() and split_name(p.name) for p in d.iterdir())


def _device_dirs(prof: Path) -> list[tuple[int, Path]]:
    out = []
    for d in prof.glob("device_*"):
        m = re.fullmatch(r"device_(\d+)", d.name)
        if m and d.is_dir():
            out.append((int(m.group(1)), d))
    return sorted(out)


def _looks_like_op_summary(path: Path) -> bool:
    if path.suffix.lower() != ".csv":
        return False
    if re.match(r"op_summary", path.name, flags=re.IGNORECASE):
        return True
    first = read_head(path, 8192).split(b"\n", 1)[0]
    return b"Op Name" in first and b"Task Start Time" in first


class MsprofTextParser:
    name = NAME
    description = "msprof CLI text export (PROF_*/mindstudio_profiler_output CSV/JSON, op_summary_*.csv)"

    def claim(self, path: Path) -> list[Unit] | None:
        if path.is_file():
            return [Unit(NAME, str(path))] if _looks_like_op_summary(path) else None
        if not path.is_dir():
            return None
        if path.name == OUTPUT_DIR:
            return [Unit(NAME, str(path))] if has_text_output(path) else None
        if has_text_output(path / OUTPUT_DIR):
            return [Unit(NAME, str(path))]
        # older CANN: PROF_*/device_{id}/summary|timeline, one unit per device
        units = []
        for dev, d in _device_dirs(path):
            if has_text_output(d / "summary") or has_text_output(d / "timeline"):
                units.append(Unit(NAME, str(d), None, (("device", str(dev)),)))
        return units or None

    def parse(self, unit: Unit, out: RankWriter) -> dict[str, Any]:
        path = Path(unit.path)
        opts = dict(unit.options)
        if path.is_file():
            n, group = parse_op_summary([path], out, device=None)
            return {"device": None, "aic_metrics": group, "files": [path.name], "warnings": []}
        if "device" in opts:  # older layout: <PROF>/device_{id}/{summary,timeline}
            return _parse_dirs([path / "summary", path / "timeline"], out, device=int(opts["device"]))
        mpo = path if path.name == OUTPUT_DIR else path / OUTPUT_DIR
        if not has_text_output(mpo):
            raise BadTraceError(
                path, f"no {OUTPUT_DIR}/ with op_summary_*.csv, msprof_*.json or other msprof text files"
            )
        prof = mpo.parent
        devs = _device_dirs(prof)
        return _parse_dirs([mpo], out, device=devs[0][0] if len(devs) == 1 else None)


# ---------------------------------------------------------------------------------------------------------
# folder
# ---------------------------------------------------------------------------------------------------------
def _parse_dirs(dirs: list[Path], out: RankWriter, device: int | None) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect(":memory:")  # one connection for every CSV of the folder
    groups = _group_files(dirs)
    warnings: list[str] = []
    # A 0-byte side file (an interrupted export, or the placeholders some test sets hold) costs only that
    # table: warn and go on. op_summary is the run's core: an empty one is an error (parse_op_summary).
    for key, files in groups.items():
        if key[0] != "op_summary":
            for p in [p for p in files if _is_blank(p)]:
                warnings.append(f"{p}: empty file, skipped")
                files.remove(p)
    csvs = {mod: files for (mod, ext), files in groups.items() if ext == "csv" and files}
    jsons = {mod: files for (mod, ext), files in groups.items() if ext == "json" and files}
    # a file cut off mid-write fails the run now, naming its byte offset, not after the others are parsed
    warnings += check_complete(
        [p for (mod, _), files in groups.items() if mod in PARSED_MODULES for p in files]
    )
    parsed: list[str] = []
    skipped: list[str] = []  # files deliberately not read, and why
    meta: list[dict[str, Any]] = []
    group = None

    def done(files: list[Path]) -> None:
        parsed.extend(p.name for p in files)

    l2 = csvs.get("l2_cache", [])
    have_kernels = False
    if "op_summary" in csvs:
        _, group = parse_op_summary(csvs["op_summary"], out, device=device, l2_cache=l2, con=con)
        done(csvs["op_summary"])
        have_kernels = True
    for p in csvs.get("task_time", []):
        csv = CsvFile(p, con=con)
        if csv.has("kernel_name"):
            if have_kernels and "op_summary" in csvs:
                skipped.append(f"{p.name}: the same tasks as op_summary")
                continue
            _write(out, "kernels", csv, _task_time_kernel_exprs(csv, device), apart_by="stream_id")
        else:
            _write(out, "op_stats", csv, _task_time_stats_exprs(csv))
        done([p])
    have_kernels = have_kernels or any(
        CsvFile(p, con=con).has("kernel_name") for p in csvs.get("task_time", [])
    )

    json_parsed = False
    for p in jsons.get("msprof", []):
        res = _trace_view(p, out, kernels=not have_kernels, write_steps="step_trace" not in csvs)
        if res is None:
            warnings.append(f"{p}: not parsed (traceql.parsers.trace_view is not available)")
            continue
        json_parsed = True
        done([p])
        warnings.extend(res.get("warnings") or [])

    simple = [
        ("op_statistic", op_statistic_exprs, "op_stats"),
        ("api_statistic", api_statistic_exprs, "op_stats"),
        ("communication_statistic", _comm_statistic_exprs, "op_stats"),
        ("memory_record", _memory_record_exprs, "memory"),
        ("operator_memory", _operator_memory_exprs, "memory"),
        ("npu_module_mem", _npu_module_mem_exprs, "memory"),
        ("l2_cache", _l2_cache_exprs, "l2_cache"),
        ("step_trace", _step_trace_exprs, "steps"),
    ]
    for mod, fn, table in simple:
        for p in csvs.get(mod, []):
            _write(out, table, CsvFile(p, con=con), fn)
            done([p])
    for p in csvs.get("npu_mem", []):
        _parse_npu_mem(p, out, counters=not json_parsed, con=con)
        done([p])
    for mod in ("hbm", "ddr"):
        for p in csvs.get(mod, []):
            meta += _bandwidth_summary(p, mod, con)
            done([p])

    not_parsed = sorted(
        p.name for (mod, _), files in groups.items() if mod not in PARSED_MODULES for p in files
    )
    meta.append({"key": "msprof.files", "value": ",".join(sorted(parsed))})
    if group:
        meta.append({"key": "traceql.aic_metrics", "value": group})
    out.write("run_meta", _columns(meta))
    return {
        "device": None,
        "aic_metrics": group,
        "files": parsed,
        "not_parsed": not_parsed,
        "skipped": skipped,
        "warnings": warnings,
    }


def _trace_view(path: Path, out: RankWriter, *, kernels: bool, write_steps: bool) -> dict[str, Any] | None:
    """parsers.trace_view on msprof_*.json."""
    from .trace_view import parse_trace_view

    return dict(parse_trace_view(path, out, kernels=kernels, comm_ops=True, write_steps=write_steps) or {})


def _columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    return {k: [r.get(k) for r in rows] for k in keys}


def _write(
    out: RankWriter,
    table: str,
    csv: CsvFile,
    exprs: Any,
    where: str | None = None,
    apart_by: str | None = None,
) -> int:
    """Stream csv -> table. `exprs` is a dict or a function of the CsvFile returning one; apart_by: see
    RankWriter.write."""
    if callable(exprs):
        exprs = exprs(csv)
    n = 0
    for batch in csv.select(exprs, where=where):
        if batch.num_rows:
            out.write(table, batch, apart_by=apart_by)
            n += batch.num_rows
    return n


def _kb(csv: CsvFile, base: str) -> str:
    """`<base>(KB)` -> bytes; the torch_npu `(MB)` spelling (binary MB) is accepted too."""
    if csv.has(f"{base}(KB)"):
        return csv.scaled(f"{base}(KB)", float(KB))
    if csv.has(f"{base}(MB)"):
        return csv.scaled(f"{base}(MB)", float(1 << 20))
    return "NULL::BIGINT"


def _device_expr(csv: CsvFile, device: int | None) -> str:
    fallback = "NULL::INTEGER" if device is None else str(int(device))
    return (
        f"COALESCE(TRY_CAST({csv.int_('Device_id')} AS INTEGER), {fallback})"
        if csv.has("Device_id")
        else fallback
    )


# ---------------------------------------------------------------------------------------------------------
# op_summary -> kernels
# ---------------------------------------------------------------------------------------------------------
_OpSummaryCsv = TaskCsv  # optionally joined to l2_cache.csv hit rates (see _csv.TaskCsv)


def _require_any(csv: CsvFile, *alternatives: tuple[str, ...]) -> None:
    missing = [" or ".join(repr(c) for c in alts) for alts in alternatives if csv.first(*alts) is None]
    if missing:
        raise BadTraceError(
            csv.path, f"missing required column(s) {', '.join(missing)}; not an msprof op_summary CSV"
        )


def _kernel_exprs(csv: CsvFile, device: int | None) -> dict[str, str]:
    c = {k: csv.first(*alts) for k, alts in _KERNEL_COLS.items()}
    name = csv.txt(c["name"] or "Op Name")
    task_type = csv.txt(c["task_type"] or "Task Type")
    exprs = {
        "device_id": _device_expr(csv, device),
        "step": csv.int_("Step Id"),
        "name": name,
        "op_type": csv.txt(c["op_type"] or "OP Type"),
        "task_type": task_type,
        "is_comm": comm_task_sql(task_type, name),
        "stream_id": csv.int_("Stream ID"),
        "task_id": csv.int_("Task ID"),
        "model_id": csv.int_("Model ID"),
        "context_id": csv.txt("Context ID"),
        "ts_ns": csv.us_ns(c["ts"] or "Task Start Time(us)"),
        "dur_ns": csv.us_ns(c["dur"] or "Task Duration(us)"),
        "wait_ns": csv.us_ns(c["wait"] or "Task Wait Time(us)"),
        "block_dim": csv.int_("Block Num", "Block Dim"),
        "mix_block_dim": csv.int_("Mix Block Num", "Mix Block Dim"),
        "op_state": csv.txt("OP State"),
    }
    for canon, col in _SHAPES.items():
        # cells are `"32,3,224,224"` (literal quotes); several inputs `"a;b"`: drop every quote
        exprs[canon] = csv.shape_txt(col)
    pmu, consumed = pmu_exprs(csv, dur_cols=tuple(_KERNEL_COLS["dur"]))
    exprs.update(pmu)
    # `extra`: columns with no canonical home (Model Name, Infer ID, HF32 Eligible...) and metric cells that
    # are not numbers (N/A is dropped: it means "not measured")
    plain = [col for col in csv.header if col not in _KERNEL_BASE and col not in consumed]
    exprs["extra"] = csv.text_cells_map(plain, not_numbers=consumed)
    return exprs


def _register_l2_hits(con: Any, l2_files: list[Path]) -> bool:
    """Temp table `__l2hit(s, t, h)`: l2_cache hit rates for (stream, task) pairs seen once with a number.
    A2 often writes N/A in every row (formats.md §6): then nothing is joined."""
    import duckdb

    parts = []
    for p in l2_files:
        l2 = CsvFile(p, con=con)
        l2.require("Stream Id", "Task Id")
        if l2.has("Hit Rate"):
            parts.append(
                f"SELECT {l2.int_('Stream Id')} AS s, {l2.int_('Task Id')} AS t, {l2.num('Hit Rate')} AS h FROM {l2.from_clause()}"
            )
    if not parts:
        return False
    sql = f"SELECT s, t, any_value(h) AS h FROM ({' UNION ALL '.join(parts)}) GROUP BY s, t HAVING count(*) = 1 AND any_value(h) IS NOT NULL"
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE __l2hit AS {sql}")
        return bool(con.execute("SELECT count(*) FROM __l2hit").fetchall()[0][0])
    except duckdb.Error as e:
        raise BadTraceError(l2_files[0], f"malformed CSV: {str(e).strip().splitlines()[0]}") from e


# slices read in one query at most (a query's planning is most of a small slice's cost; see CsvFile)
SLICES_PER_QUERY = 256


def _same_header_runs(files: list[Path]) -> list[tuple[Path, list[Path]]]:
    """Consecutive slices with one header, as (first, the others) of up to SLICES_PER_QUERY files, in order."""
    from ._csv import read_header

    runs: list[tuple[list[str], list[Path]]] = []
    for p in files:
        h = read_header(p)
        if runs and runs[-1][0] == h and len(runs[-1][1]) < SLICES_PER_QUERY:
            runs[-1][1].append(p)
        else:
            runs.append((h, [p]))
    return [(ps[0], ps[1:]) for _h, ps in runs]


def parse_op_summary(
    files: list[Path],
    out: RankWriter,
    device: int | None,
    l2_cache: list[Path] | None = None,
    con: Any = None,
) -> tuple[int, str | None]:
    """All parts (slices) of one op_summary table -> kernels. Returns (rows, aic-metrics group)."""
    total = 0
    group = None
    joined: bool | None = None
    for first, rest in _same_header_runs(files):
        csv = _OpSummaryCsv(first, con=con, also=rest)
        con = csv.con
        _require_any(csv, _KERNEL_COLS["name"], _KERNEL_COLS["ts"], _KERNEL_COLS["dur"])
        exprs = _kernel_exprs(csv, device)
        if (
            l2_cache
            and exprs["l2_hit_rate"] == "NULL::DOUBLE"
            and csv.has("Stream ID")
            and csv.has("Task ID")
        ):
            if joined is None:
                joined = _register_l2_hits(con, l2_cache)
            if joined:
                csv.join_l2 = True
                exprs["l2_hit_rate"] = "__l2hit.h"
        group = group or aic_metrics_group(csv.header)
        total += _write(out, "kernels", csv, exprs, apart_by="stream_id")
    if total == 0:
        raise BadTraceError(files[0], "no data rows (header only); expected one row per device task")
    return total, group


# ---------------------------------------------------------------------------------------------------------
# task_time
# ---------------------------------------------------------------------------------------------------------
def _task_time_kernel_exprs(csv: CsvFile, device: int | None) -> dict[str, str]:
    return task_time_kernel_exprs(
        csv, _device_expr(csv, device)
    )  # parsers._task_time (shared with torch_npu)


def _task_time_stats_exprs(csv: CsvFile) -> dict[str, str]:
    """Legacy task_time (MSPROF-CFG): `Time(%),Time(us),Count,Avg(us),Min(us),Max(us),Waiting(us),Running(us),
    Pending(us),Type,API,Task ID,Op Name,Stream ID`: per-task-type aggregates."""
    if not (csv.has("Time(us)") and csv.has("Count")):
        raise BadTraceError(
            csv.path,
            "neither task_time form: expected 'kernel_name,task_start(us),...' or 'Time(%),Time(us),Count,...'",
        )
    used = {"Op Name", "Type", "Count", "Time(us)", "Min(us)", "Avg(us)", "Max(us)", "Time(%)"}
    return {
        "source": "'task_time'",
        "name": f"COALESCE({csv.txt('Op Name')}, {csv.txt('Type')})",
        "core_type": csv.txt("Type"),
        "count": csv.int_("Count"),
        "total_ns": csv.us_ns("Time(us)"),
        "min_ns": csv.us_ns("Min(us)"),
        "avg_ns": csv.us_ns("Avg(us)"),
        "max_ns": csv.us_ns("Max(us)"),
        "ratio": csv.ratio_pct("Time(%)"),
        "extra": csv.text_map([c for c in csv.header if c not in used]),
    }


# ---------------------------------------------------------------------------------------------------------
# aggregates
# ---------------------------------------------------------------------------------------------------------
def _comm_statistic_exprs(csv: CsvFile) -> dict[str, str]:
    exprs = op_statistic_exprs(csv)
    exprs["source"] = "'communication_statistic'"
    exprs["extra"] = csv.text_map(["Device_id"])
    return exprs


# ---------------------------------------------------------------------------------------------------------
# memory (msprof writes KB where torch_npu writes MB: formats.md §6, §9 item 9)
# ---------------------------------------------------------------------------------------------------------
def _memory_record_exprs(csv: CsvFile) -> dict[str, str]:
    csv.require("Component", "Timestamp(us)")
    return {
        "kind": "'record'",
        "component": csv.txt("Component"),
        "device": csv.txt("Device", "Device Type"),
        "ts_ns": csv.us_ns("Timestamp(us)"),
        "allocated_bytes": _kb(csv, "Total Allocated"),
        "reserved_bytes": _kb(csv, "Total Reserved"),
        "active_bytes": _kb(csv, "Total Active"),
        "extra": csv.text_map(["Device_id", "Stream Ptr"]),
    }


def _operator_memory_exprs(csv: CsvFile) -> dict[str, str]:
    csv.require("Name", "Size(KB)", "Allocation Time(us)")
    ts = csv.us_ns("Allocation Time(us)")
    dur = csv.us_ns("Duration(us)")
    # msprof has no Release Time column: release = allocation + duration (null when the release was not seen)
    release = csv.us_ns("Release Time(us)") if csv.has("Release Time(us)") else f"{ts} + {dur}"
    return {
        "kind": "'op'",
        "component": csv.txt("Name"),
        "device": csv.txt("Device", "Device Type"),
        "ts_ns": ts,
        "size_bytes": csv.scaled("Size(KB)", float(KB)),
        "allocated_bytes": _kb(csv, "Allocation Total Allocated"),
        "reserved_bytes": _kb(csv, "Allocation Total Reserved"),
        "release_ts_ns": release,
        "dur_ns": dur,
        "extra": csv.text_map(
            ["Device_id", "Release Total Allocated(KB)", "Release Total Reserved(KB)", "Stream Ptr"]
        ),
    }


def _npu_module_mem_exprs(csv: CsvFile) -> dict[str, str]:
    csv.require("Component", "Timestamp(us)")
    col = csv.first("Total Reserved(KB)", "Total Reserved(MB)")
    raw = csv.num(col) if col else "NULL::DOUBLE"
    # -1 is a marker ("only the release was captured"), not a size: null bytes, raw value kept in extra
    reserved = f"CASE WHEN {raw} < 0 THEN NULL ELSE {_kb(csv, 'Total Reserved')} END"
    extra = [("Device_id", csv.txt("Device_id"))] if csv.has("Device_id") else []
    if col:
        extra.append((col, f"CASE WHEN {raw} < 0 THEN {csv.txt(col)} END"))
    return {
        "kind": "'module'",
        "component": csv.txt("Component"),
        "device": csv.txt("Device", "Device Type"),
        "ts_ns": csv.us_ns("Timestamp(us)"),
        "reserved_bytes": reserved,
        "extra": text_map_of(extra),
    }


def _parse_npu_mem(path: Path, out: RankWriter, counters: bool, con: Any = None) -> None:
    """`Device_id,event,ddr(KB),hbm(KB),memory(KB),timestamp(us)` -> memory kind 'npu_mem', one row per
    (event, DDR/HBM/Memory), named like the JSON's NPU MEM counters (`APP/HBM`); and the counters themselves
    when the JSON was not parsed."""
    csv = CsvFile(path, con=con)
    csv.require("event", "timestamp(us)")
    event = csv.txt("event")
    label = f"CASE lower({event}) WHEN 'app' THEN 'APP' WHEN 'device' THEN 'Device' ELSE {event} END"
    for kind, col in (("DDR", "ddr(KB)"), ("HBM", "hbm(KB)"), ("Memory", "memory(KB)")):
        if not csv.has(col):
            continue
        channel = f"{label} || '/{kind}'"
        value = csv.scaled(col, float(KB))
        ts = csv.us_ns("timestamp(us)")
        _write(
            out,
            "memory",
            csv,
            {
                "kind": "'npu_mem'",
                "component": channel,
                "device": csv.txt("Device_id"),
                "ts_ns": ts,
                "allocated_bytes": value,
            },
        )
        if counters:
            # named exactly like parsers.trace_view names the JSON's `NPU MEM` counters (`APP/HBM` {KB: ...})
            exprs = {
                "track": "'NPU MEM'",
                "channel": label,
                "metric": f"'{kind.lower()}_used'",
                "unit": "'bytes'",
                "name": channel,
                "ts_ns": ts,
                "value": f"({value})::DOUBLE",
            }
            _write(out, "counters", csv, exprs)


def _l2_cache_exprs(csv: CsvFile) -> dict[str, str]:
    csv.require("Stream Id", "Task Id")
    return {
        "stream_id": csv.int_("Stream Id"),
        "task_id": csv.int_("Task Id"),
        "op_name": csv.txt("Op Name"),
        "hit_rate": csv.num("Hit Rate"),
        "victim_rate": csv.num("Victim Rate"),
    }


def _step_trace_exprs(csv: CsvFile) -> dict[str, str]:
    """Graph-mode step_trace (MSPROF-CFG): FP/BP/Reduce columns have no canonical home and are not kept."""
    csv.require("Iteration ID", "Iteration Time(us)")
    dur = csv.us_ns("Iteration Time(us)")
    end = csv.us_ns("Iteration End(us)")
    return {
        "step": csv.int_("Iteration ID"),
        "ts_ns": f"{end} - {dur}",
        "dur_ns": dur,
        "source": "'step_trace'",
    }


def _bandwidth_summary(path: Path, mod: str, con: Any = None) -> list[dict[str, Any]]:
    """hbm_*/ddr_*.csv `Device_id,Metric,Read(MB/s),Write(MB/s)` -> run_meta rows (bytes/s as text)."""
    csv = CsvFile(path, con=con)
    csv.require("Metric")
    exprs = {
        "dev": csv.txt("Device_id") if csv.has("Device_id") else "'0'",
        "metric": csv.txt("Metric"),
        "r": csv.scaled(csv.first("Read(MB/s)") or "Read(MB/s)", float(MB_PER_S)),
        "w": csv.scaled(csv.first("Write(MB/s)") or "Write(MB/s)", float(MB_PER_S)),
    }
    rows: list[dict[str, Any]] = []
    for batch in csv.select(exprs):
        for r in batch.to_pylist():
            for key, v in (("read_bps", r["r"]), ("write_bps", r["w"])):
                if v is not None:
                    rows.append({"key": f"msprof.{mod}.{r['dev']}.{r['metric']}.{key}", "value": str(v)})
    return rows


PARSERS = [MsprofTextParser()]

__all__ = ["NAME", "PARSERS", "MsprofTextParser", "parse_op_summary", "split_name"]
