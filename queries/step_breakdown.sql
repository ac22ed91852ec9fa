-- name: step_breakdown
-- description: Per rank and step, the step_trace split recomputed from the kernels (computing, communication, not-overlapped communication, overlapped, free) beside the profiler's own step_trace_time numbers.
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- rank
-- column: step BIGINT                  -- step id (null when the dump has no steps)
-- column: window_source VARCHAR        -- steps (steps table start/duration) | kernels (first kernel start to last kernel end)
-- column: window_ns BIGINT             -- the step window, ns (the host step when the steps table has its start)
-- column: wall_ns BIGINT               -- first device op start to last device op end in the window, ns = computing + comm_not_overlapped + free (the profiler's step time)
-- column: preparing_ns BIGINT          -- window start to the first device op, ns (the profiler's Preparing when the window is the host step)
-- column: tail_ns BIGINT               -- last device op end to the window end, ns
-- column: computing_ns BIGINT          -- time with at least one compute kernel running (the profiler's Computing)
-- column: comm_ns BIGINT               -- time with at least one communication op running (Communication)
-- column: comm_not_overlapped_ns BIGINT -- communication with no compute running (Communication(Not Overlapped))
-- column: overlapped_ns BIGINT         -- communication hidden under compute (Overlapped)
-- column: free_ns BIGINT               -- neither, between the first and last device op (Free)
-- column: computing_ratio DOUBLE       -- computing_ns / wall_ns
-- column: profiler_step_ns BIGINT      -- steps.dur_ns as ingested (null when the dump has no step_trace)
-- column: profiler_computing_ns BIGINT -- steps.computing_ns (step_trace_time.csv Computing)
-- column: profiler_comm_not_overlapped_ns BIGINT -- steps.comm_not_overlapped_ns
-- column: profiler_overlapped_ns BIGINT -- steps.overlapped_ns
-- column: profiler_comm_ns BIGINT      -- steps.comm_ns
-- column: profiler_free_ns BIGINT      -- steps.free_ns
-- column: profiler_bubble_ns BIGINT    -- steps.bubble_ns (receive time, pipeline bubbles)
-- column: profiler_preparing_ns BIGINT -- steps.preparing_ns (step start to first device op)
--
-- Definitions: the same timeline as wait_attribution (_helpers.sql _timeline): compute = non-communication
-- kernels; communication = comm_ops intervals (or communication kernels when the rank has no comm_ops). Unions
-- are taken by a sweep over start/end events, so overlapping kernels on several streams count once, as in the
-- profiler's Overlap Analysis. Step windows: steps start/duration when ingested, else first kernel start to
-- last kernel end of the step. Inside the window, the profiler's step is the device span (first device op
-- start to last device op end = Computing + Comm(Not Overlapped) + Free): wall_ns; the rest is preparing/tail.
WITH tl AS MATERIALIZED (
    SELECT * FROM _timeline(1.0, NULL::DOUBLE)
), agg AS (
    SELECT run_id, rank, step, any_value(window_source) AS window_source,
           any_value(win_start) AS win_start, any_value(win_end) AS win_end,
           min(t0) FILTER (WHERE n_comp > 0 OR n_comm > 0) AS first_busy,
           max(t1) FILTER (WHERE n_comp > 0 OR n_comm > 0) AS last_busy,
           sum(dur_ns) FILTER (WHERE n_comp > 0)::BIGINT AS computing_ns,
           sum(dur_ns) FILTER (WHERE n_comm > 0)::BIGINT AS comm_ns,
           sum(dur_ns) FILTER (WHERE n_comm > 0 AND n_comp = 0)::BIGINT AS comm_not_overlapped_ns,
           sum(dur_ns) FILTER (WHERE n_comm > 0 AND n_comp > 0)::BIGINT AS overlapped_ns,
           -- free: nothing running between the step's first and last busy instant (_timeline carries them)
           sum(dur_ns) FILTER (WHERE n_comp = 0 AND n_comm = 0 AND t0 >= first_busy AND t1 <= last_busy)::BIGINT AS free_ns
    FROM tl GROUP BY run_id, rank, step
), st AS (
    SELECT * FROM steps
    QUALIFY row_number() OVER (PARTITION BY run_id, rank, step ORDER BY computing_ns IS NULL, source, ts_ns) = 1
)
SELECT a.run_id, a.rank, a.step, a.window_source, a.win_end - a.win_start AS window_ns,
       coalesce(a.last_busy - a.first_busy, 0) AS wall_ns,
       coalesce(a.first_busy, a.win_end) - a.win_start AS preparing_ns,
       a.win_end - coalesce(a.last_busy, a.win_end) AS tail_ns,
       coalesce(a.computing_ns, 0) AS computing_ns, coalesce(a.comm_ns, 0) AS comm_ns,
       coalesce(a.comm_not_overlapped_ns, 0) AS comm_not_overlapped_ns, coalesce(a.overlapped_ns, 0) AS overlapped_ns,
       coalesce(a.free_ns, 0) AS free_ns,
       coalesce(a.computing_ns, 0) / nullif(a.last_busy - a.first_busy, 0) AS computing_ratio,
       st.dur_ns AS profiler_step_ns, st.computing_ns AS profiler_computing_ns,
       st.comm_not_overlapped_ns AS profiler_comm_not_overlapped_ns, st.overlapped_ns AS profiler_overlapped_ns,
       st.comm_ns AS profiler_comm_ns, st.free_ns AS profiler_free_ns, st.bubble_ns AS profiler_bubble_ns,
       st.preparing_ns AS profiler_preparing_ns
FROM agg a
LEFT JOIN st ON st.run_id = a.run_id AND st.rank = a.rank AND st.step IS NOT DISTINCT FROM a.step
ORDER BY a.run_id, a.rank, a.step NULLS FIRST;
