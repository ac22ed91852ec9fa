-- name: duplicate_kernels
-- description: The same device task stored more than once (same rank, stream, task id, name, start and duration): a file ingested twice or two sources of the same kernels both written.
-- param: run_id VARCHAR          -- run to check
-- column: rank INTEGER           -- rank
-- column: stream_id BIGINT       -- stream id
-- column: task_id BIGINT         -- task id
-- column: name VARCHAR           -- kernel name
-- column: ts_ns BIGINT           -- start, ns
-- column: copies BIGINT          -- how many identical rows
-- ts_ns IS NOT NULL: rows without a time cannot be told apart and are not counted.
SELECT rank, stream_id, task_id, name, ts_ns, count(*) AS copies
FROM kernels
WHERE run_id = $run_id AND ts_ns IS NOT NULL
GROUP BY rank, stream_id, task_id, name, ts_ns, dur_ns, context_id
HAVING count(*) > 1
ORDER BY copies DESC, rank, ts_ns;
