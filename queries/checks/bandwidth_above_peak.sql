-- name: bandwidth_above_peak
-- description: HBM bandwidth above the device's peak from measured or sampled data (a counter window summed over channels, or a kernel's PMU / sampled bytes / duration): no device moves more than its peak, so each row is a data problem (units, durations, a wrong device preset), and findings never cite it as a measurement.
-- param: run_id VARCHAR          -- run to check
-- param: peak_hbm_bps DOUBLE = 1e13 -- the device's peak HBM bandwidth, bytes/s (traceql.checks fills it from the device preset; the header default bounds every device as of 2026)
-- needs: analysis
-- column: source VARCHAR         -- counters | kernels
-- column: hbm_bytes_source VARCHAR -- kernels: pmu | sampled (what the bytes rest on); counters: sampled
-- column: rank INTEGER           -- rank
-- column: name VARCHAR           -- HBM (counters) or the kernel name
-- column: ts_ns BIGINT           -- window / kernel start, ns
-- column: bandwidth_bps DOUBLE   -- the implausible bandwidth, bytes/s
-- column: times_peak DOUBLE      -- bandwidth_bps / the peak
SELECT 'counters' AS source, 'sampled' AS hbm_bytes_source, rank, 'HBM' AS name, win_start AS ts_ns,
       read_bps + write_bps AS bandwidth_bps, (read_bps + write_bps) / $peak_hbm_bps AS times_peak
FROM _hbm_windows()
WHERE run_id = $run_id AND read_bps + write_bps > $peak_hbm_bps
UNION ALL
SELECT 'kernels', hbm_bytes_source, rank, name, ts_ns, hbm_bytes * 1e9 / dur_ns, hbm_bytes * 1e9 / dur_ns / $peak_hbm_bps
FROM kernel_bytes
WHERE run_id = $run_id AND dur_ns > 0 AND hbm_bytes_source IN ('pmu', 'sampled') AND hbm_bytes * 1e9 / dur_ns > $peak_hbm_bps
ORDER BY bandwidth_bps DESC;
