-- name: compare_run_info
-- description: What kind of recording a run is, for `traceql compare`'s comparability check: format, device, ranks, profiler level and PMU metric group, steps per rank, kernels and the tables that have rows.
-- column: run_id VARCHAR               -- run
-- column: format VARCHAR               -- detected dump format (runs.format)
-- column: device VARCHAR               -- device name found in the dump, or null
-- column: ranks INTEGER                -- ranks in the run
-- column: profiler_level VARCHAR       -- torch_npu profiler_level (Level0/Level1/Level2) from run_meta, or null
-- column: aic_metrics VARCHAR          -- PMU metric group (aic_metrics) from run_meta, or null
-- column: export_type VARCHAR          -- torch_npu export_type (text/db) from run_meta, or null
-- column: kernels BIGINT               -- device kernels
-- column: steps_per_rank_min BIGINT    -- fewest profiled steps of any rank (derived/step_windows.sql)
-- column: steps_per_rank_max BIGINT    -- most profiled steps of any rank
-- column: rows VARCHAR                 -- JSON: rows stored per table (runs.rows)
--
-- Definitions: profiler_level, aic_metrics and export_type are the most common value of the run_meta keys
-- ending in _profiler_level, _aic_metrics and _export_type (torch_npu's profiler_info config), across ranks.
WITH meta AS (
    SELECT run_id,
           mode(value) FILTER (WHERE key ILIKE '%\_profiler\_level' ESCAPE '\') AS profiler_level,
           mode(value) FILTER (WHERE key ILIKE '%\_aic\_metrics' ESCAPE '\') AS aic_metrics,
           mode(value) FILTER (WHERE key ILIKE '%\_export\_type' ESCAPE '\') AS export_type
    FROM run_meta GROUP BY run_id
), k AS (
    SELECT run_id, count(*) AS kernels FROM kernels GROUP BY run_id
), w AS (
    SELECT run_id, min(n) AS smin, max(n) AS smax
    FROM (SELECT run_id, rank, count(*) AS n FROM step_windows GROUP BY run_id, rank) GROUP BY run_id
)
SELECT r.run_id, CAST(r.format AS VARCHAR) AS format, CAST(r.device AS VARCHAR) AS device, CAST(r.ranks AS INTEGER) AS ranks,
       meta.profiler_level, meta.aic_metrics, meta.export_type,
       coalesce(k.kernels, 0)::BIGINT AS kernels, coalesce(w.smin, 0)::BIGINT AS steps_per_rank_min,
       coalesce(w.smax, 0)::BIGINT AS steps_per_rank_max, CAST(r.rows AS VARCHAR) AS rows
FROM runs r
LEFT JOIN meta USING (run_id)
LEFT JOIN k USING (run_id)
LEFT JOIN w USING (run_id)
ORDER BY r.run_id;
