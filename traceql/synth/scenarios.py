"""Ready-made scenarios.

article_scenario: the seed article's story on N ranks. Every step: an H2D batch copy, a forward pass
(MatMul, LayerNorm, Tanh per layer), a backward pass, a gradient all-reduce and an optimizer update. The
"slow" ranks run LayerNorm *unfused* (ReduceMean/Sub/Mul/Rsqrt/Add: five full HBM passes instead of one),
each pass streaming a [8,4096,4096] fp16 tensor (256 MiB in, 256 MiB out) at `saturation` x `hbm_peak_bps`:
their HBM is saturated while the fast ranks finish early and wait inside the all-reduce. Known by
construction: every memory-bound op's bandwidth (MatMuls run at ~58% of peak, the article's figure), the all-reduce wait of each rank
(= slowest arrival - own arrival), its transit time and bytes.

dense_scenario: a seeded random op mix filling most of one second, for benchmarks (see large.py).
"""

from __future__ import annotations

import random

from .model import MiB, RankTrace, Scenario

TENSOR = "8,4096,4096"
TENSOR_BYTES = 8 * 4096 * 4096 * 2  # fp16: 256 MiB
WEIGHT = "4096,4096"
# MatMul: 600 us moving 528 MiB (re-reading tiles: more than its 416 MiB of tensors) = 0.92 TB/s, ~58% of
# 1.6 TB/s: the article's "matmul at 60% HBM bandwidth"
MM_READ = 272 * MiB
MM_WRITE = 256 * MiB
UNFUSED_LAYERNORM = [
    ("ReduceMean", "ReduceMean"),
    ("Sub", "Sub"),
    ("Mul", "Mul"),
    ("Rsqrt", "Rsqrt"),
    ("Add", "Add"),
]


def mem_bound_ns(read_bytes: int, write_bytes: int, bps: float) -> int:
    """Duration of a task that streams its bytes at `bps` (bytes/s)."""
    return int(round((read_bytes + write_bytes) / bps * 1e9))


