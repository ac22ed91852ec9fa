-- name: step_windows
-- description: Step windows per rank on the hbm_timeline time axis (ms from the run's first kernel start), for shading steps on timeline charts.
-- param: max_steps INTEGER = 100       -- ranks with more windows than this return none (too many to shade at chart resolution)
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- rank
-- column: step BIGINT                  -- step id (null when the dump has no step ids: one window for the dump)
-- column: step_index BIGINT            -- 0-based position of the window in the rank's time order (even/odd shading)
-- column: start_ms DOUBLE              -- window start - the run's first kernel start, ms (hbm_timeline's t_ms axis)
-- column: end_ms DOUBLE                -- window end - the run's first kernel start, ms
-- column: dur_ms DOUBLE                -- window length, ms
-- column: window_source VARCHAR        -- steps (steps table start/duration) | kernels (first to last kernel of the step)
--
-- Definitions: windows are derived/step_windows.sql (the same windows every step metric uses). The origin is
-- the earliest kernel start of the run in scope, as in hbm_timeline (t_ms = 0), so the two line up.
WITH t0 AS (
    SELECT run_id, min(ts_ns) AS t0 FROM kernels WHERE ts_ns IS NOT NULL GROUP BY run_id
), w AS (
    SELECT sw.*, row_number() OVER (PARTITION BY sw.run_id, sw.rank ORDER BY sw.win_start, sw.step) - 1 AS step_index,
           count(*) OVER (PARTITION BY sw.run_id, sw.rank) AS n_windows
    FROM step_windows sw
    WHERE sw.win_end > sw.win_start
)
SELECT w.run_id, w.rank, w.step, w.step_index::BIGINT AS step_index,
       (w.win_start - t0.t0) / 1e6 AS start_ms,
       (w.win_end - t0.t0) / 1e6 AS end_ms,
       (w.win_end - w.win_start) / 1e6 AS dur_ms,
       w.window_source
FROM w JOIN t0 USING (run_id)
WHERE w.n_windows <= $max_steps
ORDER BY w.run_id, w.rank, w.step_index;
