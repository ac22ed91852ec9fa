-- name: op_bounds
-- description: What bounds each operator (memory, compute or latency, with the latency cause), from the best evidence each task has: measured PMU bytes, pipe utilisation (PipeUtilization: every Level1+ capture), resolved HBM samples, modeled bytes (a bound), else unknown.
-- param: top_n INTEGER = 50             -- operator rows to return (by device time)
-- param: per_rank BOOLEAN = false       -- one row per operator and rank (rank filled) instead of across ranks
-- param: peak_hbm_bps DOUBLE = NULL     -- device HBM peak, bytes/s (traceql fills it from the run's device)
-- param: peak_flops DOUBLE = NULL       -- device peak FLOP/s (traceql fills it from the run's device)
-- param: mem_line DOUBLE = 0.8          -- a memory pipe (or HBM bytes) busy at least this share: memory-bound
-- param: compute_line DOUBLE = 0.8      -- cube or vector busy at least this share: compute-bound
-- param: scalar_line DOUBLE = 0.5       -- a latency-bound task whose scalar pipe is busy this share: cause 'scalar'
-- param: short_ns BIGINT = 10000        -- a latency-bound task shorter than this (ns): cause 'short_task'
-- param: few_blocks DOUBLE = 0.5        -- block_dim below this share of the run's most blocks (same core type): cause 'few_blocks'
-- column: run_id VARCHAR                -- run
-- column: rank INTEGER                  -- rank (null across ranks unless per_rank)
-- column: name VARCHAR                  -- operator (kernel) name
-- column: op_type VARCHAR               -- operator type
-- column: calls BIGINT                  -- tasks
-- column: dur_ns BIGINT                 -- device time, ns
-- column: share_of_compute DOUBLE       -- dur_ns / all compute tasks' device time in scope, 0..1
-- column: memory_share DOUBLE           -- share of the operator's time in memory-bound tasks, 0..1
-- column: compute_share DOUBLE          -- share in compute-bound tasks, 0..1
-- column: latency_share DOUBLE          -- share in latency-bound tasks, 0..1
-- column: unknown_share DOUBLE          -- share whose bound the evidence cannot tell, 0..1
-- column: bound VARCHAR                 -- memory | compute | latency | unknown: the class holding most of its time
-- column: cause VARCHAR                 -- latency-bound operators: scalar | fixpipe | few_blocks | short_task | poor_overlap (the cause holding most latency time)
-- column: grade VARCHAR                 -- measured | pipe | sampled | modeled | insufficient: the evidence behind most of its time
-- column: mem_pipe DOUBLE               -- time-weighted busiest memory pipe ratio (MTE2/MTE3), 0..1 (to 1e-6); null without pipes
-- column: compute_pipe DOUBLE           -- time-weighted busiest compute pipe ratio (cube/vector), 0..1
-- column: scalar_pipe DOUBLE            -- time-weighted scalar pipe ratio, 0..1
-- column: bw_utilization DOUBLE         -- HBM bytes (kernel_bytes' chosen source) / time / peak over its tasks whose own figure is within the peak, 0..1
--
-- Definitions: the per-task rule and the meaning of each pipe are in queries/_bounds.sql (_task_bounds). An
-- operator's shares are time-weighted over its tasks; its bound is the class with the largest share (ties:
-- memory, compute, latency, unknown in that order).
WITH t AS (
    SELECT * FROM _task_bounds($peak_hbm_bps::DOUBLE, $peak_flops::DOUBLE, $mem_line::DOUBLE, $compute_line::DOUBLE,
                               $scalar_line::DOUBLE, $short_ns::BIGINT, $few_blocks::DOUBLE)
), k AS (
    SELECT run_id, CASE WHEN $per_rank::BOOLEAN THEN rank END AS rank, name, op_type, dur_ns, bound, cause, grade,
           mem_pipe, compute_pipe, scalar_ratio, bw_util, hbm_bytes
    FROM t
), c AS (
    SELECT run_id, rank, name, op_type, cause, sum(dur_ns) AS ns FROM k WHERE bound = 'latency'
    GROUP BY ALL
), gr AS (
    SELECT run_id, rank, name, op_type, grade, sum(dur_ns) AS ns FROM k GROUP BY ALL
), o AS (
    SELECT run_id, rank, name, op_type, count(*) AS calls, sum(dur_ns)::BIGINT AS dur_ns,
           sum(dur_ns) FILTER (WHERE bound = 'memory') AS mem_ns,
           sum(dur_ns) FILTER (WHERE bound = 'compute') AS comp_ns,
           sum(dur_ns) FILTER (WHERE bound = 'latency') AS lat_ns,
           sum(dur_ns) FILTER (WHERE bound = 'unknown') AS unk_ns,
           -- weighted means as integer sums (ratios in millionths x ns): exact, so the same whatever order
           -- DuckDB's threads add them in (a float sum's last bits are not)
           sum(round(mem_pipe * 1e6)::BIGINT * dur_ns) / 1e6
               / nullif(sum(dur_ns) FILTER (WHERE mem_pipe IS NOT NULL), 0) AS mem_pipe,
           sum(round(compute_pipe * 1e6)::BIGINT * dur_ns) / 1e6
               / nullif(sum(dur_ns) FILTER (WHERE compute_pipe IS NOT NULL), 0) AS compute_pipe,
           sum(round(scalar_ratio * 1e6)::BIGINT * dur_ns) / 1e6
               / nullif(sum(dur_ns) FILTER (WHERE scalar_ratio IS NOT NULL), 0) AS scalar_pipe,
           sum(hbm_bytes) FILTER (WHERE bw_util <= 1) * 1e9
               / nullif(sum(dur_ns) FILTER (WHERE bw_util <= 1), 0) / $peak_hbm_bps::DOUBLE AS bw_utilization
    FROM k GROUP BY ALL
), s AS (
    SELECT o.*,
           coalesce(mem_ns, 0) / nullif(dur_ns, 0) AS memory_share,
           coalesce(comp_ns, 0) / nullif(dur_ns, 0) AS compute_share,
           coalesce(lat_ns, 0) / nullif(dur_ns, 0) AS latency_share,
           coalesce(unk_ns, 0) / nullif(dur_ns, 0) AS unknown_share,
           dur_ns / nullif(sum(dur_ns) OVER (PARTITION BY run_id, rank), 0) AS share_of_compute
    FROM o
)
SELECT s.run_id, s.rank, s.name, s.op_type, s.calls, s.dur_ns, s.share_of_compute,
       s.memory_share, s.compute_share, s.latency_share, s.unknown_share,
       CASE greatest(coalesce(mem_ns, 0), coalesce(comp_ns, 0), coalesce(lat_ns, 0), coalesce(unk_ns, 0))
            WHEN coalesce(mem_ns, 0) THEN 'memory' WHEN coalesce(comp_ns, 0) THEN 'compute'
            WHEN coalesce(lat_ns, 0) THEN 'latency' ELSE 'unknown' END AS bound,
       CASE WHEN greatest(coalesce(mem_ns, 0), coalesce(comp_ns, 0), coalesce(unk_ns, 0)) < coalesce(lat_ns, 0) THEN
       (SELECT c.cause FROM c WHERE c.run_id = s.run_id AND c.rank IS NOT DISTINCT FROM s.rank AND c.name = s.name
           AND c.op_type IS NOT DISTINCT FROM s.op_type ORDER BY c.ns DESC, c.cause LIMIT 1) END AS cause,
       (SELECT gr.grade FROM gr WHERE gr.run_id = s.run_id AND gr.rank IS NOT DISTINCT FROM s.rank AND gr.name = s.name
           AND gr.op_type IS NOT DISTINCT FROM s.op_type ORDER BY gr.ns DESC, gr.grade LIMIT 1) AS grade,
       s.mem_pipe, s.compute_pipe, s.scalar_pipe, s.bw_utilization
FROM s
ORDER BY s.dur_ns DESC, s.name, s.rank
LIMIT $top_n;
