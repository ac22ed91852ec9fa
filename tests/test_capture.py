"""traceql capture: built-in workloads captured on CPU, ingested, and each problem told from its fix; the user
script runner; the torch_npu path with torch_npu mocked at its boundary; missing-dependency messages.

Expected numbers are computed by hand from the workloads' shapes (see each test), not taken from the code.
Tests that need torch skip without it (CI installs `.[test]`; torch is the `capture` extra).
"""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LEVEL1, real
from traceql.capture import compare, workloads
from traceql.capture.core import CaptureError, split_command

ROOT = Path(__file__).resolve().parents[1]
ONE_STEP = ["--wait", "0", "--warmup", "1", "--active", "1"]


# --- no torch needed -------------------------------------------------------------------------------------------------


def test_every_experiment_is_one_problem_and_one_fix() -> None:
    by_exp: dict[str, list[str]] = {}
    for w in workloads.WORKLOADS.values():
        by_exp.setdefault(w.experiment, []).append(w.role)
        assert set(w.sizes) == {"small", "full"}
    assert {k: sorted(v) for k, v in by_exp.items()} == {
        e: ["fix", "problem"]
        for e in ("intensity", "reuse", "layernorm", "conv", "copy", "precision", "checkpoint")
    }
    assert workloads.WORKLOADS["layernorm-naive"].pair == "layernorm-fused"
    assert workloads.WORKLOADS["layernorm-fused"].pair == "layernorm-naive"


def test_list_workloads_cli(cli: Any) -> None:
    r = cli("capture", "--list-workloads")
    assert r.code == 0, r
    for name in workloads.WORKLOADS:
        assert name in r.out


@pytest.mark.parametrize(
    "args, needle",
    [
        ([], "exactly one of"),
        (["--workload", "layernorm-naive", "--all"], "exactly one of"),
        (["--workload", "layernorm-naive", "--size", "huge"], "--size must be one of"),
        (["--workload", "layernorm-naive", "--device", "tpu"], "--device must be one of"),
        (["--workload", "layernorm-naive", "--aic-metrics", "nope"], "--aic-metrics must be one of"),
        (["--workload", "layernorm-naive", "--npu-level", "0"], "--npu-level must be 1 or 2"),
    ],
)
def test_usage_errors_exit_2(cli: Any, args: list[str], needle: str) -> None:
    r = cli("capture", *args)
    assert r.code == 2, r
    assert needle in r.err


