-- name: kernels_outside_step
-- description: Kernels tagged with a step whose time window they do not fall in (start before the step began or after it ended, beyond 1% + 1 µs slack): wrong step ids or clocks.
-- param: run_id VARCHAR          -- run to check
-- column: rank INTEGER           -- rank
-- column: step BIGINT            -- the kernel's step id
-- column: name VARCHAR           -- kernel name
-- column: ts_ns BIGINT           -- kernel start, ns
-- column: step_start_ns BIGINT   -- step window start, ns
-- column: step_end_ns BIGINT     -- step window end, ns
-- column: off_by_ns BIGINT       -- distance outside the window, ns
-- The device side of a step runs from its start through Preparing + Computing + Communication(Not Overlapped)
-- + Free (step_trace_time.csv), which can be longer than the host ProfilerStep interval: take the larger.
WITH win AS (
    SELECT rank, step,
           min(ts_ns) AS step_start_ns,
           max(ts_ns + greatest(coalesce(dur_ns, 0),
                                coalesce(preparing_ns, 0) + coalesce(computing_ns, 0)
                                + coalesce(comm_not_overlapped_ns, 0) + coalesce(free_ns, 0))) AS step_end_ns
    FROM steps
    WHERE run_id = $run_id AND step IS NOT NULL AND ts_ns IS NOT NULL
    GROUP BY rank, step
), k AS (
    SELECT k.rank, k.step, k.name, k.ts_ns, w.step_start_ns, w.step_end_ns,
           (w.step_end_ns - w.step_start_ns) // 100 + 1000 AS slack_ns
    FROM kernels k JOIN win w ON k.rank = w.rank AND k.step = w.step
    WHERE k.run_id = $run_id AND k.ts_ns IS NOT NULL
)
SELECT rank, step, name, ts_ns, step_start_ns, step_end_ns,
       CASE WHEN ts_ns < step_start_ns THEN step_start_ns - ts_ns ELSE ts_ns - step_end_ns END AS off_by_ns
FROM k
WHERE ts_ns < step_start_ns - slack_ns OR ts_ns > step_end_ns + slack_ns
ORDER BY off_by_ns DESC;
