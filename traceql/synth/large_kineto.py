"""A GB-sized PyTorch Kineto trace (torch.profiler on one GPU) for benchmarks, deterministic per seed.

large_kineto(path, target_bytes, seed, gzip=False) writes `{header..., "traceEvents": [...], "traceName": ...}`
in the layout torch.profiler writes (modelled on sample_traces/kineto_cpu and the HTA test traces): a header
with deviceProperties / distributedInfo / baseTimeNanoseconds, `ts` as µs with 3 decimals relative to
baseTimeNanoseconds, and per step a ProfilerStep#N annotation over cpu_op events (External id, Record
function id, Sequence number, Input Dims/type/Strides, Concrete Inputs, Ev Idx), cudaLaunchKernel /
cudaMemcpyAsync runtime calls (correlation), the kernels and copies they launch (device, stream, grid, block,
registers, blocks/warps per SM, occupancy; bytes and bandwidth), ac2g flow s/f pairs, `[memory]` instants
and an occasional cudaStreamSynchronize. Times are exact ints (ns) rendered as text, never floats.
"""

from __future__ import annotations

import gzip as _gzip
import json
import random
import time
from pathlib import Path
from typing import Any

from ._text import us_text

BASE_TIME_NS = 1_790_857_026_000_000_000  # baseTimeNanoseconds (as in the torch 2.x sample)
TS0_NS = 5_142_431_484_000_000  # first event, ns relative to it (µs ~5.1e12 as in the sample)
PID, TID, GPU_PID, STREAM = 10108, 10108, 0, 7

_OPS = [  # (cpu op, kernel name, input dims, input types)
    (
        "aten::mm",
        "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_kernel",
        [[64, 256], [256, 256]],
        ["float", "float"],
    ),
    (
        "aten::native_layer_norm",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
        "(int, float, float const*, float const*, float const*, float*, float*, float*)",
        [[64, 256], [], [256], [256], []],
        ["float", "ScalarList", "float", "float", "Scalar"],
    ),
    (
        "aten::add",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
        [[64, 256], [64, 256], []],
        ["float", "float", "Scalar"],
    ),
    (
        "aten::softmax",
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
        "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
        [[64, 256], [], []],
        ["float", "Scalar", "Scalar"],
    ),
    (
        "aten::sum",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper"
        "<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)"
        "#1}>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper<float, "
        "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
        "unsigned int, float, 4>)",
        [[64, 256], [], [], []],
        ["float", "ScalarList", "Scalar", ""],
    ),
]


def _header(rank: int) -> str:
    props = [
        {
            "id": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "totalGlobalMem": 85029158912,
            "computeMajor": 9,
            "computeMinor": 0,
            "maxThreadsPerBlock": 1024,
            "maxThreadsPerMultiprocessor": 2048,
            "regsPerBlock": 65536,
            "warpSize": 32,
            "sharedMemPerBlock": 49152,
            "numSms": 132,
            "regsPerMultiprocessor": 65536,
            "sharedMemPerBlockOptin": 232448,
            "sharedMemPerMultiprocessor": 233472,
        }
    ]
    return (
        '{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    ' + json.dumps(props[0]) + "\n  ],\n"
        f'  "distributedInfo": {{"backend": "nccl", "rank": {rank}, "world_size": 8, "pg_count": 1}},\n'
        '  "record_shapes": 1,\n  "profile_memory": 1,\n  "with_stack": 0,\n'
        '  "trace_id": "EE09BEC37E524FC8B2B129C6D10E7E39",\n  "displayTimeUnit": "ms",\n'
        f'  "baseTimeNanoseconds": {BASE_TIME_NS},\n  "traceEvents": [\n'
    )


