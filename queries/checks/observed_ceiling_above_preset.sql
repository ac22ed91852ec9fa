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
    SELECT rank, name, ts_ns, dur_ns, hbm_read_bytes, hbm_write_bytes, l2_read_bytes, l2_write_bytes,
           ub_read_bytes, ub_write_bytes
    FROM kernels WHERE run_id = $run_id AND dur_ns > 0
), lv AS (
    -- one arm per level, each keeping only the kernels above that level's peak (a few, if any): building a
    -- list of three levels per kernel and unnesting it cost 80x more on a 540k-kernel run
    SELECT rank, name, ts_ns, 'HBM' AS level, coalesce(hbm_read_bytes, 0) + coalesce(hbm_write_bytes, 0) AS b,
           dur_ns, $peak_hbm_bps AS peak
    FROM k WHERE (coalesce(hbm_read_bytes, 0) + coalesce(hbm_write_bytes, 0)) * 1e9 / dur_ns > $peak_hbm_bps
    UNION ALL
    SELECT rank, name, ts_ns, 'L2', coalesce(l2_read_bytes, 0) + coalesce(l2_write_bytes, 0), dur_ns, $peak_l2_bps
    FROM k WHERE (coalesce(l2_read_bytes, 0) + coalesce(l2_write_bytes, 0)) * 1e9 / dur_ns > $peak_l2_bps
    UNION ALL
    SELECT rank, name, ts_ns, 'UB', coalesce(ub_read_bytes, 0) + coalesce(ub_write_bytes, 0), dur_ns, $peak_ub_bps
    FROM k WHERE (coalesce(ub_read_bytes, 0) + coalesce(ub_write_bytes, 0)) * 1e9 / dur_ns > $peak_ub_bps
), u AS (
    -- above the peak (the per-level top above the peak is the overall top when that is above it); above 10x:
    -- a unit error, left to hbm_bandwidth_above_peak
    SELECT rank, name, ts_ns, level, b * 1e9 / dur_ns AS bps, peak
    FROM lv WHERE peak IS NOT NULL AND b > 0 AND b * 1e9 / dur_ns <= 10 * peak
), top AS (
    SELECT * FROM u QUALIFY row_number() OVER (PARTITION BY rank, level ORDER BY bps DESC, ts_ns) = 1
)
SELECT rank, level, name, ts_ns, bps AS ceiling_bps, peak AS preset_peak_bps, bps / peak AS times_peak
FROM top
WHERE bps > peak
ORDER BY times_peak DESC, rank, level;
