"""Built-in workloads: the source article's experiments, each as a (problem, fix) pair.

A workload is data (name, pair, what the article says, sizes) plus a `build(ctx)` that allocates the tensors
on the target device and returns the step function the profiler steps over. Tensors are created in `build`, so
the profiled steps hold only the experiment's own operators. torch is imported inside the builders only.

Sizes: `small` runs on a CPU in well under a second per step (what the tests capture); `full` is the article's
sizes, meant for a device (some are scaled down where the article's size would make a trace of tens of
thousands of kernels; the parameter dicts below say so).

What tells each problem from its fix in a dump (the distinction the tests check on CPU, and `compare_variants`
reports):
  intensity   tanh: bytes, no FLOPs counted; matmul: FLOPs/byte in the tens (small) to thousands (full)
  reuse       same modeled bytes in total, but the problem's every operator streams the whole x (working set
              >> cache) while the fix's operators touch one cache-sized tile each
  layernorm   naive: 9 operators and ~8x the modeled bytes of the single fused layer_norm
  conv        same operators; the fix's convolution inputs are channels-last (stride 1 on C)
  copy        problem: copies on the compute thread/stream, serial; fix: copies on another thread/stream,
              overlapping compute (pinned memory + non_blocking on a device)
  precision   bf16 moves ~half the bytes of fp32 (the loss stays fp32)
  checkpoint  the fix re-runs the forward (more operators) and holds fewer activation bytes at peak
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SIZES = ("small", "full")


@dataclass
class Ctx:
    """What a builder gets: the torch device to allocate on and the size's parameters."""

    device: Any  # torch.device
    kind: str  # "cpu" | "cuda" | "npu": selects stream APIs and pinned memory
    size: str
    params: dict[str, Any]
    extras: dict[str, Any] = field(
        default_factory=dict
    )  # measured extras the step wants in capture_meta.json


@dataclass(frozen=True)
class Workload:
    name: str  # "<experiment>-<variant label>", e.g. layernorm-naive
    experiment: str  # pair key, e.g. layernorm
    role: str  # "problem" or "fix"
    title: str
    article: str  # which part of the article this reproduces, with its numbers
    sizes: dict[str, dict[str, Any]]
    build: Callable[[Ctx], Callable[[], None]]
    # profile every thread on CPU (the prefetch loader thread). Off otherwise: with torch 2.13 the Kineto option
    # profile_all_threads drops the [memory] events from the trace.
    all_threads_on_cpu: bool = False

    @property
    def pair(self) -> str:
        """Name of the other half of the pair."""
        other = "fix" if self.role == "problem" else "problem"
        return next(w.name for w in WORKLOADS.values() if w.experiment == self.experiment and w.role == other)


def _sync(ctx: Ctx) -> None:
    """Wait for the device so each step's kernels fall inside the step's profiler window."""
    import torch

    if ctx.kind == "cuda":
        torch.cuda.synchronize(ctx.device)
    elif ctx.kind == "npu":
        torch.npu.synchronize(ctx.device)  # type: ignore[attr-defined]  # torch_npu patches torch.npu in


def _accel(ctx: Ctx) -> Any:
    """torch.cuda or torch.npu: the module with Stream/Event/stream() for this device kind."""
    import torch

    return torch.cuda if ctx.kind == "cuda" else torch.npu  # type: ignore[attr-defined]


def _gen(device: Any) -> Any:
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(0)
    return g


def _randn(ctx: Ctx, *shape: int, dtype: Any = None) -> Any:
    """Deterministic random tensor, generated on the device itself (a 4 GiB host randn would take many seconds)."""
    import torch

    return torch.randn(*shape, generator=_gen(ctx.device), dtype=dtype or torch.float32, device=ctx.device)


# --- intensity: tanh (element-wise, ~0.125 FLOP/byte) vs matmul -------------------------------------------------


def _build_tanh(ctx: Ctx) -> Callable[[], None]:
    import torch

    x = _randn(ctx, *ctx.params["shape"])

    def step() -> None:
        torch.tanh(x)
        _sync(ctx)

    return step


