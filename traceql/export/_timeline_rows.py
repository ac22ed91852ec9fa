"""The SQL behind every exported track: one statement per family, each a stream of rows in (rank, track, ts)
order, all on the rank's own clock (the writers apply the clock offsets).

Slice families yield: rank, track, ts_ns, dur_ns, name, cat, flow_in, flow_out, and arguments: every other
column, written as the event's args when not null. Counter families yield: rank, track, ts_ns, value (or d, the
change at ts_ns, for the running-sum families). The wait-state family yields one row per timeline segment
(the writer merges them).
Track names follow the profilers: `Stream N` (torch_npu's Ascend Hardware threads; Kineto writes `stream N`),
`Thread N` host threads, `Group <g> Communication` (torch_npu's HCCL threads); raw counters keep the name the
profiler wrote (e.g. `HBM 0/Read`) with their unit. Tracks traceql derives say so in their name ("traceql: ...")
and say what they rest on: sampled counters with their period, per-task PMU measurements, the modeled lower
bound, each on its own track.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..commandline import command
from ._session import Session

SLICE_BASE = ("rank", "track", "ts_ns", "dur_ns", "name", "cat", "flow_in", "flow_out")
# categories traceql's Kineto reader stores as kernels: only device tasks may carry them
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset", "cuda_profiler_range")
WAIT_TRACK = "traceql: wait state"
FINDINGS_TRACK = "traceql: findings"


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # slice | counter | flow
    sql: str
    unit: str = ""  # counters: % | GB/s | raw unit
    # counters whose rows are changes (column d, in time order per rank): the writer keeps the running sum,
    # value = max(sum, 0) x scale. A running sum in SQL would be a window over the whole rank, which DuckDB
    # holds in memory; the deltas only need a sort, which spills.
    cumulative: bool = False
    scale: float = 1.0


def _stream_label(sess: Session) -> str:
    return "stream " if sess.run_format.startswith("kineto") else "Stream "


def kernels(sess: Session) -> Family:
    cats = ", ".join(f"'{c}'" for c in DEVICE_CATS[:5])
    return Family(
        "kernels",
        "slice",
        f"""
WITH fl AS (
    SELECT rank, dst_ts_ns, dst_tid, list(cast(rank AS VARCHAR) || ':' || coalesce(cat, '') || ':' || flow_id) AS flow_in
    FROM flows WHERE dst_ts_ns IS NOT NULL AND flow_id IS NOT NULL AND {sess.where("dst_ts_ns")}
    GROUP BY ALL
)
SELECT k.rank, '{_stream_label(sess)}' || coalesce(cast(k.stream_id AS VARCHAR), '?') AS track, k.ts_ns,
       greatest(coalesce(k.dur_ns, 0), 0) AS dur_ns, coalesce(k.name, k.op_type, '?') AS name,
       CASE WHEN lower(k.task_type) IN ({cats}) THEN lower(k.task_type) ELSE 'kernel' END AS cat,
       fl.flow_in, NULL::VARCHAR[] AS flow_out,
       k.op_type, k.task_type, k.step, k.stream_id AS stream, k.task_id, k.connection_id AS correlation,
       k.device_id AS device, k.is_comm
FROM kernels k
LEFT JOIN fl ON fl.rank = k.rank AND fl.dst_ts_ns = k.ts_ns AND fl.dst_tid = k.stream_id
WHERE k.ts_ns IS NOT NULL AND {sess.where("k.ts_ns", "k.rank")}
ORDER BY k.rank, track, k.ts_ns, dur_ns DESC""",
    )


def host_ops(sess: Session) -> Family:
    cats = ", ".join(f"'{c}'" for c in DEVICE_CATS)
    return Family(
        "host_ops",
        "slice",
        f"""
