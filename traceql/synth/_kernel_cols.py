"""kernel_details.csv columns: the base list and the PMU block of each aic-metrics group (Atlas A2/A3 naming).

Sources (see docs/formats.md §2): the base list and PipeUtilization block are copied from the real Jan-2025
torch_npu dump (level1/rank0); Memory = msprof `FftsPmuCalculator` table list (ub/l1/l2/main_mem read/write
bw for both aic_ and aiv_); MemoryAccess = msprof op_summary test EXPECT_HEADER; L2Cache, MemoryUB,
ResourceConflictRatio, ArithmeticUtilization and MemoryL0 = formats.md §2.2.
"""

from __future__ import annotations

from collections.abc import Callable

from ._text import dur_text, num
from .model import Op

# torch_npu AiCMetrics name -> the ACL name profiler_info_{rank}.json echoes
ACL_NAME = {
    "PipeUtilization": "ACL_AICORE_PIPE_UTILIZATION",
    "ArithmeticUtilization": "ACL_AICORE_ARITHMETIC_UTILIZATION",
    "Memory": "ACL_AICORE_MEMORY_BANDWIDTH",
    "MemoryL0": "ACL_AICORE_L0B_AND_WIDTH",
    "MemoryUB": "ACL_AICORE_MEMORY_UB",
    "ResourceConflictRatio": "ACL_AICORE_RESOURCE_CONFLICT_RATIO",
    "L2Cache": "ACL_AICORE_L2_CACHE",
    "MemoryAccess": "ACL_AICORE_MEMORY_ACCESS",
    "AiCoreNone": "ACL_AICORE_NONE",
}

BASE_COLS = [
    "Model ID",
    "Task ID",
    "Stream ID",
    "Name",
    "Type",
    "OP State",
    "Accelerator Core",
    "Start Time(us)",
    "Duration(us)",
    "Wait Time(us)",
    "{block}",
    "Mix {block}",
    "HF32 Eligible",
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
    "Context ID",
]

_PIPE_AIC = ["mac", "scalar", "mte1", "mte2", "fixpipe"]
_PIPE_AIV = ["vec", "scalar", "mte2", "mte3"]
_MEM = [
    "ub_read",
    "ub_write",
    "l1_read",
    "l1_write",
    "l2_read",
    "l2_write",
    "main_mem_read",
    "main_mem_write",
]
_MEM_ACCESS = [
    "read_main_memory_datas",
    "write_main_memory_datas",
    "GM_to_L1_datas",
    "L0C_to_L1_datas",
    "L0C_to_GM_datas",
    "GM_to_UB_datas",
    "UB_to_GM_datas",
]
_L2 = [
    "write_cache_hit",
    "write_cache_miss_allocate",
    "r0_read_cache_hit",
    "r0_read_cache_miss_allocate",
    "r1_read_cache_hit",
    "r1_read_cache_miss_allocate",
]
_UB = [
    "ub_read_bw_mte",
    "ub_write_bw_mte",
    "ub_read_bw_vector",
    "ub_write_bw_vector",
    "ub_read_bw_scalar",
    "ub_write_bw_scalar",
]
_CFLT = ["vec_bankgroup_cflt_ratio", "vec_bank_cflt_ratio", "vec_resc_cflt_ratio"]

DEFAULT_PIPE = {
    "aic": {"mac": 0.5, "scalar": 0.1, "mte1": 0.3, "mte2": 0.4, "fixpipe": 0.05, "icache_miss": 0.001},
    "aiv": {"vec": 0.4, "scalar": 0.1, "mte2": 0.4, "mte3": 0.2, "icache_miss": 0.02},
}
AICORE_MHZ = 1800  # `AI Core Freq` the writers report; total_cycles = core time x this


