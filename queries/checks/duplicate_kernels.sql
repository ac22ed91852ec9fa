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
-- The integer part of the key is grouped first, as one 64-bit hash of it, and only rows whose hash repeats are
-- grouped with the names on the whole key: hashing the name of every kernel cost twice as much (4.6M kernels:
-- 1.5 -> 0.8 CPU-s), and every ingest runs this check, inside the ingest's memory bound; one hash column
-- instead of five integers makes the table of all kernels a third of the size (14M kernels: 2.2 -> 1.7 s). A hash
-- collision only adds candidates, which the exact GROUP BY ... HAVING below drops; equal keys always collide.
WITH twice AS (
    SELECT hash(rank, stream_id, task_id, ts_ns, dur_ns) AS h
    FROM kernels
    WHERE run_id = $run_id AND ts_ns IS NOT NULL
    GROUP BY h
    HAVING count(*) > 1
)
SELECT k.rank, k.stream_id, k.task_id, k.name, k.ts_ns, count(*) AS copies
FROM kernels k SEMI JOIN twice t ON hash(k.rank, k.stream_id, k.task_id, k.ts_ns, k.dur_ns) = t.h
WHERE k.run_id = $run_id AND k.ts_ns IS NOT NULL
GROUP BY k.rank, k.stream_id, k.task_id, k.name, k.ts_ns, k.dur_ns, k.context_id
HAVING count(*) > 1
ORDER BY copies DESC, k.rank, k.ts_ns;