def test_without_torch_capture_says_what_to_install(
    cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    r = cli("capture", "--workload", "layernorm-naive", "-o", tmp_path)
    assert r.code == 1, r
    assert "pip install 'traceql[capture]'" in r.err and "traceql[npu]" in r.err
    assert "Traceback" not in r.err
    assert not any(tmp_path.iterdir()), "no dump folder is created when capture cannot run"


def test_unknown_workload(cli: Any) -> None:
    r = cli("capture", "--workload", "nope")
    assert r.code == 1 and "unknown workload 'nope'" in r.err and "layernorm-naive" in r.err


def test_split_command() -> None:
    exe, flags, target = split_command(["python", "-u", "train.py", "--steps", "20"])
    assert Path(exe).name.startswith("python") and flags == ["-u"] and target == ["train.py", "--steps", "20"]
    assert split_command(["python3", "-m", "pkg.train", "-x"])[2] == ["-m", "pkg.train", "-x"]
    assert split_command(["train.py", "a"]) == (sys.executable, [], ["train.py", "a"])
    for bad, msg in (
        [["bash", "x.sh"], "profiles Python scripts"],
        [["python", "-c", "print(1)"], "-c"],
        [[], "nothing to run"],
    ):
        with pytest.raises(CaptureError, match=msg):
            split_command(bad)


def test_modeled_bytes_and_flops_by_hand() -> None:
    # Kineto args as the trace writes them, JSON text, and the `;`-separated form the CSV parsers use
    dims = json.dumps([[1, 512, 4096], [1, 512, 1], []])
    types_ = json.dumps(["float", "float", "Scalar"])
    assert compare.input_bytes(dims, types_) == 1 * 512 * 4096 * 4 + 512 * 4
    assert compare.input_bytes("1,512,4096;4096", "c10::BFloat16;c10::BFloat16") == (2097152 + 4096) * 2
    # a 0-d tensor (wrapped Python scalar) and a TensorList are not counted
    assert (
        compare.input_bytes(json.dumps([[4], [], [[2], [2]]]), json.dumps(["float", "double", "TensorList"]))
        == 16
    )
    # 2*M*N*K: [8,16] @ [16,32]; addmm skips the bias; linear: input [4,8,16], weight [32,16]
    assert (
        compare.modeled_flops("aten::mm", json.dumps([[8, 16], [16, 32]]), json.dumps(["float", "float"]))
        == 2 * 8 * 16 * 32
    )
    assert (
        compare.modeled_flops("aten::addmm", json.dumps([[32], [8, 16], [16, 32]]), json.dumps(["float"] * 3))
        == 2 * 8 * 16 * 32
    )
    assert (
        compare.modeled_flops(
            "aten::linear", json.dumps([[4, 8, 16], [32, 16], [32]]), json.dumps(["float"] * 3)
        )
        == 2 * 32 * 16 * 32
    )
    assert compare.modeled_flops("aten::tanh", json.dumps([[10, 10]]), json.dumps(["float"])) == 100


def test_outermost_ops_and_overlap() -> None:
    # thread 1: A [0,100] holds B [10,50] which holds C [20,30]; D [100,120] starts as A ends; thread 2: E inside A's time
    rows = [
        ("aten::C", 1, 1, 20, 10, None, None, None),
        ("aten::A", 1, 1, 0, 100, None, None, None),
        ("aten::B", 1, 1, 10, 40, None, None, None),
        ("aten::D", 1, 1, 100, 20, None, None, None),
        ("aten::E", 1, 2, 5, 10, None, None, None),
    ]
    out = compare._outermost_ops(rows)
    assert [(o["name"], o["has_child"]) for o in out] == [
        ("aten::A", True),
        ("aten::D", False),
        ("aten::E", False),
    ]
    assert compare._overlap_ns([(0, 10), (20, 30)], [(5, 25), (8, 12)]) == 5 + 5


# --- CPU captures through the real profiler and the kineto parser -------------------------------------------------------


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every built-in workload captured at --size small (1 active step) and ingested into one store."""
    pytest.importorskip("torch")
    from traceql import ingest
    from traceql.capture import Schedule, capture_workload

    base = tmp_path_factory.mktemp("capture")
    store = base / "store"
    metas = {}
    for name in workloads.WORKLOADS:
        meta = capture_workload(
            name, size="small", out=base / "dumps", device="cpu", schedule=Schedule(0, 1, 1)
        )
        ingest(Path(meta["dump"]) / meta["ingest_path"], store=store, name=name, workers=1)
        metas[name] = meta
    return {"store": store, "metas": metas}


def _cmp(captured: dict[str, Any], experiment: str) -> dict[str, Any]:
    problem = next(
        w for w in workloads.WORKLOADS.values() if w.experiment == experiment and w.role == "problem"
    )
    return compare.compare_variants(captured["store"], problem.name, problem.pair)


def _sql(captured: dict[str, Any], q: str, *params: Any) -> list[tuple[Any, ...]]:
    import traceql

    con = traceql.connect(captured["store"])
    try:
        return con.execute(q, list(params)).fetchall()
    finally:
        con.close()


def test_capture_meta_and_dump_layout(captured: dict[str, Any]) -> None:
    for name, meta in captured["metas"].items():
        dump = Path(meta["dump"])
        on_disk = json.loads((dump / "capture_meta.json").read_text())
        assert on_disk["workload"]["name"] == name and on_disk["size"] == "small"
        assert on_disk["device"]["kind"] == "cpu" and on_disk["versions"]["torch"]
        assert on_disk["profiler"] == "torch.profiler"
        opts = on_disk["profiler_options"]
        assert (
            opts["record_shapes"]
            and opts["profile_memory"]
            and opts["schedule"] == {"wait": 0, "warmup": 1, "active": 1, "repeat": 1}
        )
        assert on_disk["cupti_counters"] == {
            "attempted": False,
            "available": False,
            "reason": "CUPTI counters are CUDA-only (device is cpu)",
        }
        assert (dump / on_disk["ingest_path"]).name.endswith(".pt.trace.json")
        assert len(on_disk["measured"]["step_wall_s"]) == 2
    runs = {r[0] for r in _sql(captured, "SELECT run_id FROM runs")}
    assert runs == set(workloads.WORKLOADS)


def test_layernorm_naive_has_more_ops_and_bytes_than_fused(captured: dict[str, Any]) -> None:
    # plain SQL first: the naive variant dispatches mean/sub/mul/rsqrt/add, the fused one layer_norm once
    counts = dict(
        _sql(
            captured,
            "SELECT run_id || ':' || name, count(*) FROM host_ops WHERE run_id IN ('layernorm-naive', 'layernorm-fused') "
            "AND name IN ('aten::layer_norm', 'aten::rsqrt', 'aten::mean') GROUP BY ALL",
        )
    )
    assert counts == {
        "layernorm-naive:aten::mean": 2,
        "layernorm-naive:aten::rsqrt": 1,
        "layernorm-fused:aten::layer_norm": 1,
    }
    c = _cmp(captured, "layernorm")
    # by hand, X = 1*512*4096*4 = 8,388,608 B, S (row stats [1,512,1]) = 2,048 B, W = 4096*4 = 16,384 B:
    # mean(x) X; x-mean X+S; xc*xc 2X; mean X; var+eps S; rsqrt S; xc*r X+S; *w X+W; +b X+W  -> 8X + 4S + 2W
    assert c["problem"]["ops_per_step"] == 9
    assert c["problem"]["modeled_bytes_per_step"] == 8 * 8388608 + 4 * 2048 + 2 * 16384 == 67149824
    # fused: layer_norm(x, w, b) -> X + 2W
    assert c["fix"]["ops_per_step"] == 1
    assert c["fix"]["modeled_bytes_per_step"] == 8388608 + 2 * 16384 == 8421376


def test_intensity_matmul_has_hundreds_of_times_the_flops_per_byte(captured: dict[str, Any]) -> None:
    c = _cmp(captured, "intensity")
    # tanh over 64^3 fp32: 262,144 FLOPs (1 per element) / 1,048,576 B = 0.25
    assert c["problem"]["flops_per_modeled_byte"] == pytest.approx(0.25)
    # 256x256 @ 256x256: 2*256^3 = 33,554,432 FLOPs / (2 * 256*256*4 = 524,288 B) = 64
    assert c["fix"]["flops_per_modeled_byte"] == pytest.approx(64.0)


def test_reuse_same_bytes_but_the_fix_works_in_cache_sized_tiles(captured: dict[str, Any]) -> None:
    c = _cmp(captured, "reuse")
    mib = 1 << 20
    # x and y: 2^20 fp32 = 4 MiB each, 10 passes. Problem: zero_(y) 4 MiB + 10 x add_(y, x) 8 MiB = 84 MiB.
    # Fix: 32 tiles of 2^15 fp32 (128 KiB): per tile zero_ 128 KiB + 10 x 256 KiB -> 32 * 2.75 MiB = 84 MiB.
    assert c["problem"]["modeled_bytes_per_step"] == c["fix"]["modeled_bytes_per_step"] == 84 * mib
    assert c["problem"]["max_op_modeled_bytes"] == 8 * mib  # each pass streams all of x and y
    assert c["fix"]["max_op_modeled_bytes"] == 256 * 1024  # a tile of x and its slice of y: fits a cache
    assert c["problem"]["ops_per_step"] == 11 and c["fix"]["ops_per_step"] == 32 * 11


def test_conv_fix_feeds_channels_last_inputs(captured: dict[str, Any]) -> None:
    c = _cmp(captured, "conv")
    assert c["problem"]["conv_ops"] == c["fix"]["conv_ops"] == 4  # 4 conv layers, one step
    assert c["problem"]["conv_channels_last"] == 0
    assert c["fix"]["conv_channels_last"] == 4


def test_copy_fix_moves_copies_off_the_compute_thread_and_overlaps(captured: dict[str, Any]) -> None:
    c = _cmp(captured, "copy")
    assert c["problem"]["copy_ops_per_step"] == c["fix"]["copy_ops_per_step"] == 8  # 8 batches
    assert c["problem"]["copy_off_main_thread_ratio"] == 0.0 and c["problem"]["copy_overlap_ratio"] == 0.0
    assert c["fix"]["copy_off_main_thread_ratio"] == 1.0
    assert c["fix"]["copy_overlap_ratio"] > 0.0


def test_precision_bf16_moves_about_half_the_bytes(captured: dict[str, Any]) -> None:
    c = _cmp(captured, "precision")
    assert set(c["problem"]["modeled_bytes_by_dtype"]) == {"float"}
    assert "c10::BFloat16" in c["fix"]["modeled_bytes_by_dtype"]
    # matmul/GELU traffic halves; the fp32 loss (kept on purpose) keeps the ratio above 0.5
    assert 0.5 < c["fix_over_problem"]["modeled_bytes_per_step"] < 0.65
    # same shapes, same op kinds: the FLOPs do not change
    assert c["fix"]["modeled_flops_per_step"] == pytest.approx(
        c["problem"]["modeled_flops_per_step"], rel=0.05
    )


def test_checkpoint_fix_recomputes_the_forward_and_holds_less_memory(captured: dict[str, Any]) -> None:
    c = _cmp(captured, "checkpoint")
    # 4 blocks x 2 Linear x 1 step; checkpointing runs each block's forward again in backward
    assert c["problem"]["op_counts"]["aten::linear"] == 8 and c["fix"]["op_counts"]["aten::linear"] == 16
    assert c["problem"]["op_counts"]["aten::gelu"] == 4 and c["fix"]["op_counts"]["aten::gelu"] == 8
    # memory: the dump's [memory] events (profile_memory=True), read from the trace itself. The rise of the
    # allocator total over the step: stored activations per block >= GELU input + output = 2 * 512*1024*4 B
    # = 4 MiB, x4 blocks held until backward; the fix holds only block inputs and one block's recompute.
    rise = {}
    for name in ("checkpoint-off", "checkpoint-on"):
        meta = captured["metas"][name]
        trace = json.loads((Path(meta["dump"]) / meta["ingest_path"]).read_text())
        totals = [
            e["args"]["Total Allocated"]
            for e in trace["traceEvents"]
            if e.get("name") == "[memory]" and "args" in e
        ]
        assert len(totals) > 10, "profile_memory=True must record allocator events"
        rise[name] = max(totals) - min(totals)
    assert rise["checkpoint-off"] - rise["checkpoint-on"] >= 4 * (1 << 20)
    # the same number through the store, once the kineto parser keeps [memory] events (it drops them today)
    if c["problem"]["memory_rise_bytes"] is not None:
        assert c["problem"]["memory_rise_bytes"] - c["fix"]["memory_rise_bytes"] >= 4 * (1 << 20)


# --- user scripts --------------------------------------------------------------------------------------------------------

TRAIN = textwrap.dedent(
    """
    import sys, torch
    model = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 16)
    steps = int(sys.argv[sys.argv.index("--steps") + 1])
    for _ in range(steps):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    print("TRAINED", steps, __name__)
    sys.exit(int(sys.argv[sys.argv.index("--exit") + 1]))
    """
)


def test_script_is_profiled_unmodified_and_its_exit_code_passes_through(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import subprocess

    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    store = tmp_path / "store"
    cmd = [sys.executable, "-m", "traceql", "capture", "-o", str(tmp_path / "dumps"), "--ingest", "--store", str(store), *ONE_STEP,
           "--", sys.executable, str(script), "--steps", "5", "--exit", "3"]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 3, r.stderr
    assert "TRAINED 5 __main__" in r.stdout  # the script's own output passes through
    assert "stored run 'train'" in r.stdout
    (meta_file,) = (tmp_path / "dumps").glob("train-*/capture_meta.json")
    meta = json.loads(meta_file.read_text())
    assert meta["exit_code"] == 3 and meta["steps_seen"] == 2 and meta["mode"] == "optimizer.step"
    assert meta["script"]["argv"][-4:] == ["--steps", "5", "--exit", "3"]
    import traceql

    con = traceql.connect(store)
    try:
        n = con.execute(
            "SELECT count(*) FROM host_ops WHERE run_id = 'train' AND name = 'aten::linear'"
        ).fetchone()[0]
    finally:
        con.close()
    assert n == 1  # one recorded step: one forward


def test_script_without_optimizer_steps_needs_a_window(cli: Any, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "infer.py"
    script.write_text("import torch\nx = torch.randn(64, 64)\nfor _ in range(50):\n    x = (x @ x).tanh()\n")
    r = cli("capture", "-o", tmp_path / "a", "--", sys.executable, str(script))
    assert r.code == 1 and "made 0 optimizer step(s)" in r.err and "--window" in r.err
    r = cli("capture", "-o", tmp_path / "b", "--window", "30", "--", sys.executable, str(script))
    assert r.code == 0, r
    (meta_file,) = (tmp_path / "b").glob("infer-*/capture_meta.json")
    meta = json.loads(meta_file.read_text())
    assert meta["mode"] == "window" and meta["profiler_options"]["window_s"] == 30
    trace = json.loads((meta_file.parent / meta["ingest_path"]).read_text())
    assert sum(1 for e in trace["traceEvents"] if e.get("name") == "aten::tanh") == 50


# --- torch_npu, mocked at its API boundary (no NPU here) ---------------------------------------------------------------


# Values as torch_npu defines them (profiler/analysis/prof_common_func/_constant.py via experimental_config.py, and the
# keys of ProfilerMgr::npu_metrics_map_ in torch_npu/csrc/profiler/profiler_mgr.cpp).
class _Level:
    Level0, Level1, Level2, Level_none = "Level0", "Level1", "Level2", "Level_none"


class _AiC:
    PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    ArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    Memory = "ACL_AICORE_MEMORY_BANDWIDTH"
    MemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    MemoryUB = "ACL_AICORE_MEMORY_UB"
    ResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    L2Cache = "ACL_AICORE_L2_CACHE"
    MemoryAccess = "ACL_AICORE_MEMORY_ACCESS"
    AiCoreNone = "ACL_AICORE_NONE"


class _FakeNpu:
    """Records every call torch_npu.profiler receives; the trace handler copies `dump_src` as the written dump."""

    def __init__(self, dump_src: Path | None = None, old_api: bool = False) -> None:
        self.calls: dict[str, Any] = {"steps": 0}
        self.dump_src = dump_src
        rec = self.calls

        if old_api:  # torch_npu of early 2024: export_type one string, no MemoryAccess / host_sys / sys_io

            class ExperimentalConfig:
                def __init__(self, profiler_level="Level0", aic_metrics="ACL_AICORE_NONE", l2_cache=False, msprof_tx=False,
                             data_simplification=True, record_op_args=False, op_attr=False, gc_detect_threshold=None,
                             export_type="text") -> None:  # fmt: skip
                    rec["experimental"] = _args(locals())

            aic = type(
                "AiCMetrics",
                (),
                {k: v for k, v in vars(_AiC).items() if k != "MemoryAccess" and not k.startswith("_")},
            )
        else:  # torch_npu/profiler/experimental_config.py (2025): the full signature

            class ExperimentalConfig:  # type: ignore[no-redef]
                def __init__(self, profiler_level="Level0", aic_metrics="ACL_AICORE_NONE", l2_cache=False, msprof_tx=False,
                             data_simplification=True, record_op_args=False, op_attr=False, gc_detect_threshold=None,
                             export_type=None, host_sys=None, mstx_domain_include=None, mstx_domain_exclude=None,
                             sys_io=False, sys_interconnection=False) -> None:  # fmt: skip
                    rec["experimental"] = _args(locals())

            aic = _AiC

        fake = self

        class Profile:
            def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False, profile_memory=False,
                         with_stack=False, with_flops=False, with_modules=False, experimental_config=None, use_cuda=None) -> None:  # fmt: skip
                rec["profile"] = _args(locals())
                self.on_trace_ready = on_trace_ready

            def __enter__(self) -> Profile:
                rec["started"] = True
                return self

            def __exit__(self, *exc: Any) -> None:
                rec["stopped"] = True
                self.on_trace_ready(
                    self
                )  # the schedule ended in RECORD_AND_SAVE: torch_npu analyses and writes

            def step(self) -> None:
                rec["steps"] += 1

        def schedule(
            wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0
        ) -> tuple[str, ...]:
            rec["schedule"] = {
                "wait": wait,
                "active": active,
                "warmup": warmup,
                "repeat": repeat,
                "skip_first": skip_first,
            }
            return ("schedule",)

        def tensorboard_trace_handler(
            dir_name: str | None = None,
            worker_name: str | None = None,
            analyse_flag: bool = True,
            async_mode: bool = False,
        ) -> Any:
            rec["handler"] = {"dir_name": dir_name, "worker_name": worker_name}

            def handler(prof: Any) -> None:
                out = Path(dir_name) / f"{worker_name}_20260101000000000_ascend_pt"  # type: ignore[arg-type]
                if fake.dump_src:
                    shutil.copytree(fake.dump_src, out)
                else:
                    (out / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)

            return handler

        prof_mod = types.ModuleType("torch_npu.profiler")
        prof_mod.profile = Profile  # type: ignore[attr-defined]
        prof_mod.schedule = schedule  # type: ignore[attr-defined]
        prof_mod.tensorboard_trace_handler = tensorboard_trace_handler  # type: ignore[attr-defined]
        prof_mod._ExperimentalConfig = ExperimentalConfig  # type: ignore[attr-defined]
        prof_mod.ProfilerLevel = _Level  # type: ignore[attr-defined]
        prof_mod.AiCMetrics = aic  # type: ignore[attr-defined]
        prof_mod.ProfilerActivity = types.SimpleNamespace(
            CPU="ProfilerActivity.CPU", NPU="ProfilerActivity.NPU"
        )  # type: ignore[attr-defined]
        if not old_api:
            prof_mod.ExportType = types.SimpleNamespace(Text="text", Db="db")  # type: ignore[attr-defined]
        self.module = types.ModuleType("torch_npu")
        self.module.profiler = prof_mod  # type: ignore[attr-defined]
        self.module.__version__ = "2.7.1"  # type: ignore[attr-defined]
        # what `import torch_npu` patches onto torch: torch.npu
        self.npu = types.SimpleNamespace(
            is_available=lambda: True,
            device_count=lambda: 1,
            get_device_name=lambda i: "Ascend910B3",
            synchronize=lambda *a: None,
            reset_peak_memory_stats=lambda *a: None,
            max_memory_allocated=lambda *a: 123,
        )

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import torch

        import traceql.capture.core as core

        monkeypatch.setitem(sys.modules, "torch_npu", self.module)
        monkeypatch.setitem(sys.modules, "torch_npu.profiler", self.module.profiler)
        monkeypatch.setattr(torch, "npu", self.npu, raising=False)
        monkeypatch.setattr(
            core, "tensor_device", lambda backend: "cpu"
        )  # the workload's tensors stay on the CPU


def _args(loc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in loc.items() if k not in ("self", "__class__", "rec")}


def test_npu_path_passes_the_memory_options_to_torch_npu(
    cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    fake = _FakeNpu()
    fake.install(monkeypatch)
    r = cli("capture", "--workload", "layernorm-fused", "-o", tmp_path)
    assert r.code == 0, r
    c = fake.calls
    p = c["profile"]
    assert p["activities"] == ["ProfilerActivity.CPU", "ProfilerActivity.NPU"]
    assert (
        p["record_shapes"] is True and p["profile_memory"] is True
    )  # profile_memory also turns on HBM/LLC sampling
    assert p["schedule"] == ("schedule",) and p["with_stack"] is False
    # keywords, because torch_npu's Schedule is (wait, active, warmup, ...) positionally
    assert c["schedule"] == {"wait": 1, "warmup": 1, "active": 2, "repeat": 1, "skip_first": 0}
    assert c["steps"] == 4 and c["started"] and c["stopped"]
    assert c["experimental"] == {
        "profiler_level": "Level1",
        "aic_metrics": "ACL_AICORE_MEMORY_BANDWIDTH",
        "l2_cache": True,
        "msprof_tx": False,
        "data_simplification": False,
        "record_op_args": False,
        "op_attr": False,
        "gc_detect_threshold": None,
        "export_type": ["text"],
        "host_sys": None,
        "mstx_domain_include": None,
        "mstx_domain_exclude": None,
        "sys_io": False,
        "sys_interconnection": False,
    }
    (dump,) = tmp_path.glob("layernorm-fused-*")
    assert c["handler"] == {"dir_name": str(dump), "worker_name": "layernorm-fused"}
    meta = json.loads((dump / "capture_meta.json").read_text())
    assert meta["profiler"] == "torch_npu.profiler" and meta["device"] == {
        "kind": "npu",
        "torch_device": "npu:0",
        "name": "Ascend910B3",
    }
    assert meta["versions"]["torch_npu"] == "2.7.1"
    assert meta["ingest_path"] == "layernorm-fused_20260101000000000_ascend_pt"
    assert meta["measured"]["peak_device_memory_bytes"] == 123
    assert meta["profiler_options"]["experimental_config"]["aic_metrics"] == "Memory"


def test_npu_options_memory_access_db_export_and_level2(
    cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    fake = _FakeNpu()
    fake.install(monkeypatch)
    r = cli(
        "capture",
        "-w",
        "layernorm-naive",
        "-o",
        tmp_path,
        "--aic-metrics",
        "memory-access",
        "--export",
        "both",
        "--npu-level",
        "2",
        "--no-l2-cache",
    )
    assert r.code == 0, r
    e = fake.calls["experimental"]
    assert e["aic_metrics"] == "ACL_AICORE_MEMORY_ACCESS" and e["profiler_level"] == "Level2"
    assert sorted(e["export_type"]) == ["db", "text"] and e["l2_cache"] is False


def test_npu_older_torch_npu_gets_only_what_it_accepts(
    cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    fake = _FakeNpu(old_api=True)
    fake.install(monkeypatch)
    r = cli(
        "capture",
        "-w",
        "layernorm-naive",
        "-o",
        tmp_path,
        "--aic-metrics",
        "memory-access",
        "--export",
        "both",
    )
    assert r.code == 0, r
    e = fake.calls["experimental"]
    assert (
        e["aic_metrics"] == "ACL_AICORE_MEMORY_BANDWIDTH"
    )  # no MemoryAccess in this release: Memory instead
    assert e["export_type"] == "text"  # one string, as that signature's default is
    (meta_file,) = tmp_path.glob("layernorm-naive-*/capture_meta.json")
    notes = json.loads(meta_file.read_text())["profiler_options"]["experimental_config"]["notes"]
    assert any("MemoryAccess" in n for n in notes) and any("one type at a time" in n for n in notes)


def test_npu_requested_without_torch_npu(cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    r = cli("capture", "-w", "layernorm-naive", "--device", "npu", "-o", tmp_path)
    assert r.code == 1 and "pip install 'traceql[npu]'" in r.err


def test_npu_capture_ingests_what_torch_npu_writes(
    cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The mocked handler writes a real torch_npu dump (level1 rank0); --ingest must store it as that format."""
    pytest.importorskip("torch")
    fake = _FakeNpu(dump_src=real(LEVEL1 / "rank0_ascend_pt"))
    fake.install(monkeypatch)
    store = tmp_path / "store"
    r = cli("capture", "-w", "layernorm-fused", "-o", tmp_path / "d", "--ingest", "--store", store)
    assert r.code == 0, r
    assert "stored run 'layernorm-fused'" in r.out
    import traceql

    con = traceql.connect(store)
    try:
        fmt, n = con.execute("SELECT format, (SELECT count(*) FROM kernels) FROM runs").fetchone()
    finally:
        con.close()
    assert "torch_npu" in fmt and n > 0
