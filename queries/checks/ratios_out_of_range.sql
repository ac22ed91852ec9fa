-- name: ratios_out_of_range
-- description: Ratio columns (pipe utilisation, hit rates, shares) outside 0..1: a percentage stored without dividing by 100, or garbage.
-- param: run_id VARCHAR          -- run to check
-- column: table_name VARCHAR     -- canonical table
-- column: field VARCHAR          -- column holding the ratio
-- column: rows BIGINT            -- rows out of range
-- column: min_value DOUBLE       -- smallest value seen among them
-- column: max_value DOUBLE       -- largest value seen among them
-- column: example VARCHAR        -- one offending row's name
-- Aggregated per column: one broken column should read as one problem, not thousands of rows.
-- Slack of 0.001 above 1: profilers round ratios to 3 decimals.
WITH r AS (
    SELECT 'kernels' AS table_name, f.field, f.v, name
    FROM kernels,
         LATERAL (VALUES ('mac_ratio', mac_ratio), ('vec_ratio', vec_ratio), ('scalar_ratio', scalar_ratio),
                         ('mte2_ratio', mte2_ratio), ('mte3_ratio', mte3_ratio), ('l2_hit_rate', l2_hit_rate)) AS f(field, v)
    WHERE run_id = $run_id
    UNION ALL
    SELECT 'l2_cache', f.field, f.v, op_name
    FROM l2_cache, LATERAL (VALUES ('hit_rate', hit_rate), ('victim_rate', victim_rate)) AS f(field, v)
    WHERE run_id = $run_id
    UNION ALL
    SELECT 'op_stats', 'ratio', ratio, name FROM op_stats WHERE run_id = $run_id
    UNION ALL
    SELECT 'comm_bandwidth', 'large_packet_ratio', large_packet_ratio, name FROM comm_bandwidth WHERE run_id = $run_id
    UNION ALL
    SELECT 'counters', 'value (unit ratio)', value, name FROM counters WHERE run_id = $run_id AND unit = 'ratio'
)
SELECT table_name, field, count(*) AS rows, min(v) AS min_value, max(v) AS max_value, any_value(name) AS example
FROM r
WHERE v < 0 OR v > 1.001 OR isnan(v)
GROUP BY table_name, field
ORDER BY rows DESC, table_name, field;
