"""Per-task PMU (aic-metrics) columns -> canonical typed kernel columns, as SQL over a CsvFile.

Shared by the torch_npu `kernel_details.csv` and the msprof `op_summary_*.csv` parsers: both files carry the
same metric block (formats.md §2.2). Usage:

    exprs, consumed = pmu_exprs(csv, dur_cols=("Task Duration(us)", "Duration(us)"))
    # exprs: canonical column -> SQL expression (hbm_read_bytes, ..., flops, metrics)
    # consumed: the header columns treated as PMU metrics (they are all in `metrics`; keep them out of `extra`)

Column naming (formats.md §2.2, MSPROF-AICM, MSPROF-DOC op_summary tables):
- A2/A3 (and 950) prefix every metric with `aic_` (cube core) or `aiv_` (vector core); the time columns are
  `aicore_time(us)` (cube side) and `aiv_time(us)` (vector side).
- Older chips (910A/310P) have no prefix and one time column `aicore_time(us)`.
- MemoryAccess names differ in case between doc and code (`GM_to_UB_datas(KB)` vs `gm_to_ub_datas(KB)`), so
  every metric lookup here is case-insensitive.

Derivations (each side = aic, aiv, or the unprefixed single side; a total is null only when every side is):
- hbm_read/write_bytes: MemoryAccess `read|write_main_memory_datas(KB)` x 1024 when present (a byte count the
  hardware measured); otherwise Memory `main_mem_read|write_bw(GB/s)` x 1e9 x that side's core time. The
  bandwidth is the op's aggregate over its cores (its average core time is ~ the task duration), so
  bw x core time is the op's traffic. Core time falls back to the task duration when the time cell is N/A.
- ub_read/write_bytes: Memory `ub_read|write_bw(GB/s)`, else MemoryUB's sum of
  `ub_read|write_bw_{mte,mte2,vector,scalar}(GB/s)` (+ `fixp2ub_write_bw` on 950), x core time.
- l2_read/write_bytes: Memory `l2_read|write_bw(GB/s)` (the doc also spells it without the unit) x core time.
- l2_hit_rate: L2Cache hits / (hits + miss_allocate) summed over write/r0/r1 and both sides; 950's
  `read|write_local_l2_hit|miss`. Null when the denominator is 0.
- mac/vec/scalar/mte2/mte3 ratio: the max over sides (and over the `_exe_`/`_extra` variants of
  PipelineExecuteUtilization / PipeUtilizationExct / chip v5). Values are already 0..1 in the files.
- flops: ArithmeticUtilization `cube_fops + vector_fops` over both sides.
- aicore_time_ns / aiv_time_ns: exact decimal µs -> ns.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..units import KB

if TYPE_CHECKING:  # pragma: no cover
    from ._csv import CsvFile

SIDES = ("aic_", "aiv_", "")  # A2/A3 cube, A2/A3 vector, older chips (no prefix)
GB_S_TIMES_US = 1000.0  # GB/s (1e9 B/s) x µs (1e-6 s) = 1e3 bytes

# Unprefixed metric names of every aic-metrics group (MSPROF-AICM default/v5/v6 lists, MSPROF-DOC tables),
# lower case. Used only to recognise PMU columns; anything snake_case or aic_/aiv_-prefixed is also PMU.
_KNOWN_METRICS = {
    "aicore_time(us)", "aiv_time(us)", "total_cycles", "cube_utilization(%)", "memory_bound",
    "read_main_memory_datas(kb)", "write_main_memory_datas(kb)", "gm_to_l1_datas(kb)", "l0c_to_l1_datas(kb)",
    "l0c_to_gm_datas(kb)", "gm_to_ub_datas(kb)", "ub_to_gm_datas(kb)",
}  # fmt: skip
# A PMU column: lower snake_case with an optional unit suffix, e.g. `vec_ratio`, `l2_read_bw(GB/s)`.
_SNAKE = re.compile(r"^[a-z0-9_]+(\([^)]*\))?$")
# Columns of the base (non-PMU) block that happen to be snake_case: never metrics.
_NOT_METRICS = {"device_id"}


def is_pmu_column(name: str) -> bool:
    low = name.lower()
    if low in _NOT_METRICS:
        return False
    return low.startswith(("aic_", "aiv_")) or low in _KNOWN_METRICS or bool(_SNAKE.match(name))


def _sum(parts: list[str]) -> str | None:
    """SQL sum of nullable parts: null only when every part is null."""
    parts = [p for p in parts if p]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return f"CASE WHEN COALESCE({', '.join(parts)}) IS NULL THEN NULL ELSE {' + '.join(f'COALESCE({p}, 0)' for p in parts)} END"


def _to_bigint(expr: str | None) -> str:
    return "NULL::BIGINT" if expr is None else f"TRY_CAST(round({expr}) AS BIGINT)"


class _Cols:
    """Case-insensitive view of a CsvFile's PMU columns, building numeric SQL per side."""

    def __init__(self, csv: CsvFile, dur_cols: tuple[str, ...]) -> None:
        self.csv = csv
        self.by_lower = {c.lower(): c for c in csv.header if is_pmu_column(c)}
        dur = csv.first(*dur_cols)
        self.dur = csv.num(dur) if dur else None

    def col(self, name: str) -> str | None:
        return self.by_lower.get(name.lower())

    def num(self, side: str, *names: str) -> str | None:
        """Numeric SQL for the first of `names` present with prefix `side`, else None."""
        for n in names:
            c = self.col(side + n)
            if c is not None:
                return self.csv.num(c)
        return None

    def side_time_us(self, side: str) -> str | None:
        t = self.num("", "aicore_time(us)") if side in ("aic_", "") else self.num("", "aiv_time(us)")
        if t is None:
            return self.dur
        return f"COALESCE({t}, {self.dur})" if self.dur else t

    def side_sum(self, side: str, names: tuple[str, ...]) -> str | None:
        return _sum([e for n in names if (e := self.num(side, n))])

    def bw_bytes(self, side: str, bw: str | None) -> str | None:
        if bw is None:
            return None
        t = self.side_time_us(side)
        return None if t is None else f"({bw}) * ({t}) * {GB_S_TIMES_US!r}"


