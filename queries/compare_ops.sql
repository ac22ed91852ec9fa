-- name: compare_ops
-- description: Per kernel name, operator type and input signature (shapes, dtypes) the calls, device time and HBM bytes with where the bytes came from: what `traceql compare` matches across two runs.
-- column: run_id VARCHAR               -- run
-- column: op_type VARCHAR              -- operator type (the kernel name when the dump has none)
-- column: input_shapes VARCHAR         -- input shapes as written ('' when the dump records none)
-- column: input_dtypes VARCHAR         -- input dtypes as written ('' when none)
-- column: is_comm BOOLEAN              -- communication (HCCL/NCCL) kernels
-- column: calls BIGINT                 -- kernel launches, all ranks in scope
-- column: dur_ns BIGINT                -- total device time, ns
-- column: calls_with_bytes BIGINT      -- calls that have HBM bytes from some source
-- column: bytes_dur_ns BIGINT          -- device time of the calls that have bytes, ns (the denominator of achieved bandwidth)
-- column: hbm_bytes BIGINT             -- read + write HBM bytes (chosen source per kernel, derived/kernel_bytes.sql
-- column: pmu_calls BIGINT             -- calls whose bytes are per-task PMU counters (measured)
-- column: sampled_calls BIGINT         -- calls whose bytes are apportioned HBM counter samples (sampled)
-- column: modeled_calls BIGINT         -- calls whose bytes are tensor sizes from shapes x dtypes (modeled)
-- column: example_name VARCHAR         -- the kernel name (kept so a name map can rename CUDA kernels whose type is coarse)
--
-- Definitions: one row per (kernel name, op_type, input_shapes, input_dtypes, is_comm) over every kernel of the run in
-- scope; the source counts say how each side's bytes were obtained (pmu = measured, sampled, modeled), so a
-- comparison can say when one side is measured and the other modeled.
SELECT run_id, _op_name(op_type, name) AS op_type,
       coalesce(input_shapes, '') AS input_shapes, coalesce(input_dtypes, '') AS input_dtypes,
       is_comm,
       count(*) AS calls,
       sum(dur_ns)::BIGINT AS dur_ns,
       count(hbm_bytes) AS calls_with_bytes,
       coalesce(sum(dur_ns) FILTER (WHERE hbm_bytes IS NOT NULL), 0)::BIGINT AS bytes_dur_ns,
       sum(hbm_bytes)::BIGINT AS hbm_bytes,
       count(*) FILTER (WHERE hbm_bytes_source = 'pmu') AS pmu_calls,
       count(*) FILTER (WHERE hbm_bytes_source = 'sampled') AS sampled_calls,
       count(*) FILTER (WHERE hbm_bytes_source = 'modeled') AS modeled_calls,
       name AS example_name
FROM kernel_bytes
GROUP BY ALL
-- example_name last: a group's example is its first row's name, the same one on every run of the query
ORDER BY run_id, dur_ns DESC, op_type, input_shapes, input_dtypes, example_name;