def _core_names(group: str) -> tuple[list[str], list[str], list[str]]:
    """(aic metric cols, aiv metric cols, trailing cols), without the time/cycles pair."""
    if group == "PipeUtilization":
        aic = [c for p in _PIPE_AIC for c in (f"aic_{p}_time(us)", f"aic_{p}_ratio")] + [
            "aic_icache_miss_rate"
        ]
        aiv = [c for p in _PIPE_AIV for c in (f"aiv_{p}_time(us)", f"aiv_{p}_ratio")] + [
            "aiv_icache_miss_rate"
        ]
        return aic, aiv, ["cube_utilization(%)"]
    if group == "Memory":
        return [f"aic_{m}_bw(GB/s)" for m in _MEM], [f"aiv_{m}_bw(GB/s)" for m in _MEM], []
    if group == "MemoryAccess":
        return [f"aic_{m}(KB)" for m in _MEM_ACCESS], [f"aiv_{m}(KB)" for m in _MEM_ACCESS], []
    if group == "L2Cache":
        return [f"aic_{m}" for m in _L2], [f"aiv_{m}" for m in _L2], []
    if group == "MemoryUB":
        return [f"aic_{m}(GB/s)" for m in _UB], [f"aiv_{m}(GB/s)" for m in _UB], []
    if group == "ResourceConflictRatio":
        return [f"aic_{m}" for m in _CFLT], [f"aiv_{m}" for m in _CFLT], []
    if group == "ArithmeticUtilization":
        return (
            ["aic_mac_fp16_ratio", "aic_mac_int8_ratio", "aic_cube_fops", "aic_vector_fops"],
            [
                "aiv_vec_fp32_ratio",
                "aiv_vec_fp16_ratio",
                "aiv_vec_int32_ratio",
                "aiv_vec_misc_ratio",
                "aiv_cube_fops",
                "aiv_vector_fops",
            ],
            [],
        )
    if group == "MemoryL0":
        return (
            [
                "aic_l0a_read_bw(GB/s)",
                "aic_l0a_write_bw(GB/s)",
                "aic_l0b_read_bw(GB/s)",
                "aic_l0b_write_bw(GB/s)",
                "aic_l0c_read_bw_cube(GB/s)",
                "aic_l0c_write_bw_cube(GB/s)",
            ],
            ["aiv_l0c_read_bw(GB/s)", "aiv_l0c_write_bw(GB/s)"],
            [],
        )
    if group == "AiCoreNone":
        return [], [], []
    raise ValueError(f"unknown aic_metrics group {group!r}; one of {sorted(ACL_NAME)}")


def metric_header(group: str) -> list[str]:
    aic, aiv, tail = _core_names(group)
    if group == "AiCoreNone":
        return []
    return ["aicore_time(us)", "aic_total_cycles", *aic, "aiv_time(us)", "aiv_total_cycles", *aiv, *tail]


def _split_int(n: int, a: float, v: float) -> tuple[int, int]:
    if a and v:
        ai = int(round(n * a))
        return ai, n - ai
    return (n, 0) if a else (0, n) if v else (0, 0)


