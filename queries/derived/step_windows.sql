-- name: step_windows
-- description: Step windows: the host step spans, else first to last kernel of each step; non-overlapping
-- grain: one row per (run_id, rank, step)
-- level: rank
-- order: win_start, step
-- column: run_id VARCHAR -- run
-- column: rank INTEGER -- rank
-- column: step BIGINT -- step id (null: one window for the whole dump)
-- column: win_start BIGINT -- window start, ns
-- column: win_end BIGINT -- window end (exclusive), ns
-- column: window_source VARCHAR -- 'steps' (the steps table) or 'kernels' (first to last kernel of the step)
-- column: device_tail_ns BIGINT -- how far the last window was extended to the end of the device work started in it, ns
--
-- Step windows per run/rank/step (see the header).
WITH st AS (
    SELECT run_id, rank, step, ts_ns AS win_start, ts_ns + dur_ns AS win_end, 'steps' AS window_source
    FROM steps WHERE ts_ns IS NOT NULL AND dur_ns IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY run_id, rank, step ORDER BY source, ts_ns) = 1  -- one row per step
), ks AS (
    SELECT run_id, rank, step, min(ts_ns) AS win_start, max(ts_ns + greatest(coalesce(dur_ns, 0), 0)) AS win_end,
           'kernels' AS window_source
    FROM kernels
    WHERE ts_ns IS NOT NULL AND coalesce(task_type, '') <> 'cuda_profiler_range'
      AND NOT EXISTS (SELECT 1 FROM st WHERE st.run_id = kernels.run_id AND st.rank = kernels.rank)
    GROUP BY run_id, rank, step
), u AS (
    SELECT * FROM st UNION ALL SELECT * FROM ks
), cut AS (
    SELECT run_id, rank, step, win_start, window_source,
           least(win_end, coalesce(lead(win_start) OVER o, win_end)) AS win_end,
           lead(win_start) OVER o IS NULL AS is_last
    FROM u WINDOW o AS (PARTITION BY run_id, rank ORDER BY win_start, step)
), tail AS (
    -- device work still running after the last host step marker ends (a GPU runs behind the host: the last
    -- ProfilerStep's kernels often finish after it) belongs to that step, not to nobody
    SELECT c.run_id, c.rank, max(k.ts_ns + greatest(coalesce(k.dur_ns, 0), 0)) AS last_end
    FROM (SELECT * FROM cut WHERE is_last AND window_source = 'steps') c
    JOIN kernels k ON k.run_id = c.run_id AND k.rank = c.rank
    WHERE k.ts_ns >= c.win_start AND coalesce(k.task_type, '') <> 'cuda_profiler_range'
    GROUP BY c.run_id, c.rank
)
SELECT c.run_id, c.rank, c.step, c.win_start,
       CASE WHEN c.is_last THEN greatest(c.win_end, coalesce(t.last_end, c.win_end)) ELSE c.win_end END AS win_end,
       c.window_source,
       CASE WHEN c.is_last THEN greatest(coalesce(t.last_end, c.win_end) - c.win_end, 0) ELSE 0 END AS device_tail_ns
FROM cut c LEFT JOIN tail t ON t.run_id = c.run_id AND t.rank = c.rank;
