-- name: roofline
-- description: Roofline per operator: FLOPs (measured or modeled), HBM bytes, arithmetic intensity, achieved bandwidth and FLOP/s vs the device peaks, and which roof bounds it.
-- param: top_n INTEGER = 50            -- rows to return (by device time)
-- param: peak_hbm_bps DOUBLE = NULL    -- device HBM peak, bytes/s (traceql fills it from the device preset)
-- param: peak_flops DOUBLE = NULL      -- device peak FLOP/s, dense fp16/bf16 (traceql fills it from the device preset)
-- param: line DOUBLE = 0.8             -- a roof is reached at this share of it (memory / compute); below both: latency
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
-- column: bound VARCHAR                -- memory | compute | latency (neither roof reached: see bound_grade) | null when nothing tells
-- column: bound_grade VARCHAR          -- what `bound` rests on: measured / pipe (per-task evidence, op_bounds' rule) | modeled (the roofline's own figures, which are bounds) | null
-- column: model_note VARCHAR           -- why modeled bytes or FLOPs were left out: above the device peak, the model cannot hold for this operator (null when they hold)
--
-- Definitions: modeled FLOPs (when the dump has no measured flops) are
--   MatMul/BatchMatMul/GEMM types: 2 x elements(output) x K, with K = sqrt(elements(A) x elements(B) /
--     (elements(output) x batch(B))) for inputs A, B (batch(B) = product of B's dims before its last two):
--     exact for [..,m,k]x[..,k,n] with or without transposes;
--   element-wise types (Add, Mul, Relu, Tanh, Gelu, Cast...): 1 x elements(output) (the article's tanh estimate);
--   anything else (convolutions included): unknown (null).
-- Three classes (MindStudio Insight's operator roofline): an operator is memory-bound when it reaches `line` of
-- the HBM roof, compute-bound when it reaches `line` of the compute roof, latency-bound when it reaches neither.
-- Per-task evidence decides first (measured PMU bytes or pipe utilisation: queries/_bounds.sql, the class holding
-- most of the operator's time); otherwise the roofline's own figures decide. Modeled bytes or FLOPs that would
-- exceed a peak cannot hold: they are left out (null, with model_note) and never drawn above the roof; with
-- modeled figures only, 'latency' means "below both roofs by the model".
WITH kb AS (
    SELECT * FROM kernel_bytes WHERE NOT is_comm
), fm AS (
    -- the FLOP model once per distinct (op type, shapes): they repeat every step, and splitting and
    -- multiplying the shape texts of every kernel cost ~1 CPU-s on an 8-rank cluster's 600k kernels
    SELECT op_type, input_shapes, output_shapes,
           CASE
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
           END AS fl_model
    FROM (SELECT op_type, input_shapes, output_shapes, string_split(input_shapes, ';') AS ins
          FROM (SELECT DISTINCT op_type, input_shapes, output_shapes FROM kb WHERE flops IS NULL))
), f AS (
    SELECT kb.*, CASE WHEN kb.flops IS NOT NULL THEN kb.flops ELSE fm.fl_model END AS fl,
           CASE WHEN kb.flops IS NOT NULL THEN 'pmu' END AS fl_src0
    FROM kb LEFT JOIN fm ON fm.op_type IS NOT DISTINCT FROM kb.op_type
         AND fm.input_shapes IS NOT DISTINCT FROM kb.input_shapes
         AND fm.output_shapes IS NOT DISTINCT FROM kb.output_shapes AND kb.flops IS NULL
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
, tb AS (
    -- per-task evidence: the class holding most of the operator's measured / pipe-graded time
    SELECT run_id, name, op_type, arg_max(bound, ns) AS ev_bound, arg_max(grade, ns) AS ev_grade
    FROM (SELECT run_id, name, op_type, bound, grade, sum(dur_ns) AS ns
          FROM _task_bounds($peak_hbm_bps::DOUBLE, $peak_flops::DOUBLE, $line::DOUBLE, $line::DOUBLE, 0.5, 10000, 0.5)
          WHERE grade IN ('measured', 'pipe') GROUP BY ALL)
    GROUP BY ALL
), h AS (
    -- a modeled figure above its peak cannot hold: left out, with the reason
    SELECT g.*, tb.ev_bound, tb.ev_grade,
           hbm_bytes_source = 'modeled' AND achieved_bw_bps > $peak_hbm_bps::DOUBLE AS bytes_impossible,
           flops_source = 'modeled' AND achieved_flops_per_s > $peak_flops::DOUBLE AS flops_impossible
    FROM g LEFT JOIN tb USING (run_id, name, op_type)
), v AS (
    SELECT run_id, name, op_type, calls, dur_ns, ev_bound, ev_grade,
           CASE WHEN flops_impossible THEN NULL ELSE flops END AS flops, flops_source,
           CASE WHEN bytes_impossible THEN NULL ELSE hbm_bytes END AS hbm_bytes, hbm_bytes_source,
           CASE WHEN flops_impossible OR bytes_impossible THEN NULL ELSE arithmetic_intensity END AS arithmetic_intensity,
           CASE WHEN bytes_impossible THEN NULL ELSE achieved_bw_bps END AS achieved_bw_bps,
           CASE WHEN flops_impossible THEN NULL ELSE achieved_flops_per_s END AS achieved_flops_per_s,
           nullif(concat_ws('; ',
               CASE WHEN bytes_impossible THEN printf('model cannot hold: modeled bytes at %.1fx the HBM peak',
                                                      achieved_bw_bps / $peak_hbm_bps::DOUBLE) END,
               CASE WHEN flops_impossible THEN printf('model cannot hold: modeled FLOPs at %.1fx the peak FLOP/s',
                                                      achieved_flops_per_s / $peak_flops::DOUBLE) END), '') AS model_note
    FROM h
), r AS (
    SELECT *, achieved_bw_bps / $peak_hbm_bps::DOUBLE AS bw_utilization,
           achieved_flops_per_s / $peak_flops::DOUBLE AS flops_utilization
    FROM v
)
SELECT run_id, name, op_type, calls, dur_ns, flops, flops_source, hbm_bytes, hbm_bytes_source, arithmetic_intensity,
       achieved_bw_bps, achieved_flops_per_s, bw_utilization, flops_utilization,
       $peak_flops::DOUBLE / $peak_hbm_bps::DOUBLE AS ridge_point,
       CASE WHEN ev_bound IS NOT NULL AND ev_bound <> 'unknown' THEN ev_bound
            WHEN bw_utilization >= $line::DOUBLE AND bw_utilization >= coalesce(flops_utilization, 0) THEN 'memory'
            WHEN flops_utilization >= $line::DOUBLE THEN 'compute'
            WHEN bw_utilization IS NOT NULL AND flops_utilization IS NOT NULL THEN 'latency' END AS bound,
       CASE WHEN ev_bound IS NOT NULL AND ev_bound <> 'unknown' THEN ev_grade
            WHEN bw_utilization >= $line::DOUBLE OR flops_utilization >= $line::DOUBLE
                 OR (bw_utilization IS NOT NULL AND flops_utilization IS NOT NULL)
            THEN CASE WHEN coalesce(hbm_bytes_source, '') = 'pmu' AND coalesce(flops_source, '') = 'pmu' THEN 'measured'
                      ELSE 'modeled' END END AS bound_grade,
       model_note
FROM r
ORDER BY dur_ns DESC, name
LIMIT $top_n;
