"""Planted-bottleneck dumps for the findings tests: real-format torch_npu text dumps (traceql.synth, Memory PMU
group, 2 ranks, 3 steps) with exactly one known problem each, and a clean one.

Every case starts from the same clean job and changes one thing:

  clean               MatMul (fp16, ~88% of peak FLOP/s), FlashAttention, LayerNormV3 (reads the attention
                      output: no fusable producer), a second MatMul; HBM busy ~35% of 1.6 TB/s; a balanced 48 MiB
                      all-reduce at 32 GB/s; the DataLoader runs on the host while the device computes.
  unfused_chain       Conv2D -> BNTrainingReduce -> BNTrainingUpdate -> Relu twice per step (each kernel reads its
                      predecessor's output through HBM), the BN/ReLU kernels at 90% of peak bandwidth.
  fp32_heavy          element-wise Mul/Add/Sigmoid on fp32 tensors at 90% of peak (no chain: each reads fresh
                      tensors of its own shape).
  no_ub_reuse         Softmax and LayerNormV3 whose PMU read bytes are 4x their input tensor (re-reads), at 90%.
  transdata_heavy     TransData NCHW->NC1HWC0 before a Conv2D and NC1HWC0->NCHW after it, around a Relu: ~15% of
                      compute time in conversions.
  h2d_not_overlapped  each step starts with 2 ms of DataLoader __next__ and a 1 ms blocking aten::_to_copy on the
                      host while the device idles.
  hbm_wait            rank 1 runs 3 ms more of element-wise kernels at 93% of peak before the all-reduce; rank 0
                      (FlashAttention + LayerNorm only) waits for it there.
  slow_link           the all-reduce moves 24 MiB over HCCS at 2.5 GB/s (10 ms) on both ranks, arriving together.
  late_host           rank 1 starts computing 3 ms into each step (the host runs a Python function first) and
                      rank 0 waits for it in the all-reduce: a slow rank whose waiting is *not* memory, so
                      comm_waits_on_memory must stay silent while slow_rank names host gaps.

EXPECTED says which checks must fire on each case (every other check must stay silent); the memory-bound
cases also fire bandwidth_bound, because planting a memory problem at realistic bandwidth saturates HBM, and
hbm_wait fires slow_rank, the advisor-parity view of the same late rank.
Ops are marked static so the advisor's dynamic-shape check stays silent (it is not a planted problem).
"""

from __future__ import annotations

from pathlib import Path

from traceql.synth import MiB, Scenario, write_torch_npu_dump

PEAK = 1.6e12  # bytes/s: the ascend910b preset the tests evaluate with
FP16, FP32 = "FLOAT16", "FLOAT"
STEPS = 3

CASES = (
    "clean",
    "unfused_chain",
    "fp32_heavy",
    "no_ub_reuse",
    "transdata_heavy",
    "h2d_not_overlapped",
    "hbm_wait",
    "slow_link",
    "late_host",
)

EXPECTED: dict[str, set[str]] = {
    "clean": set(),
    "unfused_chain": {"operator_fusion", "bandwidth_bound"},
    "fp32_heavy": {"mixed_precision", "bandwidth_bound"},
    "no_ub_reuse": {"ub_reuse", "bandwidth_bound"},
    "transdata_heavy": {"memory_layout"},
    "h2d_not_overlapped": {"prefetch_overlap"},
    "hbm_wait": {"comm_waits_on_memory", "slow_rank", "bandwidth_bound"},
    "slow_link": {"slow_link"},
    "late_host": {"slow_rank"},
}


def nbytes(shape: str, dtype: str) -> int:
    n = 1
    for d in shape.split(","):
        n *= int(d)
    return n * (4 if dtype == FP32 else 2)


def at(frac: float, read: int, write: int) -> int:
    """Duration (ns) of a kernel streaming read + write bytes at frac x PEAK."""
    return int(round((read + write) / (frac * PEAK) * 1e9))


def _op(
    rt,
    name: str,
    op_type: str,
    ins: list[str],
    outs: list[str],
    dtype: str,
    *,
    dur_ns: int | None = None,  # type: ignore[no-untyped-def]
    bw: float | None = None,
    read_x: float = 1.0,
    task_type: str = "AI_VECTOR_CORE",
    fmt: str = "ND",
    in_fmts: list[str] | None = None,
    out_fmts: list[str] | None = None,
    extra_in: list[tuple[str, str]] = (),
) -> None:
    """A kernel whose PMU bytes are its tensors' bytes (reads x read_x), at `bw` x PEAK or for dur_ns."""
    in_shapes = list(ins) + [s for s, _ in extra_in]
    in_types = [dtype] * len(ins) + [d for _, d in extra_in]
    read = int(sum(nbytes(s, d) for s, d in zip(in_shapes, in_types, strict=True)) * read_x)
    write = sum(nbytes(s, dtype) for s in outs)
    if dur_ns is None:
        dur_ns = at(bw or 0.5, read, write)
    rt.add_op(
        name,
        op_type,
        dur_ns=dur_ns,
        task_type=task_type,
        block_dim=24 if task_type == "AI_CORE" else 48,
        hbm_read_bytes=read,
        hbm_write_bytes=write,
        input_shapes=tuple(in_shapes),
        input_dtypes=tuple(in_types),
        input_formats=tuple(in_fmts or [fmt] * len(in_shapes)),
        output_shapes=tuple(outs),
        output_dtypes=(dtype,) * len(outs),
        output_formats=tuple(out_fmts or [fmt] * len(outs)),
        op_state="static",
        host_op=f"aclnn{op_type}",
    )


