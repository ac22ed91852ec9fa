-- name: op_exec_modes
-- description: How operators execute: per operator type, task type (AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX...) and state (dynamic/static shape): calls, time, share of compute time, longest call and dtypes - for Ascend's advisor checks on AI CPU operators and dynamic-shape operators.
-- param: top_n INTEGER = 200           -- rows to return (by device time)
-- column: run_id VARCHAR               -- run
-- column: op_type VARCHAR              -- operator type (name when untyped)
-- column: task_type VARCHAR            -- task/core type as the profiler writes it
-- column: op_state VARCHAR             -- dynamic | static | null (the profiler's OP State)
-- column: calls BIGINT                 -- kernel launches
-- column: dur_ns BIGINT                -- device time, ns
-- column: max_dur_ns BIGINT            -- longest call, ns
-- column: share_of_compute DOUBLE      -- dur_ns / all compute kernels' device time, 0..1
-- column: ops_with_state BIGINT        -- compute kernels of the run with an op_state (same on every row)
-- column: static_ops BIGINT            -- compute kernels of the run in static state (same on every row)
-- column: input_dtypes VARCHAR         -- input dtypes of the longest call
-- column: example_name VARCHAR         -- one kernel name
--
-- Definitions: compute kernels only (communication left out).
WITH k AS MATERIALIZED (
    SELECT run_id, _op_name(op_type, name) AS op_type, task_type, lower(op_state) AS op_state,
           greatest(coalesce(dur_ns, 0), 0) AS dur_ns, input_dtypes, name
    FROM kernels WHERE NOT _is_comm(is_comm, task_type, name)
), tot AS (
    SELECT run_id, sum(dur_ns) AS compute_ns, count(op_state) AS with_state,
           count(*) FILTER (WHERE op_state = 'static') AS static_ops
    FROM k GROUP BY run_id
)
SELECT k.run_id, k.op_type, k.task_type, k.op_state, count(*) AS calls, sum(k.dur_ns)::BIGINT AS dur_ns,
       max(k.dur_ns)::BIGINT AS max_dur_ns, sum(k.dur_ns) / nullif(any_value(t.compute_ns), 0) AS share_of_compute,
       any_value(t.with_state)::BIGINT AS ops_with_state, any_value(t.static_ops)::BIGINT AS static_ops,
       arg_max(k.input_dtypes, (k.dur_ns, k.input_dtypes)) AS input_dtypes, min(k.name) AS example_name
FROM k JOIN tot t USING (run_id)
GROUP BY k.run_id, k.op_type, k.task_type, k.op_state
ORDER BY dur_ns DESC, op_type, task_type, op_state
LIMIT $top_n;
