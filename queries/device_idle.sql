-- name: device_idle
-- description: When the device sits idle inside the steps (before the first device op, between ops, after the last) and what the host was doing then: data loading, host->device copies, synchronisation, or something else; plus host->device copy kernels not overlapped with compute (the article's prefetch, and the profiler's Free time with its causes).
-- param: loading_regex VARCHAR = '(?i)(enumerate\(DataLoader\)|dataloader\.py|DataLoaderIter|_next_data|fetch\(|collate)' -- host events that load input data
-- param: copy_regex VARCHAR = '(?i)(aclrtMemcpy|acl_memcpy_host_to_device|aten::_to_copy|^aten::to$|cudaMemcpy|Memcpy HtoD|pin_memory)' -- host events that copy data to the device
-- param: sync_regex VARCHAR = '(?i)(synchroni[sz]e|aten::item|_local_scalar_dense|aten::nonzero|aclrtSynchronize)' -- host events that wait for the device
-- rank_filter: output
-- column: run_id VARCHAR               -- run
-- column: scope VARCHAR                -- run | rank | step: what the row aggregates
-- column: rank INTEGER                 -- rank (null for scope run)
-- column: step BIGINT                  -- step (scope step only)
-- column: steps BIGINT                 -- rank-steps aggregated in the row
-- column: window_ns BIGINT             -- wall time of the step windows (see _helpers.sql _step_windows), ns
-- column: busy_ns BIGINT               -- time with a compute kernel, a copy kernel or a communication op running, ns
-- column: preparing_ns BIGINT          -- device idle from the window start to the first device activity, ns
-- column: free_ns BIGINT               -- device idle between the first and last device activity (the profiler's Free), ns
-- column: tail_ns BIGINT               -- device idle after the last device activity, ns
-- column: free_gaps BIGINT             -- idle gaps between the first and last device activity
-- column: largest_free_gap_ns BIGINT   -- the longest of those gaps, ns
-- column: idle_loading_ns BIGINT       -- device idle (preparing, free or tail) while a data-loading host event runs, ns
-- column: idle_host_copy_ns BIGINT     -- device idle while a host->device copy call runs (and no loading), ns
-- column: idle_sync_ns BIGINT          -- device idle while the host waits for the device (and no loading or copy), ns
-- column: idle_other_ns BIGINT         -- the rest of the device idle time: the host busy elsewhere (Python, launches) or not recorded, ns
-- column: free_loading_ns BIGINT       -- the part of free_ns while data loading runs, ns
-- column: free_host_copy_ns BIGINT     -- the part of free_ns while a host->device copy runs, ns
-- column: free_sync_ns BIGINT          -- the part of free_ns while the host synchronises, ns
-- column: loading_ns BIGINT            -- data-loading host time inside the windows (nested events counted once), ns
-- column: device_copy_ns BIGINT        -- host->device copy kernels' time inside the windows (GPU memcpy HtoD; none for torch_npu text dumps), ns
-- column: copy_exposed_ns BIGINT       -- copy kernels running while no compute kernel runs, ns
--
-- Definitions: device activity = compute kernels, host->device copy kernels (task type memcpy with HtoD in the
-- name) and communication ops (_helpers.sql _comm_events); the timeline is cut at every start and end of
-- those, of the classified host events and of the step windows (a sweep, nested events counted once). Idle time
-- is split in one order: loading first, then copy, then sync, then other. Host events are matched by name with
-- the three regexes (params); host and device share one clock in the dumps traceql reads.
WITH win AS MATERIALIZED (
    SELECT * FROM _step_windows()
), k AS (
    SELECT run_id, rank, ts_ns AS s, ts_ns + dur_ns AS e,
           NOT _is_comm(is_comm, task_type, name)
               AND (task_type ILIKE '%memcpy%' OR name ILIKE 'memcpy%' OR name = 'MEMCPY_ASYNC')
               AND (name ILIKE '%htod%' OR name ILIKE '%h2d%' OR name ILIKE '%host to device%' OR name = 'MEMCPY_ASYNC') AS is_copy,
           _is_comm(is_comm, task_type, name) AS is_comm
    FROM kernels WHERE ts_ns IS NOT NULL AND dur_ns > 0
), h AS (
    SELECT run_id, rank, ts_ns AS s, ts_ns + dur_ns AS e,
           regexp_matches(name, $loading_regex) AS l, regexp_matches(name, $copy_regex) AS c,
           regexp_matches(name, $sync_regex) AS y
    FROM host_ops
    WHERE ts_ns IS NOT NULL AND dur_ns > 0
      AND (regexp_matches(name, $loading_regex) OR regexp_matches(name, $copy_regex) OR regexp_matches(name, $sync_regex))
), ev AS (
    SELECT run_id, rank, s AS t, 1 AS dc, 0 AS dp, 0 AS dm, 0 AS dl, 0 AS dh, 0 AS dy FROM k WHERE NOT is_comm AND NOT is_copy
    UNION ALL SELECT run_id, rank, e, -1, 0, 0, 0, 0, 0 FROM k WHERE NOT is_comm AND NOT is_copy
    UNION ALL SELECT run_id, rank, s, 0, 1, 0, 0, 0, 0 FROM k WHERE is_copy
    UNION ALL SELECT run_id, rank, e, 0, -1, 0, 0, 0, 0 FROM k WHERE is_copy
    UNION ALL SELECT run_id, rank, ts_ns, 0, 0, 1, 0, 0, 0 FROM _comm_events() WHERE dur_ns > 0
    UNION ALL SELECT run_id, rank, end_ns, 0, 0, -1, 0, 0, 0 FROM _comm_events() WHERE dur_ns > 0
    UNION ALL SELECT run_id, rank, s, 0, 0, 0, l::INTEGER, c::INTEGER, y::INTEGER FROM h
    UNION ALL SELECT run_id, rank, e, 0, 0, 0, -l::INTEGER, -c::INTEGER, -y::INTEGER FROM h
    UNION ALL SELECT run_id, rank, win_start, 0, 0, 0, 0, 0, 0 FROM win
    UNION ALL SELECT run_id, rank, win_end, 0, 0, 0, 0, 0, 0 FROM win
), pts AS (
    SELECT run_id, rank, t, sum(dc) AS dc, sum(dp) AS dp, sum(dm) AS dm, sum(dl) AS dl, sum(dh) AS dh, sum(dy) AS dy
    FROM ev GROUP BY run_id, rank, t
), seg AS (
    SELECT run_id, rank, t AS t0, lead(t) OVER w AS t1,
           sum(dc) OVER c AS nc, sum(dp) OVER c AS np, sum(dm) OVER c AS nm,
           sum(dl) OVER c AS nl, sum(dh) OVER c AS nh, sum(dy) OVER c AS ny
    FROM pts
    WINDOW w AS (PARTITION BY run_id, rank ORDER BY t),
           c AS (PARTITION BY run_id, rank ORDER BY t ROWS UNBOUNDED PRECEDING)
), sw AS (
    SELECT seg.*, win.step, seg.t1 - seg.t0 AS d,
           seg.nc = 0 AND seg.np = 0 AND seg.nm = 0 AS idle
    FROM seg
    ASOF JOIN win ON seg.run_id = win.run_id AND seg.rank = win.rank AND seg.t0 >= win.win_start
    WHERE seg.t1 IS NOT NULL AND seg.t1 > seg.t0 AND seg.t0 < win.win_end
), sb AS (
    SELECT *,
           min(t0) FILTER (WHERE NOT idle) OVER p AS first_busy,
           max(t1) FILTER (WHERE NOT idle) OVER p AS last_busy,
           sum(CASE WHEN idle THEN 0 ELSE 1 END) OVER (p ORDER BY t0 ROWS UNBOUNDED PRECEDING) AS island
    FROM sw
    WINDOW p AS (PARTITION BY run_id, rank, step)
), cls AS (
    SELECT *,
           CASE WHEN NOT idle THEN NULL
                WHEN first_busy IS NULL OR t1 <= first_busy THEN 'preparing'
                WHEN t0 >= last_busy THEN 'tail' ELSE 'free' END AS kind,
           CASE WHEN NOT idle THEN NULL WHEN nl > 0 THEN 'loading' WHEN nh > 0 THEN 'copy' WHEN ny > 0 THEN 'sync'
                ELSE 'other' END AS cause
    FROM sb
), gaps AS (
    SELECT run_id, rank, step, island, sum(d) AS gap_ns FROM cls WHERE kind = 'free' GROUP BY ALL
), per_step AS (
    SELECT c.run_id, c.rank, c.step,
           sum(c.d) AS window_ns,
           sum(c.d) FILTER (WHERE NOT c.idle) AS busy_ns,
           sum(c.d) FILTER (WHERE c.kind = 'preparing') AS preparing_ns,
           sum(c.d) FILTER (WHERE c.kind = 'free') AS free_ns,
           sum(c.d) FILTER (WHERE c.kind = 'tail') AS tail_ns,
           sum(c.d) FILTER (WHERE c.cause = 'loading') AS idle_loading_ns,
           sum(c.d) FILTER (WHERE c.cause = 'copy') AS idle_host_copy_ns,
           sum(c.d) FILTER (WHERE c.cause = 'sync') AS idle_sync_ns,
           sum(c.d) FILTER (WHERE c.cause = 'other') AS idle_other_ns,
           sum(c.d) FILTER (WHERE c.kind = 'free' AND c.cause = 'loading') AS free_loading_ns,
           sum(c.d) FILTER (WHERE c.kind = 'free' AND c.cause = 'copy') AS free_host_copy_ns,
           sum(c.d) FILTER (WHERE c.kind = 'free' AND c.cause = 'sync') AS free_sync_ns,
           sum(c.d) FILTER (WHERE c.nl > 0) AS loading_ns,
           sum(c.d) FILTER (WHERE c.np > 0) AS device_copy_ns,
           sum(c.d) FILTER (WHERE c.np > 0 AND c.nc = 0) AS copy_exposed_ns
    FROM cls c GROUP BY c.run_id, c.rank, c.step
), gap_step AS (
    SELECT run_id, rank, step, count(*) AS free_gaps, max(gap_ns) AS largest_free_gap_ns FROM gaps GROUP BY ALL
), j AS (
    SELECT p.*, coalesce(g.free_gaps, 0) AS free_gaps, g.largest_free_gap_ns
    FROM per_step p LEFT JOIN gap_step g ON g.run_id = p.run_id AND g.rank = p.rank AND g.step IS NOT DISTINCT FROM p.step
), agg AS (
    SELECT run_id, rank, step,
           CASE WHEN grouping(rank) = 1 THEN 'run' WHEN grouping(step) = 1 THEN 'rank' ELSE 'step' END AS scope,
           count(*) AS steps,
           sum(window_ns) AS window_ns, sum(busy_ns) AS busy_ns, sum(preparing_ns) AS preparing_ns,
           sum(free_ns) AS free_ns, sum(tail_ns) AS tail_ns, sum(free_gaps) AS free_gaps,
           max(largest_free_gap_ns) AS largest_free_gap_ns,
           sum(idle_loading_ns) AS idle_loading_ns, sum(idle_host_copy_ns) AS idle_host_copy_ns,
           sum(idle_sync_ns) AS idle_sync_ns, sum(idle_other_ns) AS idle_other_ns,
           sum(free_loading_ns) AS free_loading_ns, sum(free_host_copy_ns) AS free_host_copy_ns,
           sum(free_sync_ns) AS free_sync_ns, sum(loading_ns) AS loading_ns,
           sum(device_copy_ns) AS device_copy_ns, sum(copy_exposed_ns) AS copy_exposed_ns
    FROM j
    GROUP BY GROUPING SETS ((run_id), (run_id, rank), (run_id, rank, step))
)
SELECT ru.run_id, coalesce(a.scope, 'run') AS scope, a.rank, a.step, coalesce(a.steps, 0)::BIGINT AS steps,
       coalesce(a.window_ns, 0)::BIGINT AS window_ns, coalesce(a.busy_ns, 0)::BIGINT AS busy_ns,
       coalesce(a.preparing_ns, 0)::BIGINT AS preparing_ns, coalesce(a.free_ns, 0)::BIGINT AS free_ns,
       coalesce(a.tail_ns, 0)::BIGINT AS tail_ns, coalesce(a.free_gaps, 0)::BIGINT AS free_gaps,
       a.largest_free_gap_ns::BIGINT AS largest_free_gap_ns,
       coalesce(a.idle_loading_ns, 0)::BIGINT AS idle_loading_ns, coalesce(a.idle_host_copy_ns, 0)::BIGINT AS idle_host_copy_ns,
       coalesce(a.idle_sync_ns, 0)::BIGINT AS idle_sync_ns, coalesce(a.idle_other_ns, 0)::BIGINT AS idle_other_ns,
       coalesce(a.free_loading_ns, 0)::BIGINT AS free_loading_ns, coalesce(a.free_host_copy_ns, 0)::BIGINT AS free_host_copy_ns,
       coalesce(a.free_sync_ns, 0)::BIGINT AS free_sync_ns, coalesce(a.loading_ns, 0)::BIGINT AS loading_ns,
       coalesce(a.device_copy_ns, 0)::BIGINT AS device_copy_ns, coalesce(a.copy_exposed_ns, 0)::BIGINT AS copy_exposed_ns
FROM runs ru LEFT JOIN agg a ON a.run_id = ru.run_id
ORDER BY ru.run_id, a.rank NULLS FIRST, a.step NULLS FIRST, a.scope = 'step';