# ---- compute blocks ------------------------------------------------------------------------------------------
def _clean_block(rt, with_matmuls: bool = True) -> None:  # type: ignore[no-untyped-def]
    if with_matmuls:
        # 2*4096^3 FLOP in 500 us = 275 TFLOP/s, 88% of the 910B's 313: efficient, not a tiling suspect
        _op(
            rt,
            "MatMulV2_a",
            "MatMulV2",
            ["4096,4096", "4096,4096"],
            ["4096,4096"],
            FP16,
            dur_ns=500_000,
            task_type="AI_CORE",
        )
    q = "8,32,2048,128"
    _op(
        rt, "FlashAttentionScore_0", "FlashAttentionScore", [q, q, q], [q], FP16, bw=0.67, task_type="MIX_AIC"
    )
    _op(rt, "LayerNormV3_0", "LayerNormV3", [q], [q], FP16, bw=0.75, extra_in=[("128", FP16), ("128", FP16)])
    if with_matmuls:
        _op(
            rt,
            "MatMulV2_b",
            "MatMulV2",
            ["4096,8192", "8192,4096"],
            ["4096,4096"],
            FP16,
            dur_ns=1_000_000,
            task_type="AI_CORE",
        )


def _unfused_block(rt) -> None:  # type: ignore[no-untyped-def]
    for i, (n, h) in enumerate(((64, 112), (32, 160))):
        x, y = f"{n},4,{h},{h},16", f"{n},16,{h},{h},16"
        _op(
            rt,
            f"Conv2D_{i}",
            "Conv2D",
            [x],
            [y],
            FP16,
            bw=0.65,
            task_type="AI_CORE",
            fmt="NC1HWC0",
            extra_in=[("36,16,16,16", FP16)],
        )
        _op(
            rt, f"BNTrainingReduce_{i}", "BNTrainingReduce", [y], ["1,16,1,1,16"], FP16, bw=0.9, fmt="NC1HWC0"
        )
        _op(
            rt,
            f"BNTrainingUpdate_{i}",
            "BNTrainingUpdate",
            [y, "1,16,1,1,16", "1,16,1,1,16"],
            [y],
            FP16,
            bw=0.9,
            fmt="NC1HWC0",
        )
        _op(rt, f"Relu_{i}", "Relu", [y], [y], FP16, bw=0.9, fmt="NC1HWC0")


def _fp32_block(rt) -> None:  # type: ignore[no-untyped-def]
    for name, op_type, shape, n_in in (
        ("Mul_0", "Mul", "8192,8192", 2),
        ("Add_0", "Add", "4096,16384", 2),
        ("Sigmoid_0", "Sigmoid", "16384,4096", 1),
        ("Mul_1", "Mul", "2048,32768", 2),
    ):
        _op(rt, name, op_type, [shape] * n_in, [shape], FP32, bw=0.9)


def _reread_block(rt) -> None:  # type: ignore[no-untyped-def]
    _op(rt, "SoftmaxV2_0", "SoftmaxV2", ["16,16,1024,1024"], ["16,16,1024,1024"], FP16, bw=0.9, read_x=4.0)
    _op(rt, "LayerNormV3_rr", "LayerNormV3", ["8,4096,8192"], ["8,4096,8192"], FP16, bw=0.9, read_x=4.0)


def _transdata_block(rt) -> None:  # type: ignore[no-untyped-def]
    nchw, nc1 = "64,128,56,56", "64,8,56,56,16"
    _op(
        rt,
        "trans_TransData_0",
        "TransData",
        [nchw],
        [nc1],
        FP16,
        dur_ns=150_000,
        in_fmts=["NCHW"],
        out_fmts=["NC1HWC0"],
    )
    _op(
        rt,
        "Conv2D_td",
        "Conv2D",
        [nc1],
        [nc1],
        FP16,
        dur_ns=400_000,
        task_type="AI_CORE",
        fmt="NC1HWC0",
        extra_in=[("72,8,16,16", FP16)],
    )
    _op(
        rt,
        "trans_TransData_1",
        "TransData",
        [nc1],
        [nchw],
        FP16,
        dur_ns=150_000,
        in_fmts=["NC1HWC0"],
        out_fmts=["NCHW"],
    )
    _op(rt, "aclnnRelu_Relu", "Relu", [nchw], [nchw], FP16, dur_ns=100_000, fmt="NCHW")
    _op(
        rt,
        "trans_TransData_2",
        "TransData",
        [nchw],
        [nc1],
        FP16,
        dur_ns=150_000,
        in_fmts=["NCHW"],
        out_fmts=["NC1HWC0"],
    )


