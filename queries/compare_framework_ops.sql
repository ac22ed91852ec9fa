-- name: compare_framework_ops
-- description: Device kernels grouped by the framework operator that launched them (outermost aten op, or the torch_npu dequeue/aclnn op), for `traceql compare --mode cross` (a GPU baseline against an NPU port): calls, device time and HBM bytes per framework op.
-- column: run_id VARCHAR               -- run
-- column: framework_op VARCHAR         -- normalised framework op: lower case, without aten::, Dequeue@, aclnn and non-alphanumerics (aten::conv2d and Conv2D both give conv2d); 'kernel:' || op type when no launching host op was found
-- column: is_comm BOOLEAN              -- communication kernels
-- column: calls BIGINT                 -- kernels
-- column: dur_ns BIGINT                -- their device time, ns
-- column: calls_with_bytes BIGINT      -- kernels with HBM bytes
-- column: bytes_dur_ns BIGINT          -- device time of those, ns
-- column: hbm_bytes BIGINT             -- HBM bytes (chosen source, derived/kernel_bytes.sql
-- column: pmu_calls BIGINT             -- kernels with measured (PMU) bytes
-- column: sampled_calls BIGINT         -- kernels with sampled bytes
-- column: modeled_calls BIGINT         -- kernels with modeled bytes
-- column: example_kernel VARCHAR       -- one kernel name of the group
-- column: example_host_op VARCHAR      -- the framework op as the dump names it
--
-- Definitions: a kernel's launch is the host runtime call with its correlation id (connection_id: Kineto
-- cuda_runtime, torch_npu db cann), else the source of a flow ending at the kernel's start (Kineto ac2g,
-- torch_npu async_npu, which starts at the framework op, before HostToDevice, which starts on CANN's launch
-- thread). Its framework op is the outermost host op on the launching thread (matched by thread id alone: the
-- CANN layer writes another pid for the same thread) that contains the launch and is an aten op, a torch_npu
-- dequeue op or an aclnn op.
WITH kb AS (
    SELECT run_id, rank, ts_ns, name, stream_id, _op_name(op_type, name) AS op_type, is_comm, dur_ns, hbm_bytes,
           hbm_bytes_source
    FROM kernel_bytes
), k AS (
    SELECT run_id, rank, ts_ns, name, stream_id, any_value(connection_id) AS connection_id
    FROM kernels WHERE ts_ns IS NOT NULL GROUP BY ALL
), corr AS (
    SELECT k.run_id, k.rank, k.ts_ns, k.name, k.stream_id, any_value(h.pid) AS pid, any_value(h.tid) AS tid,
           any_value(h.ts_ns) AS lts
    FROM k JOIN host_ops h ON h.run_id = k.run_id AND h.rank = k.rank AND h.correlation_id = k.connection_id
    WHERE h.cat IN ('cuda_runtime', 'cuda_driver', 'cann')
    GROUP BY ALL
), fl AS (
    -- async_npu starts on the framework thread (the aten/aclnn op); HostToDevice on the CANN launch thread
    SELECT k.run_id, k.rank, k.ts_ns, k.name, k.stream_id,
           arg_min(f.src_pid, list_position(['async_npu', 'ac2g', 'HostToDevice'], f.cat)) AS pid,
           arg_min(f.src_tid, list_position(['async_npu', 'ac2g', 'HostToDevice'], f.cat)) AS tid,
           arg_min(f.src_ts_ns, list_position(['async_npu', 'ac2g', 'HostToDevice'], f.cat)) AS lts
    FROM k JOIN flows f ON f.run_id = k.run_id AND f.rank = k.rank AND f.dst_ts_ns = k.ts_ns
    WHERE f.cat IN ('ac2g', 'HostToDevice', 'async_npu') AND f.src_ts_ns IS NOT NULL
    GROUP BY ALL
), launch AS (
    SELECT kb.*, coalesce(fl.tid, c.tid) AS tid, coalesce(fl.lts, c.lts) AS lts
    FROM kb
    LEFT JOIN corr c ON c.run_id = kb.run_id AND c.rank = kb.rank AND c.ts_ns = kb.ts_ns AND c.name = kb.name
                    AND c.stream_id IS NOT DISTINCT FROM kb.stream_id
    LEFT JOIN fl ON fl.run_id = kb.run_id AND fl.rank = kb.rank AND fl.ts_ns = kb.ts_ns AND fl.name = kb.name
                AND fl.stream_id IS NOT DISTINCT FROM kb.stream_id
), fw AS (
    SELECT run_id, rank, pid, tid, ts_ns, ts_ns + greatest(coalesce(dur_ns, 0), 0) AS end_ns, name
    FROM host_ops
    WHERE ts_ns IS NOT NULL AND (name LIKE 'aten::%' OR cat = 'dequeue' OR (cat = 'cpu_op' AND name LIKE 'aclnn%'))
), attributed AS (
    SELECT l.*, (SELECT arg_min(fw.name, fw.ts_ns) FROM fw
                 WHERE fw.run_id = l.run_id AND fw.rank = l.rank AND fw.tid = l.tid
                   AND fw.ts_ns <= l.lts AND fw.end_ns >= l.lts) AS host_op
    FROM launch l
)
SELECT run_id,
       CASE WHEN host_op IS NULL THEN 'kernel:' || op_type
            ELSE regexp_replace(regexp_replace(lower(host_op), '^(aten::|dequeue@)', ''), '^aclnn|[^a-z0-9]', '', 'g') END AS framework_op,
       is_comm,
       count(*) AS calls, sum(dur_ns)::BIGINT AS dur_ns, count(hbm_bytes) AS calls_with_bytes,
       coalesce(sum(dur_ns) FILTER (WHERE hbm_bytes IS NOT NULL), 0)::BIGINT AS bytes_dur_ns,
       sum(hbm_bytes)::BIGINT AS hbm_bytes,
       count(*) FILTER (WHERE hbm_bytes_source = 'pmu') AS pmu_calls,
       count(*) FILTER (WHERE hbm_bytes_source = 'sampled') AS sampled_calls,
       count(*) FILTER (WHERE hbm_bytes_source = 'modeled') AS modeled_calls,
       min(name) AS example_kernel, min(host_op) AS example_host_op
FROM attributed
GROUP BY ALL
ORDER BY run_id, dur_ns DESC, framework_op;
