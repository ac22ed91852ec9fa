-- name: layout_forcers
-- description: Which operators force the layout conversions: each TransData/Transpose/format cast with the compute kernel before and after it on the same stream, grouped by (conversion, neighbours), with time, bytes and the operator that needs the converted layout (the article's memory layout: keep one layout end to end).
-- param: top_n INTEGER = 20            -- rows to return (by device time)
-- column: run_id VARCHAR               -- run
-- column: op_type VARCHAR              -- TransData, Transpose, ...
-- column: src_format VARCHAR           -- the conversion's input formats
-- column: dst_format VARCHAR           -- its output formats
-- column: prev_op VARCHAR              -- operator type of the kernel just before it on the stream
-- column: next_op VARCHAR              -- operator type of the kernel just after it
-- column: forced_by VARCHAR            -- the operator tied to the conversion: the first of the next 4 kernels that reads the converted tensor, else the nearest of the previous 4 whose output it converts, else null
-- column: role VARCHAR                 -- weight (FRACTAL_Z on either side: a conv/matmul weight re-converted every step) | feeds_next | drains_prev | unknown
-- column: calls BIGINT                 -- conversions in the group
-- column: dur_ns BIGINT                -- their device time, ns
-- column: hbm_bytes BIGINT             -- their HBM bytes (chosen source)
-- column: share_of_compute DOUBLE      -- dur_ns / all compute kernels' device time, 0..1
-- column: example_name VARCHAR         -- one conversion's kernel name
-- column: example_shapes VARCHAR       -- input -> output shape of the longest call
--
-- Definitions: conversions as in layout_transforms (op_type TransData*/Transpose*/*FormatCast*, or name with
-- transdata/transpose/format_cast/permute). Neighbours are the compute kernels just before and after on the same
-- (rank, stream), conversions included. A conversion feeds a consumer when one of the next 4 kernels has an input
-- with the conversion's first output shape and dtype (e.g. a weight converted two kernels before its Conv); it
-- drains a producer when it reads the first output of one of the previous 4 kernels.
-- role weight: FRACTAL_Z (the cube unit's weight format) on either side: weights kept in NCHW are converted to
-- FRACTAL_Z for every forward/backward and their gradients converted back.
WITH kb AS MATERIALIZED (
    SELECT kid, run_id, rank, stream_id, compute_seq, name, _op_name(op_type, name) AS op, ts_ns,
           dur_ns, hbm_bytes, input_formats, output_formats, input_shapes, output_shapes,
           coalesce(input_shapes, '') AS ins_txt, coalesce(input_dtypes, '') AS ind_txt,
           trim(string_split(coalesce(output_shapes, ''), ';')[1]) || '|' || trim(string_split(coalesce(output_dtypes, ''), ';')[1]) AS out_key,
           op_type ILIKE 'TransData%' OR op_type ILIKE 'Transpose%' OR op_type ILIKE '%FormatCast%'
               OR name ILIKE '%transdata%' OR name ILIKE '%transpose%' OR name ILIKE '%format_cast%' OR name ILIKE '%permute%'
               AS is_conv
    FROM kernel_bytes WHERE NOT is_comm
), conv0 AS (
    SELECT * FROM kb WHERE is_conv
), want AS MATERIALIZED (
    -- the positions of the 4 compute kernels before and after each conversion on its stream
    SELECT c.kid, c.run_id, c.rank, c.stream_id, o.off, c.compute_seq + o.off AS nseq
    FROM conv0 c CROSS JOIN (SELECT unnest([-4, -3, -2, -1, 1, 2, 3, 4]) AS off) o
), nb AS (
    -- looked up by equi-join on (rank, stream, compute_seq): no re-sort, and linear
    SELECT w.kid, w.run_id, w.rank, w.off, k.op, k.ins_txt, k.ind_txt, k.out_key
    FROM want w
    JOIN kb k ON k.run_id = w.run_id AND k.rank = w.rank AND k.stream_id IS NOT DISTINCT FROM w.stream_id
         AND k.compute_seq = w.nseq
), sig AS (
    -- input keys (shape|dtype) once per distinct input signature among conversions and their neighbours
    SELECT ins_txt, ind_txt,
           list_transform(string_split(ins_txt, ';'), lambda s, i: trim(s) || '|' ||
               trim(string_split(ind_txt, ';')[CASE WHEN len(string_split(ind_txt, ';')) = 1 THEN 1 ELSE i END])) AS in_keys
    FROM (SELECT ins_txt, ind_txt FROM conv0 UNION SELECT ins_txt, ind_txt FROM nb)
), nbk AS (
    SELECT nb.*, sig.in_keys FROM nb JOIN sig ON sig.ins_txt = nb.ins_txt AND sig.ind_txt = nb.ind_txt
), ck AS (
    SELECT c.*, cs.in_keys FROM conv0 c JOIN sig cs ON cs.ins_txt = c.ins_txt AND cs.ind_txt = c.ind_txt
), around AS (
    -- consumer: the nearest following kernel reading the conversion's output; producer: the nearest preceding
    -- kernel whose output the conversion reads
    SELECT c.run_id, c.rank, c.kid,
           any_value(n.op) FILTER (WHERE n.off = -1) AS prev_op,
           any_value(n.op) FILTER (WHERE n.off = 1) AS next_op,
           arg_min(n.op, n.off) FILTER (WHERE n.off > 0 AND list_contains(n.in_keys, c.out_key)) AS consumer,
           arg_max(n.op, n.off) FILTER (WHERE n.off < 0 AND list_contains(c.in_keys, n.out_key)) AS producer
    FROM ck c JOIN nbk n ON n.kid = c.kid AND n.run_id = c.run_id AND n.rank = c.rank
    GROUP BY c.run_id, c.rank, c.kid
), conv AS (
    SELECT c.*, a.prev_op, a.next_op, a.consumer, a.producer
    FROM ck c LEFT JOIN around a ON a.run_id = c.run_id AND a.rank = c.rank AND a.kid = c.kid
), conv2 AS (
    SELECT *, consumer IS NOT NULL AS feeds_next, producer IS NOT NULL AS drains_prev FROM conv
), tot AS (
    SELECT run_id, sum(dur_ns) AS compute_ns FROM kb GROUP BY run_id
), g AS (
    SELECT c.run_id, c.op AS op_type, c.input_formats AS src_format, c.output_formats AS dst_format,
           c.prev_op, c.next_op,
           CASE WHEN c.feeds_next THEN c.consumer WHEN c.drains_prev THEN c.producer END AS forced_by,
           CASE WHEN c.output_formats ILIKE '%FRACTAL_Z%' OR c.input_formats ILIKE '%FRACTAL_Z%' THEN 'weight'
                WHEN c.feeds_next THEN 'feeds_next' WHEN c.drains_prev THEN 'drains_prev' ELSE 'unknown' END AS role,
           count(*) AS calls, sum(c.dur_ns)::BIGINT AS dur_ns, round(sum(c.hbm_bytes))::BIGINT AS hbm_bytes,
           sum(c.dur_ns) / nullif(any_value(t.compute_ns), 0) AS share_of_compute,
           min(c.name) AS example_name,
           arg_max(c.input_shapes || ' -> ' || c.output_shapes, (c.dur_ns, c.ts_ns)) AS example_shapes  -- ties: the later call
    FROM conv2 c JOIN tot t USING (run_id)
    GROUP BY ALL
)
SELECT * FROM g
ORDER BY dur_ns DESC, op_type, src_format, dst_format, prev_op, next_op
LIMIT $top_n;