def _build_matmul(ctx: Ctx) -> Callable[[], None]:
    n = ctx.params["n"]
    a, b = _randn(ctx, n, n), _randn(ctx, n, n)

    def step() -> None:
        a @ b
        _sync(ctx)

    return step


# --- reuse: x streamed from memory on every pass vs each cache-sized tile reused for all passes ----------------


def _reuse_setup(ctx: Ctx) -> tuple[Any, Any, list[float]]:
    import torch

    numel, passes = ctx.params["numel"], ctx.params["passes"]
    x = _randn(ctx, numel)
    y = torch.zeros(numel, device=ctx.device)
    weights = [1.0 / (r + 1) for r in range(passes)]
    return x, y, weights


def _build_reread(ctx: Ctx) -> Callable[[], None]:
    x, y, weights = _reuse_setup(ctx)

    def step() -> None:
        y.zero_()
        for w in weights:  # every pass reads all of x (and y) from memory: the working set never fits a cache
            y.add_(x, alpha=w)
        _sync(ctx)

    return step


def _build_cached(ctx: Ctx) -> Callable[[], None]:
    x, y, weights = _reuse_setup(ctx)
    tile = ctx.params["tile_numel"][ctx.kind]
    # Views made here, not in the step: the step then holds only the arithmetic (view ops move no data).
    tiles = [(x[i : i + tile], y[i : i + tile]) for i in range(0, x.numel(), tile)]

    def step() -> None:
        for (
            xt,
            yt,
        ) in tiles:  # one tile (and its slice of y) stays in cache for all passes: read once from memory
            yt.zero_()
            for w in weights:
                yt.add_(xt, alpha=w)
        _sync(ctx)

    return step


# --- layernorm: separate mean/var/normalise/affine passes vs the fused kernel -------------------------------------


def _ln_setup(ctx: Ctx) -> tuple[Any, Any, Any]:
    import torch

    shape = ctx.params["shape"]
    x = _randn(ctx, *shape)
    w = torch.ones(shape[-1], device=ctx.device)
    b = torch.zeros(shape[-1], device=ctx.device)
    return x, w, b


def _build_ln_naive(ctx: Ctx) -> Callable[[], None]:
    import torch

    x, w, b = _ln_setup(ctx)
    eps = 1e-5

    def step() -> None:
        # 9 operators, each a full pass over memory (the article's "separate mean/var/normalise/affine").
        mean = x.mean(-1, keepdim=True)
        xc = x - mean
        var = (xc * xc).mean(-1, keepdim=True)
        y = xc * torch.rsqrt(var + eps) * w + b
        del y
        _sync(ctx)

    return step


def _build_ln_fused(ctx: Ctx) -> Callable[[], None]:
    import torch.nn.functional as F

    x, w, b = _ln_setup(ctx)
    shape = ctx.params["shape"]

    def step() -> None:
        F.layer_norm(x, (shape[-1],), w, b, 1e-5)
        _sync(ctx)

    return step


# --- conv: NCHW vs channels-last ------------------------------------------------------------------------------------


def _conv_model(ctx: Ctx) -> Any:
    import torch

    p = ctx.params
    torch.manual_seed(0)
    layers: list[Any] = []
    cin = p["input"][1]
    for _ in range(p["layers"]):
        layers += [torch.nn.Conv2d(cin, p["channels"], 3, padding=1), torch.nn.ReLU()]
        cin = p["channels"]
    return torch.nn.Sequential(*layers).to(ctx.device).eval()


def _build_conv(channels_last: bool) -> Callable[[Ctx], Callable[[], None]]:
    def build(ctx: Ctx) -> Callable[[], None]:
        import torch

        model = _conv_model(ctx)
        x = _randn(ctx, *ctx.params["input"])
        if channels_last:
            model = model.to(memory_format=torch.channels_last)

        def step() -> None:
            with torch.no_grad():
                inp = (
                    x.to(memory_format=torch.channels_last) if channels_last else x
                )  # NCHW -> NHWC once, up front
                model(inp)
            _sync(ctx)

        return step

    return build


