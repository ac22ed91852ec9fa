-- name: dtype_traffic
-- description: HBM traffic by precision: per operator the share of its tensor bytes in fp32, its HBM bytes and time, and what fp16/bf16 would save (half the fp32 bytes, and the time they take when the operator is bandwidth-bound) - the article's mixed precision.
-- param: top_n INTEGER = 20            -- operator rows to return (by time saved), after the run row
-- param: keep_fp32_regex VARCHAR = '(?i)(loss|softmaxcrossentropy|logsoftmax|foreach|apply(adam|momentum|gradientdescent|rmsprop)|adamw?$|lamb|sgd|norm$|reducesum|reducemean)' -- operators mixed precision keeps in fp32 (loss, optimizer update, reductions): counted but not in the saving
-- param: mem_bound_util DOUBLE = 0.5   -- an operator counts as bandwidth-bound when its achieved HBM bandwidth >= this x peak (all operators when the peak is unknown)
-- param: peak_hbm_bps DOUBLE = NULL    -- device HBM peak, bytes/s (traceql fills it from the device preset)
-- column: run_id VARCHAR               -- run
-- column: scope VARCHAR                -- run (totals) | op (one row per operator name and type)
-- column: name VARCHAR                 -- operator name (null for scope run)
-- column: op_type VARCHAR              -- operator type
-- column: calls BIGINT                 -- kernel launches (compute kernels only)
-- column: dur_ns BIGINT                -- device time, ns
-- column: hbm_bytes BIGINT             -- HBM bytes (chosen source, _helpers.sql)
-- column: hbm_share DOUBLE             -- hbm_bytes / all compute kernels' HBM bytes, 0..1
-- column: tensor_bytes BIGINT          -- input + output tensor bytes from shapes x dtypes (calls with shapes)
-- column: fp32_tensor_bytes BIGINT     -- the part of tensor_bytes in fp32 tensors
-- column: fp32_fraction DOUBLE         -- fp32_tensor_bytes / tensor_bytes, 0..1
-- column: keep_fp32 BOOLEAN            -- true when the operator matches keep_fp32_regex (not counted in the saving)
-- column: bw_utilization DOUBLE        -- achieved HBM bandwidth / peak, 0..1 (null without a peak)
-- column: bandwidth_bound BOOLEAN      -- bw_utilization >= mem_bound_util (true for every operator when the peak is unknown)
-- column: saved_bytes BIGINT           -- hbm_bytes x fp32_fraction / 2: HBM bytes fp16/bf16 would not move (0 for keep_fp32 operators)
-- column: saved_ns BIGINT              -- dur_ns x saved_bytes / hbm_bytes for bandwidth-bound operators, else 0, ns
-- column: compute_ns BIGINT            -- all compute kernels' device time in the run, ns
--
-- Definitions: fp32 tensors are those whose dtype is FLOAT/float32/fp32 (also DT_FLOAT, torch.float32, single);
-- one dtype applies to every tensor when the dump gives one. HBM bytes halve when those tensors move in 16 bits;
-- a bandwidth-bound operator's time scales with its bytes. Communication kernels are left out.
WITH g AS (
    -- kernels grouped by op and tensor signature first: shapes repeat every step, so the per-tensor list work
    -- below runs once per distinct signature instead of once per kernel
    SELECT run_id, name, _op_name(op_type, name) AS op_type, input_shapes, input_dtypes,
           output_shapes, output_dtypes,
           count(*) AS calls, sum(dur_ns) AS dur, sum(hbm_bytes) AS bytes,
           sum(dur_ns) FILTER (WHERE hbm_bytes IS NOT NULL) AS bytes_dur
    FROM kernel_bytes WHERE NOT is_comm
    GROUP BY ALL
), kb AS (
    SELECT *,
           list_transform(string_split(coalesce(input_shapes, ''), ';'), lambda s, i: {'s': s,
               'd': string_split(coalesce(input_dtypes, ''), ';')[CASE WHEN len(string_split(coalesce(input_dtypes, ''), ';')) = 1 THEN 1 ELSE i END]})
           || list_transform(string_split(coalesce(output_shapes, ''), ';'), lambda s, i: {'s': s,
               'd': string_split(coalesce(output_dtypes, ''), ';')[CASE WHEN len(string_split(coalesce(output_dtypes, ''), ';')) = 1 THEN 1 ELSE i END]})
               AS tensors
    FROM g
), tb AS (
    SELECT *,
           list_sum(list_transform(tensors, lambda t: coalesce(_shape_elems(t.s) * _dtype_bytes(t.d), 0))) AS tbytes,
           list_sum(list_transform(tensors, lambda t: CASE
               WHEN regexp_matches(lower(trim(coalesce(t.d, ''))), '^(dt_|torch\.)?(float|float32|fp32|single)$')
               THEN coalesce(_shape_elems(t.s) * _dtype_bytes(t.d), 0) ELSE 0 END)) AS fbytes
    FROM kb
), ops AS (
    SELECT run_id, name, op_type, sum(calls) AS calls, sum(dur) AS dur, sum(bytes) AS bytes,
           sum(bytes_dur) AS bytes_dur, sum(calls * tbytes) AS tbytes, sum(calls * fbytes) AS fbytes
    FROM tb GROUP BY run_id, name, op_type
), c AS (
    SELECT *,
           regexp_matches(op_type, $keep_fp32_regex) OR regexp_matches(name, $keep_fp32_regex) AS keep,
           fbytes / nullif(tbytes, 0) AS ffrac,
           bytes * 1e9 / nullif(bytes_dur, 0) / $peak_hbm_bps::DOUBLE AS util
    FROM ops
), s AS (
    SELECT *,
           coalesce(util >= $mem_bound_util::DOUBLE, $peak_hbm_bps::DOUBLE IS NULL) AS bwb,
           CASE WHEN keep THEN 0 ELSE coalesce(bytes * ffrac / 2, 0) END AS saved_b
    FROM c
), s2 AS (
    SELECT *, CASE WHEN bwb AND bytes > 0 THEN dur * saved_b / bytes ELSE 0 END AS saved_t FROM s
), tot AS (
    SELECT run_id, sum(dur) AS compute_ns, sum(bytes) AS all_bytes FROM ops GROUP BY run_id
), rows_op AS (
    SELECT s2.run_id, 'op' AS scope, name, op_type, calls, dur AS dur_ns, bytes AS hbm_bytes,
           bytes / nullif(t.all_bytes, 0) AS hbm_share, tbytes, fbytes, ffrac AS fp32_fraction, keep AS keep_fp32,
           util AS bw_utilization, bwb AS bandwidth_bound, saved_b, saved_t, t.compute_ns
    FROM s2 JOIN tot t USING (run_id)
), rows_run AS (
    SELECT ru.run_id, 'run' AS scope, NULL AS name, NULL AS op_type, coalesce(sum(o.calls), 0) AS calls,
           coalesce(sum(o.dur_ns), 0) AS dur_ns, sum(o.hbm_bytes) AS hbm_bytes,
           CASE WHEN sum(o.hbm_bytes) > 0 THEN 1.0 END AS hbm_share, sum(o.tbytes) AS tbytes, sum(o.fbytes) AS fbytes,
           sum(o.fbytes) / nullif(sum(o.tbytes), 0) AS fp32_fraction, NULL AS keep_fp32,
           sum(o.hbm_bytes) * 1e9 / nullif(sum(o.dur_ns) FILTER (WHERE o.hbm_bytes IS NOT NULL), 0) / $peak_hbm_bps::DOUBLE AS bw_utilization,
           NULL AS bandwidth_bound, coalesce(sum(o.saved_b), 0) AS saved_b, coalesce(sum(o.saved_t), 0) AS saved_t,
           coalesce(any_value(o.compute_ns), 0) AS compute_ns
    FROM runs ru LEFT JOIN rows_op o ON o.run_id = ru.run_id
    GROUP BY ru.run_id
), u AS (
    SELECT * FROM rows_run
    UNION ALL
    SELECT * FROM (SELECT * FROM rows_op ORDER BY saved_t DESC, saved_b DESC, hbm_bytes DESC NULLS LAST, name LIMIT $top_n)
)
SELECT run_id, scope, name::VARCHAR AS name, op_type::VARCHAR AS op_type, calls::BIGINT AS calls, dur_ns::BIGINT AS dur_ns,
       round(hbm_bytes)::BIGINT AS hbm_bytes, hbm_share::DOUBLE AS hbm_share, round(tbytes)::BIGINT AS tensor_bytes,
       round(fbytes)::BIGINT AS fp32_tensor_bytes, fp32_fraction::DOUBLE AS fp32_fraction, keep_fp32::BOOLEAN AS keep_fp32,
       bw_utilization::DOUBLE AS bw_utilization, bandwidth_bound::BOOLEAN AS bandwidth_bound,
       round(saved_b)::BIGINT AS saved_bytes, round(saved_t)::BIGINT AS saved_ns, compute_ns::BIGINT AS compute_ns
FROM u
ORDER BY run_id, scope = 'op', saved_ns DESC, saved_bytes DESC, hbm_bytes DESC NULLS LAST, name;
