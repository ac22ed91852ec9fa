-- name: bound_shares
-- description: What saturates first inside compute, per rank and for the run: the share of compute time in memory-, compute- and latency-bound tasks (and unknown), from the best evidence each task has (op_bounds' rule), with the grade behind most of it.
-- param: peak_hbm_bps DOUBLE = NULL     -- device HBM peak, bytes/s (traceql fills it from the run's device)
-- param: peak_flops DOUBLE = NULL       -- device peak FLOP/s (traceql fills it from the run's device)
-- param: mem_line DOUBLE = 0.8          -- memory pipe / HBM bytes line (see op_bounds)
-- param: compute_line DOUBLE = 0.8      -- cube / vector line
-- param: scalar_line DOUBLE = 0.5       -- scalar pipe line for the latency cause
-- param: short_ns BIGINT = 10000        -- short task line, ns
-- param: few_blocks DOUBLE = 0.5        -- few blocks line
-- column: run_id VARCHAR                -- run
-- column: scope VARCHAR                 -- run | rank
-- column: rank INTEGER                  -- rank (null for the run row)
-- column: tasks BIGINT                  -- compute tasks
-- column: compute_ns BIGINT             -- compute tasks' device time, ns
-- column: memory_share DOUBLE           -- share of compute time in memory-bound tasks, 0..1
-- column: compute_share DOUBLE          -- share in compute-bound tasks, 0..1
-- column: latency_share DOUBLE          -- share in latency-bound tasks, 0..1
-- column: unknown_share DOUBLE          -- share the evidence cannot classify, 0..1
-- column: top_cause VARCHAR             -- the latency cause holding most latency-bound time (null: none)
-- column: top_cause_share DOUBLE        -- its share of compute time, 0..1
-- column: grade VARCHAR                 -- measured | pipe | sampled | modeled | insufficient: the evidence behind most compute time
-- column: pipe_share DOUBLE             -- share of compute time with pipe ratios, 0..1
-- column: measured_share DOUBLE         -- share of compute time with per-task PMU bytes, 0..1
--
-- Definitions: queries/_bounds.sql (_task_bounds). Shares are of compute device time (communication tasks
-- excluded), summed over the ranks for the run row.
WITH t AS (
    SELECT * FROM _task_bounds($peak_hbm_bps::DOUBLE, $peak_flops::DOUBLE, $mem_line::DOUBLE, $compute_line::DOUBLE,
                               $scalar_line::DOUBLE, $short_ns::BIGINT, $few_blocks::DOUBLE)
), u AS (
    SELECT run_id, 'rank' AS scope, rank, dur_ns, bound, cause, grade FROM t
    UNION ALL
    SELECT run_id, 'run', NULL, dur_ns, bound, cause, grade FROM t
), a AS (
    SELECT run_id, scope, rank, count(*) AS tasks, sum(dur_ns)::BIGINT AS compute_ns,
           coalesce(sum(dur_ns) FILTER (WHERE bound = 'memory'), 0) / nullif(sum(dur_ns), 0) AS memory_share,
           coalesce(sum(dur_ns) FILTER (WHERE bound = 'compute'), 0) / nullif(sum(dur_ns), 0) AS compute_share,
           coalesce(sum(dur_ns) FILTER (WHERE bound = 'latency'), 0) / nullif(sum(dur_ns), 0) AS latency_share,
           coalesce(sum(dur_ns) FILTER (WHERE bound = 'unknown'), 0) / nullif(sum(dur_ns), 0) AS unknown_share,
           coalesce(sum(dur_ns) FILTER (WHERE grade = 'pipe'), 0) / nullif(sum(dur_ns), 0) AS pipe_share,
           coalesce(sum(dur_ns) FILTER (WHERE grade = 'measured'), 0) / nullif(sum(dur_ns), 0) AS measured_share
    FROM u GROUP BY run_id, scope, rank
), c AS (
    SELECT run_id, scope, rank, cause, sum(dur_ns) AS ns,
           row_number() OVER (PARTITION BY run_id, scope, rank ORDER BY sum(dur_ns) DESC, cause) AS rn
    FROM u WHERE cause IS NOT NULL GROUP BY run_id, scope, rank, cause
), g AS (
    SELECT run_id, scope, rank, grade,
           row_number() OVER (PARTITION BY run_id, scope, rank ORDER BY sum(dur_ns) DESC, grade) AS rn
    FROM u GROUP BY run_id, scope, rank, grade
)
SELECT a.run_id, a.scope, a.rank, a.tasks, a.compute_ns, a.memory_share, a.compute_share, a.latency_share,
       a.unknown_share, c.cause AS top_cause, c.ns / nullif(a.compute_ns, 0) AS top_cause_share, g.grade,
       a.pipe_share, a.measured_share
FROM a
LEFT JOIN c ON c.run_id = a.run_id AND c.scope = a.scope AND c.rank IS NOT DISTINCT FROM a.rank AND c.rn = 1
LEFT JOIN g ON g.run_id = a.run_id AND g.scope = a.scope AND g.rank IS NOT DISTINCT FROM a.rank AND g.rn = 1
ORDER BY a.run_id, a.scope = 'rank', a.rank;