def _extra_hbm_block(rt) -> None:  # type: ignore[no-untyped-def]
    """~3 ms of unlinked element-wise fp16 kernels at 93% of peak (each on tensors of its own shape)."""
    for i, shape in enumerate(("8192,16384", "16384,8192", "4096,32768", "32768,4096", "2048,65536")):
        _op(rt, f"aclnnMul_Mul_{i}", "Mul", [shape, shape], [shape], FP16, bw=0.93)


# ---- the job ---------------------------------------------------------------------------------------------
def all_reduce(sc: Scenario, arrivals: dict[int, int], k: int, group: str, transit: int, grad: int) -> int:
    """The k-th gradient all-reduce: every rank enters at its arrival, all leave together once the last one has
    arrived and the data moved (transit + 30 us); the wait and sync the profiler writes are the rank's wait for
    the last arrival. Returns the end."""
    last = max(arrivals.values())
    end = last + transit + 30_000
    for rt in sc.ranks:
        a = arrivals[rt.rank]
        rt.add_comm(
            f"hcom_allReduce__586_{k}_1",
            start_ns=a,
            dur_ns=end - a,
            op_type="allreduce",
            group=group,
            transit_ns=transit,
            wait_ns=last - a,
            sync_ns=last - a,
            transports={"HCCS": grad},
            data_type="FP16",
            host_op="HcclAllreduce",
        )
    return end


def build(case: str) -> Scenario:
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}; cases: {', '.join(CASES)}")
    sc = Scenario(n_ranks=2, hbm_period_ns=1_000_000)
    group = next(iter(sc.groups))
    grad = 24 * MiB if case == "slow_link" else 48 * MiB
    link_bps = 2.5e9 if case == "slow_link" else 32e9
    transit = int(round(grad / link_bps * 1e9))
    s0 = 1_000_000
    for k in range(STEPS):
        sid = k + 1
        arrivals: dict[int, int] = {}
        for rt in sc.ranks:
            rt._cursor[2] = s0 + 150_000  # Preparing: the first device task 150 us into the step
            if case == "h2d_not_overlapped":
                rt.add_host_op(
                    "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                    start_ns=s0 + 20_000,
                    dur_ns=2_000_000,
                )
                rt.add_host_op("aten::_to_copy", start_ns=s0 + 2_030_000, dur_ns=1_000_000)
                rt.add_memcpy(start_ns=s0 + 2_050_000, dur_ns=950_000, nbytes=24 * MiB)
                rt._cursor[2] = s0 + 3_100_000
            elif case == "late_host" and rt.rank == 1:
                rt.add_host_op(
                    "train.py(88): augment", start_ns=s0 + 20_000, dur_ns=2_950_000, cat="python_function"
                )
                rt._cursor[2] = s0 + 3_000_000
            else:
                # the next batch loads on the host while this one computes: overlapped
                # (inside the first kernel of the step: the device is busy the whole time)
                rt.add_host_op(
                    "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                    start_ns=s0 + 160_000,
                    dur_ns=130_000,
                )
            if case == "unfused_chain":
                _unfused_block(rt)
            elif case == "fp32_heavy":
                _fp32_block(rt)
            elif case == "no_ub_reuse":
                _reread_block(rt)
            elif case == "transdata_heavy":
                _transdata_block(rt)
                _clean_block(rt)
            elif case == "hbm_wait":
                _clean_block(rt, with_matmuls=False)
                if rt.rank == 1:
                    _extra_hbm_block(rt)
            else:
                _clean_block(rt)
            arrivals[rt.rank] = rt.cursor() + 20_000
        end = all_reduce(sc, arrivals, k, group, transit, grad)
        step_end = end + 200_000
        for rt in sc.ranks:
            rt.add_step(sid, start_ns=s0, dur_ns=step_end - s0)
        s0 = step_end
    return sc


def write(case: str, out_dir: str | Path) -> Path:
    """Write the case's dump (rank0_ascend_pt/, rank1_ascend_pt/) under out_dir/case and return that folder."""
    out = Path(out_dir) / case
    write_torch_npu_dump(build(case), out, aic_metrics="Memory")
    return out
