"""Deterministic synthetic profiler dumps in the *real* torch_npu text format, with answers known by construction.

Used by golden query tests, planted-bottleneck findings tests, benchmarks and sample_traces/.

Build a scenario (times are int ns offsets from ``Scenario.base_ns``; bytes are ints), write it, and check
what traceql computes against what you planted:

    from traceql.synth import Scenario, MiB, write_torch_npu_dump

    sc = Scenario(n_ranks=1, hbm_period_ns=1_000_000, hbm_channels=4)    # HBM sampled every 1 ms, 4 channels
    r0 = sc.rank(0)
    r0.add_step(1, start_ns=0, dur_ns=5_000_000)                          # ProfilerStep#1, 5 ms
    r0.add_op("Tanh_1", "Tanh", start_ns=1_000_000, dur_ns=1_000_000,      # one 1 ms op in window [1 ms, 2 ms)
              task_type="AI_VECTOR_CORE", hbm_read_bytes=4 * MiB, hbm_write_bytes=4 * MiB)
    paths = write_torch_npu_dump(sc, "out", aic_metrics="Memory")          # out/rank0_ascend_pt/...
    # kernel_details.csv: aiv_main_mem_read_bw(GB/s) = 4194304 B / 1e6 ns = 4.194304 (x aiv_time 1000 us -> 4 MiB)
    # trace_view.json: "HBM 0/Read" at ts 1736408883001000.000 = 4194304 B/ms / 4 channels = 1048.576 MB/s
    series = sc.hbm_counters(0)   # the exact samples the writer emitted (CounterSeries), for assertions

Main names:
- model: ``Scenario`` (n_ranks, base_ns, hbm_period_ns, hbm_channels, repeat, period_ns, groups),
  ``RankTrace`` (add_op, add_comm, add_memcpy, add_step, add_host_op, add_memory_sample, hbm_counters,
  step_breakdown, total_hbm_bytes), ``Op``, ``CommOp``, ``Link``, ``Memcpy``, ``HostOp``, ``Step``,
  ``MemorySample``, ``CounterSeries``/``CounterSample``, ``derive_hbm_counters``; constants ``BASE_NS``,
  ``KiB``/``MiB``/``GiB``.
- writer: ``write_torch_npu_dump(scenario, out_dir, *, aic_metrics="PipeUtilization"|"Memory"|"MemoryAccess"|
  "L2Cache"|..., block_col="Block Dim"|"Block Num", device_id_col=False, with_trace_view=True, repeat=None,
  llc=True, l2_cache=False, host_events=True, cann_events=True, hccl_tasks=True, stamp="start") -> list[Path]``.
- scenarios: ``article_scenario(n_ranks=2, steps=3, slow_ranks=(1,), ...)`` (the seed article's story),
  ``dense_scenario(seed)`` (random op mix).
- benchmarks: ``large_trace_view(path, target_bytes, seed)`` (standalone trace_view.json, ~GB at several
  hundred MB/s), ``large_kernel_details(path, n_rows, seed)`` (kernel_details.csv, 46 columns, time-sorted),
  ``write_cluster(out_dir, n_ranks, bytes_per_rank, seed, aic_metrics="Memory")``; ingest shapes in
  ``traceql.synth.shapes``: ``device_trace_view`` / ``host_trace_view`` / ``counter_trace_view`` (a trace_view.json
  of one event kind), ``interleaved_kernel_details`` (streams interleaved: rows not in time order); many small
  ranks: ``write_cluster`` with many ranks.

Conventions the parsers must agree with (all from the real dumps, docs/formats.md):
- µs text has exactly 3 decimals and converts to the exact ns; kernel_details start times end with a TAB.
- Memory group: per-op HBM bytes = aic_main_mem_*_bw(GB/s) x aicore_time(us) + aiv_... x aiv_time(us), with
  GB = 1e9 (so bytes/ns == GB/s). MemoryAccess: *_read/write_main_memory_datas(KB), KB = 1024 bytes.
- HBM counters: `HBM <ch>/Read` args {"Read(MB/s)"}, MB = 1e6; device bandwidth = sum over channels. A sample
  at ts averages the window [ts, ts + period) (stamp="start", the canonical `counters` convention).
- communication.json: sizes in MB = 1e6 bytes, times in ms; SDMA = HCCS + PCIE + SIO (do not add it again).
"""

from __future__ import annotations

from .large import large_kernel_details, large_trace_view, write_cluster
from .model import (
    BASE_NS,
    CommOp,
    CounterSample,
    CounterSeries,
    GiB,
    HostOp,
    KiB,
    Link,
    Memcpy,
    MemorySample,
    MiB,
    Op,
    RankTrace,
    Scenario,
    Step,
    derive_hbm_counters,
)
from .scenarios import PIPE_BOUND_OPS, article_scenario, dense_scenario, pipe_bounds_scenario
from .torch_npu_writer import WriteOptions, write_torch_npu_dump

__all__ = [
    "PIPE_BOUND_OPS",
    "pipe_bounds_scenario",
    "BASE_NS",
    "KiB",
    "MiB",
    "GiB",
    "Scenario",
    "RankTrace",
    "Op",
    "CommOp",
    "Link",
    "Memcpy",
    "HostOp",
    "Step",
    "MemorySample",
    "CounterSample",
    "CounterSeries",
    "derive_hbm_counters",
    "write_torch_npu_dump",
    "WriteOptions",
    "article_scenario",
    "dense_scenario",
    "large_trace_view",
    "large_kernel_details",
    "write_cluster",
]
