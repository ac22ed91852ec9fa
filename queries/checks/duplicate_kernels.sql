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
-- The integer part of the key is grouped first and only its repeats are grouped with the names: hashing the
-- name of every kernel cost twice as much (4.6M kernels: 1.5 -> 0.8 CPU-s), and every ingest runs this check.
WITH twice AS (
    SELECT rank, stream_id, task_id, ts_ns, dur_ns
    FROM kernels
    WHERE run_id = $run_id AND ts_ns IS NOT NULL
    GROUP BY rank, stream_id, task_id, ts_ns, dur_ns
    HAVING count(*) > 1
)
SELECT k.rank, k.stream_id, k.task_id, k.name, k.ts_ns, count(*) AS copies
FROM kernels k SEMI JOIN twice t
  ON k.rank = t.rank AND k.ts_ns = t.ts_ns AND k.stream_id IS NOT DISTINCT FROM t.stream_id
 AND k.task_id IS NOT DISTINCT FROM t.task_id AND k.dur_ns IS NOT DISTINCT FROM t.dur_ns
WHERE k.run_id = $run_id AND k.ts_ns IS NOT NULL
GROUP BY k.rank, k.stream_id, k.task_id, k.name, k.ts_ns, k.dur_ns, k.context_id
HAVING count(*) > 1
ORDER BY copies DESC, k.rank, k.ts_ns;
