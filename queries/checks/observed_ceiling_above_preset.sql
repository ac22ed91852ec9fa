-- name: observed_ceiling_above_preset
-- description: The highest bandwidth a kernel measurably reached (per-task PMU bytes / duration), per rank and memory level (HBM, L2, UB), when it lies above the device preset's peak but below 10x it: no device beats its own peak, so the preset (or the device detected) is wrong for this device; pass --device or a platform_config ini. Above 10x is a unit error (hbm_bandwidth_above_peak).
-- param: run_id VARCHAR                -- run to check
-- param: peak_hbm_bps DOUBLE = 1e13    -- the preset's HBM peak, bytes/s (traceql.checks fills it from the device preset)
-- param: peak_l2_bps DOUBLE = NULL     -- the preset's L2 peak, bytes/s (null: not checked)
-- param: peak_ub_bps DOUBLE = NULL     -- the preset's Unified Buffer peak, bytes/s (null: not checked)
-- column: rank INTEGER                 -- rank
-- column: level VARCHAR                -- HBM | L2 | UB
-- column: name VARCHAR                 -- the kernel that reached the ceiling
-- column: ts_ns BIGINT                 -- its start, ns
-- column: ceiling_bps DOUBLE           -- its bandwidth: measured bytes (PMU) / duration, bytes/s
-- column: preset_peak_bps DOUBLE       -- the peak it exceeds, bytes/s
-- column: times_peak DOUBLE            -- ceiling_bps / preset_peak_bps (between 1 and 10)
-- Only PMU bytes count (measured); sampled counters and modeled bytes are left to bandwidth_above_peak.
WITH k AS (
    SELECT rank, name, ts_ns, dur_ns,
           [{'level': 'HBM', 'b': coalesce(hbm_read_bytes, 0) + coalesce(hbm_write_bytes, 0), 'peak': $peak_hbm_bps},
            {'level': 'L2', 'b': coalesce(l2_read_bytes, 0) + coalesce(l2_write_bytes, 0), 'peak': $peak_l2_bps},
            {'level': 'UB', 'b': coalesce(ub_read_bytes, 0) + coalesce(ub_write_bytes, 0), 'peak': $peak_ub_bps}] AS lv
    FROM kernels WHERE run_id = $run_id AND dur_ns > 0
), u AS (
    SELECT rank, name, ts_ns, l.level AS level, l.b * 1e9 / dur_ns AS bps, l.peak AS peak
    FROM k, unnest(lv) AS t(l)
    WHERE l.peak IS NOT NULL AND l.b > 0 AND l.b * 1e9 / dur_ns <= 10 * l.peak  -- above 10x: a unit error
), top AS (
    SELECT * FROM u QUALIFY row_number() OVER (PARTITION BY rank, level ORDER BY bps DESC, ts_ns) = 1
)
SELECT rank, level, name, ts_ns, bps AS ceiling_bps, peak AS preset_peak_bps, bps / peak AS times_peak
FROM top
WHERE bps > peak
ORDER BY times_peak DESC, rank, level;
