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

from .device_table import NO_UB_L2_SOURCE, PRESETS, Device
from .errors import QueryError

__all__ = [
    "NO_UB_L2_SOURCE",
    "PEAK_PARAMS",
    "PRESETS",
    "Device",
    "detect",
    "from_properties",
    "preset",
    "resolve",
]

PEAK_PARAMS = ("peak_hbm_bps", "peak_ub_bps", "peak_l2_bps", "peak_flops")

_BY_KEY = {d.key: d for d in PRESETS}


def _norm(text: str) -> str:
    t = text.strip().lower()
    t = re.sub(r"^(nvidia|huawei|amd)\s+", "", t)
    return re.sub(r"[\s_\-]+", "", t)


def preset(key: str) -> Device:
    """The preset named `key` (case-insensitive; a detected-style name such as 'Ascend910B3' also works)."""
    d = _BY_KEY.get(key.strip().lower())
    if d is None:
        d = detect(key)
    if d is None:
        from .suggest import did_you_mean

        raise QueryError(
            f"unknown device {key!r}{did_you_mean(key, _BY_KEY)}; presets: {', '.join(_BY_KEY)} "
            "(or pass --peak-hbm-gbps)"
        )
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


# ---- a device with no name: Kineto's deviceProperties (ROCm often writes "name": "") ---------------------------
# (warpSize, computeMajor, computeMinor, numSms, GiB low, GiB high) -> preset key. Only signatures that one
# part alone has: an A100 80GB SXM and PCIe (108 SMs, 80 GB) look alike, so they are not here and stay unknown.
# Sources: the presets' datasheets (memory) and the SM / CU counts NVIDIA's and AMD's whitepapers give
# (H100 SXM/NVL 132 SMs, H100 PCIe 114, H20 78; MI300X and MI325X 304 CUs, gfx942 = compute 9.4 on ROCm).
_SIGNATURES: list[tuple[int, int, int, int, float, float, str]] = [
    (64, 9, 4, 304, 180.0, 200.0, "mi300x"),
    (64, 9, 4, 304, 240.0, 260.0, "mi325x"),
    (32, 9, 0, 132, 75.0, 81.0, "h100-sxm"),
    (32, 9, 0, 132, 85.0, 95.0, "h100-nvl"),
    (32, 9, 0, 114, 75.0, 81.0, "h100-pcie"),
    (32, 9, 0, 132, 125.0, 145.0, "h200"),
    (32, 9, 0, 78, 85.0, 100.0, "h20"),
]
_PROP_KEY = re.compile(r"^deviceProperties\.(\d+)\.(\w+)$")


def _prop_rows(meta: dict[str, str]) -> dict[int, dict[str, str]]:
    rows: dict[int, dict[str, str]] = {}
    for k, v in meta.items():
        m = _PROP_KEY.match(k)
        if m:
            rows.setdefault(int(m.group(1)), {})[m.group(2)] = v
    return rows


def from_properties(meta: dict[str, str]) -> tuple[Device, str] | None:
    """The preset that a Kineto deviceProperties entry (run_meta `deviceProperties.<i>.*`) identifies when it
    carries no usable name, with the evidence quoted; None when no entry matches exactly one signature."""
    for i, p in sorted(_prop_rows(meta).items()):
        try:
            warp, major, minor = int(p["warpSize"]), int(p["computeMajor"]), int(p["computeMinor"])
            sms, gib = int(p["numSms"]), int(p["totalGlobalMem"]) / (1 << 30)
        except (KeyError, ValueError):
            continue
        keys = [s[6] for s in _SIGNATURES if s[:4] == (warp, major, minor, sms) and s[4] <= gib <= s[5]]
        if len(keys) == 1:
            d = _BY_KEY[keys[0]]
            unit = "CUs" if warp == 64 else "SMs"
            why = (
                f"{d.name} (inferred from deviceProperties[{i}], which names no device: warpSize {warp}, compute "
                f"{major}.{minor}, {sms} {unit}, {gib:.1f} GiB)"
            )
            return d, why
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
