"""Planted before/after pairs for `traceql compare`: real-format torch_npu dumps (traceql.synth, Memory PMU
group) of tests/planted.py's clean job, changed in one known way, with the answer known by construction.

  clean        planted.py's clean job (MatMul, FlashAttention, LayerNorm, MatMul, a 48 MiB all-reduce).
  chain        clean + planted.py's unfused Conv2D -> BNTrainingReduce -> BNTrainingUpdate -> Relu chain (x2) per
               step, before the all-reduce: every step grows by exactly chain_ns() (each op's duration plus the
               2 us launch gap the generator puts before it), and every rank moves chain_bytes() more HBM bytes
               (per-op PMU bytes = its tensors' bytes).
  fused        clean=False, fused=True: the chain replaced by one FusedConvBnRelu per layer (the article's fix);
               with clean=False, chain=True it is planted.py's unfused_chain job, where operator_fusion fires.
  jitter=...   the host tail after the all-reduce of step k is longer by jitter[k] ns: per-step noise on the step
               window that no device number sees.
"""

from __future__ import annotations

from pathlib import Path

import planted

from traceql.synth import MiB, Scenario, write_torch_npu_dump

STEPS = 3
GAP_NS = 2_000  # RankTrace.add_op's default gap before an op placed after the previous one
NOISE_A = (0, 8_000_000, 1_000_000)  # host tail added to steps 1..3 (ns): the noisy pairs (tests/conftest.py)
NOISE_B = (6_000_000, 0, 7_000_000)


def _chain_ops() -> list[tuple[int, int, int]]:
    """(read bytes, write bytes, duration ns) of planted._unfused_block's kernels, by hand from its shapes."""
    s = planted.nbytes("1,16,1,1,16", planted.FP16)
    out = []
    for n, h in ((64, 112), (32, 160)):
        x = planted.nbytes(f"{n},4,{h},{h},16", planted.FP16)
        y = planted.nbytes(f"{n},16,{h},{h},16", planted.FP16)
        w = planted.nbytes("36,16,16,16", planted.FP16)
        for read, write, bw in ((x + w, y, 0.65), (y, s, 0.9), (y + 2 * s, y, 0.9), (y, y, 0.9)):
            out.append((read, write, planted.at(bw, read, write)))
    return out


def chain_ns() -> int:
    """Step time the chain adds, ns: its kernels back to back, each after a 2 us gap."""
    return sum(d + GAP_NS for _, _, d in _chain_ops())


def chain_kernel_ns() -> int:
    return sum(d for _, _, d in _chain_ops())


def chain_bytes() -> int:
    """HBM bytes the chain moves per step on one rank (PMU bytes = tensor bytes)."""
    return sum(r + w for r, w, _ in _chain_ops())


def _fused_block(rt) -> None:  # type: ignore[no-untyped-def]
    """The article's fix for the chain: one FusedConvBnRelu per layer, reading x and writing y once."""
    for i, (n, h) in enumerate(((64, 112), (32, 160))):
        x, y = f"{n},4,{h},{h},16", f"{n},16,{h},{h},16"
        planted._op(
            rt,
            f"FusedConvBnRelu_{i}",
            "FusedConvBnRelu",
            [x],
            [y],
            planted.FP16,
            bw=0.65,
            task_type="AI_CORE",
            fmt="NC1HWC0",
            extra_in=[("36,16,16,16", planted.FP16)],
        )


def build(
    *,
    chain: bool = False,
    jitter: tuple[int, ...] = (0,) * STEPS,
    n_ranks: int = 2,
    clean: bool = True,
    fused: bool = False,
) -> Scenario:
    sc = Scenario(n_ranks=n_ranks, hbm_period_ns=1_000_000)
    group = next(iter(sc.groups))
    grad = 48 * MiB
    transit = int(round(grad / 32e9 * 1e9))
    s0 = 1_000_000
    for k in range(STEPS):
        arrivals: dict[int, int] = {}
        for rt in sc.ranks:
            rt._cursor[2] = s0 + 150_000
            rt.add_host_op(
                "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                start_ns=s0 + 160_000,
                dur_ns=130_000,
            )
            if clean:
                planted._clean_block(rt)
            if fused:
                _fused_block(rt)
            if chain:
                planted._unfused_block(rt)
            arrivals[rt.rank] = rt.cursor() + 20_000
        end = planted.all_reduce(sc, arrivals, k, group, transit, grad)
        step_end = end + 200_000 + jitter[k]
        for rt in sc.ranks:
            rt.add_step(k + 1, start_ns=s0, dur_ns=step_end - s0)
        s0 = step_end
    return sc


def write(name: str, out_dir: str | Path, **kw: object) -> Path:
    out = Path(out_dir) / name
    write_torch_npu_dump(build(**kw), out, aic_metrics="Memory")  # type: ignore[arg-type]
    return out


def clean_step_ns() -> int:
    """The clean job's step window, ns, by construction (the same arithmetic as build())."""
    sc = build()
    st = sc.ranks[0].steps[0]
    return int(st.dur_ns)


def fused_ns() -> int:
    """Step time the fused block takes, ns (each FusedConvBnRelu at 65% of peak plus its 2 us gap)."""
    total = 0
    for n, h in ((64, 112), (32, 160)):
        x = planted.nbytes(f"{n},4,{h},{h},16", planted.FP16)
        y = planted.nbytes(f"{n},16,{h},{h},16", planted.FP16)
        w = planted.nbytes("36,16,16,16", planted.FP16)
        total += planted.at(0.65, x + w, y) + GAP_NS
    return total
