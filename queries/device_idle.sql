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
-- column: window_ns BIGINT             -- wall time of the step windows (see derived/step_windows.sql), ns
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
-- name, _helpers.sql _is_h2d_copy) and communication ops (comm_events), as cut into the step timeline by
-- timeline_base (stored by traceql.derive, with idle-time prefix sums per kind); the classified host events are swept
-- alone (nested events counted once), cut at the step windows, and the idle time inside each host piece is read
-- from the prefix sums (two ASOF look-ups), so the kernel timeline is never swept again. Idle time
-- is split in one order: loading first, then copy, then sync, then other. Host events are matched by name with
-- the three regexes (params); host and device share one clock in the dumps traceql reads.
WITH tl AS NOT MATERIALIZED (
    -- the stored step timeline (derived/timeline_base.sql): compute (copies apart), copies, communication,
    -- and the idle kind of each segment with nothing running (not materialised: each reader below scans the
    -- Parquet for its own columns and rows, cheaper than copying ~2M rows of all of them once)
    SELECT run_id, rank, step, win_start, t0, t1, dur_ns AS d, n_comp - n_copy AS nc, n_copy AS np,
           idle_kind AS kind, idle_kind IS NOT NULL AS idle, prep_before_ns, free_before_ns, tail_before_ns, gap_no
    FROM timeline_base
), win AS MATERIALIZED (
    SELECT * FROM step_windows
), names AS MATERIALIZED (
    -- host-op classes once per distinct name (materialised: else the optimiser pushes the regexes below the
    -- DISTINCT, onto every host op)
    SELECT name, regexp_matches(name, $loading_regex) AS l, regexp_matches(name, $copy_regex) AS c,
           regexp_matches(name, $sync_regex) AS y
    FROM (SELECT DISTINCT name FROM host_ops WHERE ts_ns IS NOT NULL AND dur_ns > 0)
), h AS (
    SELECT o.run_id, o.rank, o.ts_ns AS s, o.ts_ns + o.dur_ns AS e, n.l, n.c, n.y
    FROM host_ops o JOIN names n ON n.name = o.name
    WHERE o.ts_ns IS NOT NULL AND o.dur_ns > 0 AND (n.l OR n.c OR n.y)
), ev AS (
    -- a sweep over the classified host ops alone, cut at the step windows' edges (small: no kernels)
    SELECT run_id, rank, s AS t, l::INTEGER AS dl, c::INTEGER AS dh, y::INTEGER AS dy FROM h
    UNION ALL SELECT run_id, rank, e, -l::INTEGER, -c::INTEGER, -y::INTEGER FROM h
    UNION ALL SELECT run_id, rank, win_start, 0, 0, 0 FROM win
    UNION ALL SELECT run_id, rank, win_end, 0, 0, 0 FROM win
), pts AS (
    SELECT run_id, rank, t, sum(dl) AS dl, sum(dh) AS dh, sum(dy) AS dy FROM ev GROUP BY run_id, rank, t
), pc AS (
    SELECT run_id, rank, t AS p0, lead(t) OVER w AS p1,
           sum(dl) OVER c AS nl, sum(dh) OVER c AS nh, sum(dy) OVER c AS ny
    FROM pts
    WINDOW w AS (PARTITION BY run_id, rank ORDER BY t),
           c AS (PARTITION BY run_id, rank ORDER BY t ROWS UNBOUNDED PRECEDING)
), pw AS (
    -- host pieces inside a step window with a class (idle time in them is loading > copy > sync, in that order)
    SELECT pc.*, win.step, pc.p1 - pc.p0 AS d,
           CASE WHEN nl > 0 THEN 'loading' WHEN nh > 0 THEN 'copy' WHEN ny > 0 THEN 'sync' END AS cause
    FROM pc ASOF JOIN win ON pc.run_id = win.run_id AND pc.rank = win.rank AND pc.p0 >= win.win_start
    WHERE pc.p1 IS NOT NULL AND pc.p1 > pc.p0 AND pc.p0 < win.win_end AND (nl > 0 OR nh > 0 OR ny > 0)
), pwin AS (
    SELECT DISTINCT run_id, rank, step FROM pw
), tli AS (
    -- what the look-up below searches: the idle segments of the windows with host pieces, and each such
    -- window's first segment, whose prefix sums are the idle time before the window (an edge with no idle
    -- segment before it in its window lands there); the other windows' segments are never found, and
    -- leaving them out shrinks the look-up's sort to the windows the host pieces are in
    SELECT t.* FROM tl t
    SEMI JOIN pwin w ON w.run_id = t.run_id AND w.rank = t.rank AND w.step IS NOT DISTINCT FROM t.step
    WHERE t.idle OR t.t0 = t.win_start
), edge_idle AS (
    -- idle time of each kind on the rank before each piece edge: the last of those segments starting at or
    -- before the edge + its prefix sums (busy segments add no idle time, so the look-up skips them; none yet:
    -- 0); both edges in one ASOF pass
    SELECT q.run_id, q.rank, q.p0, q.edge,
           coalesce(s.prep_before_ns + CASE WHEN s.kind = 'preparing' THEN least(q.p, s.t1) - s.t0 ELSE 0 END, 0) AS prep,
           coalesce(s.free_before_ns + CASE WHEN s.kind = 'free' THEN least(q.p, s.t1) - s.t0 ELSE 0 END, 0) AS free,
           coalesce(s.tail_before_ns + CASE WHEN s.kind = 'tail' THEN least(q.p, s.t1) - s.t0 ELSE 0 END, 0) AS tail
    FROM (SELECT run_id, rank, p0, p0 AS p, 0 AS edge FROM pw UNION ALL SELECT run_id, rank, p0, p1, 1 FROM pw) q
    ASOF LEFT JOIN tli s ON s.run_id = q.run_id AND s.rank = q.rank AND q.p >= s.t0
), pi AS (
    SELECT pw.*, b.free - a.free AS free_i, (b.prep - a.prep) + (b.free - a.free) + (b.tail - a.tail) AS idle_i
    FROM pw
    JOIN edge_idle a ON a.run_id = pw.run_id AND a.rank = pw.rank AND a.p0 = pw.p0 AND a.edge = 0
    JOIN edge_idle b ON b.run_id = pw.run_id AND b.rank = pw.rank AND b.p0 = pw.p0 AND b.edge = 1
), gaps AS (
    -- Free gaps: the touching free segments between two busy ones, named by timeline_base's gap_no
    SELECT run_id, rank, step, sum(d) AS gap_ns FROM tl WHERE kind = 'free' GROUP BY run_id, rank, step, gap_no
), per_tl AS (
    SELECT run_id, rank, step,
           sum(d) AS window_ns,
           sum(d) FILTER (WHERE NOT idle) AS busy_ns,
           sum(d) FILTER (WHERE kind = 'preparing') AS preparing_ns,
           sum(d) FILTER (WHERE kind = 'free') AS free_ns,
           sum(d) FILTER (WHERE kind = 'tail') AS tail_ns,
           sum(d) FILTER (WHERE idle) AS idle_ns,
           sum(d) FILTER (WHERE np > 0) AS device_copy_ns,
           sum(d) FILTER (WHERE np > 0 AND nc = 0) AS copy_exposed_ns
    FROM tl GROUP BY run_id, rank, step
), per_piece AS (
    SELECT run_id, rank, step,
           sum(idle_i) FILTER (WHERE cause = 'loading') AS idle_loading_ns,
           sum(idle_i) FILTER (WHERE cause = 'copy') AS idle_host_copy_ns,
           sum(idle_i) FILTER (WHERE cause = 'sync') AS idle_sync_ns,
           sum(free_i) FILTER (WHERE cause = 'loading') AS free_loading_ns,
           sum(free_i) FILTER (WHERE cause = 'copy') AS free_host_copy_ns,
           sum(free_i) FILTER (WHERE cause = 'sync') AS free_sync_ns,
           sum(d) FILTER (WHERE nl > 0) AS loading_ns
    FROM pi GROUP BY run_id, rank, step
), per_step AS (
    SELECT t.run_id, t.rank, t.step, t.window_ns, t.busy_ns, t.preparing_ns, t.free_ns, t.tail_ns,
           nullif(p.idle_loading_ns, 0) AS idle_loading_ns, nullif(p.idle_host_copy_ns, 0) AS idle_host_copy_ns,
           nullif(p.idle_sync_ns, 0) AS idle_sync_ns,
           nullif(coalesce(t.idle_ns, 0) - coalesce(p.idle_loading_ns, 0) - coalesce(p.idle_host_copy_ns, 0)
                  - coalesce(p.idle_sync_ns, 0), 0) AS idle_other_ns,
           nullif(p.free_loading_ns, 0) AS free_loading_ns, nullif(p.free_host_copy_ns, 0) AS free_host_copy_ns,
           nullif(p.free_sync_ns, 0) AS free_sync_ns, p.loading_ns,
           t.device_copy_ns, t.copy_exposed_ns
    FROM per_tl t
    LEFT JOIN per_piece p ON p.run_id = t.run_id AND p.rank = t.rank AND p.step IS NOT DISTINCT FROM t.step
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
