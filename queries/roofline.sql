-- name: roofline
-- description: Roofline per operator: FLOPs (measured or modeled), HBM bytes, arithmetic intensity, achieved bandwidth and FLOP/s vs the device peaks, and which roof bounds it.
-- param: top_n INTEGER = 50            -- rows to return (by device time)
-- param: peak_hbm_bps DOUBLE = NULL    -- device HBM peak, bytes/s (traceql fills it from the device preset)
-- param: peak_flops DOUBLE = NULL      -- device peak FLOP/s, dense fp16/bf16 (traceql fills it from the device preset)
-- column: run_id VARCHAR               -- run
-- column: name VARCHAR                 -- operator name
-- column: op_type VARCHAR              -- operator type
-- column: calls BIGINT                 -- kernel launches
-- column: dur_ns BIGINT                -- total device time, ns
-- column: flops DOUBLE                 -- floating-point operations over the calls that have them
-- column: flops_source VARCHAR         -- pmu (kernels.flops) | modeled (from shapes, see below) | mixed; null when unknown
-- column: hbm_bytes BIGINT             -- HBM bytes (chosen source)
-- column: hbm_bytes_source VARCHAR     -- pmu | sampled | modeled | mixed
-- column: arithmetic_intensity DOUBLE  -- flops / hbm_bytes, FLOP/byte (calls having both)
-- column: achieved_bw_bps DOUBLE       -- hbm_bytes / device time of the calls with bytes, bytes/s
-- column: achieved_flops_per_s DOUBLE  -- flops / device time of the calls with flops, FLOP/s
-- column: bw_utilization DOUBLE        -- achieved_bw_bps / peak_hbm_bps, 0..1
-- column: flops_utilization DOUBLE     -- achieved_flops_per_s / peak_flops, 0..1
-- column: ridge_point DOUBLE           -- peak_flops / peak_hbm_bps, FLOP/byte: below it an operator is memory-bound
-- column: bound VARCHAR                -- memory (intensity < ridge point) | compute; null when either is unknown
--
-- Definitions: modeled FLOPs (when the dump has no measured flops) are
--   MatMul/BatchMatMul/GEMM types: 2 x elements(output) x K, with K = sqrt(elements(A) x elements(B) /
--     (elements(output) x batch(B))) for inputs A, B (batch(B) = product of B's dims before its last two):
--     exact for [..,m,k]x[..,k,n] with or without transposes;
--   element-wise types (Add, Mul, Relu, Tanh, Gelu, Cast...): 1 x elements(output) (the article's tanh estimate);
--   anything else (convolutions included): unknown (null).
WITH kb AS MATERIALIZED (
    SELECT *, string_split(input_shapes, ';') AS ins FROM kernel_bytes WHERE NOT is_comm
), f AS (
    SELECT *,
           CASE WHEN flops IS NOT NULL THEN flops
                WHEN regexp_matches(lower(coalesce(op_type, '')), '^(batch)?matmul|gemm|^bmm|^linear')
                     AND len(ins) >= 2 AND _shape_elems(ins[1]) > 0 AND _shape_elems(ins[2]) > 0
                     AND _shape_elems(string_split(output_shapes, ';')[1]) > 0
                THEN 2 * _shape_elems(string_split(output_shapes, ';')[1]) * sqrt(
                       _shape_elems(ins[1]) * _shape_elems(ins[2])
                       / (_shape_elems(string_split(output_shapes, ';')[1])
                          * _shape_elems(array_to_string(string_split(ins[2], ',')[1:-3], ','))))
                WHEN lower(coalesce(op_type, '')) IN ('add', 'adds', 'addv2', 'sub', 'mul', 'muls', 'div', 'realdiv',
                     'relu', 'relugrad', 'gelu', 'gelugrad', 'fastgelu', 'fastgelugrad', 'tanh', 'tanhgrad',
                     'sigmoid', 'sigmoidgrad', 'exp', 'log', 'sqrt', 'rsqrt', 'neg', 'abs', 'maximum', 'minimum',
                     'pow', 'square', 'cast', 'axpy', 'axpyv2', 'silu', 'swish', 'leakyrelu', 'elu', 'mish')
                     AND _shape_elems(string_split(output_shapes, ';')[1]) IS NOT NULL
                THEN _shape_elems(string_split(output_shapes, ';')[1])
           END AS fl,
           CASE WHEN flops IS NOT NULL THEN 'pmu' END AS fl_src0
    FROM kb
), g AS (
    SELECT run_id, name, op_type, count(*) AS calls, sum(dur_ns)::BIGINT AS dur_ns,
           sum(fl) AS flops,
           CASE WHEN count(fl) = 0 THEN NULL
                WHEN count(fl_src0) = count(fl) THEN 'pmu' WHEN count(fl_src0) = 0 THEN 'modeled' ELSE 'mixed' END AS flops_source,
           sum(hbm_bytes)::BIGINT AS hbm_bytes,
           CASE WHEN min(hbm_bytes_source) = max(hbm_bytes_source) THEN min(hbm_bytes_source)
                WHEN count(hbm_bytes_source) > 0 THEN 'mixed' END AS hbm_bytes_source,
           sum(fl) FILTER (WHERE hbm_bytes > 0) / nullif(sum(hbm_bytes) FILTER (WHERE fl IS NOT NULL), 0) AS arithmetic_intensity,
           sum(hbm_bytes) * 1e9 / nullif(sum(dur_ns) FILTER (WHERE hbm_bytes IS NOT NULL), 0) AS achieved_bw_bps,
           sum(fl) * 1e9 / nullif(sum(dur_ns) FILTER (WHERE fl IS NOT NULL), 0) AS achieved_flops_per_s
    FROM f GROUP BY run_id, name, op_type
)
SELECT run_id, name, op_type, calls, dur_ns, flops, flops_source, hbm_bytes, hbm_bytes_source, arithmetic_intensity,
       achieved_bw_bps, achieved_flops_per_s,
       achieved_bw_bps / $peak_hbm_bps::DOUBLE AS bw_utilization,
       achieved_flops_per_s / $peak_flops::DOUBLE AS flops_utilization,
       $peak_flops::DOUBLE / $peak_hbm_bps::DOUBLE AS ridge_point,
       CASE WHEN arithmetic_intensity IS NULL OR $peak_flops::DOUBLE IS NULL OR $peak_hbm_bps::DOUBLE IS NULL THEN NULL
            WHEN arithmetic_intensity < $peak_flops::DOUBLE / $peak_hbm_bps::DOUBLE THEN 'memory' ELSE 'compute' END AS bound
FROM g
ORDER BY dur_ns DESC, name
LIMIT $top_n;
