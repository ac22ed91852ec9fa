-- name: hbm_utilization
-- description: Time-weighted HBM bandwidth utilisation vs the device peak for the run, each rank and each step, with the share of compute time above the bottleneck line (80%) and below the not-bandwidth line (70%).
-- param: sat_threshold DOUBLE = 0.8    -- utilisation at or above which HBM counts as saturated (the article's bottleneck line)
-- param: low_threshold DOUBLE = 0.7    -- utilisation below which a run is not bandwidth-bound (the article's checklist line)
-- param: peak_hbm_bps DOUBLE = NULL    -- device HBM peak, bytes/s (traceql fills it from the device preset)
-- column: run_id VARCHAR               -- run
-- column: scope VARCHAR                -- run | rank | step: what the row aggregates
-- column: rank INTEGER                 -- rank (null for scope run)
-- column: step BIGINT                  -- step (scope step only; null also when the dump has no step ids)
-- column: window_ns BIGINT             -- wall time covered: the step windows (see _helpers.sql), summed
-- column: busy_ns BIGINT               -- time with at least one compute kernel running
-- column: hbm_bytes BIGINT             -- HBM bytes moved in the windows (kernel bytes spread over kernel time)
-- column: avg_bw_bps DOUBLE            -- hbm_bytes / window time, bytes/s
-- column: utilization DOUBLE           -- avg_bw_bps / peak, 0..1: time-weighted over the whole window (idle counts as 0)
-- column: busy_bw_bps DOUBLE           -- mean device bandwidth while compute runs, bytes/s
-- column: busy_utilization DOUBLE      -- busy_bw_bps / peak, 0..1: time-weighted over compute time (the article's number)
-- column: max_utilization DOUBLE       -- highest instantaneous utilisation, 0..1
-- column: frac_busy_saturated DOUBLE   -- share of compute time at or above sat_threshold x peak, 0..1
-- column: frac_busy_low DOUBLE         -- share of compute time below low_threshold x peak, 0..1
-- column: frac_window_saturated DOUBLE -- share of the whole window at or above sat_threshold x peak, 0..1
-- column: peak_hbm_bps DOUBLE          -- the peak used, bytes/s
-- column: hbm_bytes_source VARCHAR     -- pmu | sampled | modeled when every kernel with bytes in the scope has that source, else mixed
-- column: verdict VARCHAR              -- hbm-bound (busy_utilization >= sat_threshold) | borderline | not bandwidth-bound (< low_threshold); null without a peak
--
-- Definitions: the device bandwidth at an instant is the sum over running kernels of bytes / duration
-- (_helpers.sql _bw_segments, a sweep over kernel start/end events, cut at step-window edges). Utilisation at
-- an instant = that bandwidth / peak_hbm_bps. Time-weighted means each constant piece of that step function
-- counts by its length. Compute time = instants with at least one non-communication kernel running.
WITH seg AS MATERIALIZED (
    SELECT run_id, rank, step, dur_ns, n_comp, bw_bps, rank_source,
           $peak_hbm_bps::DOUBLE AS peak,
           bw_bps >= $sat_threshold::DOUBLE * $peak_hbm_bps::DOUBLE AS above,
           bw_bps < $low_threshold::DOUBLE * $peak_hbm_bps::DOUBLE AS below
    FROM _bw_segments()
), agg AS (
    SELECT run_id, rank, step,
           CASE WHEN grouping(rank) = 1 THEN 'run' WHEN grouping(step) = 1 THEN 'rank' ELSE 'step' END AS scope,
           sum(dur_ns)::BIGINT AS window_ns,
           sum(dur_ns) FILTER (WHERE n_comp > 0)::BIGINT AS busy_ns,
           sum(bw_bps * dur_ns / 1e9) AS bytes,
           sum(bw_bps * dur_ns / 1e9) FILTER (WHERE n_comp > 0) AS busy_bytes,
           max(bw_bps) AS max_bw,
           sum(dur_ns) FILTER (WHERE n_comp > 0 AND above) AS busy_above_ns,
           sum(dur_ns) FILTER (WHERE n_comp > 0 AND below) AS busy_below_ns,
           sum(dur_ns) FILTER (WHERE above) AS above_ns,
           any_value(peak) AS peak,
           CASE WHEN min(rank_source) = max(rank_source) THEN min(rank_source)
                WHEN count(rank_source) > 0 THEN 'mixed' END AS hbm_bytes_source
    FROM seg
    GROUP BY GROUPING SETS ((run_id), (run_id, rank), (run_id, rank, step))
), res AS (
    SELECT a.run_id, a.scope, a.rank, a.step, a.window_ns, coalesce(a.busy_ns, 0) AS busy_ns,
           round(a.bytes)::BIGINT AS hbm_bytes,
           a.bytes * 1e9 / nullif(a.window_ns, 0) AS avg_bw_bps,
           a.bytes * 1e9 / nullif(a.window_ns, 0) / a.peak AS utilization,
           a.busy_bytes * 1e9 / nullif(a.busy_ns, 0) AS busy_bw_bps,
           a.busy_bytes * 1e9 / nullif(a.busy_ns, 0) / a.peak AS busy_utilization,
           a.max_bw / a.peak AS max_utilization,
           CASE WHEN a.peak IS NOT NULL THEN coalesce(a.busy_above_ns, 0) / nullif(a.busy_ns, 0) END AS frac_busy_saturated,
           CASE WHEN a.peak IS NOT NULL THEN coalesce(a.busy_below_ns, 0) / nullif(a.busy_ns, 0) END AS frac_busy_low,
           CASE WHEN a.peak IS NOT NULL THEN coalesce(a.above_ns, 0) / nullif(a.window_ns, 0) END AS frac_window_saturated,
           a.peak AS peak_hbm_bps,
           a.hbm_bytes_source
    FROM agg a
)
SELECT *,
       CASE WHEN busy_utilization IS NULL THEN NULL
            WHEN busy_utilization >= $sat_threshold::DOUBLE THEN 'hbm-bound'
            WHEN busy_utilization < $low_threshold::DOUBLE THEN 'not bandwidth-bound'
            ELSE 'borderline' END AS verdict
FROM res
ORDER BY run_id, rank NULLS FIRST, step NULLS FIRST, scope = 'step';
