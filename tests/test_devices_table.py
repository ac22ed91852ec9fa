"""The device preset table (traceql.device_table) and how a device is recognised (traceql.devices).

Expected numbers are the vendors' datasheet figures written out by hand here (dense = the sparse figure halved),
not read back from the table's own arithmetic; the real traces' device names are read from the raw .json.gz
with the json module, independently of traceql's parser.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import TRACELENS

from traceql import devices

H100 = TRACELENS / "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
MI300 = TRACELENS / "mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
VLLM = (
    TRACELENS
    / "inference/vllm_decode_full/capture_traces/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"
)

ISSUE_DEVICES = {
    "h100-sxm", "h100-pcie", "h100-nvl", "h200", "h20", "b200", "gb200", "a100-40gb", "a100-80gb", "l40s",
    "mi300x", "mi325x", "mi250x", "ascend910b1", "ascend910b2", "ascend910b3", "ascend910b4", "ascend910c",
    "ascend310p",
}  # fmt: skip


def test_every_named_device_has_a_row_with_sources_and_per_dtype_flops() -> None:
    keys = {d.key for d in devices.PRESETS}
    assert keys >= ISSUE_DEVICES, ISSUE_DEVICES - keys
    for d in devices.PRESETS:
        assert d.source.strip() and d.peak_hbm_bps > 0, d.key
        assert d.kind in ("gpu", "npu"), d.key
        # the bf16/fp16 figure the findings use is the one the per-dtype list gives (where it gives one)
        if d.peak_flops is not None and d.flops_for("fp16") is not None:
            assert d.flops_for("fp16") == d.peak_flops, d.key
        if "approximate" not in d.source and d.kind == "gpu":
            assert d.flops, d.key  # a datasheet row lists its dtypes


@pytest.mark.parametrize(
    "key,hbm_tbps,bf16_tflops,fp8_tflops",
    [
        # datasheet figures by hand: sparse / 2 for NVIDIA's "with sparsity" columns
        ("h100-sxm", 3.35, 989, 3958 / 2),
        ("h100-nvl", 3.9, 1671 / 2, 3341 / 2),
        ("h200", 4.8, 989, 3958 / 2),
        ("b200", 8.0, 36_000 / 8 / 2, 72_000 / 8 / 2),
        ("gb200", 8.0, 360_000 / 72 / 2, 720_000 / 72 / 2),
        ("l40s", 0.864, 362.05, 733),
        ("mi300x", 5.3, 1307.4, 2614.9),
        ("mi325x", 6.0, 1307.4, 2614.9),
    ],
)
def test_datasheet_figures(key: str, hbm_tbps: float, bf16_tflops: float, fp8_tflops: float) -> None:
    d = devices.preset(key)
    assert d.peak_hbm_bps == pytest.approx(hbm_tbps * 1e12)
    assert d.flops_for("bf16") == pytest.approx(bf16_tflops * 1e12)
    assert d.flops_for("fp8") == pytest.approx(fp8_tflops * 1e12)


def test_ascend_rows_carry_the_unified_buffer_and_no_invented_ub_bandwidth() -> None:
    for key in ("ascend910b1", "ascend910b2", "ascend910b3", "ascend910b4", "ascend910c"):
        d = devices.preset(key)
        assert d.kind == "npu" and d.ub_bytes_per_core == 196608 and d.peak_ub_bps is None
        assert "ub_size=196608" in d.source
    assert devices.preset("mi300x").kind == "gpu" and devices.preset("mi300x").ub_bytes_per_core is None


@pytest.mark.parametrize(
    "name,key",
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H200 NVL", "h200-nvl"),
        ("NVIDIA H20", "h20"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB200", "gb200"),
        ("NVIDIA L40S", "l40s"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI300X VF", "mi300x"),
        ("AMD Instinct MI325X", "mi325x"),
        ("AMD Instinct MI250X", "mi250x"),
        ("AMD Instinct MI250X/MI250", None),  # two parts in one name: no guess
        ("Ascend910_9392", "ascend910c"),
        ("Ascend310P3", "ascend310p"),
        ("Tesla V100-SXM2-16GB", None),
    ],
)
def test_names_as_profilers_write_them(name: str, key: str | None) -> None:
    d = devices.detect(name)
    assert (d.key if d else None) == key


def test_an_unknown_name_stays_unknown_and_is_quoted() -> None:
    c = devices.resolve(detected=["Tesla V100-SXM2-16GB"])
    assert c.device is None and c.peaks["peak_hbm_bps"] is None
    assert "'Tesla V100-SXM2-16GB' has no preset" in c.note and "HBM peak unknown" in c.note


def _props(path: Path) -> list[dict[str, object]]:
    with gzip.open(path, "rt") as fh:
        return list(json.load(fh)["deviceProperties"])


def _meta(props: list[dict[str, object]]) -> dict[str, str]:
    return {f"deviceProperties.{i}.{k}": str(v) for i, p in enumerate(props) for k, v in p.items()}


def test_a_nameless_rocm_device_is_known_by_its_properties() -> None:
    if not VLLM.exists():
        pytest.skip(f"shared trace absent: {VLLM}")
    props = _props(VLLM)
    assert props[0]["name"] == ""  # the reason for the inference: ROCm wrote no name
    got = devices.from_properties(_meta(props))
    assert got is not None and got[0].key == "mi300x"
    assert "304 CUs" in got[1] and "192.0 GiB" in got[1] and "names no device" in got[1]


def test_properties_that_fit_two_parts_stay_unknown() -> None:
    # an A100 80GB: SXM and PCIe both have 108 SMs and 80 GB; not in the signatures, so no guess
    meta = _meta([{"name": "", "warpSize": 32, "computeMajor": 8, "computeMinor": 0, "numSms": 108,
                   "totalGlobalMem": 85_899_345_920}])  # fmt: skip
    assert devices.from_properties(meta) is None


@pytest.mark.parametrize("trace,key", [(H100, "h100-sxm"), (MI300, "mi300x"), (VLLM, "mi300x")])
def test_shared_gpu_traces_get_their_peaks_without_device(tmp_path: Path, trace: Path, key: str) -> None:
    """The H100 and MI300 traces write deviceProperties after traceEvents; the vLLM one writes no name."""
    if not trace.exists():
        pytest.skip(f"shared trace absent: {trace}")
    import traceql
    from traceql import queries

    store = tmp_path / "s"
    traceql.ingest(trace, store=store, name="r", workers=1)
    t = queries.run("op_hbm_bytes", store, run_id="r")
    peaks = json.loads(t.schema.metadata[b"traceql.peaks"])
    assert peaks["peak_hbm_bps"] == devices.preset(key).peak_hbm_bps
    names = [p["name"] for p in _props(trace) if p["name"]]
    note = t.schema.metadata[b"traceql.peaks_note"].decode()
    assert f"preset {key}" in note and all(n in note for n in names[:1])