WITH fl AS (
    SELECT rank, src_ts_ns, src_tid, list(cast(rank AS VARCHAR) || ':' || coalesce(cat, '') || ':' || flow_id) AS flow_out
    FROM flows WHERE src_ts_ns IS NOT NULL AND flow_id IS NOT NULL AND {sess.where("src_ts_ns")}
    GROUP BY ALL
)
SELECT h.rank,
       CASE WHEN lower(h.cat) = 'cann' THEN 'CANN ' ELSE '' END || 'Thread ' || coalesce(cast(h.tid AS VARCHAR), '?') AS track,
       h.ts_ns, greatest(coalesce(h.dur_ns, 0), 0) AS dur_ns, coalesce(h.name, '?') AS name,
       -- a host event must never read back as a device task (traceql's Kineto reader keys kernels on cat)
       CASE WHEN lower(h.cat) IN ({cats}) THEN 'host_' || h.cat ELSE coalesce(h.cat, 'host') END AS cat,
       NULL::VARCHAR[] AS flow_in, fl.flow_out,
       h.level, h.correlation_id, h.seq_num AS "Sequence number", h.input_shapes AS "Input Dims",
       h.input_dtypes AS "Input type"
FROM host_ops h
LEFT JOIN fl ON fl.rank = h.rank AND fl.src_ts_ns = h.ts_ns AND fl.src_tid = h.tid
WHERE h.ts_ns IS NOT NULL AND {sess.where("h.ts_ns", "h.rank")}
ORDER BY h.rank, track, h.ts_ns, dur_ns DESC""",
    )


def comm_ops(sess: Session) -> Family:
    return Family(
        "comm_ops",
        "slice",
        f"""
SELECT rank, CASE WHEN group_name IS NULL THEN 'Communication' ELSE 'Group ' || group_name || ' Communication' END AS track,
       ts_ns, greatest(coalesce(dur_ns, 0), 0) AS dur_ns, coalesce(name, op_type, '?') AS name, 'communication' AS cat,
       NULL::VARCHAR[] AS flow_in, NULL::VARCHAR[] AS flow_out,
       op_type, kind, step, transit_ns, wait_ns, sync_ns, idle_ns, bytes, source
FROM comm_ops
WHERE ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND coalesce(name, '') <> 'Total Op Info' AND {sess.where()}
QUALIFY row_number() OVER (PARTITION BY rank, name, ts_ns ORDER BY transit_ns IS NULL, source) = 1
ORDER BY rank, track, ts_ns, dur_ns DESC""",
    )


def flows(sess: Session) -> Family:
    """Flow arrows for the Chrome writer: each end on the track of the event it belongs to (a host thread when
    the end's process is a host process of the rank, else the device stream of that tid)."""
    st = _stream_label(sess)
    return Family(
        "flows",
        "flow",
        f"""
WITH hp AS (SELECT DISTINCT rank, pid FROM host_ops WHERE pid IS NOT NULL)
SELECT f.rank, cast(f.rank AS VARCHAR) || ':' || coalesce(f.cat, '') || ':' || f.flow_id AS id, coalesce(f.cat, 'flow') AS cat,
       coalesce(f.name, '') AS name,
       CASE WHEN hs.pid IS NOT NULL THEN 'Thread ' ELSE '{st}' END || coalesce(cast(f.src_tid AS VARCHAR), '?') AS src_track,
       f.src_ts_ns,
       CASE WHEN hd.pid IS NOT NULL THEN 'Thread ' ELSE '{st}' END || coalesce(cast(f.dst_tid AS VARCHAR), '?') AS dst_track,
       f.dst_ts_ns
FROM flows f
LEFT JOIN hp hs ON hs.rank = f.rank AND hs.pid = f.src_pid
LEFT JOIN hp hd ON hd.rank = f.rank AND hd.pid = f.dst_pid
WHERE f.flow_id IS NOT NULL AND f.src_ts_ns IS NOT NULL AND f.dst_ts_ns IS NOT NULL AND {sess.where("f.src_ts_ns", "f.rank")}
ORDER BY f.rank, f.src_ts_ns""",
    )


def raw_counters(sess: Session) -> Family:
    return Family(
        "counters",
        "counter",
        f"""
SELECT rank,
       coalesce(nullif(name, ''), track || CASE WHEN coalesce(channel, '') <> '' THEN ' ' || channel ELSE '' END || '/' || metric)
       || ' (' || coalesce(unit, '?') || ')' AS track,
       ts_ns, value
FROM counters
WHERE ts_ns IS NOT NULL AND value IS NOT NULL AND isfinite(value) AND {sess.where()}
ORDER BY rank, track, ts_ns""",
    )


def hbm_sampled(sess: Session) -> Family | None:
    """Device HBM bandwidth from the sampled counters (every channel summed: _helpers.sql _hbm_windows), as a %
    of the device peak (GB/s when the peak is unknown), with the counters' sampling period in the name."""
    peak = sess.peaks.get("peak_hbm_bps")
    scale, unit = (f"100.0 / {float(peak)!r}", "%") if peak else ("1e-9", "GB/s")
    what = "% of peak" if peak else "GB/s (device peak unknown)"
    return Family(
        "hbm_sampled",
        "counter",
        f"""
WITH per AS (
    SELECT rank, quantile_disc(d, 0.5) AS period_ns FROM (
        SELECT rank, ts_ns - lag(ts_ns) OVER (PARTITION BY rank, channel, metric ORDER BY ts_ns) AS d
        FROM counters WHERE upper(track) = 'HBM' AND metric IN ('read_bw', 'write_bw') AND unit = 'bytes/s')
    WHERE d > 0 GROUP BY rank
)
SELECT w.rank,
       'traceql: HBM bandwidth, {what} (measured: sampled counters, read + write of every channel, period '
       || coalesce(CASE WHEN per.period_ns % 1000000 = 0 THEN (per.period_ns // 1000000) || ' ms'
                        WHEN per.period_ns % 1000 = 0 THEN (per.period_ns // 1000) || ' us'
                        ELSE per.period_ns || ' ns' END, '?') || ')' AS track,
       w.win_start AS ts_ns, round((w.read_bps + w.write_bps) * {scale}, 6) AS value
FROM _hbm_windows() w LEFT JOIN per ON per.rank = w.rank
WHERE {sess.where("w.win_start", "w.rank")}
ORDER BY w.rank, w.win_start""",
        unit,
    )


def _sweep(sess: Session, name: str, label: str, bytes_expr: str, have_expr: str, peak_key: str) -> Family:
    """Bandwidth of the kernels running at each instant (each kernel's bytes spread evenly over its run time,
    concurrent kernels summed, as _helpers.sql defines device bandwidth), one point per change: the rows are
    the changes (+bw at a kernel's start, -bw at its end), summed by the writer."""
    peak = sess.peaks.get(peak_key)
    scale, unit = (100.0 / float(peak), "%") if peak else (1e-9, "GB/s")
    what = "% of peak" if peak else "GB/s (peak unknown)"
    return Family(
        name,
        "counter",
        f"""
WITH kb AS (
    SELECT rank, ts_ns, end_ns, ({bytes_expr}) * 1e9 / dur_ns AS bw
    FROM kernel_bytes WHERE dur_ns > 0 AND ({have_expr}) AND {sess.where()}
), ev AS (
    SELECT rank, ts_ns AS t, bw AS d FROM kb UNION ALL SELECT rank, end_ns, -bw FROM kb
)
SELECT rank, 'traceql: {label}, {what}' AS track, t AS ts_ns, sum(d) AS d
FROM ev GROUP BY rank, t
ORDER BY rank, t""",
        unit,
        cumulative=True,
        scale=scale,
    )


def hbm_pmu(sess: Session) -> Family:
    return _sweep(
        sess,
        "hbm_pmu",
        "HBM bandwidth (measured per task: PMU bytes spread over each task)",
        "coalesce(pmu_read, 0) + coalesce(pmu_write, 0)",
        "pmu_read IS NOT NULL OR pmu_write IS NOT NULL",
        "peak_hbm_bps",
    )


def hbm_modeled(sess: Session) -> Family:
    return _sweep(
        sess,
        "hbm_modeled",
        "HBM bandwidth, modeled lower bound (tensor sizes: no re-reads, not measured)",
        "coalesce(modeled_read, 0) + coalesce(modeled_write, 0)",
        "modeled_read IS NOT NULL OR modeled_write IS NOT NULL",
        "peak_hbm_bps",
    )


def ub_pmu(sess: Session) -> Family:
    return _sweep(
        sess,
        "ub_pmu",
        "UB bandwidth (measured per task: PMU UB bytes)",
        "coalesce(ub_read_bytes, 0) + coalesce(ub_write_bytes, 0)",
        "NOT is_comm AND (ub_read_bytes IS NOT NULL OR ub_write_bytes IS NOT NULL)",
        "peak_ub_bps",
    )


def l2_hit(sess: Session) -> Family:
    """Per-task L2 hit rate (kernels.l2_hit_rate, else the l2_cache table, matched as ub_l2_rates does), set at
    each task's start: the rate of the task starting there, held until the next rated task."""
    return Family(
        "l2_hit",
        "counter",
        f"""
SELECT k.rank, 'traceql: L2 hit rate, % (measured per task: PMU or l2_cache; value of the task starting here)' AS track,
       k.ts_ns, round(100 * coalesce(k.l2_hit_rate, lc.hit_rate), 6) AS value
FROM kernel_bytes k
LEFT JOIN (SELECT rank, stream_id, task_id, op_name, avg(hit_rate) AS hit_rate
           FROM l2_cache WHERE hit_rate IS NOT NULL GROUP BY ALL) lc
  ON lc.rank = k.rank AND lc.stream_id = k.stream_id AND lc.task_id = k.task_id AND lc.op_name = k.name
WHERE NOT k.is_comm AND coalesce(k.l2_hit_rate, lc.hit_rate) IS NOT NULL AND {sess.where("k.ts_ns", "k.rank")}
ORDER BY k.rank, k.ts_ns""",
        "%",
    )


def wait_state(sess: Session, sat_threshold: float) -> Family:
    """Per rank, what wait_attribution calls each instant: one row per _timeline segment, in time order, named
    by the rule below (the writer merges consecutive segments in the same state into one slice). In a
    communication segment wait_attribution splits time by shares; the slice carries those shares as arguments."""
    peak = sess.peaks.get("peak_hbm_bps")
    peak_sql = "NULL::DOUBLE" if not peak else f"{float(peak)!r}::DOUBLE"
    return Family(
        "wait_state",
        "slice",
        f"""
SELECT rank, step, t0, t1, n_comm, n_peer_wait, peer_hbm_share, transit_share, CASE
        WHEN n_comp > 0 AND sat THEN 'compute (HBM-saturated)'
        WHEN n_comp > 0 THEN 'computing'
        WHEN n_comm > 0 AND n_peer_wait > 0 AND peer_hbm_share >= 0.5 THEN 'waiting on an HBM-saturated peer'
        WHEN n_comm > 0 AND n_peer_wait > 0 THEN 'waiting on a peer'
        WHEN n_comm > 0 AND transit_share >= 0.5 THEN 'transit'
        WHEN n_comm > 0 THEN 'waiting (sync, or ranks not in the dump)'
        WHEN t0 >= first_busy AND t1 <= last_busy THEN 'idle'
        ELSE 'host' END AS state
FROM _timeline({float(sat_threshold)!r}::DOUBLE, {peak_sql})
WHERE {sess.where("t0")}
ORDER BY rank, t0""",
    )


def wait_basis(sess: Session, sat_threshold: float) -> str:
    return (
        f"wait_attribution timeline (_helpers.sql _timeline, sat_threshold {float(sat_threshold):g}"
        + (", HBM peak unknown: no compute counts as saturated" if not sess.peaks.get("peak_hbm_bps") else "")
        + f"); rerun: {command('query', 'wait_attribution', run=sess.run_id)}"
    )


def counter_families(sess: Session) -> list[Family]:
    fams = [raw_counters(sess), hbm_pmu(sess), hbm_modeled(sess), ub_pmu(sess), l2_hit(sess)]
    h = hbm_sampled(sess)
    if h is not None:
        fams.insert(1, h)
    return fams
