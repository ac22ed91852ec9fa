-- name: modeled_above_peak
-- description: Kernels whose modeled HBM bytes (input + output tensor sizes) over their duration exceed the device's HBM peak: the byte model cannot hold for them (the L2 cache or UB served the tensors, the op works in place, or the shapes are not what ran), so their modeled bandwidth is no lower bound on HBM traffic and findings never cite it.
-- param: run_id VARCHAR          -- run to check
-- param: peak_hbm_bps DOUBLE = 1e13 -- the device's peak HBM bandwidth, bytes/s (traceql.checks fills it from the device preset)
-- needs: analysis
-- column: rank INTEGER           -- rank
-- column: name VARCHAR           -- kernel name
-- column: op_type VARCHAR        -- operator type
-- column: ts_ns BIGINT           -- kernel start, ns
-- column: dur_ns BIGINT          -- kernel duration, ns
-- column: modeled_bytes BIGINT   -- modeled read + write bytes
-- column: times_peak DOUBLE      -- modeled bandwidth / the peak
SELECT rank, name, op_type, ts_ns, dur_ns, hbm_bytes AS modeled_bytes, hbm_bytes * 1e9 / dur_ns / $peak_hbm_bps AS times_peak
FROM kernel_bytes
WHERE run_id = $run_id AND dur_ns > 0 AND hbm_bytes_source = 'modeled' AND hbm_bytes * 1e9 / dur_ns > $peak_hbm_bps
ORDER BY times_peak DESC;