def _bytes(c: _Cols, kb_name: str | None, bw_groups: list[tuple[str, ...]]) -> str:
    """Byte total over sides: the KB counter where a row has it, else bandwidth x core time.

    Per side, the first bandwidth group present wins (e.g. Memory `ub_read_bw` before MemoryUB's parts).
    """
    from_kb = None
    if kb_name is not None:
        kb = _sum([e for s in SIDES if (e := c.num(s, kb_name))])
        from_kb = None if kb is None else f"({kb}) * {KB}"
    parts = []
    for s in SIDES:
        for names in bw_groups:
            bw = c.side_sum(s, names)
            if bw is not None:
                parts.append(c.bw_bytes(s, bw))
                break
    from_bw = _sum([p for p in parts if p])
    if from_kb and from_bw:
        return _to_bigint(f"COALESCE({from_kb}, {from_bw})")
    return _to_bigint(from_kb or from_bw)


def _ratio_max(c: _Cols, *names: str) -> str:
    exprs = [e for s in SIDES for n in names if (e := c.num(s, n))]
    if not exprs:
        return "NULL::DOUBLE"
    return exprs[0] if len(exprs) == 1 else f"greatest({', '.join(exprs)})"


def _hit_rate(c: _Cols) -> str:
    hit_names = (
        "write_cache_hit",
        "r0_read_cache_hit",
        "r1_read_cache_hit",
        "read_local_l2_hit",
        "write_local_l2_hit",
    )
    miss_names = (
        "write_cache_miss_allocate", "r0_read_cache_miss_allocate", "r1_read_cache_miss_allocate",
        "read_local_l2_miss", "write_local_l2_miss",
    )  # fmt: skip
    hits = _sum([e for s in SIDES if (e := c.side_sum(s, hit_names))])
    misses = _sum([e for s in SIDES if (e := c.side_sum(s, miss_names))])
    if hits is None or misses is None:
        return "NULL::DOUBLE"
    return f"(({hits}) / NULLIF(({hits}) + ({misses}), 0))::DOUBLE"