def _meta_events() -> list[str]:
    out = []
    for pid, tid, name, value in (
        (PID, 0, "process_name", "python"),
        (PID, 0, "process_labels", "CPU"),
        (PID, TID, "thread_name", f"thread {TID} (python)"),
        (GPU_PID, 0, "process_name", "python"),
        (GPU_PID, 0, "process_labels", "GPU 0"),
        (GPU_PID, STREAM, "thread_name", f"stream {STREAM}"),
    ):
        key = "labels" if name == "process_labels" else "name"
        out.append(
            f'  {{\n    "name": "{name}", "ph": "M", "ts": {us_text(TS0_NS)}, "pid": {pid}, "tid": {tid},\n'
            f'    "args": {{\n      "{key}": "{value}"\n    }}\n  }}'
        )
    return out


class _Gen:
    """Renders events step by step; all times are int ns relative to baseTimeNanoseconds."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.t = TS0_NS + 50_000
        self.ext = 0  # External id
        self.corr = 0  # correlation id
        self.seq = 0  # Sequence number
        self.ev_idx = 0
        self.addr = 94_000_000_000_000
        self.gpu_free = 0  # end of the last kernel/copy: one stream runs them in launch order

    def _x(self, cat: str, name: str, pid: int, tid: int, ts: int, dur: int, args: str) -> str:
        return (
            f'  {{\n    "ph": "X", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {pid}, "tid": {tid},\n'
            f'    "ts": {us_text(ts)}, "dur": {us_text(dur)},\n    "args": {{\n      {args}\n    }}\n  }}'
        )

    def _flow(self, ph: str, pid: int, tid: int, ts: int) -> str:
        bp = ', "bp": "e"' if ph == "f" else ""
        return (
            f'  {{\n    "ph": "{ph}", "id": {self.corr}, "pid": {pid}, "tid": {tid}, "ts": {us_text(ts)},\n'
            f'    "cat": "ac2g", "name": "ac2g"{bp}\n  }}'
        )

    def _memory(self, ts: int, nbytes: int) -> str:
        self.ev_idx += 1
        self.addr += 4096
        return (
            f'  {{\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",\n'
            f'    "pid": {PID}, "tid": {TID},\n    "ts": {us_text(ts)},\n    "args": {{\n'
            f'      "Total Reserved": 2097152, "Total Allocated": {abs(nbytes) * 3}, "Bytes": {nbytes}, '
            f'"Device Id": 0, "Device Type": 1, "Addr": {self.addr}, "Ev Idx": {self.ev_idx}\n    }}\n  }}'
        )

    def op(self, out: list[str]) -> None:
        rng = self.rng
        cpu_op, kname, dims, types = _OPS[rng.randrange(len(_OPS))]
        self.ext += 1
        self.seq += 1
        self.ev_idx += 1
        start = self.t
        cpu_dur = rng.randrange(8_000, 60_000)
        strides = [[d[1], 1] if len(d) == 2 else ([1] if d else []) for d in dims]
        concrete = ", ".join('""' if d else '"[256]"' for d in dims)
        out.append(
            self._x(
                "cpu_op",
                cpu_op,
                PID,
                TID,
                start,
                cpu_dur,
                f'"External id": {self.ext},"Record function id": 0, "Sequence number": {self.seq}, '
                f'"Fwd thread id": 0, "Concrete Inputs": [{concrete}], "Input type": {json.dumps(types)}, '
                f'"Input Strides": {json.dumps(strides)}, "Input Dims": {json.dumps(dims)}, '
                f'"Ev Idx": {self.ev_idx}',
            )
        )
        if rng.random() < 0.5:
            out.append(self._memory(start + 1_000, 65536 * rng.randrange(1, 64)))
        memcpy = rng.random() < 0.1
        self.corr += 1
        launch = start + cpu_dur - rng.randrange(3_000, 6_000)
        rt_name, cbid = ("cudaMemcpyAsync", 51) if memcpy else ("cudaLaunchKernel", 211)
        out.append(
            self._x(
                "cuda_runtime",
                rt_name,
                PID,
                TID,
                launch,
                rng.randrange(2_000, 5_000),
                f'"External id": {self.ext}, "cbid": {cbid}, "correlation": {self.corr}',
            )
        )
        out.append(self._flow("s", PID, TID, launch))
        gpu_ts = max(launch + rng.randrange(5_000, 20_000), self.gpu_free + 1_000)
        gpu_dur = rng.randrange(1_500, 90_000)
        self.gpu_free = gpu_ts + gpu_dur
        if memcpy:
            nbytes = 4 * rng.randrange(1_000, 4_000_000)
            args = (
                f'"External id": {self.ext}, "device": 0, "context": 1, "stream": {STREAM}, '
                f'"correlation": {self.corr}, "bytes": {nbytes}, "memory bandwidth (GB/s)": {nbytes / gpu_dur!r}'
            )
            out.append(
                self._x(
                    "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", GPU_PID, STREAM, gpu_ts, gpu_dur, args
                )
            )
        else:
            grid, block = [rng.choice((1, 2, 64, 132, 264)), 1, 1], [rng.choice((128, 256, 512)), 1, 1]
            blocks_sm = grid[0] / 132
            warps_sm = blocks_sm * block[0] / 32
            args = (
                f'"External id": {self.ext}, "queued": 0, "device": 0, "context": 1, "stream": {STREAM}, '
                f'"correlation": {self.corr}, "registers per thread": {rng.choice((32, 40, 64, 128))}, '
                f'"shared memory": {rng.choice((0, 4096, 16384))}, "blocks per SM": {blocks_sm!r}, '
                f'"warps per SM": {warps_sm!r}, "grid": {json.dumps(grid)}, "block": {json.dumps(block)}, '
                f'"est. achieved occupancy %": {min(100, int(warps_sm / 64 * 100))}'
            )
            out.append(self._x("kernel", kname, GPU_PID, STREAM, gpu_ts, gpu_dur, args))
        out.append(self._flow("f", GPU_PID, STREAM, gpu_ts))
        self.t = start + cpu_dur + rng.randrange(1_000, 10_000)

    def step(self, n: int, out: list[str]) -> None:
        start = self.t
        body: list[str] = []
        for _ in range(self.rng.randrange(40, 80)):
            self.op(body)
        if self.rng.random() < 0.3:
            body.append(
                self._x(
                    "cuda_sync",
                    "cudaStreamSynchronize",
                    PID,
                    TID,
                    self.t,
                    20_000,
                    f'"External id": {self.ext}, "cbid": 131, "correlation": {self.corr + 1}',
                )
            )
            self.corr += 1
            self.t += 21_000
        self.ext += 1
        out.append(
            self._x(
                "user_annotation",
                f"ProfilerStep#{n}",
                PID,
                TID,
                start,
                self.t - start,
                f'"External id": {self.ext},"Record function id": 0, "Ev Idx": {self.ev_idx}',
            )
        )
        out.extend(body)
        self.t += 30_000


def large_kineto(
    out_path: str | Path, target_bytes: int, seed: int = 0, *, gzip: bool = False, rank: int = 0
) -> dict[str, Any]:
    """Write a Kineto trace of at least `target_bytes` uncompressed bytes (stops after the step that passes it).

    gzip=True writes it gzip-compressed (level 1; name the file *.json.gz). Returns {"bytes" (uncompressed),
    "events", "steps", "seconds"}."""
    t0 = time.perf_counter()
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    gen = _Gen(seed)
    fh: Any = (
        _gzip.open(out, "wt", encoding="utf-8", compresslevel=1)  # noqa: SIM115 -- entered by `with fh` below
        if gzip
        else open(out, "w", encoding="utf-8")  # noqa: SIM115
    )
    written = events = steps = 0
    with fh:
        meta = _meta_events()
        written += fh.write(_header(rank) + ",\n".join(meta))
        events += len(meta)
        while written < target_bytes:
            steps += 1
            chunk: list[str] = []
            gen.step(steps, chunk)
            events += len(chunk)
            written += fh.write(",\n" + ",\n".join(chunk))
        written += fh.write(f'\n  ],\n  "traceName": "{out.name}"\n}}\n')
    dt = time.perf_counter() - t0
    return {"bytes": written, "events": events, "steps": steps, "seconds": dt}
