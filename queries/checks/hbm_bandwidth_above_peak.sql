-- name: hbm_bandwidth_above_peak
-- description: HBM bandwidth above 10x the device's peak (per counter sample, or per kernel from its measured HBM bytes / duration): a unit error (MB/s vs bytes/s, KB vs bytes).
-- param: run_id VARCHAR          -- run to check
-- param: hbm_limit_bps DOUBLE = 1e13 -- 10x the device peak HBM bandwidth, bytes/s (traceql.checks fills it from the device preset)
-- column: source VARCHAR         -- counters or kernels
-- column: rank INTEGER           -- rank
-- column: name VARCHAR           -- counter name or kernel name
-- column: ts_ns BIGINT           -- sample/kernel start, ns
-- column: bandwidth_bps DOUBLE   -- the implausible bandwidth, bytes/s
-- column: limit_bps DOUBLE       -- the bound it exceeds, bytes/s
SELECT 'counters' AS source, rank, name, ts_ns, value AS bandwidth_bps, $hbm_limit_bps AS limit_bps
FROM counters
WHERE run_id = $run_id AND upper(track) LIKE '%HBM%' AND unit = 'bytes/s' AND value > $hbm_limit_bps
UNION ALL
SELECT 'kernels', rank, name, ts_ns,
       (coalesce(hbm_read_bytes, 0) + coalesce(hbm_write_bytes, 0)) * 1e9 / dur_ns,
       $hbm_limit_bps
FROM kernels
WHERE run_id = $run_id AND dur_ns > 0
  AND (coalesce(hbm_read_bytes, 0) + coalesce(hbm_write_bytes, 0)) * 1e9 / dur_ns > $hbm_limit_bps
ORDER BY bandwidth_bps DESC;
