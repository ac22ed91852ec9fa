"""msprof op (`msprof op ... ./app`, CANN) single-operator collections: OPPROF_{stamp}_{id}/ -> kernels.

Layout (a real 910B3 collection, CANN 8.x): OPPROF_<yyyymmddhhmmss>_<id>/<op name>/<launch>/ holding
OpBasicInfo_<stamp>.csv (one row: Op Name, Op Type, Task Duration(us), Block Dim, Mix Block Dim, Device Id, Pid,
Current Freq, Rated Freq), dump/op_basic_info.txt (key=value: Run Soc Version...), and one CSV per metric group
with one row per core block (block_id, sub_block_id, then aic_* / aiv_* columns, NA where a core type was
idle): Memory, PipeUtilization, L2Cache, ArithmeticUtilization, MemoryUB, MemoryL0, ResourceConflictRatio.
Every line ends with a trailing comma (an empty last field, dropped).

One kernels row per launch folder, task_type from `Op Type` (vector -> AI_VECTOR_CORE, cube -> AI_CORE,
mix -> MIX_AIC), name = Op Name, op_type null (msprof op names the kernel, not the framework op):
- hbm_read_bytes / hbm_write_bytes = sum over blocks of Memory `read_main_memory_datas(KB)` /
  `write_main_memory_datas(KB)` x 1024 (KB = 1024 bytes: KB / aiv_time equals the GiB/s bandwidth columns):
  measured GM bytes, graded measured (kernel_bytes.hbm_bytes_source 'pmu');
- dur_ns = Task Duration(us) x 1000 (exact decimal), block_dim / mix_block_dim, device_id;
- vec_ratio / mte2_ratio / mte3_ratio / scalar_ratio / mac_ratio: mean over blocks of the aic/aiv ratio
  columns (max of aic and aiv, as kernel_details' canonical ratios); l2_hit_rate = all hits / (hits +
  miss_allocate) summed over blocks and both core types; flops = sum of aic_cube_fops + aiv_vec_fops;
- metrics: every numeric column of every group as `<Group>.<column>`, the mean over the blocks that have it;
- extra: Op Type, Pid, Current/Rated Freq, the launch folder, op_basic_info.txt keys, `source` = 'opprof'.
- ts_ns: msprof op records no device timestamps; the launch's CSV name stamp (yyyymmddhhmmssmmm, the
  collecting host's local time, taken as UTC) places the row, and meta["time_unit"] says so.
meta["device"] = Run Soc Version (op_basic_info.txt), which selects the peaks.

Not read: dump/*.bin, visualize_data.bin (instruction-level hot spots), pc_start_addr.txt.
"""

from __future__ import annotations

import csv
import re
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadTraceError
from .base import Unit

if TYPE_CHECKING:  # pragma: no cover
    from ..rank_writer import RankWriter

BASIC_RE = re.compile(r"^OpBasicInfo(?:_(\d{17}))?\.csv$")
GROUP_RE = re.compile(r"^([A-Za-z0-9]+?)(?:_(\d{17}))?\.csv$")
GROUPS = (
    "Memory",
    "PipeUtilization",
    "L2Cache",
    "ArithmeticUtilization",
    "MemoryUB",
    "MemoryL0",
    "ResourceConflictRatio",
)
TASK_TYPES = {"vector": "AI_VECTOR_CORE", "cube": "AI_CORE", "mix": "MIX_AIC", "aicore": "AI_CORE"}
KB = 1024
WHAT = "an msprof op collection (OPPROF_*/<op>/<launch>/OpBasicInfo_*.csv)"


def launch_dirs(path: Path) -> list[Path]:
    """Launch folders under an OPPROF_* folder (or the path itself when it is one), sorted."""
    if _basic_file(path) is not None:
        return [path]
    found = [d for d in sorted(path.glob("*/*")) if d.is_dir() and _basic_file(d) is not None]
    return found