# --- copy: serial copy-then-compute vs prefetch (pinned + non_blocking on a side stream / a loader thread) ----------


def _copy_setup(ctx: Ctx, pinned: bool) -> tuple[list[Any], Any]:
    import torch

    p = ctx.params
    # host batches: values do not matter for copy and matmul cost, and filling is much faster than randn
    batches = [torch.full((p["batch"], p["features"]), 0.5 + i) for i in range(p["batches"])]
    if pinned and ctx.kind != "cpu":
        batches = [b.pin_memory() for b in batches]
    w = _randn(ctx, p["features"], p["features"])
    return batches, w


def _build_copy_serial(ctx: Ctx) -> Callable[[], None]:
    batches, w = _copy_setup(ctx, pinned=False)

    def step() -> None:
        for hb in batches:
            # pageable host memory, blocking copy: the device idles during the copy, the copy waits for compute
            db = hb.to(ctx.device) if ctx.kind != "cpu" else hb.clone()  # on CPU the "H2D copy" is a memcpy
            (db @ w).relu_()
        _sync(ctx)

    return step


def _build_copy_prefetch(ctx: Ctx) -> Callable[[], None]:
    batches, w = _copy_setup(ctx, pinned=True)
    if ctx.kind == "cpu":
        return _cpu_prefetch_step(ctx, batches, w)
    acc = _accel(ctx)
    copy_stream = acc.Stream(device=ctx.device)

    def step() -> None:
        def issue(hb: Any) -> tuple[Any, Any]:
            with acc.stream(copy_stream):
                db = hb.to(ctx.device, non_blocking=True)  # pinned -> device DMA, overlaps compute
                ev = acc.Event()
                ev.record(copy_stream)
            return db, ev

        nxt = issue(batches[0])
        for i in range(len(batches)):
            db, ev = nxt
            if i + 1 < len(batches):
                nxt = issue(batches[i + 1])  # prefetch the next batch while this one computes
            acc.current_stream(ctx.device).wait_event(ev)
            db.record_stream(acc.current_stream(ctx.device))
            (db @ w).relu_()
        _sync(ctx)

    return step


def _cpu_prefetch_step(ctx: Ctx, batches: list[Any], w: Any) -> Callable[[], None]:
    """CPU stand-in for a prefetching DataLoader: a loader thread copies batch i+1 while batch i computes."""
    import queue
    import threading

    def step() -> None:
        q: queue.Queue[Any] = queue.Queue(maxsize=2)  # prefetch_factor=2

        def loader() -> None:
            for hb in batches:
                q.put(hb.clone())
            q.put(None)

        t = threading.Thread(target=loader, name="traceql-prefetch", daemon=True)
        t.start()
        while (db := q.get()) is not None:
            (db @ w).relu_()
        t.join()

    return step


# --- precision: fp32 vs bf16 (loss kept in fp32) ----------------------------------------------------------------------


def _build_mlp(dtype_name: str) -> Callable[[Ctx], Callable[[], None]]:
    def build(ctx: Ctx) -> Callable[[], None]:
        import torch

        dtype = getattr(torch, dtype_name)
        p = ctx.params
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(p["d"], 4 * p["d"]), torch.nn.GELU(), torch.nn.Linear(4 * p["d"], p["d"])
        ).to(ctx.device, dtype)
        x = _randn(ctx, p["tokens"], p["d"], dtype=dtype)

        def step() -> None:
            model.zero_grad(set_to_none=True)
            loss = model(x).float().pow(2).mean()  # the loss in fp32, as the article recommends
            loss.backward()
            _sync(ctx)

        return step

    return build


# --- checkpoint: stored activations vs recompute -------------------------------------------------------------------


