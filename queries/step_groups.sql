-- name: step_groups
-- description: Step time per rank and per group of consecutive steps (at most max_groups groups per rank, so charts stay small on long runs): the wait-attribution parts and the step_trace split, with the profiler's own step_trace sums beside them.
-- param: max_groups INTEGER = 60       -- at most this many step groups per rank (consecutive steps are merged evenly)
-- param: sat_threshold DOUBLE = 0.8    -- HBM utilisation at or above which compute counts as HBM-saturated
-- param: peak_hbm_bps DOUBLE = NULL    -- device HBM peak, bytes/s (traceql fills it from the device preset)
-- rank_filter: output
-- column: run_id VARCHAR               -- run
-- column: scope VARCHAR                -- rank (all steps of a rank) | group (consecutive steps of a rank)
-- column: rank INTEGER                 -- rank
-- column: grp BIGINT                   -- group index within the rank, 0-based in time order (null for scope rank)
-- column: first_step BIGINT            -- first step id of the group
-- column: last_step BIGINT             -- last step id of the group
-- column: label VARCHAR                -- "first-last" step ids ("7" for a one-step group; "all" for scope rank)
-- column: steps BIGINT                 -- step windows in the row
-- column: window_ns BIGINT             -- wall time of those windows, ns; the eight wait parts add up to it
-- column: compute_hbm_saturated_ns BIGINT -- compute while device HBM bandwidth >= sat_threshold x peak (as wait_attribution)
-- column: compute_other_ns BIGINT      -- the rest of the compute time (as wait_attribution)
-- column: comm_transit_ns BIGINT       -- exposed communication moving data (as wait_attribution)
-- column: comm_wait_peer_hbm_ns BIGINT -- exposed communication waiting on a peer in HBM-saturated compute (as wait_attribution)
-- column: comm_wait_other_ns BIGINT    -- other exposed communication waiting (as wait_attribution)
-- column: comm_unsplit_ns BIGINT       -- exposed communication whose moving / waiting split the dump does not record (as wait_attribution)
-- column: idle_ns BIGINT               -- nothing running between the first and last device op (as wait_attribution; = step_breakdown free)
-- column: host_ns BIGINT               -- before the first / after the last device op (as wait_attribution; = preparing + tail)
-- column: computing_ns BIGINT          -- at least one compute kernel running (step_breakdown computing)
-- column: comm_not_overlapped_ns BIGINT -- communication with no compute running (step_breakdown)
-- column: overlapped_ns BIGINT         -- communication hidden under compute (step_breakdown; part of computing_ns)
-- column: preparing_ns BIGINT          -- window start to the first device op (step_breakdown)
-- column: tail_ns BIGINT               -- last device op end to the window end (step_breakdown)
-- column: profiler_step_ns BIGINT      -- steps.dur_ns summed over the row's steps; null unless every step has it
-- column: profiler_computing_ns BIGINT -- steps.computing_ns (step_trace_time.csv Computing), summed likewise
-- column: profiler_comm_not_overlapped_ns BIGINT -- steps.comm_not_overlapped_ns, summed likewise
-- column: profiler_free_ns BIGINT      -- steps.free_ns, summed likewise
-- column: profiler_preparing_ns BIGINT -- steps.preparing_ns, summed likewise
--
-- Definitions: one pass over _helpers.sql _timeline (the timeline wait_attribution and step_breakdown read),
-- classified exactly as those two queries do, so for every rank the scope-rank row equals wait_attribution's
-- rank row (seven parts) and the sums of step_breakdown's rows (computing, not overlapped, overlapped, free,
-- preparing, tail). Groups: a rank's n step windows in time order are cut into ceil(n / max_groups)-step runs.
WITH win AS (
    SELECT run_id, rank, step,
           row_number() OVER (PARTITION BY run_id, rank ORDER BY win_start, step) - 1 AS idx,
           count(*) OVER (PARTITION BY run_id, rank) AS n
    FROM step_windows
), grp AS (
    SELECT run_id, rank, step, idx // greatest(ceil(n / greatest($max_groups::INTEGER, 1))::BIGINT, 1) AS grp
    FROM win
), parts AS (
    -- the same per-segment split as wait_attribution and step_breakdown (_helpers.sql _timeline_parts), summed
    -- per step window first: the group and the profiler's numbers are then joined to ~30k steps, not to the
    -- ~2M segments of an 8-rank cluster
    SELECT run_id, rank, step,
           sum(dur_ns) AS wall, sum(c_sat) AS c_sat, sum(c_other) AS c_other, sum(m_transit) AS m_transit,
           sum(m_peer) AS m_peer, sum(m_other) AS m_other, sum(m_unsplit) AS m_unsplit, sum(idle) AS idle, sum(host) AS host,
           sum(computing) AS computing, sum(comm_no) AS comm_no, sum(overlapped) AS overlapped,
           sum(preparing) AS preparing, sum(tail) AS tail
    FROM _timeline_parts($sat_threshold::DOUBLE, $peak_hbm_bps::DOUBLE)
    GROUP BY run_id, rank, step
), st AS (
    SELECT * FROM steps
    QUALIFY row_number() OVER (PARTITION BY run_id, rank, step ORDER BY computing_ns IS NULL, source, ts_ns) = 1
), per_step AS (
    -- one row per step window: its parts, and the profiler's step_trace numbers for it
    SELECT p.*, g.grp,
           st.dur_ns AS p_step, st.computing_ns AS p_comp, st.comm_not_overlapped_ns AS p_comm_no,
           st.free_ns AS p_free, st.preparing_ns AS p_prep
    FROM parts p
    JOIN grp g ON g.run_id = p.run_id AND g.rank = p.rank AND g.step IS NOT DISTINCT FROM p.step
    LEFT JOIN st ON st.run_id = p.run_id AND st.rank = p.rank AND st.step IS NOT DISTINCT FROM p.step
), agg AS (
    SELECT run_id, rank, grp,
           CASE WHEN grouping(grp) = 1 THEN 'rank' ELSE 'group' END AS scope,
           min(step) AS first_step, max(step) AS last_step, count(*) AS steps,
           sum(wall)::BIGINT AS window_ns,
           sum(c_sat)::BIGINT AS compute_hbm_saturated_ns, sum(c_other)::BIGINT AS compute_other_ns,
           round(sum(m_transit))::BIGINT AS comm_transit_ns, round(sum(m_peer))::BIGINT AS comm_wait_peer_hbm_ns,
           round(sum(m_other))::BIGINT AS comm_wait_other_ns, round(sum(m_unsplit))::BIGINT AS comm_unsplit_ns,
           sum(idle)::BIGINT AS idle_ns, sum(host)::BIGINT AS host_ns,
           sum(computing)::BIGINT AS computing_ns, sum(comm_no)::BIGINT AS comm_not_overlapped_ns,
           sum(overlapped)::BIGINT AS overlapped_ns, sum(preparing)::BIGINT AS preparing_ns, sum(tail)::BIGINT AS tail_ns,
           CASE WHEN count(p_step) = count(*) THEN sum(p_step)::BIGINT END AS profiler_step_ns,
           CASE WHEN count(p_comp) = count(*) THEN sum(p_comp)::BIGINT END AS profiler_computing_ns,
           CASE WHEN count(p_comm_no) = count(*) THEN sum(p_comm_no)::BIGINT END AS profiler_comm_not_overlapped_ns,
           CASE WHEN count(p_free) = count(*) THEN sum(p_free)::BIGINT END AS profiler_free_ns,
           CASE WHEN count(p_prep) = count(*) THEN sum(p_prep)::BIGINT END AS profiler_preparing_ns
    FROM per_step
    GROUP BY GROUPING SETS ((run_id, rank), (run_id, rank, grp))
)
SELECT run_id, scope, rank, grp, first_step, last_step,
       CASE WHEN scope = 'rank' THEN 'all'
            WHEN first_step IS NULL THEN 'no step id'
            WHEN first_step = last_step THEN first_step::VARCHAR
            ELSE first_step::VARCHAR || '-' || last_step::VARCHAR END AS label,
       steps, window_ns, compute_hbm_saturated_ns, compute_other_ns, comm_transit_ns, comm_wait_peer_hbm_ns,
       comm_wait_other_ns, comm_unsplit_ns, idle_ns, host_ns, computing_ns, comm_not_overlapped_ns, overlapped_ns, preparing_ns,
       tail_ns, profiler_step_ns, profiler_computing_ns, profiler_comm_not_overlapped_ns, profiler_free_ns,
       profiler_preparing_ns
FROM agg
ORDER BY run_id, rank, scope = 'group', grp;
