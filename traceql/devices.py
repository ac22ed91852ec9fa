"""Device presets (peak HBM/L2/UB bandwidth, capacities, peak FLOP/s) and detection from dump metadata.

The one place device numbers live. Queries take peaks as parameters (`peak_hbm_bps`, `peak_ub_bps`,
`peak_l2_bps`, `peak_flops`); `traceql.queries.run` fills them from the preset chosen with `--device`, else
from the device name found in the dump (`runs.device`, run_meta), and `--peak-hbm-gbps` overrides the HBM
peak. An unknown device leaves the peaks null (utilisation columns null), never a guess.

Units: bandwidth bytes/s (1 TB/s = 1e12 bytes/s, decimal, as vendors quote it), capacities bytes, FLOP/s dense
fp16/bf16 (no sparsity). Figures marked "approximate" are publicly reported values without a vendor datasheet
we could cite; check them against your part and override when it matters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import QueryError
from .units import GB, TB, GiB, MiB

# Searched for the 910B-class presets (Dec 2026, search tool: hiascend.com docs, Ascend/msprof, Ascend/pytorch,
# CANN platform code, public spec pages): no published chip-level UB or L2 bandwidth. CANN describes them per
# core and cycle in its platform_config/<SoC>.ini (AICoreMemoryRates), which platform_peaks() reads when a
# dump carries it; the presets do not invent one, so UB/L2 utilisation stays null for 910B dumps without it.
NO_UB_L2_SOURCE = "UB and L2 peak: no source found (pass a dump with CANN's platform_config/<SoC>.ini for L2)"


@dataclass(frozen=True)
class Device:
    key: str  # preset name for --device
    name: str  # human name
    peak_hbm_bps: float  # read + write, bytes/s
    hbm_bytes: int | None
    peak_flops: float | None = None  # dense fp16/bf16 FLOP/s
    peak_l2_bps: float | None = None
    l2_bytes: int | None = None
    peak_ub_bps: float | None = None  # Unified Buffer (Ascend on-chip), all cores together
    ub_bytes: int | None = None
    match: str = ""  # regex over the normalised detected name (lower case, no spaces, '-', '_')
    source: str = ""

    def peaks(self) -> dict[str, float | None]:
        return {
            "peak_hbm_bps": self.peak_hbm_bps,
            "peak_ub_bps": self.peak_ub_bps,
            "peak_l2_bps": self.peak_l2_bps,
            "peak_flops": self.peak_flops,
        }


PEAK_PARAMS = ("peak_hbm_bps", "peak_ub_bps", "peak_l2_bps", "peak_flops")

# Order matters for detection: specific names before family names.
PRESETS: list[Device] = [
    Device(
        # The source article's table (seed-article.md, "Memory hierarchy (Ascend 910)"): UB 2 MB 16 TB/s,
        # L2 8 MB 1.2 TB/s, HBM 64 GB 1.23 TB/s. 256 TFLOPS fp16: Huawei's Ascend 910 launch figures (2019).
        key="ascend910",
        name="Ascend 910 (the article's figures)",
        peak_hbm_bps=1.23 * TB,
        hbm_bytes=64 * GiB,
        peak_flops=256 * TB,
        peak_l2_bps=1.2 * TB,
        l2_bytes=8 * MiB,
        peak_ub_bps=16 * TB,
        ub_bytes=2 * MiB,
        match=r"^ascend910(a|prob|proa|premiuma)?$",
        source="seed article (CANN memory optimisation in practice); Huawei Ascend 910 launch (2019) for FLOP/s",
    ),
    Device(
        # 910B4: 32 GB HBM2e; bandwidth approximate (publicly reported ~0.8 TB/s). No public UB/L2 bandwidth.
        key="ascend910b4",
        name="Ascend 910B4",
        peak_hbm_bps=0.8 * TB,
        hbm_bytes=32 * GiB,
        peak_flops=None,
        match=r"^ascend910b4",
        source="approximate: publicly reported 910B4 figures (32 GB HBM2e, ~0.8 TB/s); no vendor datasheet cited. "
        + NO_UB_L2_SOURCE,
    ),
    Device(
        key="ascend910b3",
        name="Ascend 910B3",
        peak_hbm_bps=1.6 * TB,
        hbm_bytes=64 * GiB,
        peak_flops=313 * TB,
        match=r"^ascend910b3",
        source="approximate: publicly reported 910B (Atlas A2) figures: 64 GB HBM2e, ~1.6 TB/s, ~313 TFLOPS fp16 "
        + NO_UB_L2_SOURCE,
    ),
    Device(
        key="ascend910b2",
        name="Ascend 910B2",
        peak_hbm_bps=1.6 * TB,
        hbm_bytes=64 * GiB,
        peak_flops=376 * TB,
        match=r"^ascend910b2",
        source="approximate: publicly reported 910B2 figures: 64 GB HBM2e, ~1.6 TB/s, ~376 TFLOPS fp16 "
        + NO_UB_L2_SOURCE,
    ),
    Device(
        key="ascend910b1",
        name="Ascend 910B1",
        peak_hbm_bps=1.6 * TB,
        hbm_bytes=64 * GiB,
        peak_flops=None,
        match=r"^ascend910b1",
        source="approximate: publicly reported 910B family figures: 64 GB HBM2e, ~1.6 TB/s "
        + NO_UB_L2_SOURCE,
    ),
    Device(
        # The profiler writes plain "Ascend910B" for the family; use the B3 figures (the common training part).
        key="ascend910b",
        name="Ascend 910B (family; B3 figures)",
        peak_hbm_bps=1.6 * TB,
        hbm_bytes=64 * GiB,
        peak_flops=313 * TB,
        match=r"^ascend910b",
        source="approximate: publicly reported 910B (Atlas A2) figures: 64 GB HBM2e, ~1.6 TB/s, ~313 TFLOPS fp16 "
        + NO_UB_L2_SOURCE,
    ),
    Device(
        key="a100-40gb",
        name="NVIDIA A100 40GB (SXM4/PCIe)",
        peak_hbm_bps=1555 * GB,
        hbm_bytes=40 * GiB,
        peak_flops=312 * TB,
        l2_bytes=40 * MiB,
        # PG509-200 is the A100 SXM4 40 GB board's part number (HTA's sample trace: totalGlobalMem 42505273344 B)
        match=r"a100.*40gb|^a100$|a100pg509200",
        source="NVIDIA A100 Tensor Core GPU datasheet: 40 GB HBM2 1,555 GB/s; 312 TFLOPS fp16/bf16 dense",
    ),
    Device(
        key="a100-80gb-pcie",
        name="NVIDIA A100 80GB PCIe",
        peak_hbm_bps=1935 * GB,
        hbm_bytes=80 * GiB,
        peak_flops=312 * TB,
        l2_bytes=40 * MiB,
        match=r"a100.*80gb.*pcie|a100.*pcie.*80gb",
        source="NVIDIA A100 datasheet: 80 GB HBM2e PCIe 1,935 GB/s",
    ),
    Device(
        key="a100-80gb",
        name="NVIDIA A100 80GB SXM4",
        peak_hbm_bps=2039 * GB,
        hbm_bytes=80 * GiB,
        peak_flops=312 * TB,
        l2_bytes=40 * MiB,
        match=r"a100.*80gb",
        source="NVIDIA A100 datasheet: 80 GB HBM2e SXM 2,039 GB/s; 312 TFLOPS fp16/bf16 dense",
    ),
    Device(
        key="h100-pcie",
        name="NVIDIA H100 PCIe",
        peak_hbm_bps=2.0 * TB,
        hbm_bytes=80 * GiB,
        peak_flops=756 * TB,
        l2_bytes=50 * MiB,
        match=r"h100.*pcie",
        source="NVIDIA H100 Tensor Core GPU datasheet: PCIe 80 GB HBM2e 2 TB/s; 756 TFLOPS bf16 dense",
    ),
    Device(
        key="h100-sxm",
        name="NVIDIA H100 SXM5 80GB",
        peak_hbm_bps=3.35 * TB,
        hbm_bytes=80 * GiB,
        peak_flops=989 * TB,
        l2_bytes=50 * MiB,
        match=r"h100",
        source="NVIDIA H100 Tensor Core GPU datasheet: SXM 80 GB HBM3 3.35 TB/s; 989 TFLOPS bf16 dense",
    ),
    Device(
        key="h200",
        name="NVIDIA H200 SXM 141GB",
        peak_hbm_bps=4.8 * TB,
        hbm_bytes=141 * GB,
        peak_flops=989 * TB,
        l2_bytes=50 * MiB,
        match=r"h200",
        source="NVIDIA H200 Tensor Core GPU datasheet: 141 GB HBM3e 4.8 TB/s; 989 TFLOPS bf16 dense (as H100)",
    ),
]

_BY_KEY = {d.key: d for d in PRESETS}


def _norm(text: str) -> str:
    t = text.strip().lower()
    t = re.sub(r"^(nvidia|huawei)\s+", "", t)
    return re.sub(r"[\s_\-]+", "", t)


def preset(key: str) -> Device:
    """The preset named `key` (case-insensitive; a detected-style name such as 'Ascend910B3' also works)."""
    d = _BY_KEY.get(key.strip().lower())
    if d is None:
        d = detect(key)
    if d is None:
        raise QueryError(f"unknown device {key!r}; presets: {', '.join(_BY_KEY)} (or pass --peak-hbm-gbps)")
    return d


def detect(name: str | None) -> Device | None:
    """The preset matching a device name as a dump writes it ('Ascend910B', 'NVIDIA A100-SXM4-80GB'), or None."""
    if not name:
        return None
    n = _norm(name)
    for d in PRESETS:
        if d.match and re.search(d.match, n):
            return d
    return None


@dataclass(frozen=True)
class PeakChoice:
    device: Device | None
    peaks: dict[str, float | None]
    note: str  # how the peaks were chosen, for stderr and the result's metadata


def resolve(
    device: str | None = None,
    detected: list[str] | None = None,
    overrides: dict[str, float | None] | None = None,
) -> PeakChoice:
    """Pick peaks: an explicit preset, else the first detected name that matches, then per-peak overrides."""
    dev: Device | None = None
    if device:
        dev = preset(device)
        note = f"device preset {dev.key} (--device)"
    else:
        names = [d for d in (detected or []) if d]
        for nm in names:
            dev = detect(nm)
            if dev:
                note = f"device {nm!r} detected in the dump -> preset {dev.key}"
                break
        else:
            note = f"device {names[0]!r} has no preset" if names else "no device name in the dump"
    peaks: dict[str, float | None] = dev.peaks() if dev else dict.fromkeys(PEAK_PARAMS)
    for k, v in (overrides or {}).items():
        if k not in PEAK_PARAMS:
            raise QueryError(f"unknown peak {k!r}; expected one of {', '.join(PEAK_PARAMS)}")
        if v is not None:
            peaks[k] = float(v)
            note += f"; {k} set to {float(v):.6g}"
    if peaks["peak_hbm_bps"] is None:
        note += f": HBM peak unknown (pass --device one of {', '.join(_BY_KEY)}, or --peak-hbm-gbps)"
    return PeakChoice(dev, peaks, note)


# ---- peaks from CANN's platform_config/<SoC>.ini (run_meta rows written by parsers._device_info) -----------
def _ini(meta: dict[str, str], section: str, *keys: str) -> float | None:
    """The first of `keys` in `section` as a positive number (CANN writes snake_case, older files camelCase)."""
    for k in keys:
        v = meta.get(f"platform_config.{section}.{k}")
        if v is None:
            continue
        try:
            if "/" in v:  # CANN allows a fraction, e.g. ub_to_ddr_rate=21474836480/680000000
                num, den = v.split("/", 1)
                x = float(num) / float(den)
            else:
                x = float(v)
        except (ValueError, ZeroDivisionError):
            return None
        return x if x > 0 and x == x and x != float("inf") else None
    return None


def platform_peaks(meta: dict[str, str]) -> tuple[dict[str, float | None], str] | None:
    """Peaks computed from a platform_config ini's values (run_meta `platform_config.*`), or None without one.

    As CANN's own code computes them (ops tiling: `GetPlatformRes("AICoreSpec", "cube_freq")`, `("SoCInfo",
    "ai_core_cnt")`, `("AICoreMemoryRates", "ddr_rate")`; HBM = freq x cores x ddr_rate, L2 = freq x cores x
    l2_rate, rates in bytes per cycle per core): peak_hbm_bps = cube_freq (MHz) x 1e6 x ai_core_cnt x ddr_rate,
    peak_l2_bps likewise with l2_rate, peak_flops = 2 x cube_m x cube_n x cube_k (the cube unit's fp16 MACs
    per cycle, AICoreSpec cube_m_size/cube_n_size/cube_k_size) x cube cores (cube_core_cnt, else ai_core_cnt)
    x freq. The ini has no single Unified Buffer rate (only transfer rates into and out of UB), so the UB peak
    stays unknown. A value the ini lacks stays None (the preset's, if any, is kept for it by the caller).
    """
    if not any(k.startswith("platform_config.") for k in meta):
        return None
    freq = _ini(meta, "AICoreSpec", "cube_freq", "cubeFreq")
    cores = _ini(meta, "SoCInfo", "ai_core_cnt", "aiCoreCnt")
    cube_cores = _ini(meta, "SoCInfo", "cube_core_cnt", "cubeCoreCnt") or cores
    ddr = _ini(meta, "AICoreMemoryRates", "ddr_rate", "ddrRate")
    l2 = _ini(meta, "AICoreMemoryRates", "l2_rate", "l2Rate")
    m = _ini(meta, "AICoreSpec", "cube_m_size", "cubeMSize")
    n = _ini(meta, "AICoreSpec", "cube_n_size", "cubeNSize")
    k = _ini(meta, "AICoreSpec", "cube_k_size", "cubeKSize")
    hz = freq * 1e6 if freq else None
    peaks: dict[str, float | None] = {
        "peak_hbm_bps": hz * cores * ddr if hz and cores and ddr else None,
        "peak_l2_bps": hz * cores * l2 if hz and cores and l2 else None,
        "peak_ub_bps": None,
        "peak_flops": 2 * m * n * k * cube_cores * hz if hz and cube_cores and m and n and k else None,
    }
    name = meta.get("platform_config.version.SoC_version") or meta.get(
        "platform_config.file", "platform_config"
    )
    have = [p for p, v in peaks.items() if v is not None]
    return peaks, f"peaks from CANN platform_config ({name}): {', '.join(have) or 'none computable'}"
