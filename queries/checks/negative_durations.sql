-- name: negative_durations
-- description: Events whose duration (or a part of it) is negative: a broken clock conversion or a parser that subtracted the wrong way.
-- param: run_id VARCHAR          -- run to check
-- column: table_name VARCHAR     -- canonical table holding the row
-- column: rank INTEGER           -- rank
-- column: name VARCHAR           -- event name (or step id for steps)
-- column: ts_ns BIGINT           -- start, ns
-- column: field VARCHAR          -- which duration column is negative
-- column: value_ns BIGINT        -- the negative value, ns
SELECT 'kernels' AS table_name, rank, name, ts_ns, 'dur_ns' AS field, dur_ns AS value_ns
FROM kernels WHERE run_id = $run_id AND dur_ns < 0
UNION ALL
SELECT 'host_ops', rank, name, ts_ns, 'dur_ns', dur_ns
FROM host_ops WHERE run_id = $run_id AND dur_ns < 0
UNION ALL
SELECT 'comm_ops', rank, name, ts_ns, f.field, f.value_ns
FROM comm_ops,
     LATERAL (VALUES ('dur_ns', dur_ns), ('transit_ns', transit_ns), ('wait_ns', wait_ns),
                     ('sync_ns', sync_ns), ('idle_ns', idle_ns)) AS f(field, value_ns)
WHERE run_id = $run_id AND f.value_ns < 0
UNION ALL
SELECT 'comm_bandwidth', rank, name, NULL, 'transit_ns', transit_ns
FROM comm_bandwidth WHERE run_id = $run_id AND transit_ns < 0
UNION ALL
SELECT 'steps', rank, CAST(step AS VARCHAR), ts_ns, f.field, f.value_ns
FROM steps,
     LATERAL (VALUES ('dur_ns', dur_ns), ('computing_ns', computing_ns), ('comm_ns', comm_ns),
                     ('free_ns', free_ns), ('preparing_ns', preparing_ns)) AS f(field, value_ns)
WHERE run_id = $run_id AND f.value_ns < 0
ORDER BY value_ns;
