-- name: hbm_utilization
-- description: Time-weighted HBM bandwidth utilisation vs the device peak for the run, each rank and each step, with what it rests on (measured PMU bytes, sampled counters and their period, or a modeled lower bound), the share of compute time above the bottleneck line (80%) and below the not-bandwidth line (70%).
-- param: sat_threshold DOUBLE = 0.8    -- utilisation at or above which HBM counts as saturated (the article's bottleneck line)
-- param: low_threshold DOUBLE = 0.7    -- utilisation below which a run is not bandwidth-bound (the article's checklist line)
-- param: peak_hbm_bps DOUBLE = NULL    -- device HBM peak, bytes/s (traceql fills it from the device preset)
-- column: run_id VARCHAR               -- run
-- column: scope VARCHAR                -- run | rank | step: what the row aggregates
-- column: rank INTEGER                 -- rank (null for scope run)
-- column: step BIGINT                  -- step (scope step only; null also when the dump has no step ids)
-- column: window_ns BIGINT             -- wall time covered: the step windows (see _helpers.sql), summed
-- column: busy_ns BIGINT               -- time with at least one compute kernel running
-- column: hbm_bytes BIGINT             -- HBM bytes moved in the windows (measured or sampled; null when only modeled)
-- column: covered_ns BIGINT            -- time the bandwidth figures rest on: the windows, or (sampled) the part of them inside the counter samples' span
-- column: avg_bw_bps DOUBLE            -- hbm_bytes / covered time, bytes/s
-- column: utilization DOUBLE           -- avg_bw_bps / peak, 0..1: time-weighted over the covered window (idle counts as 0); for sampled counters the time-weighted mean of the counters' step function where samples exist
-- column: busy_bw_bps DOUBLE           -- mean device bandwidth while compute runs, bytes/s (null when the evidence does not resolve compute time)
-- column: busy_utilization DOUBLE      -- busy_bw_bps / peak, 0..1: time-weighted over compute time (the article's number); measured, or sampled with a period that resolves the kernels; else null
-- column: busy_utilization_max DOUBLE  -- sampled counters only: the most busy_utilization can be (every sampled byte moved while compute ran: hbm_bytes / busy time / peak); the lines can be tested against it when it is below them
-- column: max_utilization DOUBLE       -- highest instantaneous utilisation, 0..1 (for sampled counters: the highest sample)
-- column: frac_busy_saturated DOUBLE   -- share of compute time at or above sat_threshold x peak, 0..1 (measured or sampled only)
-- column: frac_busy_low DOUBLE         -- share of compute time below low_threshold x peak, 0..1 (measured or sampled only)
-- column: frac_window_saturated DOUBLE -- share of the whole window at or above sat_threshold x peak, 0..1 (measured or sampled only)
-- column: peak_hbm_bps DOUBLE          -- the peak used, bytes/s
-- column: hbm_bytes_source VARCHAR     -- pmu | sampled | modeled when every kernel with bytes in the scope has that source, else mixed
-- column: evidence VARCHAR             -- the grade of the bandwidth figures: measured (per-task PMU) | sampled (HBM counters, see sample_period_ns) | modeled (tensor sizes: lower bound only) | mixed | none
-- column: sample_period_ns BIGINT      -- sampled: the counters' sampling period (median gap between samples of one series)
-- column: resolved_share DOUBLE        -- sampled: share of compute-kernel time in kernels the sampling resolves (period <= 2 x duration), 0..1
-- column: modeled_bytes BIGINT         -- modeled lower bound of the HBM bytes of the kernels in the windows (input + output tensors; kernels whose modeled bytes would exceed the peak left out)
-- column: modeled_utilization_lower DOUBLE -- modeled_bytes / window / peak: a lower bound, never tested against the lines
-- column: verdict VARCHAR              -- hbm-bound | borderline | not bandwidth-bound | unresolved (sampled counters too coarse to tell) | lower bound only (modeled); null without a peak
--
-- Definitions: the device bandwidth at an instant is derived/bw_segments.sql' bw_bps: with per-task PMU bytes,
-- the sum over running kernels of bytes / duration; with HBM counter samples and no PMU bytes, the counters'
-- step function (a sample holds for its period); cut at step-window edges. Utilisation at an instant = that
-- bandwidth / peak_hbm_bps; time-weighted means each constant piece counts by its length. Compute time =
-- instants with at least one non-communication kernel running. A counter sample is a mean over its period:
-- over compute time it resolves the bandwidth only when most compute time is in kernels not much shorter than
-- the period (resolved_share >= 0.8); otherwise busy_utilization is null and busy_utilization_max bounds it
-- from above. Modeled bytes (shapes x dtypes, no re-reads) are a lower bound: they are reported, never graded.
WITH seg AS (
    SELECT run_id, rank, step, n_comp, bw_bps, rank_source, bw_source, win_start, win_end, dur_ns AS wall_ns,
           -- sampled bandwidth is known only inside the counters' span: time outside it is not counted as 0
           CASE WHEN bw_source <> 'sampled' OR in_counter_span THEN dur_ns ELSE 0 END AS dur_ns,
           $peak_hbm_bps::DOUBLE AS peak,
           bw_bps >= $sat_threshold::DOUBLE * $peak_hbm_bps::DOUBLE AS above,
           bw_bps < $low_threshold::DOUBLE * $peak_hbm_bps::DOUBLE AS below
    FROM bw_segments
), kw AS (
    -- each kernel's step window: the window of its own step when that one holds its start (one hash look-up;
    -- the windows do not overlap, so it is the only window that does), else the last non-empty window
    -- starting at or before it (an ASOF join, which sorts its kernels: only those whose step did not say)
    SELECT k.run_id, k.rank, w.step, k.ts_ns, k.dur_ns, k.is_comm, k.modeled_read, k.modeled_write,
           k.counter_coverage, k.sample_period_ns
    FROM kernel_bytes k
    JOIN step_windows w ON w.run_id = k.run_id AND w.rank = k.rank AND w.step = k.step
         AND k.ts_ns >= w.win_start AND k.ts_ns < w.win_end
    UNION ALL
    SELECT k.run_id, k.rank, w.step, k.ts_ns, k.dur_ns, k.is_comm, k.modeled_read, k.modeled_write,
           k.counter_coverage, k.sample_period_ns
    FROM (SELECT * FROM kernel_bytes k ANTI JOIN step_windows w ON w.run_id = k.run_id AND w.rank = k.rank
              AND w.step = k.step AND k.ts_ns >= w.win_start AND k.ts_ns < w.win_end) k
    ASOF JOIN (SELECT * FROM step_windows WHERE win_end > win_start) w
         ON k.run_id = w.run_id AND k.rank = w.rank AND k.ts_ns >= w.win_start
    WHERE k.ts_ns < w.win_end
), kb AS (
    -- per rank and step: modeled bytes of the kernels in the windows, and how much compute time the counter
    -- sampling resolves
    SELECT k.run_id, k.rank, k.step,
           -- a kernel whose modeled bytes exceed the peak over its duration cannot be right: its bytes would
           -- make the "lower bound" no bound at all, so they are left out (traceql check: modeled_above_peak)
           sum(coalesce(k.modeled_read, 0) + coalesce(k.modeled_write, 0)) FILTER (
               WHERE NOT coalesce(k.dur_ns > 0 AND (coalesce(k.modeled_read, 0) + coalesce(k.modeled_write, 0)) * 1e9
                                  / k.dur_ns > $peak_hbm_bps::DOUBLE, false)) AS modeled_bytes,
           sum(k.dur_ns) FILTER (WHERE NOT k.is_comm AND k.counter_coverage = 'resolved') AS resolved_ns,
           sum(k.dur_ns) FILTER (WHERE NOT k.is_comm AND k.counter_coverage IS NOT NULL) AS covered_ns,
           any_value(k.sample_period_ns) AS sample_period_ns
    FROM kw k
    GROUP BY k.run_id, k.rank, k.step
), seg_step AS (
    -- one pass over the ~2M segments per step; the rank and run rows roll up these step rows (a grouping set
    -- over the segments themselves ran three aggregates over all of them)
    SELECT run_id, rank, step,
           sum(wall_ns) AS wall_ns,
           sum(wall_ns) FILTER (WHERE n_comp > 0) AS busy_wall_ns,
           sum(dur_ns) AS dur_ns,
           sum(dur_ns) FILTER (WHERE n_comp > 0) AS busy_dur_ns,
           sum(bw_bps * dur_ns / 1e9) AS bytes,
           sum(bw_bps * dur_ns / 1e9) FILTER (WHERE n_comp > 0) AS busy_bytes,
           max(bw_bps) AS max_bw,
           sum(dur_ns) FILTER (WHERE n_comp > 0 AND above) AS busy_above_ns,
           sum(dur_ns) FILTER (WHERE n_comp > 0 AND below) AS busy_below_ns,
           sum(dur_ns) FILTER (WHERE above) AS above_ns,
           any_value(peak) AS peak,
           min(rank_source) AS rs_min, max(rank_source) AS rs_max, count(rank_source) AS rs_n,
           min(bw_source) AS bs_min, max(bw_source) AS bs_max, count(bw_source) AS bs_n
    FROM seg
    GROUP BY run_id, rank, step
), agg AS (
    SELECT run_id, rank, step,
           CASE WHEN grouping(rank) = 1 THEN 'run' WHEN grouping(step) = 1 THEN 'rank' ELSE 'step' END AS scope,
           sum(wall_ns)::BIGINT AS window_ns,
           sum(busy_wall_ns)::BIGINT AS busy_ns,
           sum(dur_ns)::BIGINT AS covered_ns,
           sum(busy_dur_ns)::BIGINT AS covered_busy_ns,
           sum(bytes) AS bytes,
           sum(busy_bytes) AS busy_bytes,
           max(max_bw) AS max_bw,
           sum(busy_above_ns) AS busy_above_ns,
           sum(busy_below_ns) AS busy_below_ns,
           sum(above_ns) AS above_ns,
           any_value(peak) AS peak,
           CASE WHEN min(rs_min) = max(rs_max) THEN min(rs_min)
                WHEN sum(rs_n) > 0 THEN 'mixed' END AS hbm_bytes_source,
           CASE WHEN sum(bs_n) = 0 THEN 'none'
                WHEN min(bs_min) = max(bs_max) THEN CASE min(bs_min) WHEN 'pmu' THEN 'measured' ELSE min(bs_min) END
                ELSE 'mixed' END AS evidence
    FROM seg_step
    GROUP BY GROUPING SETS ((run_id), (run_id, rank), (run_id, rank, step))
), kagg AS (
    SELECT run_id, rank, step,
           CASE WHEN grouping(rank) = 1 THEN 'run' WHEN grouping(step) = 1 THEN 'rank' ELSE 'step' END AS scope,
           sum(modeled_bytes) AS modeled_bytes, sum(resolved_ns) AS resolved_ns, sum(covered_ns) AS covered_ns,
           max(sample_period_ns) AS sample_period_ns
    FROM kb
    GROUP BY GROUPING SETS ((run_id), (run_id, rank), (run_id, rank, step))
), g AS (
    -- what each scope's figures may claim: graded figures (measured; sampled and resolved) test the lines
    SELECT a.*, k.modeled_bytes, k.sample_period_ns,
           coalesce(k.resolved_ns, 0) / nullif(k.covered_ns, 0) AS resolved_share,
           a.evidence IN ('measured', 'sampled') AS graded,
           a.evidence = 'measured' OR (a.evidence = 'sampled' AND coalesce(k.resolved_ns, 0) >= 0.8 * k.covered_ns) AS busy_resolved
    FROM agg a
    LEFT JOIN kagg k ON k.run_id = a.run_id AND k.scope = a.scope AND k.rank IS NOT DISTINCT FROM a.rank
         AND k.step IS NOT DISTINCT FROM a.step
), res AS (
    SELECT a.run_id, a.scope, a.rank, a.step, a.window_ns, coalesce(a.busy_ns, 0) AS busy_ns,
           CASE WHEN a.graded THEN round(a.bytes)::BIGINT END AS hbm_bytes,
           a.covered_ns,
           CASE WHEN a.graded THEN a.bytes * 1e9 / nullif(a.covered_ns, 0) END AS avg_bw_bps,
           CASE WHEN a.graded THEN a.bytes * 1e9 / nullif(a.covered_ns, 0) / a.peak END AS utilization,
           CASE WHEN a.busy_resolved THEN a.busy_bytes * 1e9 / nullif(a.covered_busy_ns, 0) END AS busy_bw_bps,
           CASE WHEN a.busy_resolved THEN a.busy_bytes * 1e9 / nullif(a.covered_busy_ns, 0) / a.peak END AS busy_utilization,
           CASE WHEN a.evidence = 'sampled' AND NOT a.busy_resolved
                THEN a.bytes * 1e9 / nullif(a.covered_busy_ns, 0) / a.peak END AS busy_utilization_max,
           CASE WHEN a.graded THEN a.max_bw / a.peak END AS max_utilization,
           CASE WHEN a.peak IS NOT NULL AND a.busy_resolved THEN coalesce(a.busy_above_ns, 0) / nullif(a.covered_busy_ns, 0) END AS frac_busy_saturated,
           CASE WHEN a.peak IS NOT NULL AND a.busy_resolved THEN coalesce(a.busy_below_ns, 0) / nullif(a.covered_busy_ns, 0) END AS frac_busy_low,
           CASE WHEN a.peak IS NOT NULL AND a.graded THEN coalesce(a.above_ns, 0) / nullif(a.covered_ns, 0) END AS frac_window_saturated,
           a.peak AS peak_hbm_bps,
           a.hbm_bytes_source, a.evidence,
           CASE WHEN a.evidence = 'sampled' THEN a.sample_period_ns END AS sample_period_ns,
           CASE WHEN a.evidence = 'sampled' THEN a.resolved_share END AS resolved_share,
           round(a.modeled_bytes)::BIGINT AS modeled_bytes,
           a.modeled_bytes * 1e9 / nullif(a.window_ns, 0) / a.peak AS modeled_utilization_lower
    FROM g a
)
SELECT *,
       CASE WHEN peak_hbm_bps IS NULL THEN NULL
            WHEN busy_utilization >= $sat_threshold::DOUBLE THEN 'hbm-bound'
            WHEN busy_utilization < $low_threshold::DOUBLE THEN 'not bandwidth-bound'
            WHEN busy_utilization IS NOT NULL THEN 'borderline'
            WHEN busy_utilization_max < $low_threshold::DOUBLE THEN 'not bandwidth-bound'
            WHEN utilization >= $sat_threshold::DOUBLE THEN 'hbm-bound'
            WHEN evidence = 'sampled' THEN 'unresolved'
            WHEN evidence = 'modeled' THEN 'lower bound only' END AS verdict
FROM res
ORDER BY run_id, rank NULLS FIRST, step NULLS FIRST, scope = 'step';
