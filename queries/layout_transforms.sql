-- name: layout_transforms
-- description: Layout/format conversions (TransData, Transpose, format casts): time, share of compute time and HBM bytes per conversion, with source and target formats (the article's memory-layout optimisation).
-- param: top_n INTEGER = 20            -- rows to return (by device time)
-- column: run_id VARCHAR               -- run
-- column: op_type VARCHAR              -- TransData, Transpose, ...
-- column: src_format VARCHAR           -- input formats as written (NCHW, ND...; `;` between inputs)
-- column: dst_format VARCHAR           -- output formats (NC1HWC0, FRACTAL_Z...)
-- column: src_dtype VARCHAR            -- input dtypes
-- column: dst_dtype VARCHAR            -- output dtypes
-- column: calls BIGINT                 -- kernel launches
-- column: dur_ns BIGINT                -- total device time, ns
-- column: share_of_compute DOUBLE      -- dur_ns / all compute kernels' device time in the run, 0..1
-- column: hbm_bytes BIGINT             -- HBM bytes moved (chosen source, see hbm_bytes_source)
-- column: hbm_bytes_source VARCHAR     -- pmu | sampled | modeled | mixed (definitions in _helpers.sql)
-- column: example_name VARCHAR         -- one operator name of the group
-- column: example_input_shape VARCHAR  -- input shapes of the longest call
-- column: example_output_shape VARCHAR -- output shapes of the longest call
--
-- Definitions: a layout transform is a compute kernel whose op_type starts with TransData or Transpose, or
-- contains FormatCast, or whose function name (the name before any template or parameter list) contains
-- transdata, transpose, format_cast or permute (case-insensitive). Memory copies (memcpy / memset tasks)
-- are never layout transforms.
-- Groups are (op_type, input formats, output formats, input dtypes, output dtypes).
WITH kb AS NOT MATERIALIZED (  -- each reader scans its own columns (the conversions are few)
    SELECT * FROM kernel_bytes WHERE NOT is_comm
), conv AS (
    -- the conversions' (task type, name, op type) once per distinct triple: the ILIKE tests and the name's
    -- regexp over every kernel cost ~0.35 CPU-s on an 8-rank cluster's 600k kernels, a few hundred distinct
    SELECT task_type, name, op_type
    FROM (SELECT *, regexp_extract(name, '^[^(<]*') AS fname FROM (SELECT DISTINCT task_type, name, op_type FROM kb))
    -- copies (memcpy/memset tasks) move bytes but change no layout; a CUDA kernel's name is matched on its
    -- function name only (`scal_kernel<...>(cublasTransposeParams<float>, ...)` is a BLAS scale, not a transpose)
    WHERE NOT (coalesce(task_type, '') ILIKE '%memcpy%' OR coalesce(task_type, '') ILIKE '%memset%'
               OR name ILIKE 'memcpy%' OR name ILIKE 'memset%' OR name = 'MEMCPY_ASYNC')
      AND (op_type ILIKE 'TransData%' OR op_type ILIKE 'Transpose%' OR op_type ILIKE '%FormatCast%'
           OR fname ILIKE '%transdata%' OR fname ILIKE '%transpose%' OR fname ILIKE '%format_cast%'
           OR fname ILIKE '%permute%')
), t AS (
    -- (conv's rows are distinct: an inner join keeps each kernel once, and builds on the small side)
    SELECT kb.* FROM kb
    JOIN conv c ON c.task_type IS NOT DISTINCT FROM kb.task_type AND c.name IS NOT DISTINCT FROM kb.name
         AND c.op_type IS NOT DISTINCT FROM kb.op_type
), tot AS (
    SELECT run_id, sum(dur_ns) AS compute_ns FROM kb GROUP BY run_id
)
SELECT t.run_id, coalesce(t.op_type, t.name) AS op_type, t.input_formats AS src_format, t.output_formats AS dst_format,
       t.input_dtypes AS src_dtype, t.output_dtypes AS dst_dtype,
       count(*) AS calls, sum(t.dur_ns)::BIGINT AS dur_ns,
       sum(t.dur_ns) / nullif(any_value(tot.compute_ns), 0) AS share_of_compute,
       sum(t.hbm_bytes)::BIGINT AS hbm_bytes,
       CASE WHEN min(t.hbm_bytes_source) = max(t.hbm_bytes_source) THEN min(t.hbm_bytes_source)
            WHEN count(t.hbm_bytes_source) > 0 THEN 'mixed' END AS hbm_bytes_source,
       min(t.name) AS example_name,
       arg_max(t.input_shapes, (t.dur_ns, t.input_shapes, t.output_shapes)) AS example_input_shape,
       arg_max(t.output_shapes, (t.dur_ns, t.input_shapes, t.output_shapes)) AS example_output_shape
FROM t JOIN tot USING (run_id)
GROUP BY t.run_id, coalesce(t.op_type, t.name), t.input_formats, t.output_formats, t.input_dtypes, t.output_dtypes
-- (a total order over the grouping key: the first N rows of a larger top_n are this top_n's rows, which the
-- analysis session relies on to serve a chart's top 15 from findings' top 1000)
ORDER BY dur_ns DESC, op_type, src_format, dst_format, src_dtype, dst_dtype
LIMIT $top_n;