def _basic_file(d: Path) -> Path | None:
    try:
        return next((p for p in sorted(d.iterdir()) if BASIC_RE.match(p.name) and p.is_file()), None)
    except OSError:
        return None


class OpprofParser:
    name = "opprof"
    description = "msprof op single-operator collection (OPPROF_* folder)"

    def claim(self, path: Path) -> list[Unit] | None:
        if not path.is_dir():
            return None
        if path.name.startswith("OPPROF_") and launch_dirs(path):
            return [Unit(self.name, str(path))]
        if _basic_file(path) is not None:
            return [Unit(self.name, str(path))]
        return None

    def parse(self, unit: Unit, out: RankWriter) -> dict[str, Any]:
        launches = launch_dirs(Path(unit.path))
        if not launches:
            raise BadTraceError(unit.path, f"no launch folder with OpBasicInfo_*.csv; expected {WHAT}")
        rows = [read_launch(d) for d in launches]
        cols: dict[str, list[Any]] = {k: [] for k in rows[0]}
        for r in rows:
            for k, v in r.items():
                cols[k].append(v)
        out.write("kernels", cols)
        device = dict(rows[0]["extra"]).get("Run Soc Version")
        meta: dict[str, Any] = {
            "rows": {"kernels": len(rows)},
            "warnings": [],
            "time_unit": "msprof op records no timestamps: ts_ns = each launch's CSV name stamp taken as UTC",
            "export": "opprof",
        }
        if device:
            meta["device"] = device
        return meta


def read_launch(d: Path) -> dict[str, Any]:
    """One kernels row (canonical column -> value) of a launch folder."""
    basic_path = _basic_file(d)
    assert basic_path is not None
    basic = _read_csv(basic_path)
    if len(basic) != 1 or "Op Name" not in basic[0]:
        raise BadTraceError(basic_path, "expected one row with an 'Op Name' column (msprof op OpBasicInfo)")
    b = basic[0]
    groups = {g: _read_csv(p) for g, p in _group_files(d).items()}
    info = _dump_info(d / "dump" / "op_basic_info.txt")
    mem = groups.get("Memory", [])
    extra = [(k, v) for k, v in b.items() if k not in ("Op Name", "Task Duration(us)", "Block Dim", "Mix Block Dim",
                                                       "Device Id") and v not in ("", "NA")]  # fmt: skip
    extra += [(k, v) for k, v in info.items() if k not in ("Op Name", "Block Dim", "Device Id")]
    extra += [("launch", d.name), ("source", "opprof")]
    dur = _dec(b.get("Task Duration(us)"), basic_path, "Task Duration(us)")
    return {
        "device_id": _int(b.get("Device Id")),
        "name": b["Op Name"],
        "op_type": None,
        "task_type": TASK_TYPES.get((b.get("Op Type") or "").strip().lower(), b.get("Op Type")),
        "is_comm": False,
        "ts_ns": _stamp_ns(basic_path),
        "dur_ns": None if dur is None else int(round(dur * 1000)),  # sub-ns digits: nearest ns
        "block_dim": _int(b.get("Block Dim")),
        "mix_block_dim": _int(b.get("Mix Block Dim")),
        "hbm_read_bytes": _sum_bytes(mem, "read_main_memory_datas(KB)"),
        "hbm_write_bytes": _sum_bytes(mem, "write_main_memory_datas(KB)"),
        "vec_ratio": _ratio(groups.get("PipeUtilization", []), "vec_ratio"),
        "mte2_ratio": _ratio(groups.get("PipeUtilization", []), "mte2_ratio"),
        "mte3_ratio": _ratio(groups.get("PipeUtilization", []), "mte3_ratio"),
        "scalar_ratio": _ratio(groups.get("PipeUtilization", []), "scalar_ratio"),
        "mac_ratio": _ratio(groups.get("PipeUtilization", []), "cube_ratio"),
        "l2_hit_rate": _l2_hit_rate(groups.get("L2Cache", [])),
        "flops": _flops(groups.get("ArithmeticUtilization", [])),
        "metrics": _metrics(groups),
        "extra": extra,
    }


