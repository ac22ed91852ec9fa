-- name: mfu
-- description: Model FLOPs utilisation from torch_npu's per-operator FLOPs ranges (mstx domain mfu_flops): per operator, per step and for the run, achieved FLOP/s against the device peak.
-- param: peak_flops DOUBLE = NULL      -- device peak FLOP/s, dense fp16/bf16 (traceql fills it from the device preset)
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- rank
-- column: scope VARCHAR                -- op (one operator name over the run) | step (one step window) | run
-- column: step BIGINT                  -- step id (scope step), else null
-- column: op_name VARCHAR              -- operator name from the range message (scope op), else null
-- column: ranges BIGINT                -- FLOPs ranges counted
-- column: flops DOUBLE                 -- FLOPs the ranges declare (torch_npu's formula, a model of the op's math)
-- column: time_ns BIGINT               -- op: device time of the kernels launched inside the ranges; step/run: wall time of the step windows
-- column: achieved_flops_per_s DOUBLE  -- flops / time_ns x 1e9
-- column: mfu DOUBLE                   -- achieved_flops_per_s / peak_flops, 0..1; null when the peak or the time is unknown
-- column: time_basis VARCHAR           -- device_kernels | step_window | unresolved (no kernel linked to the op's ranges)
--
-- Source of the ranges: torch_npu/profiler/_flops_hook.py (Ascend/pytorch, 2026): for every patched operator the
-- hook calls `mstx.range_start(f"{flops}-{op_name}", domain="mfu_flops")` before the op and `range_end` after,
-- flops from torch_npu/profiler/_flops_formulas.py. traceql stores mstx ranges as host_ops with cat 'mstx'
-- (db: MSTX_EVENTS, message decoded through STRING_IDS); a range is a FLOPs range when its name is
-- `<number>-<op name>` and, where the dump recorded the domain as text (extra['domain']), it is mfu_flops.
-- Definitions:
--   op MFU = sum(flops) / (device time of the kernels whose host launch lies inside one of the op's ranges)
--     / peak: the launch link is the flows table (host op -> first device task; torch_npu db: PYTORCH_API ->
--     TASK by connectionId), same process and thread as the range. The FLOPs are a model of the operator's
--     math (a formula over shapes), the time is measured; the ratio is the op's share of the peak while it
--     runs. No linked kernel (e.g. the launch happened on the task-queue thread after the range closed):
--     time_basis 'unresolved', time and mfu null.
--   step MFU = sum(flops of the ranges starting inside the step window) / step wall time / peak (the usual
--     training MFU: useful math per second of step); run = all step windows together.
WITH r AS MATERIALIZED (
    SELECT h.run_id, h.rank, h.pid, h.tid, h.ts_ns, h.ts_ns + coalesce(h.dur_ns, 0) AS end_ns,
           TRY_CAST(regexp_extract(h.name, '^([0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?)-', 1) AS DOUBLE) AS flops,
           regexp_extract(h.name, '^[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?-(.+)$', 3) AS op_name
    FROM host_ops h
    WHERE h.cat = 'mstx' AND regexp_matches(h.name, '^[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?-.+')
      AND coalesce(h.extra['domain'], 'mfu_flops') = 'mfu_flops'
), linked AS (
    -- kernels launched inside a range (one kernel counted once per range)
    SELECT DISTINCT r.run_id, r.rank, r.op_name, r.ts_ns AS r_ts, r.tid AS r_tid, k.ts_ns AS k_ts, k.stream_id,
           k.dur_ns
    FROM r
    JOIN flows f ON f.run_id = r.run_id AND f.rank = r.rank AND f.src_pid IS NOT DISTINCT FROM r.pid
                AND f.src_tid IS NOT DISTINCT FROM r.tid AND f.src_ts_ns >= r.ts_ns AND f.src_ts_ns <= r.end_ns
    JOIN kernels k ON k.run_id = f.run_id AND k.rank = f.rank AND k.ts_ns = f.dst_ts_ns
                  AND (f.dst_tid IS NULL OR k.stream_id IS NULL OR k.stream_id = f.dst_tid)
), op_time AS (
    SELECT run_id, rank, op_name, sum(dur_ns) AS dev_ns FROM linked GROUP BY ALL
), ops AS (
    SELECT r.run_id, r.rank, 'op' AS scope, NULL::BIGINT AS step, r.op_name, count(*) AS ranges,
           sum(r.flops) AS flops, any_value(t.dev_ns)::BIGINT AS time_ns
    FROM r LEFT JOIN op_time t USING (run_id, rank, op_name)
    GROUP BY r.run_id, r.rank, r.op_name
), w AS (
    SELECT run_id, rank, step, win_start, win_end FROM step_windows WHERE win_end > win_start
), steps AS (
    SELECT w.run_id, w.rank, 'step' AS scope, w.step, NULL::VARCHAR AS op_name, count(r.flops) AS ranges,
           sum(r.flops) AS flops, (any_value(w.win_end) - any_value(w.win_start))::BIGINT AS time_ns
    FROM w JOIN r ON r.run_id = w.run_id AND r.rank = w.rank AND r.ts_ns >= w.win_start AND r.ts_ns < w.win_end
    GROUP BY w.run_id, w.rank, w.step, w.win_start
), run AS (
    SELECT run_id, rank, 'run' AS scope, NULL::BIGINT AS step, NULL::VARCHAR AS op_name, sum(ranges)::BIGINT,
           sum(flops), sum(time_ns)::BIGINT
    FROM steps GROUP BY run_id, rank
), allrows AS (
    SELECT * FROM ops UNION ALL SELECT * FROM steps UNION ALL SELECT * FROM run
)
SELECT run_id, rank, scope, step, op_name, ranges::BIGINT AS ranges, flops, time_ns,
       flops / NULLIF(time_ns, 0) * 1e9 AS achieved_flops_per_s,
       flops / NULLIF(time_ns, 0) * 1e9 / $peak_flops AS mfu,
       CASE WHEN scope = 'op' AND time_ns IS NULL THEN 'unresolved'
            WHEN scope = 'op' THEN 'device_kernels' ELSE 'step_window' END AS time_basis
FROM allrows
ORDER BY run_id, rank, CASE scope WHEN 'run' THEN 0 WHEN 'step' THEN 1 ELSE 2 END, step, flops DESC, op_name;
