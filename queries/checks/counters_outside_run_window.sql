-- name: counters_outside_run_window
-- description: Counter samples far outside the rank's event window (first to last kernel/host op, widened by max(1 s, the window's length)): a unit or clock-base error in the counter track.
-- param: run_id VARCHAR          -- run to check
-- column: rank INTEGER           -- rank
-- column: track VARCHAR          -- counter track (HBM, LLC, NPU MEM...)
-- column: name VARCHAR           -- raw counter name
-- column: samples BIGINT         -- samples of this counter outside the window
-- column: first_ts_ns BIGINT     -- earliest such sample, ns
-- column: window_start_ns BIGINT -- event window start, ns
-- column: window_end_ns BIGINT   -- event window end, ns
-- One row per counter name (not per sample), so a wholly mis-scaled track counts once per series.
WITH ev AS (
    SELECT rank, ts_ns, ts_ns + coalesce(greatest(dur_ns, 0), 0) AS end_ns
    FROM kernels WHERE run_id = $run_id AND ts_ns IS NOT NULL
    UNION ALL
    SELECT rank, ts_ns, ts_ns + coalesce(greatest(dur_ns, 0), 0)
    FROM host_ops WHERE run_id = $run_id AND ts_ns IS NOT NULL
), win AS (
    SELECT rank, min(ts_ns) AS window_start_ns, max(end_ns) AS window_end_ns,
           greatest(max(end_ns) - min(ts_ns), 1000000000) AS slack_ns
    FROM ev GROUP BY rank
)
SELECT c.rank, c.track, c.name, count(*) AS samples, min(c.ts_ns) AS first_ts_ns,
       w.window_start_ns, w.window_end_ns
FROM counters c JOIN win w ON c.rank = w.rank
WHERE c.run_id = $run_id
  AND (c.ts_ns < w.window_start_ns - w.slack_ns OR c.ts_ns > w.window_end_ns + w.slack_ns)
GROUP BY c.rank, c.track, c.name, w.window_start_ns, w.window_end_ns
ORDER BY samples DESC, c.rank, c.name;
