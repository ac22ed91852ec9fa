-- name: rank_summary
-- description: One row per rank to compare ranks: kernels launched, compute time, HBM bytes, AI CPU time, and how late the rank reaches the matched collectives (and how long it waits for others) - the slow-rank evidence, with the numbers that say why a rank is slow.
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- rank
-- column: steps BIGINT                 -- step windows of the rank (derived/step_windows.sql)
-- column: window_ns BIGINT             -- their total wall time, ns
-- column: kernel_list BOOLEAN          -- the rank has a device task list in the dump (false: compute and HBM bytes are not recorded, not zero)
-- column: compute_kernels BIGINT       -- compute kernels launched (null without a task list)
-- column: compute_ns BIGINT            -- their total device time, ns (concurrent kernels add up; null without a task list)
-- column: step_computing_ns BIGINT     -- the profiler's own Computing time over the rank's steps (step_trace_time), ns: the compute figure for a rank without a task list
-- column: hbm_bytes BIGINT             -- HBM bytes of the compute kernels (chosen source)
-- column: aicpu_kernels BIGINT         -- kernels of task type AI_CPU
-- column: aicpu_ns BIGINT              -- their device time, ns
-- column: collectives BIGINT           -- matched collectives the rank took part in (derived/comm_events.sql)
-- column: last_arrivals BIGINT         -- collectives this rank started last (after every other member)
-- column: lateness_ns BIGINT           -- sum over collectives of this rank's start - the first member's start, ns
-- column: peer_wait_ns BIGINT          -- sum over collectives of this rank's wait for the last member (start to the last member's start, within the op), ns
--
-- Definitions: collectives are matched across ranks by order within their group (comm_events); p2p ops and
-- matches where members disagree on the op type are left out of the last three columns.
WITH kb AS MATERIALIZED (
    SELECT run_id, rank, task_type, dur_ns, hbm_bytes FROM kernel_bytes WHERE NOT is_comm
), k AS (
    SELECT run_id, rank, count(*) AS compute_kernels, sum(dur_ns) AS compute_ns, sum(hbm_bytes) AS hbm_bytes,
           count(*) FILTER (WHERE upper(task_type) = 'AI_CPU') AS aicpu_kernels,
           coalesce(sum(dur_ns) FILTER (WHERE upper(task_type) = 'AI_CPU'), 0) AS aicpu_ns
    FROM kb GROUP BY run_id, rank
), kl AS (
    SELECT DISTINCT run_id, rank FROM kernels WHERE coalesce(task_type, '') <> 'cuda_profiler_range'
), sc AS (
    SELECT run_id, rank, sum(computing_ns) AS step_computing_ns FROM (
        SELECT run_id, rank, computing_ns FROM steps WHERE step IS NOT NULL AND computing_ns IS NOT NULL
        QUALIFY row_number() OVER (PARTITION BY run_id, rank, step ORDER BY source) = 1)
    GROUP BY run_id, rank
), w AS (
    SELECT run_id, rank, count(*) AS steps, sum(win_end - win_start) AS window_ns FROM step_windows GROUP BY run_id, rank
), c AS (
    SELECT run_id, rank, count(*) AS collectives,
           count(*) FILTER (WHERE last_rank = rank AND last_arrival_ns > first_arrival_ns) AS last_arrivals,
           sum(ts_ns - first_arrival_ns) AS lateness_ns,
           sum(CASE WHEN last_rank <> rank AND last_arrival_ns > ts_ns THEN least(last_arrival_ns, end_ns) - ts_ns ELSE 0 END) AS peer_wait_ns
    FROM comm_events
    WHERE NOT is_p2p AND types_agree AND n_ranks > 1
    GROUP BY run_id, rank
), ranks AS (
    SELECT run_id, rank FROM k UNION SELECT run_id, rank FROM w UNION SELECT run_id, rank FROM c
    UNION SELECT run_id, rank FROM sc
)
SELECT r.run_id, r.rank, coalesce(w.steps, 0)::BIGINT AS steps, coalesce(w.window_ns, 0)::BIGINT AS window_ns,
       kl.rank IS NOT NULL AS kernel_list,
       -- a rank without a task list did not compute nothing: its compute is not recorded
       CASE WHEN kl.rank IS NOT NULL THEN coalesce(k.compute_kernels, 0) END::BIGINT AS compute_kernels,
       CASE WHEN kl.rank IS NOT NULL THEN coalesce(k.compute_ns, 0) END::BIGINT AS compute_ns,
       sc.step_computing_ns::BIGINT AS step_computing_ns,
       round(k.hbm_bytes)::BIGINT AS hbm_bytes,
       CASE WHEN kl.rank IS NOT NULL THEN coalesce(k.aicpu_kernels, 0) END::BIGINT AS aicpu_kernels,
       CASE WHEN kl.rank IS NOT NULL THEN coalesce(k.aicpu_ns, 0) END::BIGINT AS aicpu_ns, coalesce(c.collectives, 0)::BIGINT AS collectives,
       coalesce(c.last_arrivals, 0)::BIGINT AS last_arrivals, coalesce(c.lateness_ns, 0)::BIGINT AS lateness_ns,
       coalesce(c.peer_wait_ns, 0)::BIGINT AS peer_wait_ns
FROM ranks r
LEFT JOIN k ON k.run_id = r.run_id AND k.rank = r.rank
LEFT JOIN kl ON kl.run_id = r.run_id AND kl.rank = r.rank
LEFT JOIN sc ON sc.run_id = r.run_id AND sc.rank = r.rank
LEFT JOIN w ON w.run_id = r.run_id AND w.rank = r.rank
LEFT JOIN c ON c.run_id = r.run_id AND c.rank = r.rank
ORDER BY r.run_id, r.rank;