def metric_values(op: Op, group: str, decimals: int | None = None) -> list[str]:
    """The PMU cells of one kernel_details row, in metric_header(group) order."""
    header = metric_header(group)
    if not header:
        return []
    if op.task_type not in ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV"):
        return ["N/A"] * len(header)
    a_share, v_share = op.core_split()
    core_ns = op.core_ns
    aic_cols, aiv_cols, tail = _core_names(group)
    cycles = str(core_ns * AICORE_MHZ // 1000)

    def fmt(x: float) -> str:
        return num(x, decimals)

    def bw(nbytes: float) -> str:  # bytes/ns == GB/s (GB = 1e9)
        return fmt(nbytes / core_ns) if core_ns else "0.0"

    def pipe(core: str, share: float) -> list[str]:
        names = _PIPE_AIC if core == "aic" else _PIPE_AIV
        d = DEFAULT_PIPE[core]
        out = []
        for p in names:
            ratio = op.pipe.get(p, d[p])
            out += [fmt(ratio * core_ns / 1000), fmt(ratio)]
        out.append(fmt(op.pipe.get("icache_miss", d["icache_miss"])))
        return out

    def memory(core: str, share: float) -> list[str]:
        b = {
            "ub_read": op.ub_read_bytes,
            "ub_write": op.ub_write_bytes,
            "l1_read": op.l1_read_bytes,
            "l1_write": op.l1_write_bytes,
            "l2_read": op.l2_read_bytes,
            "l2_write": op.l2_write_bytes,
            "main_mem_read": op.hbm_read_bytes,
            "main_mem_write": op.hbm_write_bytes,
        }
        return [bw(b[m] * share) for m in _MEM]

    def access(core: str, share: float) -> list[str]:
        r, w = op.hbm_read_bytes * share / 1024, op.hbm_write_bytes * share / 1024
        cube = core == "aic"
        vals = [r, w, r if cube else 0.0, 0.0, w if cube else 0.0, 0.0 if cube else r, 0.0 if cube else w]
        return [fmt(v) for v in vals]

    def arith(core: str, share: float) -> list[str]:
        if core == "aic":
            return [fmt(op.pipe.get("mac_fp16", 0.5)), fmt(0.0), fmt(op.flops * share), fmt(0.0)]
        return [
            fmt(op.pipe.get("vec_fp32", 0.3)),
            fmt(op.pipe.get("vec_fp16", 0.1)),
            fmt(0.0),
            fmt(0.05),
            fmt(0.0),
            fmt(op.flops * share),
        ]

    def ub(core: str, share: float) -> list[str]:
        return [
            fmt(0.0),
            fmt(0.0),
            bw(op.ub_read_bytes * share),
            bw(op.ub_write_bytes * share),
            fmt(0.0),
            fmt(0.0),
        ]

    def cflt(core: str, share: float) -> list[str]:
        return [fmt(0.01), fmt(0.02), fmt(0.03)]

    def l0(core: str, share: float) -> list[str]:
        return [fmt(0.0)] * (6 if core == "aic" else 2)

    per_core: dict[str, Callable[[str, float], list[str]]] = {
        "PipeUtilization": pipe,
        "Memory": memory,
        "MemoryAccess": access,
        "ArithmeticUtilization": arith,
        "MemoryUB": ub,
        "ResourceConflictRatio": cflt,
        "MemoryL0": l0,
    }
    l2 = _l2_counts(op)

    out: list[str] = []
    for core, share, cols in (("aic", a_share, aic_cols), ("aiv", v_share, aiv_cols)):
        if not share:
            out += ["0.0", "0"] + ["0.0"] * len(cols)
            continue
        out += [dur_text(core_ns), cycles]
        if group == "L2Cache":
            i = 0 if core == "aic" else 1
            out += [str(_split_int(n, a_share, v_share)[i]) for n in l2]
        else:
            out += per_core[group](core, share)
    if tail:  # cube_utilization(%): cube MAC busy share of the task
        out.append(fmt(100 * op.pipe.get("mac", DEFAULT_PIPE["aic"]["mac"])) if a_share else "0")
    return out


def _l2_counts(op: Op) -> list[int]:
    """L2Cache counts in _L2 order. Defaults when unset: read misses = HBM read bytes / 128 B lines, read hits
    = (L2 read bytes - HBM read bytes) / 128; write the same with write bytes. r0 gets half, r1 the rest."""
    rh = (
        op.l2_read_hits
        if op.l2_read_hits is not None
        else max(0, op.l2_read_bytes - op.hbm_read_bytes) // 128
    )
    rm = op.l2_read_misses if op.l2_read_misses is not None else op.hbm_read_bytes // 128
    wh = (
        op.l2_write_hits
        if op.l2_write_hits is not None
        else max(0, op.l2_write_bytes - op.hbm_write_bytes) // 128
    )
    wm = op.l2_write_misses if op.l2_write_misses is not None else op.hbm_write_bytes // 128
    return [wh, wm, rh // 2, rm // 2, rh - rh // 2, rm - rm // 2]


def l2_hit_rate(op: Op) -> float | None:
    """Read hit rate implied by the L2Cache counts: hits / (hits + miss_allocate)."""
    _, _, h0, m0, h1, m1 = _l2_counts(op)
    d = h0 + m0 + h1 + m1
    return (h0 + h1) / d if d else None
