"""The device preset table: peak HBM bandwidth, FLOP/s per dtype, capacities and (Ascend) Unified Buffer, each
row with the source of its numbers and the pattern that matches the names profilers write.

`traceql.devices` picks a row (by --device, by the name in the dump, by deviceProperties) and turns it into
query parameters; this module only holds the numbers. Units: bandwidth bytes/s (1 TB/s = 1e12 B/s, decimal,
as vendors quote it), capacities bytes, FLOP/s DENSE (vendors print the 2:4-sparsity figure first: we halve
it and say so). `peak_flops` is the dense fp16/bf16 figure the findings compare against; `flops` holds every
dtype the source lists. Rows marked "approximate" have no vendor datasheet we could cite (publicly reported
figures): check them against your part and override (--peak-hbm-gbps) when it matters.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 10**9
TB = 10**12
GiB = 1 << 30
MiB = 1 << 20
KiB = 1 << 10

# Searched for the 910B-class presets (Dec 2026, search tool: hiascend.com docs, Ascend/msprof, Ascend/pytorch,
# CANN platform code, public spec pages): no published chip-level UB or L2 bandwidth. CANN describes them per
# core and cycle in its platform_config/<SoC>.ini (AICoreMemoryRates), which platform_peaks() reads when a
# dump carries it; the presets do not invent one, so UB/L2 utilisation stays null for 910B dumps without it.
NO_UB_L2_SOURCE = "UB and L2 peak: no source found (pass a dump with CANN's platform_config/<SoC>.ini for L2)"
# CANN's platform_config/Ascend910B*.ini and Ascend910_93*.ini: [AICoreSpec] ub_size=196608 (192 KiB per core;
# public copies of the ini quoted in Ascend operator repositories, Dec 2026)
UB_A2_SOURCE = "UB 192 KiB per AI core: CANN platform_config/<SoC>.ini [AICoreSpec] ub_size=196608"


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
    ub_bytes: int | None = None  # the article's chip-level UB figure (Ascend 910 only)
    match: str = ""  # regex over the normalised detected name (lower case, no spaces, '-', '_')
    source: str = ""
    flops: tuple[tuple[str, float], ...] = ()  # dense FLOP/s (OP/s for int8) per dtype, as the source lists
    ub_bytes_per_core: int | None = None  # Ascend: Unified Buffer of one AI (vector) core
    kind: str = "gpu"  # "gpu" or "npu": which advice and panels apply
    vendor: str = ""

    def peaks(self) -> dict[str, float | None]:
        return {
            "peak_hbm_bps": self.peak_hbm_bps,
            "peak_ub_bps": self.peak_ub_bps,
            "peak_l2_bps": self.peak_l2_bps,
            "peak_flops": self.peak_flops,
        }

    def flops_for(self, dtype: str) -> float | None:
        """Dense FLOP/s for a dtype ('bf16', 'fp8', ...), or None when the source gives none."""
        return dict(self.flops).get(dtype.lower())


def _f(**tflops: float) -> tuple[tuple[str, float], ...]:
    """Per-dtype dense figures given in TFLOP/s (TOP/s for int8)."""
    return tuple((k, v * TB) for k, v in tflops.items())


def _nvidia() -> list[Device]:
    # the order is the match order (devices.detect takes the first row whose pattern matches): a100.*80gb.*pcie
    # before a100.*80gb, h100.*nvl and h100.*pcie before h100, h200.*nvl before h200
    return _nvidia_ampere() + _nvidia_hopper() + _nvidia_blackwell_ada()


def _nvidia_ampere() -> list[Device]:
    """A100 (40 GB, 80 GB PCIe, 80 GB SXM4)."""
    return [
        Device(
            key="a100-40gb",
            name="NVIDIA A100 40GB (SXM4/PCIe)",
            peak_hbm_bps=1555 * GB,
            hbm_bytes=40 * GiB,
            peak_flops=312 * TB,
            l2_bytes=40 * MiB,
            # PG509-200 is the A100 SXM4 40 GB board's part number (HTA's sample trace: totalGlobalMem 42505273344 B)
            match=r"a100.*40gb|^a100$|a100pg509200",
            source="NVIDIA A100 Tensor Core GPU datasheet: 40 GB HBM2 1,555 GB/s; dense fp64 9.7, fp64 tensor "
            "19.5, fp32 19.5, tf32 156, bf16/fp16 312 TFLOPS, int8 624 TOPS",
            flops=_f(fp64=9.7, fp32=19.5, tf32=156, bf16=312, fp16=312, int8=624),
        ),
        Device(
            key="a100-80gb-pcie",
            name="NVIDIA A100 80GB PCIe",
            peak_hbm_bps=1935 * GB,
            hbm_bytes=80 * GiB,
            peak_flops=312 * TB,
            l2_bytes=40 * MiB,
            match=r"a100.*80gb.*pcie|a100.*pcie.*80gb",
            source="NVIDIA A100 datasheet: 80 GB HBM2e PCIe 1,935 GB/s; dense figures as A100 SXM",
            flops=_f(fp64=9.7, fp32=19.5, tf32=156, bf16=312, fp16=312, int8=624),
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
            flops=_f(fp64=9.7, fp32=19.5, tf32=156, bf16=312, fp16=312, int8=624),
        ),
    ]


def _nvidia_hopper() -> list[Device]:
    """H100 (NVL, PCIe, SXM), H200 (NVL, SXM) and H20."""
    return [
        Device(
            key="h100-nvl",
            name="NVIDIA H100 NVL 94GB",
            peak_hbm_bps=3.9 * TB,
            hbm_bytes=94 * GB,
            peak_flops=835.5 * TB,
            l2_bytes=50 * MiB,
            match=r"h100.*nvl",
            source="NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column: 94 GB HBM3 3.9 TB/s; fp32 60, tf32 835, "
            "bf16/fp16 1,671, fp8 3,341 TFLOPS with sparsity (halved here for dense)",
            flops=_f(fp64=30, fp32=60, tf32=417.5, bf16=835.5, fp16=835.5, fp8=1670.5, int8=1670.5),
        ),
        Device(
            key="h100-pcie",
            name="NVIDIA H100 PCIe",
            peak_hbm_bps=2.0 * TB,
            hbm_bytes=80 * GiB,
            peak_flops=756 * TB,
            l2_bytes=50 * MiB,
            match=r"h100.*pcie",
            source="NVIDIA H100 Tensor Core GPU datasheet (PCIe 80 GB): HBM2e 2 TB/s; fp32 51, tf32 756, bf16/fp16 "
            "1,513, fp8 3,026 TFLOPS with sparsity (halved here for dense; bf16 dense 756)",
            flops=_f(fp64=26, fp32=51, tf32=378, bf16=756, fp16=756, fp8=1513, int8=1513),
        ),
        Device(
            key="h100-sxm",
            name="NVIDIA H100 SXM5 80GB",
            peak_hbm_bps=3.35 * TB,
            hbm_bytes=80 * GiB,
            peak_flops=989 * TB,
            l2_bytes=50 * MiB,
            # the deviceProperties name of an SXM part is "NVIDIA H100 80GB HBM3" (the PCIe part says PCIe)
            match=r"h100",
            source="NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: 80 GB HBM3 3.35 TB/s; fp32 67, tf32 "
            "989, bf16/fp16 1,979, fp8 3,958 TFLOPS with sparsity (halved here for dense; bf16 dense 989)",
            flops=_f(fp64=34, fp32=67, tf32=494.5, bf16=989, fp16=989, fp8=1979, int8=1979),
        ),
        Device(
            key="h200-nvl",
            name="NVIDIA H200 NVL 141GB",
            peak_hbm_bps=4.8 * TB,
            hbm_bytes=141 * GB,
            peak_flops=835.5 * TB,
            l2_bytes=50 * MiB,
            match=r"h200.*nvl",
            source="NVIDIA H200 Tensor Core GPU datasheet, H200 NVL column: 141 GB HBM3e 4.8 TB/s; fp32 60, tf32 "
            "835, bf16/fp16 1,671, fp8 3,341 TFLOPS with sparsity (halved here for dense)",
            flops=_f(fp64=30, fp32=60, tf32=417.5, bf16=835.5, fp16=835.5, fp8=1670.5, int8=1670.5),
        ),
        Device(
            key="h200",
            name="NVIDIA H200 SXM 141GB",
            peak_hbm_bps=4.8 * TB,
            hbm_bytes=141 * GB,
            peak_flops=989 * TB,
            l2_bytes=50 * MiB,
            match=r"h200",
            source="NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column: 141 GB HBM3e 4.8 TB/s; compute as H100 "
            "SXM (bf16/fp16 1,979, fp8 3,958 TFLOPS with sparsity; halved here for dense)",
            flops=_f(fp64=34, fp32=67, tf32=494.5, bf16=989, fp16=989, fp8=1979, int8=1979),
        ),
        Device(
            key="h20",
            name="NVIDIA H20 96GB",
            peak_hbm_bps=4.0 * TB,
            hbm_bytes=96 * GB,
            peak_flops=148 * TB,
            l2_bytes=60 * MiB,
            # "h20" alone: never the prefix of "h200"
            match=r"^h20(?![0-9])",
            source="approximate: NVIDIA publishes no H20 datasheet; publicly reported figures: 96 GB HBM3 4.0 TB/s, "
            "dense fp32 44, tf32 74, bf16/fp16 148, fp8 296 TFLOPS, int8 296 TOPS",
            flops=_f(fp32=44, tf32=74, bf16=148, fp16=148, fp8=296, int8=296),
        ),
    ]


def _nvidia_blackwell_ada() -> list[Device]:
    """Blackwell (GB200, B200) and Ada (L40S)."""
    return [
        Device(
            key="gb200",
            name="NVIDIA GB200 (one Blackwell GPU of a GB200 NVL72)",
            peak_hbm_bps=8.0 * TB,
            hbm_bytes=186 * GB,
            peak_flops=2500 * TB,
            match=r"gb200",
            source="NVIDIA GB200 NVL72 specifications divided by its 72 GPUs: HBM3e 13.4 TB / 576 TB/s -> 186 GB "
            "8 TB/s; tf32 180, bf16/fp16 360, fp8 720, fp4 1,440 PFLOPS with sparsity -> dense per GPU tf32 1.25, "
            "bf16 2.5, fp8 5, fp4 10 PFLOPS; fp64 3,240 TFLOPS -> 45",
            flops=_f(fp64=45, tf32=1250, bf16=2500, fp16=2500, fp8=5000, int8=5000, fp4=10000),
        ),
        Device(
            key="b200",
            name="NVIDIA B200 (HGX B200)",
            peak_hbm_bps=8.0 * TB,
            hbm_bytes=180 * GB,
            peak_flops=2250 * TB,
            # not the B200 inside "gb200" (matched above)
            match=r"(?<!g)b200",
            source="NVIDIA HGX B200 specifications divided by its 8 GPUs: 1.4 TB HBM3e / 64 TB/s -> 180 GB 8 TB/s; "
            "tf32 18, bf16/fp16 36, fp8 72, fp4 144 PFLOPS with sparsity -> dense per GPU tf32 1.125, bf16 2.25, "
            "fp8 4.5, fp4 9 PFLOPS; fp64 296 TFLOPS -> 37",
            flops=_f(fp64=37, tf32=1125, bf16=2250, fp16=2250, fp8=4500, int8=4500, fp4=9000),
        ),
        Device(
            key="l40s",
            name="NVIDIA L40S 48GB",
            peak_hbm_bps=864 * GB,  # GDDR6, not HBM: the memory-bandwidth peak all the same
            hbm_bytes=48 * GB,
            peak_flops=362.05 * TB,
            l2_bytes=96 * MiB,
            match=r"l40s",
            source="NVIDIA L40S datasheet: 48 GB GDDR6 864 GB/s; dense fp32 91.6, tf32 183, bf16/fp16 362.05, "
            "fp8 733 TFLOPS, int8 733 TOPS (the sparse figures are twice these)",
            flops=_f(fp32=91.6, tf32=183, bf16=362.05, fp16=362.05, fp8=733, int8=733),
        ),
    ]


def _amd() -> list[Device]:
    mi300_flops = _f(fp64=81.7, fp32=163.4, tf32=653.7, bf16=1307.4, fp16=1307.4, fp8=2614.9, int8=2614.9)
    return [
        Device(
            key="mi325x",
            name="AMD Instinct MI325X",
            peak_hbm_bps=6.0 * TB,
            hbm_bytes=256 * GB,
            peak_flops=1307.4 * TB,
            l2_bytes=256 * MiB,  # Infinity Cache (the last level before HBM)
            match=r"mi325x",
            source="AMD Instinct MI325X product page/datasheet: 256 GB HBM3E 6 TB/s; dense fp16/bf16 1,307.4, fp8 "
            "2,614.9, tf32 653.7, fp32 163.4 TFLOPS; 256 MB Infinity Cache",
            flops=mi300_flops,
            vendor="amd",
        ),
        Device(
            key="mi300x",
            name="AMD Instinct MI300X",
            peak_hbm_bps=5.3 * TB,
            hbm_bytes=192 * GB,
            peak_flops=1307.4 * TB,
            l2_bytes=256 * MiB,
            # "AMD Instinct MI300X VF" is the same chip seen through SR-IOV (a cloud VM's virtual function)
            match=r"mi300x",
            source="AMD Instinct MI300X datasheet: 192 GB HBM3 5.3 TB/s; dense fp64 81.7, fp32 163.4, tf32 653.7, "
            "fp16/bf16 1,307.4, fp8 2,614.9 TFLOPS, int8 2,614.9 TOPS; 256 MB Infinity Cache",
            flops=mi300_flops,
            vendor="amd",
        ),
        Device(
            key="mi250x",
            name="AMD Instinct MI250X",
            peak_hbm_bps=3.2768 * TB,
            hbm_bytes=128 * GB,
            peak_flops=383 * TB,
            # "MI250X/MI250" (what some ROCm versions report) names two parts: not matched, stays unknown
            match=r"mi250x(?!/)",
            source="AMD Instinct MI250X datasheet: 128 GB HBM2e 3.2768 TB/s; fp16/bf16 383 TFLOPS, fp32/fp64 "
            "matrix 95.7, vector 47.9 TFLOPS, int8 383 TOPS",
            flops=_f(fp64=95.7, fp32=95.7, bf16=383, fp16=383, int8=383),
            vendor="amd",
        ),
    ]


def _ascend() -> list[Device]:
    # (key, name, hbm B/s, hbm bytes, fp16 FLOP/s, match, source) of the 910B family: publicly reported figures
    fam: list[tuple[str, str, float, int, float | None, str, str]] = [
        ("ascend910b4", "Ascend 910B4", 0.8 * TB, 32 * GiB, None, r"^ascend910b4",
         "approximate: publicly reported 910B4 figures (32 GB HBM2e, ~0.8 TB/s); no vendor datasheet cited. "),
        ("ascend910b3", "Ascend 910B3", 1.6 * TB, 64 * GiB, 313 * TB, r"^ascend910b3",
         "approximate: publicly reported 910B (Atlas A2) figures: 64 GB HBM2e, ~1.6 TB/s, ~313 TFLOPS fp16 "),
        ("ascend910b2", "Ascend 910B2", 1.6 * TB, 64 * GiB, 376 * TB, r"^ascend910b2",
         "approximate: publicly reported 910B2 figures: 64 GB HBM2e, ~1.6 TB/s, ~376 TFLOPS fp16 "),
        ("ascend910b1", "Ascend 910B1", 1.6 * TB, 64 * GiB, None, r"^ascend910b1",
         "approximate: publicly reported 910B family figures: 64 GB HBM2e, ~1.6 TB/s "),
        # The profiler writes plain "Ascend910B" for the family; use the B3 figures (the common training part).
        ("ascend910b", "Ascend 910B (family; B3 figures)", 1.6 * TB, 64 * GiB, 313 * TB, r"^ascend910b",
         "approximate: publicly reported 910B (Atlas A2) figures: 64 GB HBM2e, ~1.6 TB/s, ~313 TFLOPS fp16 "),
    ]  # fmt: skip
    rows = [
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
            source="seed article (CANN memory optimisation in practice); Huawei Ascend 910 launch (2019) for FLOP/s "
            "(256 TFLOPS fp16, 512 TOPS int8)",
            flops=_f(fp16=256, int8=512),
            kind="npu",
            vendor="huawei",
        )
    ]
    for key, name, hbm, cap, fp16, match, src in fam:
        rows.append(
            Device(
                key=key,
                name=name,
                peak_hbm_bps=hbm,
                hbm_bytes=cap,
                peak_flops=fp16,
                match=match,
                source=src + NO_UB_L2_SOURCE + "; " + UB_A2_SOURCE,
                flops=_f(fp16=fp16 / TB, bf16=fp16 / TB) if fp16 else (),
                ub_bytes_per_core=192 * KiB,
                kind="npu",
                vendor="huawei",
            )
        )
    rows += [
        Device(
            key="ascend910c",
            name="Ascend 910C (Atlas A3, SoC Ascend910_93xx)",
            peak_hbm_bps=3.2 * TB,
            hbm_bytes=128 * GB,
            peak_flops=800 * TB,
            # CANN's SoC names of the A3 parts: Ascend910_9391/9392/9381/9382/9372/9362 (Ascend910_93 family)
            match=r"^ascend910(c|93\d\d)|^atlasa3",
            source="approximate: publicly reported 910C figures (two 910B-class dies: 128 GB HBM, ~3.2 TB/s, ~800 "
            "TFLOPS fp16); no vendor datasheet cited. " + NO_UB_L2_SOURCE + "; " + UB_A2_SOURCE,
            flops=_f(fp16=800, bf16=800),
            ub_bytes_per_core=192 * KiB,
            kind="npu",
            vendor="huawei",
        ),
        Device(
            key="ascend310p",
            name="Ascend 310P (Atlas 300I Pro)",
            peak_hbm_bps=204.8 * GB,  # LPDDR4X, not HBM: the card's memory bandwidth
            hbm_bytes=24 * GB,
            peak_flops=70 * TB,
            match=r"^ascend310p",
            source="Huawei Atlas 300I Pro inference card datasheet (one Ascend 310P): 24 GB LPDDR4X 204.8 GB/s; "
            "70 TFLOPS fp16, 140 TOPS int8. UB: no source found",
            flops=_f(fp16=70, int8=140),
            kind="npu",
            vendor="huawei",
        ),
    ]
    return rows


def _nv(d: Device) -> Device:
    from dataclasses import replace

    return replace(d, vendor="nvidia")


# Order matters for detection: specific names before family names (h100 NVL/PCIe before h100, gb200 before b200,
# 910B4 before 910B).
PRESETS: list[Device] = _ascend() + [_nv(d) for d in _nvidia()] + _amd()