def article_scenario(
    n_ranks: int = 2,
    *,
    steps: int = 3,
    slow_ranks: tuple[int, ...] = (1,),
    layers: int = 2,
    hbm_peak_bps: float = 1.6e12,
    saturation: float = 0.93,
    step_ns: int = 13_000_000,
    first_step: int = 1,
    start_ns: int = 1_000_000,
    hbm_period_ns: int = 1_000_000,
    grad_bytes: int = 48 * MiB,
    hccs_bps: float = 32e9,
    repeat: int = 1,
) -> Scenario:
    """The article's story; see the module docstring. Ranks not in slow_ranks run the fused LayerNorm."""
    sc = Scenario(n_ranks=n_ranks, hbm_period_ns=hbm_period_ns, repeat=repeat)
    bw = hbm_peak_bps * saturation
    ew_ns = mem_bound_ns(TENSOR_BYTES, TENSOR_BYTES, bw)  # one elementwise pass over the activation
    transit_ns = int(round(grad_bytes / hccs_bps * 1e9))
    group = next(iter(sc.groups))
    for k in range(steps):
        s0 = start_ns + k * step_ns
        arrivals: dict[int, int] = {}
        for rt in sc.ranks:
            rt.add_step(first_step + k, start_ns=s0, dur_ns=step_ns)
            rt._cursor[2] = s0 + 150_000  # Preparing: 150 µs before the first device task
            rt.add_memcpy(dur_ns=170_000, nbytes=4 * MiB)  # the batch, ~25 GB/s over PCIe
            _forward(rt, layers, ew_ns, slow=rt.rank in slow_ranks)
            _backward(rt, layers, bw)
            arrivals[rt.rank] = rt.cursor() + 20_000
        last = max(arrivals.values())
        end_of_comm = last + transit_ns + 30_000  # 30 µs idle tail inside the op
        for rt in sc.ranks:
            a = arrivals[rt.rank]
            _allreduce(
                rt, f"hcom_allReduce__586_{k}_1", a, last - a, end_of_comm, group, transit_ns, grad_bytes
            )
            rt._cursor[2] = end_of_comm
            _optimizer_update(rt, grad_bytes, bw)
            base = 2 * 1024 * MiB
            rt.add_memory_sample(s0 + 100_000, base, base + 512 * MiB)
            rt.add_memory_sample(s0 + step_ns // 2, base + layers * 3 * TENSOR_BYTES, base + 4096 * MiB)
    return sc


def _forward(rt: RankTrace, layers: int, ew_ns: int, *, slow: bool) -> None:
    """Per layer: a MatMul, the LayerNorm (unfused on a slow rank: five full HBM passes) and a Tanh."""
    for layer in range(layers):
        rt.add_op(
            f"MatMulV2_{layer}",
            "MatMulV2",
            dur_ns=600_000,
            task_type="AI_CORE",
            block_dim=24,
            hbm_read_bytes=MM_READ,
            hbm_write_bytes=MM_WRITE,
            l2_read_bytes=2 * MM_READ,
            input_shapes=("8,4096,2048", WEIGHT),
            input_dtypes=("FLOAT16", "FLOAT16"),
            input_formats=("ND", "ND"),
            output_shapes=(TENSOR,),
            output_dtypes=("FLOAT16",),
            output_formats=("ND",),
            pipe={"mac": 0.82, "mte2": 0.35},
            host_op="aclnnMm",
            flops=2 * 8 * 4096 * 2048 * 4096,
        )
        if slow:  # unfused LayerNorm: five full passes over HBM
            for name, op_type in UNFUSED_LAYERNORM:
                _ew(rt, f"aclnn{name}_{op_type}_{layer}", op_type, ew_ns, host=f"aclnn{name}")
        else:
            _ew(
                rt,
                f"LayerNormV3_{layer}",
                "LayerNormV3",
                ew_ns,
                host="aclnnLayerNorm",
                ub_bytes=5 * TENSOR_BYTES,
            )
        _ew(rt, f"aclnnTanh_TanhAiCore_Tanh_{layer}", "Tanh", ew_ns, host="aclnnTanh")


def _backward(rt: RankTrace, layers: int, bw: float) -> None:
    """Per layer, last first: TanhGrad, LayerNormGrad (each reading two tensors) and the dx/dw MatMuls."""
    for layer in reversed(range(layers)):
        _ew(
            rt,
            f"aclnnTanhGrad_{layer}",
            "TanhGrad",
            mem_bound_ns(2 * TENSOR_BYTES, TENSOR_BYTES, bw),
            host="aclnnTanhBackward",
            reads=2,
        )
        _ew(
            rt,
            f"LayerNormGrad_{layer}",
            "LayerNormGrad",
            mem_bound_ns(2 * TENSOR_BYTES, TENSOR_BYTES, bw),
            host="aclnnLayerNormBackward",
            reads=2,
        )
        for which in ("dx", "dw"):
            rt.add_op(
                f"MatMulV2_{which}_{layer}",
                "MatMulV2",
                dur_ns=600_000,
                task_type="AI_CORE",
                block_dim=24,
                hbm_read_bytes=MM_READ + (224 * MiB if which == "dw" else 0),
                hbm_write_bytes=32 * MiB if which == "dw" else MM_WRITE,
                input_shapes=(TENSOR, WEIGHT),
                input_dtypes=("FLOAT16", "FLOAT16"),
                input_formats=("ND", "ND"),
                output_shapes=(WEIGHT if which == "dw" else TENSOR,),
                output_dtypes=("FLOAT16",),
                output_formats=("ND",),
                pipe={"mac": 0.8},
                host_op="aclnnMm",
                flops=2 * 8 * 4096 * 2048 * 4096,
            )


def _allreduce(
    rt: RankTrace,
    name: str,
    arrival: int,
    wait: int,
    end_ns: int,
    group: str,
    transit_ns: int,
    grad_bytes: int,
) -> None:
    """The gradient all-reduce from this rank's arrival to the common end: it waits for the last rank."""
    rt.add_comm(
        name,
        start_ns=arrival,
        dur_ns=end_ns - arrival,
        op_type="allreduce",
        group=group,
        transit_ns=transit_ns,
        wait_ns=wait,
        sync_ns=wait,
        transports={"HCCS": grad_bytes},
        data_type="FP16",
        host_op="HcclAllreduce",
    )


def _optimizer_update(rt: RankTrace, grad_bytes: int, bw: float) -> None:
    """The optimizer step after the all-reduce: one vector op reading two gradient-sized tensors, writing one."""
    rt.add_op(
        "aclnnForeachAddList_ForeachAddList",
        "ForeachAddList",
        dur_ns=mem_bound_ns(2 * grad_bytes, grad_bytes, bw),
        task_type="AI_VECTOR_CORE",
        block_dim=48,
        hbm_read_bytes=2 * grad_bytes,
        hbm_write_bytes=grad_bytes,
        input_shapes=(WEIGHT, WEIGHT),
        input_dtypes=("FLOAT16", "FLOAT16"),
        input_formats=("ND", "ND"),
        output_shapes=(WEIGHT,),
        output_dtypes=("FLOAT16",),
        output_formats=("ND",),
        host_op="aclnnForeachAddList",
    )


def _ew(rt, name: str, op_type: str, dur_ns: int, *, host: str, reads: int = 1, ub_bytes: int = 0) -> None:  # type: ignore[no-untyped-def]
    shapes = tuple([TENSOR] * reads)
    rt.add_op(
        name,
        op_type,
        dur_ns=dur_ns,
        task_type="AI_VECTOR_CORE",
        block_dim=48,
        hbm_read_bytes=reads * TENSOR_BYTES,
        hbm_write_bytes=TENSOR_BYTES,
        ub_read_bytes=ub_bytes or reads * TENSOR_BYTES,
        ub_write_bytes=ub_bytes or TENSOR_BYTES,
        l2_read_bytes=reads * TENSOR_BYTES,
        input_shapes=shapes,
        input_dtypes=("FLOAT16",) * reads,
        input_formats=("ND",) * reads,
        output_shapes=(TENSOR,),
        output_dtypes=("FLOAT16",),
        output_formats=("ND",),
        pipe={"vec": 0.3, "mte2": 0.95, "mte3": 0.9},
        host_op=host,
    )


_DENSE_TYPES = [  # (op_type, task_type, mean dur µs, bytes per µs at which it streams)
    ("MatMulV2", "AI_CORE", 120, 300_000),
    ("Add", "AI_VECTOR_CORE", 30, 1_400_000),
    ("Mul", "AI_VECTOR_CORE", 30, 1_400_000),
    ("TransData", "AI_VECTOR_CORE", 20, 900_000),
    ("LayerNormV3", "AI_VECTOR_CORE", 60, 1_300_000),
    ("Softmax", "MIX_AIV", 45, 1_000_000),
    ("Cast", "AI_VECTOR_CORE", 15, 1_200_000),
    ("FlashAttentionScore", "MIX_AIC", 200, 500_000),
]


def dense_scenario(
    seed: int = 0,
    *,
    n_ranks: int = 1,
    fill_ns: int = 990_000_000,
    start_ns: int = 1_000_000,
    step_ns: int = 99_000_000,
    hbm_period_ns: int = 1_000_000,
    gap_us: tuple[int, int] = (2, 12),
    comm_every_ns: int = 33_000_000,
    dur_scale: float = 1.0,
) -> Scenario:
    """A seeded random op mix on `n_ranks` ranks, filling [start_ns, start_ns + fill_ns) (keep it < 1 s so the
    writer can replay it second after second), with a step every step_ns and an all-reduce every
    comm_every_ns; dur_scale scales the op types' mean durations (0.1: ten times as many kernels a second).
    Same seed -> byte-identical output."""
    sc = Scenario(n_ranks=n_ranks, hbm_period_ns=hbm_period_ns)
    group = next(iter(sc.groups))
    for rt in sc.ranks:
        rng = random.Random(f"{seed}-{rt.rank}")
        t = start_ns
        sid = 1
        while t + step_ns <= start_ns + fill_ns:
            rt.add_step(sid, start_ns=t, dur_ns=step_ns)
            sid += 1
            t += step_ns
        end = start_ns + fill_ns - 1_000_000
        rt._cursor[2] = start_ns + 100_000
        next_comm = start_ns + comm_every_ns
        i = 0
        while rt.cursor() < end:
            if rt.cursor() >= next_comm and n_ranks > 1:
                rt.add_comm(
                    f"hcom_allReduce__{seed % 1000}_{i}_1",
                    start_ns=rt.cursor() + 5_000,
                    dur_ns=400_000,
                    group=group,
                    transit_ns=300_000,
                    wait_ns=60_000,
                    sync_ns=50_000,
                    transports={"HCCS": 8 * MiB},
                    host_op="HcclAllreduce",
                )
                next_comm += comm_every_ns
                continue
            op_type, ttype, mean_us, bpus = _DENSE_TYPES[rng.randrange(len(_DENSE_TYPES))]
            dur_us = max(3, int(rng.expovariate(1 / (mean_us * dur_scale if dur_scale != 1.0 else mean_us))))
            nbytes = dur_us * bpus * rng.uniform(0.4, 1.0)
            rd = int(nbytes * 0.6) // 1024 * 1024
            wr = int(nbytes * 0.4) // 1024 * 1024
            rt.add_op(
                f"{op_type}_{i}",
                op_type,
                dur_ns=dur_us * 1000 + rng.randrange(1000),
                task_type=ttype,
                gap_ns=rng.randint(*gap_us) * 1000,
                hbm_read_bytes=rd,
                hbm_write_bytes=wr,
                l2_read_bytes=rd,
                block_dim=rng.choice((8, 16, 24, 40, 48)),
                input_shapes=(f"{rng.randint(1, 64)},4096", "4096"),
                input_dtypes=("FLOAT16", "FLOAT16"),
                input_formats=("ND", "ND"),
                output_shapes=(f"{rng.randint(1, 64)},4096",),
                output_dtypes=("FLOAT16",),
                output_formats=("ND",),
            )
            i += 1
    return sc


# (name, op_type, task_type, dur_ns, block_dim, pipe ratios): one planted operator per class of
# queries/_bounds.sql's rule; the expected class of each is in its name (tests compute it again from the CSV)
PIPE_BOUND_OPS: tuple[tuple[str, str, str, int, int, dict[str, float]], ...] = (
    ("memory_Add", "Add", "AI_VECTOR_CORE", 400_000, 48, {"vec": 0.2, "scalar": 0.05, "mte2": 0.93, "mte3": 0.6}),
    ("memory_store_ZerosLike", "ZerosLike", "AI_VECTOR_CORE", 100_000, 48,
     {"vec": 0.02, "scalar": 0.02, "mte2": 0.0, "mte3": 0.97}),
    ("compute_MatMulV2", "MatMulV2", "AI_CORE", 600_000, 24,
     {"mac": 0.91, "scalar": 0.1, "mte1": 0.6, "mte2": 0.45, "fixpipe": 0.1}),
    ("latency_scalar_TopK", "TopK", "AI_VECTOR_CORE", 200_000, 48,
     {"vec": 0.1, "scalar": 0.72, "mte2": 0.2, "mte3": 0.1}),
    ("latency_few_blocks_Mul", "Mul", "AI_VECTOR_CORE", 150_000, 4,
     {"vec": 0.3, "scalar": 0.1, "mte2": 0.5, "mte3": 0.3}),
    ("latency_short_Cast", "Cast", "AI_VECTOR_CORE", 6_000, 48,
     {"vec": 0.3, "scalar": 0.1, "mte2": 0.4, "mte3": 0.3}),
    ("latency_overlap_ReduceSum", "ReduceSum", "AI_VECTOR_CORE", 300_000, 48,
     {"vec": 0.45, "scalar": 0.2, "mte2": 0.5, "mte3": 0.2}),
)  # fmt: skip


def pipe_bounds_scenario(steps: int = 2, calls: int = 3, step_ns: int = 10_000_000) -> Scenario:
    """One rank, `steps` ProfilerSteps, each running every PIPE_BOUND_OPS operator `calls` times: a
    PipeUtilization dump (write it with aic_metrics="PipeUtilization") whose operators' bounds are known by
    construction: memory (MTE2 / MTE3 >= 0.8), compute (cube >= 0.8), latency with each cause."""
    sc = Scenario(n_ranks=1, hbm_period_ns=20_000_000)
    rt = sc.rank(0)
    for k in range(steps):
        s0 = 1_000_000 + k * step_ns
        rt.add_step(k + 1, start_ns=s0, dur_ns=step_ns)
        rt._cursor[2] = s0 + 100_000
        for _ in range(calls):
            for name, op_type, task_type, dur, blocks, pipe in PIPE_BOUND_OPS:
                rt.add_op(
                    name,
                    op_type,
                    dur_ns=dur,
                    task_type=task_type,
                    block_dim=blocks,
                    pipe=dict(pipe),
                    input_shapes=("1024,1024",),
                    input_dtypes=("FLOAT16",),
                    input_formats=("ND",),
                    output_shapes=("1024,1024",),
                    output_dtypes=("FLOAT16",),
                    output_formats=("ND",),
                    host_op=f"aclnn{op_type}",
                )
    return sc