def _build_blocks(use_checkpoint: bool) -> Callable[[Ctx], Callable[[], None]]:
    def build(ctx: Ctx) -> Callable[[], None]:
        import torch
        from torch.utils.checkpoint import checkpoint

        p = ctx.params
        torch.manual_seed(0)
        blocks = torch.nn.ModuleList(
            torch.nn.Sequential(
                torch.nn.Linear(p["d"], 4 * p["d"]), torch.nn.GELU(), torch.nn.Linear(4 * p["d"], p["d"])
            )
            for _ in range(p["blocks"])
        ).to(ctx.device)
        x = _randn(ctx, p["tokens"], p["d"])

        def step() -> None:
            blocks.zero_grad(set_to_none=True)
            h = x
            for blk in blocks:
                h = checkpoint(blk, h, use_reentrant=False) if use_checkpoint else blk(h)
            h.pow(2).mean().backward()
            _sync(ctx)

        return step

    return build


_W = Workload
_ALL = [
    _W(
        "intensity-tanh",
        "intensity",
        "problem",
        "tanh over a large tensor: element-wise, ~0.125 FLOP/byte",
        "How HBM gets saturated #1: tanh over (1024,1024,1024) fp32 (4 GB in, 4 GB out): 42 ms at 95% HBM bandwidth on Ascend 910",
        {"small": {"shape": [64, 64, 64]}, "full": {"shape": [1024, 1024, 1024]}},
        _build_tanh,
    ),
    _W(
        "intensity-matmul",
        "intensity",
        "fix",
        "matmul: hundreds of FLOPs per byte (the contrast to tanh)",
        "How HBM gets saturated #1: matmul 8 ms at 60% HBM bandwidth (compute-bound, not bandwidth-bound)",
        {"small": {"n": 256}, "full": {"n": 8192}},
        _build_matmul,
    ),
    _W(
        "reuse-reread",
        "reuse",
        "problem",
        "x re-read from memory on every pass of a loop",
        "How HBM gets saturated #2: x read 100 times (4 GB x 100 = 400 GB) instead of once into UB",
        # full: 1 GiB x (not 4 GB) so the fix's tile loop stays under ~7k kernels per step
        {
            "small": {
                "numel": 1 << 20,
                "passes": 10,
                "tile_numel": {"cpu": 1 << 15, "cuda": 1 << 15, "npu": 1 << 15},
            },
            "full": {
                "numel": 1 << 28,
                "passes": 100,
                "tile_numel": {"cpu": 1 << 18, "cuda": 1 << 22, "npu": 1 << 18},
            },
        },
        _build_reread,
    ),
    _W(
        "reuse-cached",
        "reuse",
        "fix",
        "each cache-sized tile of x read once and reused for every pass",
        "Optimisation 2 (UB data reuse): keep the working set on chip; x read from HBM once",
        # tile_numel: fp32 elements per tile, chosen so tile + its slice of y fit the device's cache
        # (CPU L2 ~1 MB; H200 L2 50 MB; Ascend 910 UB 2 MB / L2 8 MB per the article)
        {
            "small": {
                "numel": 1 << 20,
                "passes": 10,
                "tile_numel": {"cpu": 1 << 15, "cuda": 1 << 15, "npu": 1 << 15},
            },
            "full": {
                "numel": 1 << 28,
                "passes": 100,
                "tile_numel": {"cpu": 1 << 18, "cuda": 1 << 22, "npu": 1 << 18},
            },
        },
        _build_cached,
    ),
    _W(
        "layernorm-naive",
        "layernorm",
        "problem",
        "LayerNorm as separate mean/var/normalise/affine operators",
        "Optimisation 2: LayerNorm [1,512,4096] as separate ops, each an HBM pass: 0.48 ms",
        {"small": {"shape": [1, 512, 4096]}, "full": {"shape": [1, 512, 4096]}},
        _build_ln_naive,
    ),
    _W(
        "layernorm-fused",
        "layernorm",
        "fix",
        "fused layer_norm: one kernel, intermediates stay on chip",
        "Optimisation 2: fused layer_norm [1,512,4096]: 0.11 ms (4.4x)",
        {"small": {"shape": [1, 512, 4096]}, "full": {"shape": [1, 512, 4096]}},
        _build_ln_fused,
    ),
    _W(
        "conv-nchw",
        "conv",
        "problem",
        "convolutions over an NCHW input",
        "Optimisation 3: NCHW convolutions of a [1,3,1024,1024] input: 156 ms",
        # full: 8 conv layers of 64 channels (the article's "64 convolutions" read as 64 output channels)
        {
            "small": {"input": [1, 3, 64, 64], "channels": 16, "layers": 4},
            "full": {"input": [1, 3, 1024, 1024], "channels": 64, "layers": 8},
        },
        _build_conv(False),
    ),
    _W(
        "conv-channels-last",
        "conv",
        "fix",
        "the same convolutions after one NCHW -> NHWC (channels-last) conversion",
        "Optimisation 3: NHWC (channels-last) before the convolutions: 89 ms (1.75x)",
        {
            "small": {"input": [1, 3, 64, 64], "channels": 16, "layers": 4},
            "full": {"input": [1, 3, 1024, 1024], "channels": 64, "layers": 8},
        },
        _build_conv(True),
    ),
    _W(
        "copy-serial",
        "copy",
        "problem",
        "serial copy-then-compute from pageable host memory",
        "Optimisation 4: serial host->device copy then compute leaves the device idle during copies",
        {
            "small": {"batches": 8, "batch": 256, "features": 512},
            "full": {"batches": 16, "batch": 4096, "features": 8192},
        },
        _build_copy_serial,
    ),
    _W(
        "copy-prefetch",
        "copy",
        "fix",
        "pinned memory + non_blocking copies one batch ahead on a side stream",
        "Optimisation 4: prefetch (pin_memory, non_blocking, prefetch_factor=2) overlaps copies with compute",
        {
            "small": {"batches": 8, "batch": 256, "features": 512},
            "full": {"batches": 16, "batch": 4096, "features": 8192},
        },
        _build_copy_prefetch,
        all_threads_on_cpu=True,
    ),
    _W(
        "precision-fp32",
        "precision",
        "problem",
        "MLP forward+backward in fp32",
        "Optimisation 5: fp32 moves twice the bytes of fp16/bf16",
        {"small": {"tokens": 256, "d": 256}, "full": {"tokens": 8192, "d": 4096}},
        _build_mlp("float32"),
    ),
    _W(
        "precision-bf16",
        "precision",
        "fix",
        "the same MLP in bf16, loss in fp32",
        "Optimisation 5: bf16 halves the bytes moved; keep the loss in fp32",
        {"small": {"tokens": 256, "d": 256}, "full": {"tokens": 8192, "d": 4096}},
        _build_mlp("bfloat16"),
    ),
    _W(
        "checkpoint-off",
        "checkpoint",
        "problem",
        "MLP blocks training with every activation stored",
        "Optimisation 6: stored activations: forward writes 4 GB, backward reads 4 GB (8 GB)",
        {"small": {"blocks": 4, "tokens": 512, "d": 256}, "full": {"blocks": 8, "tokens": 8192, "d": 2048}},
        _build_blocks(False),
    ),
    _W(
        "checkpoint-on",
        "checkpoint",
        "fix",
        "the same blocks with gradient checkpointing (recompute in backward)",
        "Optimisation 6: recompute: ~4 GB traffic + 2 GB recompute, ~50% less bandwidth for ~20% more compute",
        {"small": {"blocks": 4, "tokens": 512, "d": 256}, "full": {"blocks": 8, "tokens": 8192, "d": 2048}},
        _build_blocks(True),
    ),
]
WORKLOADS: dict[str, Workload] = {w.name: w for w in _ALL}


def get(name: str) -> Workload:
    from ..errors import TraceQLError

    try:
        return WORKLOADS[name]
    except KeyError:
        from ..suggest import did_you_mean

        raise TraceQLError(
            f"unknown workload {name!r}{did_you_mean(name, WORKLOADS)}; built-in workloads: "
            f"{', '.join(WORKLOADS)} (traceql capture --list-workloads)"
        ) from None


def pairs() -> list[tuple[Workload, Workload]]:
    """(problem, fix) for every experiment, in the article's order."""
    out = []
    for w in _ALL:
        if w.role == "problem":
            out.append((w, WORKLOADS[w.pair]))
    return out
