-- name: negative_bytes
-- description: Negative byte counts or bandwidths in kernels and communication tables (sizes cannot be negative; memory.size_bytes may be, by design, and is not checked).
-- param: run_id VARCHAR          -- run to check
-- column: table_name VARCHAR     -- canonical table
-- column: field VARCHAR          -- column holding the value
-- column: rows BIGINT            -- rows with a negative value
-- column: min_value DOUBLE       -- most negative value
-- column: example VARCHAR        -- one offending row's name
WITH v AS (
    SELECT 'kernels' AS table_name, f.field, f.x, name
    FROM kernels,
         LATERAL (VALUES ('hbm_read_bytes', hbm_read_bytes::DOUBLE), ('hbm_write_bytes', hbm_write_bytes::DOUBLE),
                         ('ub_read_bytes', ub_read_bytes::DOUBLE), ('ub_write_bytes', ub_write_bytes::DOUBLE),
                         ('l2_read_bytes', l2_read_bytes::DOUBLE), ('l2_write_bytes', l2_write_bytes::DOUBLE),
                         ('flops', flops)) AS f(field, x)
    WHERE run_id = $run_id
    UNION ALL
    SELECT 'comm_ops', 'bytes', bytes::DOUBLE, name FROM comm_ops WHERE run_id = $run_id
    UNION ALL
    SELECT 'comm_bandwidth', f.field, f.x, name
    FROM comm_bandwidth, LATERAL (VALUES ('bytes', bytes::DOUBLE), ('bandwidth_bps', bandwidth_bps)) AS f(field, x)
    WHERE run_id = $run_id
    UNION ALL
    SELECT 'comm_matrix', f.field, f.x, coalesce(op_name, name)
    FROM comm_matrix, LATERAL (VALUES ('bytes', bytes::DOUBLE), ('bandwidth_bps', bandwidth_bps)) AS f(field, x)
    WHERE run_id = $run_id
    UNION ALL
    SELECT 'counters', 'value (unit ' || unit || ')', value, name
    FROM counters WHERE run_id = $run_id AND unit IN ('bytes', 'bytes/s')
)
SELECT table_name, field, count(*) AS rows, min(x) AS min_value, any_value(name) AS example
FROM v
WHERE x < 0
GROUP BY table_name, field
ORDER BY rows DESC, table_name, field;
