-- name: cube_efficiency
-- description: MatMul/Conv-class operators against the device peaks: FLOP/s and HBM bandwidth achieved, cube (MAC) pipe busy ratio and block dim against the most cores any kernel of the run used - operators far below both roofs or on few cores are tiling suspects (the article's checklist step 3).
-- param: top_n INTEGER = 20            -- operator rows to return (by device time)
-- param: cube_regex VARCHAR = '(?i)^(matmul|matmulv2|matmulv3|batchmatmul|batchmatmulv2|batchmatmulv3|gemm|gemmv2|fullyconnection|conv2d|conv2dv2|conv3d|conv2dbackpropinput|conv2dbackpropfilter|conv3dbackpropinput|conv3dbackpropfilter|quantbatchmatmul.*|weightquantbatchmatmul.*|grouped_?matmul.*)$' -- operator types that run on the cube unit
-- param: peak_hbm_bps DOUBLE = NULL    -- device HBM peak, bytes/s (traceql fills it from the device preset)
-- param: peak_flops DOUBLE = NULL      -- device peak FLOP/s, dense fp16/bf16 (traceql fills it from the device preset)
-- column: run_id VARCHAR               -- run
-- column: name VARCHAR                 -- operator name
-- column: op_type VARCHAR              -- operator type
-- column: input_shapes VARCHAR         -- input shapes of the longest call
-- column: input_dtypes VARCHAR         -- input dtypes of the longest call
-- column: calls BIGINT                 -- kernel launches
-- column: dur_ns BIGINT                -- device time, ns
-- column: share_of_compute DOUBLE      -- dur_ns / all compute kernels' device time, 0..1
-- column: flops DOUBLE                 -- FLOPs (measured, else modeled for MatMul types as in the roofline query)
-- column: flops_utilization DOUBLE     -- flops / dur / peak_flops, 0..1 (null when either is unknown)
-- column: hbm_bytes BIGINT             -- HBM bytes (chosen source)
-- column: bw_utilization DOUBLE        -- hbm_bytes / dur / peak_hbm_bps, 0..1
-- column: mac_ratio DOUBLE             -- cube (MAC) pipe busy ratio, time-weighted over calls that have it (PipeUtilization), 0..1
-- column: block_dim DOUBLE             -- mean block dim (AI cores used) over the calls; null for non-Ascend kernels (a CUDA grid is not a core count)
-- column: max_block_dim BIGINT         -- the largest block dim any cube-class kernel of the run used (the cube cores available, as far as the dump shows)
-- column: block_dim_ratio DOUBLE       -- block_dim / max_block_dim, 0..1
--
-- Definitions: modeled MatMul FLOPs = 2 x elements(output) x K with K = sqrt(elements(A) x elements(B) /
-- (elements(output) x batch(B))) (roofline.sql); convolutions have no modeled FLOPs (null) unless the dump
-- measured them. Utilisations are over the calls that have the numerator.
WITH kb AS MATERIALIZED (
    -- block dim counts AI cores on Ascend only (a CUDA grid size is not a core count)
    SELECT run_id, name, op_type, _op_name(op_type, name) AS op, input_shapes, input_dtypes,
           output_shapes, dur_ns, hbm_bytes, flops, mac_ratio,
           CASE WHEN upper(task_type) IN ('AI_CORE', 'AI_VECTOR_CORE', 'MIX_AIC', 'MIX_AIV') THEN block_dim END AS bd
    FROM kernel_bytes WHERE NOT is_comm
), sig AS (
    -- modeled FLOPs once per distinct (op type, shapes): shapes repeat every step
    SELECT op_type, input_shapes, output_shapes,
           string_split(coalesce(input_shapes, ''), ';') AS ins, string_split(coalesce(output_shapes, ''), ';')[1] AS out1
    FROM (SELECT DISTINCT op_type, input_shapes, output_shapes FROM kb WHERE flops IS NULL)
), sigf AS (
    SELECT op_type, input_shapes, output_shapes,
           CASE WHEN regexp_matches(lower(coalesce(op_type, '')), '^(batch)?matmul|gemm|^bmm|^linear')
                     AND len(ins) >= 2 AND _shape_elems(ins[1]) > 0 AND _shape_elems(ins[2]) > 0 AND _shape_elems(out1) > 0
                THEN 2 * _shape_elems(out1) * sqrt(_shape_elems(ins[1]) * _shape_elems(ins[2])
                     / (_shape_elems(out1) * coalesce(nullif(list_reduce(list_transform(
                           string_split(trim(ins[2], ' "[]()'), ',')[1:-3], lambda d: TRY_CAST(trim(d) AS DOUBLE)),
                           lambda a, b: a * b, 1::DOUBLE), 0), 1)))
           END AS mfl
    FROM sig
), cube AS (
    SELECT op, regexp_matches(op, $cube_regex) AS is_cube FROM (SELECT DISTINCT op FROM kb)
), f AS (
    SELECT kb.*, c.is_cube FROM kb JOIN cube c USING (op)
), tot AS (
    SELECT run_id, sum(dur_ns) AS compute_ns,
           max(bd) FILTER (WHERE is_cube) AS max_bd
    FROM f GROUP BY run_id
), fc AS (
    -- the cube kernels alone get their modeled FLOPs (the other two thirds of the kernels are only counted
    -- in tot)
    SELECT f.*, coalesce(f.flops, s.mfl) AS fl
    FROM f
    LEFT JOIN sigf s ON f.flops IS NULL AND s.op_type IS NOT DISTINCT FROM f.op_type
         AND s.input_shapes IS NOT DISTINCT FROM f.input_shapes AND s.output_shapes IS NOT DISTINCT FROM f.output_shapes
    WHERE f.is_cube
), g0 AS (
    SELECT f.run_id, f.name, f.op AS op_type,
           arg_max(f.input_shapes, (f.dur_ns, f.input_shapes, f.input_dtypes)) AS input_shapes,
           arg_max(f.input_dtypes, (f.dur_ns, f.input_shapes, f.input_dtypes)) AS input_dtypes,  -- one call's shapes and dtypes
           count(*) AS calls, sum(f.dur_ns) AS dur,
           sum(f.fl) AS flops,
           sum(f.fl) * 1e9 / nullif(sum(f.dur_ns) FILTER (WHERE f.fl IS NOT NULL), 0) / $peak_flops::DOUBLE AS flops_utilization,
           round(sum(f.hbm_bytes))::BIGINT AS hbm_bytes,
           sum(f.hbm_bytes) * 1e9 / nullif(sum(f.dur_ns) FILTER (WHERE f.hbm_bytes IS NOT NULL), 0) / $peak_hbm_bps::DOUBLE AS bw_utilization,
           sum(f.mac_ratio * f.dur_ns) / nullif(sum(f.dur_ns) FILTER (WHERE f.mac_ratio IS NOT NULL), 0) AS mac_ratio,
           avg(f.bd) AS block_dim
    FROM fc f
    GROUP BY f.run_id, f.name, f.op
), g AS (
    -- the run's totals joined to the ~hundreds of operator rows, not to every kernel
    SELECT g0.run_id, g0.name, g0.op_type, g0.input_shapes, g0.input_dtypes, g0.calls, g0.dur::BIGINT AS dur_ns,
           g0.dur / nullif(t.compute_ns, 0) AS share_of_compute,
           g0.flops, g0.flops_utilization, g0.hbm_bytes, g0.bw_utilization, g0.mac_ratio, g0.block_dim,
           t.max_bd::BIGINT AS max_block_dim
    FROM g0 JOIN tot t USING (run_id)
)
SELECT *, block_dim / nullif(max_block_dim, 0) AS block_dim_ratio
FROM g
ORDER BY dur_ns DESC, name
LIMIT $top_n;
