-- name: overlap_check
-- description: Cross-check of traceql's step split against the profiler's own OVERLAP_ANALYSIS intervals (db exports): per rank and step, Computing / Communication / Communication(Not Overlapped) / Free from both and their relative difference.
-- param: tolerance DOUBLE = 0.001     -- relative difference above which a part is flagged (0.1%)
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- rank
-- column: step BIGINT                  -- step id (null when the dump has no steps)
-- column: part VARCHAR                 -- Computing | Communication | Communication(Not Overlapped) | Free
-- column: profiler_ns BIGINT           -- sum of the OVERLAP_ANALYSIS intervals of this type in the step, ns
-- column: traceql_ns BIGINT            -- the same part recomputed by traceql from kernels and comm_ops (step_breakdown's sweep), ns
-- column: rel_diff DOUBLE              -- |traceql - profiler| / profiler (null when the profiler has 0 of it)
-- column: agrees BOOLEAN               -- rel_diff <= tolerance (or both zero)
--
-- Definitions: OVERLAP_ANALYSIS (msprof analysis/csrc/application/timeline/overlap_analysis_assembler.cpp) holds
-- msprof's own unions of compute tasks and communication ops per device; its type order (0 Computing,
-- 1 Communication, 2 Communication(Not Overlapped), 3 Free) is parsers._db_tables.OVERLAP_TYPES. traceql's side
-- is _helpers.sql _timeline, as in step_breakdown: compute = non-communication kernels, communication =
-- comm_ops intervals; free = neither, between the step's first and last busy instant. Two independent
-- computations over the same tasks: a disagreement means the task list, the step windows or one of the sweeps
-- differs (e.g. msprof counting tasks traceql does not type as compute). Rows only where the overlap table
-- has intervals.
WITH tl AS MATERIALIZED (
    SELECT * FROM _timeline(1.0, NULL::DOUBLE)
), agg AS (
    SELECT run_id, rank, step,
           min(t0) FILTER (WHERE n_comp > 0 OR n_comm > 0) AS first_busy,
           max(t1) FILTER (WHERE n_comp > 0 OR n_comm > 0) AS last_busy,
           sum(dur_ns) FILTER (WHERE n_comp > 0)::BIGINT AS computing_ns,
           sum(dur_ns) FILTER (WHERE n_comm > 0)::BIGINT AS comm_ns,
           sum(dur_ns) FILTER (WHERE n_comm > 0 AND n_comp = 0)::BIGINT AS comm_not_overlapped_ns,
           sum(dur_ns) FILTER (WHERE n_comp = 0 AND n_comm = 0 AND t0 >= first_busy AND t1 <= last_busy)::BIGINT AS free_ns
    FROM tl GROUP BY run_id, rank, step
), ours AS (
    SELECT run_id, rank, step, part, coalesce(ns, 0)::BIGINT AS ns
    FROM agg UNPIVOT INCLUDE NULLS (ns FOR part IN (computing_ns AS 'Computing', comm_ns AS 'Communication',
                     comm_not_overlapped_ns AS 'Communication(Not Overlapped)', free_ns AS 'Free'))
), prof AS (
    SELECT run_id, rank, step, type AS part, sum(dur_ns)::BIGINT AS ns FROM overlap GROUP BY ALL
)
SELECT p.run_id, p.rank, p.step, p.part, p.ns AS profiler_ns, coalesce(o.ns, 0)::BIGINT AS traceql_ns,
       abs(coalesce(o.ns, 0) - p.ns) / NULLIF(p.ns, 0)::DOUBLE AS rel_diff,
       CASE WHEN p.ns = 0 THEN coalesce(o.ns, 0) = 0
            ELSE abs(coalesce(o.ns, 0) - p.ns) / p.ns::DOUBLE <= $tolerance END AS agrees
FROM prof p LEFT JOIN ours o ON o.run_id = p.run_id AND o.rank = p.rank AND o.step IS NOT DISTINCT FROM p.step
                             AND o.part = p.part
ORDER BY p.run_id, p.rank, p.step,
         CASE p.part WHEN 'Computing' THEN 0 WHEN 'Communication' THEN 1
                     WHEN 'Communication(Not Overlapped)' THEN 2 ELSE 3 END;