def pmu_exprs(
    csv: CsvFile, dur_cols: tuple[str, ...] = ("Task Duration(us)", "Duration(us)")
) -> tuple[dict[str, str], list[str]]:
    """Canonical kernel column -> SQL expression for every PMU-derived column, and the PMU columns consumed.

    Every key is always present (NULL expressions when the file lacks the inputs). `metrics` maps every PMU
    column (name as written) to its numeric value; N/A cells are left out of the map.
    """
    c = _Cols(csv, dur_cols)
    consumed = [col for col in csv.header if is_pmu_column(col)]
    ub_read = [
        ("ub_read_bw(GB/s)",),
        (
            "ub_read_bw_mte(GB/s)",
            "ub_read_bw_mte2(GB/s)",
            "ub_read_bw_vector(GB/s)",
            "ub_read_bw_scalar(GB/s)",
        ),
    ]
    ub_write = [
        ("ub_write_bw(GB/s)",),
        (
            "ub_write_bw_mte(GB/s)",
            "ub_write_bw_mte2(GB/s)",
            "ub_write_bw_vector(GB/s)",
            "ub_write_bw_scalar(GB/s)",
            "fixp2ub_write_bw(GB/s)",
        ),
    ]
    flops = _sum([e for s in SIDES if (e := c.side_sum(s, ("cube_fops", "vector_fops")))])
    exprs = {
        "hbm_read_bytes": _bytes(
            c, "read_main_memory_datas(KB)", [("main_mem_read_bw(GB/s)",), ("main_mem_read_bw",)]
        ),
        "hbm_write_bytes": _bytes(
            c, "write_main_memory_datas(KB)", [("main_mem_write_bw(GB/s)",), ("main_mem_write_bw",)]
        ),
        "ub_read_bytes": _bytes(c, None, ub_read),
        "ub_write_bytes": _bytes(c, None, ub_write),
        "l2_read_bytes": _bytes(c, None, [("l2_read_bw(GB/s)",), ("l2_read_bw",)]),
        "l2_write_bytes": _bytes(c, None, [("l2_write_bw(GB/s)",), ("l2_write_bw",)]),
        "l2_hit_rate": _hit_rate(c),
        "aicore_time_ns": csv.us_ns(c.col("aicore_time(us)") or "aicore_time(us)"),
        "aiv_time_ns": csv.us_ns(c.col("aiv_time(us)") or "aiv_time(us)"),
        "mac_ratio": _ratio_max(c, "mac_ratio", "mac_exe_ratio", "mac_ratio_extra"),
        "vec_ratio": _ratio_max(c, "vec_ratio", "vec_exe_ratio"),
        "scalar_ratio": _ratio_max(c, "scalar_ratio", "scalar_exe_ratio"),
        "mte2_ratio": _ratio_max(c, "mte2_ratio", "mte2_exe_ratio"),
        "mte3_ratio": _ratio_max(c, "mte3_ratio", "mte3_exe_ratio"),
        "flops": "NULL::DOUBLE" if flops is None else f"({flops})::DOUBLE",
        "metrics": csv.num_map(consumed),
    }
    return exprs, consumed


# (group, a lower-case substring only that group's columns contain), most specific first (MSPROF-AICM lists)
_GROUP_MARKERS = [
    ("MemoryAccess", "main_memory_datas"),
    ("L2Cache", "cache_hit"),
    ("L2Cache", "local_l2_hit"),
    ("MemoryUB", "ub_read_bw_mte"),
    ("MemoryL0", "l0a_read_bw"),
    ("Memory", "main_mem_read_bw"),
    ("ResourceConflictRatio", "cflt_ratio"),
    ("ArithmeticUtilization", "_fops"),
    ("ArithmeticUtilization", "mac_fp16_ratio"),
    ("PipeStallCycle", "stall_cycles"),
    ("PipelineExecuteUtilization", "_exe_ratio"),
    ("PipeUtilization", "mac_ratio"),
    ("PipeUtilization", "vec_ratio"),
]


def aic_metrics_group(header: list[str]) -> str | None:
    """Which aic-metrics group (formats.md §2.2 names) a kernel_details/op_summary header carries, or None."""
    cols = " ".join(c.lower() for c in header if is_pmu_column(c))
    for group, marker in _GROUP_MARKERS:
        if marker in cols:
            return group
    return None