def _group_files(d: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for p in sorted(d.iterdir()):
        m = GROUP_RE.match(p.name)
        if m and m.group(1) in GROUPS and p.is_file():
            out[m.group(1)] = p
    return out


def _read_csv(p: Path) -> list[dict[str, str]]:
    try:
        with open(p, encoding="utf-8", newline="") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise BadTraceError(p, f"cannot read it ({type(e).__name__}: {e}); expected {WHAT}") from e
    if not rows:
        raise BadTraceError(p, f"empty file; expected a header line; {WHAT}")
    head = [h.strip() for h in rows[0]]
    if head and head[-1] == "":  # every msprof op line ends with a comma
        head = head[:-1]
    return [{h: (r[i].strip() if i < len(r) else "") for i, h in enumerate(head)} for r in rows[1:] if any(r)]


def _dump_info(p: Path) -> dict[str, str]:
    if not p.is_file():
        return {}
    out: dict[str, str] = {}
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        k, sep, v = line.partition("=")
        if sep and k.strip():
            out[k.strip()] = v.strip()
    return out


def _dec(v: str | None, path: Path | None = None, col: str = "") -> Decimal | None:
    if v is None or v.strip() in ("", "NA", "N/A"):
        return None
    try:
        d = Decimal(v.strip())
    except InvalidOperation:
        if path is not None:
            raise BadTraceError(path, f"column {col!r}: {v!r} is not a number") from None
        return None
    return d if d.is_finite() else None


def _int(v: str | None) -> int | None:
    d = _dec(v)
    return None if d is None else int(d)


def _sum_bytes(rows: list[dict[str, str]], col: str) -> int | None:
    vals = [d for r in rows if (d := _dec(r.get(col))) is not None]
    return int(sum(vals, Decimal(0)) * KB) if vals else None


def _ratio(rows: list[dict[str, str]], suffix: str) -> float | None:
    """Mean over blocks of max(aic_<suffix>, aiv_<suffix>) (the busier core type), null when neither is there."""
    per = []
    for r in rows:
        vals = [d for k in (f"aic_{suffix}", f"aiv_{suffix}") if (d := _dec(r.get(k))) is not None]
        if vals:
            per.append(max(vals))
    return float(sum(per, Decimal(0)) / len(per)) if per else None


def _l2_hit_rate(rows: list[dict[str, str]]) -> float | None:
    hits = miss = Decimal(0)
    for r in rows:
        for core in ("aic", "aiv"):
            for kind in ("write_cache", "r0_read_cache", "r1_read_cache"):
                hits += _dec(r.get(f"{core}_{kind}_hit")) or 0
                miss += _dec(r.get(f"{core}_{kind}_miss_allocate")) or 0
    return float(hits / (hits + miss)) if hits + miss > 0 else None


def _flops(rows: list[dict[str, str]]) -> float | None:
    vals = [d for r in rows for k in ("aic_cube_fops", "aiv_vec_fops") if (d := _dec(r.get(k))) is not None]
    return float(sum(vals, Decimal(0))) if vals else None


def _metrics(groups: dict[str, list[dict[str, str]]]) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    for g, rows in groups.items():
        if not rows:
            continue
        for col in rows[0]:
            if col in ("block_id", "sub_block_id"):
                continue
            vals = [d for r in rows if (d := _dec(r.get(col))) is not None]
            if vals:
                out.append((f"{g}.{col}", float(sum(vals, Decimal(0)) / len(vals))))
    return out


def _stamp_ns(p: Path) -> int | None:
    m = BASIC_RE.match(p.name)
    if not m or not m.group(1):
        return None
    s = m.group(1)
    try:
        t = datetime.strptime(s[:14], "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)  # noqa: UP017
    except ValueError:
        return None
    return int(t.timestamp()) * 1_000_000_000 + int(s[14:]) * 1_000_000


PARSERS = [OpprofParser()]
