"""GB-sized dumps for benchmarks, fast: render one second of timeline once, replay it second after second.

large_trace_view(path, target_bytes, seed): a standalone torch_npu trace_view.json (array root, string ts)
with a realistic event mix (~55% X events with args, ~30% HBM/LLC counters, the rest flows and metadata).
write_cluster(out_dir, n_ranks, bytes_per_rank, seed): an N-rank cluster folder of full torch_npu dumps
(kernel_details.csv, trace_view.json, communication*.json, ...) of at least `bytes_per_rank` each, built from
the article scenario so the data stays meaningful (slow rank HBM-saturated, fast ranks wait in all-reduce).
large_kernel_details(path, n_rows, seed, aic_metrics): a kernel_details.csv of exactly n_rows rows (46 columns
with PipeUtilization), start times increasing as in the real files (the store then needs no re-sort).
All are deterministic for a given seed.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from ._text import NS_PER_S, Replay
from .model import Scenario
from .scenarios import article_scenario, dense_scenario
from .torch_npu_writer import RankWriter, WriteOptions, csv_line, write_torch_npu_dump

_VARIANTS = 3  # distinct one-second templates a large trace cycles through (seeded choice per second)


def large_trace_view(out_path: str | Path, target_bytes: int, seed: int = 0) -> dict[str, float]:
    """Write a trace_view.json of at least `target_bytes` (stops at the first whole second past it).

    Returns {"bytes", "seconds", "mb_per_s", "repetitions"}."""
    t0 = time.perf_counter()
    opts = WriteOptions(aic_metrics="PipeUtilization", flow_every=8)
    templates: list[str] = []
    meta = ""
    for v in range(_VARIANTS):
        sc = dense_scenario(seed * 1000 + v, hbm_period_ns=500_000)
        sc.finalize()
        rw = RankWriter(sc, sc.ranks[0], opts, repeat=2)  # repeat > 1: template mode
        if not meta:
            meta = ", ".join(rw.meta_events())
        templates.append(rw.trace_events())
    replay = Replay(sc.base_ns, 2, NS_PER_S, [s.id for s in sc.ranks[0].steps])
    rng = random.Random(seed)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    k = 0
    with open(out, "w", encoding="utf-8", newline="") as fh:
        written += fh.write("[" + meta)
        while written < target_bytes:
            text = replay.rep(templates[rng.randrange(_VARIANTS)], k)
            written += fh.write(", " + text)
            k += 1
        written += fh.write("]")
    dt = time.perf_counter() - t0
    return {"bytes": written, "seconds": dt, "mb_per_s": written / 1e6 / dt if dt else 0.0, "repetitions": k}


def large_kernel_details(
    out_path: str | Path, n_rows: int, seed: int = 0, *, aic_metrics: str = "PipeUtilization"
) -> dict[str, float]:
    """Write a kernel_details.csv of exactly `n_rows` device tasks (a seeded op mix, one second replayed).

    Metric values are printed with 3 decimals, as torch_npu does. Returns {"bytes", "rows", "seconds", "mb_per_s"}.
    """
    t0 = time.perf_counter()
    sc = dense_scenario(seed * 1000, hbm_period_ns=500_000)
    sc.finalize()
    rw = RankWriter(sc, sc.ranks[0], WriteOptions(aic_metrics=aic_metrics, metric_decimals=3), repeat=2)
    header = csv_line(rw.kernel_header(), "\r\n")
    template = rw.kernel_rows()
    per_rep = template.count("\r\n")
    replay = Replay(sc.base_ns, 2, NS_PER_S, [s.id for s in sc.ranks[0].steps])
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    left = n_rows
    k = 0
    with open(out, "w", encoding="utf-8", newline="") as fh:
        written += fh.write(header)
        while left > 0:
            text = replay.rep(template, k)
            if left < per_rep:  # the last repetition: its first `left` rows
                text = "\r\n".join(text.split("\r\n", left)[:left]) + "\r\n"
            written += fh.write(text)
            left -= min(left, per_rep)
            k += 1
    dt = time.perf_counter() - t0
    return {"bytes": written, "rows": n_rows, "seconds": dt, "mb_per_s": written / 1e6 / dt if dt else 0.0}


def cluster_scenario(n_ranks: int, *, steps_per_second: int = 50) -> Scenario:
    """The article scenario packed into one second (steps of 1 s / steps_per_second), ready for replay."""
    step_ns = NS_PER_S // steps_per_second
    steps = (NS_PER_S - 2_000_000) // step_ns
    return article_scenario(
        n_ranks, steps=steps, slow_ranks=tuple(range(1, n_ranks, 2)), step_ns=step_ns, start_ns=1_000_000
    )


def dense_cluster_scenario(n_ranks: int) -> Scenario:
    """A kernel-dense second per rank: dense_scenario's random op mix at a tenth of its durations, kernels 1-4 us
    apart (~96k kernels a second per rank), an all-reduce every 33 ms, HBM samples every 100 us: a byte of dump
    holds more kernels than the article scenario's (the shape whose analysis tables cost the most per GB)."""
    return dense_scenario(0, n_ranks=n_ranks, hbm_period_ns=100_000, gap_us=(1, 4), dur_scale=0.1)


def write_cluster(
    out_dir: str | Path,
    n_ranks: int,
    bytes_per_rank: int,
    seed: int = 0,
    *,
    aic_metrics: str = "Memory",
    steps_per_second: int = 50,
    dense: bool = False,
) -> dict[str, object]:
    """An N-rank cluster folder (rank{r}_ascend_pt/...) of at least bytes_per_rank per rank (one more second
    of timeline at most).

    The article scenario (dense: dense_cluster_scenario) fills one second and is replayed `repetitions` times. `seed` shifts the base time
    (so two clusters with different seeds do not collide) while the content stays the same pattern.
    Returns {"paths", "bytes", "seconds", "mb_per_s", "repetitions"}."""
    t0 = time.perf_counter()
    sc = (
        dense_cluster_scenario(n_ranks)
        if dense
        else cluster_scenario(n_ranks, steps_per_second=steps_per_second)
    )
    sc.base_ns += seed * 3600 * NS_PER_S
    sc.finalize()
    per_rep = min(
        _rep_bytes(RankWriter(sc, rt, WriteOptions(aic_metrics=aic_metrics), repeat=2)) for rt in sc.ranks
    )
    reps = max(1, -(-bytes_per_rank // per_rep))
    sc.repeat = reps
    paths = write_torch_npu_dump(sc, out_dir, aic_metrics=aic_metrics)
    total = sum(p.stat().st_size for p in paths)
    dt = time.perf_counter() - t0
    return {
        "paths": paths,
        "bytes": total,
        "seconds": dt,
        "mb_per_s": total / 1e6 / dt if dt else 0.0,
        "repetitions": reps,
    }


def _rep_bytes(rw: RankWriter) -> int:
    """Bytes one repetition adds to a rank's files (the smallest rank sets the repetition count)."""
    return (
        len(rw.trace_events())
        + len(rw.kernel_rows())
        + len(rw.communication_steps())
        + len(rw.matrix_steps())
        + len(rw.step_rows())
        + len(rw.memory_rows())
    )
