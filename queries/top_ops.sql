-- name: top_ops
-- description: Operators ranked by total device time: calls, total/avg/min/max time and share of all device kernel time.
-- param: top_n INTEGER = 20            -- rows to return
-- param: by VARCHAR = 'op_type'        -- group by 'op_type' or by 'name'
-- column: run_id VARCHAR               -- run
-- column: op VARCHAR                   -- operator type (or name with by='name'); kernel name when the type is unknown
-- column: task_types VARCHAR           -- core/task types seen (AI_CORE, AI_VECTOR_CORE, HCCL, kernel...), comma separated
-- column: is_comm BOOLEAN              -- true when the operator is communication (HCCL/NCCL)
-- column: calls BIGINT                 -- kernel launches
-- column: total_ns BIGINT              -- total device time, ns
-- column: avg_ns DOUBLE                -- mean time per call, ns
-- column: min_ns BIGINT                -- shortest call, ns
-- column: max_ns BIGINT                -- longest call, ns
-- column: share DOUBLE                 -- total_ns / all kernels' device time in the run, 0..1 (overlapping streams counted twice)
WITH k AS (
    SELECT run_id,
           CASE WHEN $by = 'name' THEN name
                WHEN $by = 'op_type' THEN _op_name(op_type, name)
                ELSE error('top_ops: param by must be op_type or name, got ' || $by) END AS op,
           task_type, _is_comm(is_comm, task_type, name) AS is_comm, greatest(coalesce(dur_ns, 0), 0) AS dur_ns
    FROM kernels
)
SELECT run_id, op,
       string_agg(DISTINCT task_type, ',' ORDER BY task_type) AS task_types,
       bool_or(is_comm) AS is_comm,
       count(*) AS calls,
       sum(dur_ns)::BIGINT AS total_ns,
       avg(dur_ns) AS avg_ns,
       min(dur_ns) AS min_ns,
       max(dur_ns) AS max_ns,
       sum(dur_ns) / nullif(sum(sum(dur_ns)) OVER (PARTITION BY run_id), 0) AS share
FROM k
GROUP BY run_id, op
ORDER BY total_ns DESC, op
LIMIT $top_n;
