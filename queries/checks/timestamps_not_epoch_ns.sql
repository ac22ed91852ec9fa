-- name: timestamps_not_epoch_ns
-- description: Timestamps outside 2000..2100 when read as ns since the Unix epoch: µs or ms left unconverted, a relative clock, or a raw device counter.
-- param: run_id VARCHAR          -- run to check
-- column: table_name VARCHAR     -- canonical table
-- column: rank INTEGER           -- rank
-- column: rows BIGINT            -- rows with such a timestamp
-- column: min_ts_ns BIGINT       -- smallest offending timestamp
-- column: max_ts_ns BIGINT       -- largest offending timestamp
-- 946684800e9 = 2000-01-01T00:00:00Z and 4102444800e9 = 2100-01-01T00:00:00Z, in ns.
WITH t AS (
    SELECT 'kernels' AS table_name, rank, ts_ns FROM kernels WHERE run_id = $run_id
    UNION ALL SELECT 'host_ops', rank, ts_ns FROM host_ops WHERE run_id = $run_id
    UNION ALL SELECT 'counters', rank, ts_ns FROM counters WHERE run_id = $run_id
    UNION ALL SELECT 'comm_ops', rank, ts_ns FROM comm_ops WHERE run_id = $run_id
    UNION ALL SELECT 'steps', rank, ts_ns FROM steps WHERE run_id = $run_id
    UNION ALL SELECT 'flows', rank, src_ts_ns FROM flows WHERE run_id = $run_id
    UNION ALL SELECT 'flows', rank, dst_ts_ns FROM flows WHERE run_id = $run_id
)
SELECT table_name, rank, count(*) AS rows, min(ts_ns) AS min_ts_ns, max(ts_ns) AS max_ts_ns
FROM t
WHERE ts_ns < 946684800000000000 OR ts_ns > 4102444800000000000
GROUP BY table_name, rank
ORDER BY rows DESC, table_name, rank;
