-- name: kernel_bytes
-- description: Per-kernel HBM bytes from every source and the chosen one, and the kernel's stream neighbours
-- grain: one row per kernel with a start time (run_id, rank, kid)
-- level: rank
-- order: ts_ns, kid
-- column: kid BIGINT -- kernel id within the run, in scan order (joins the other kernel-level rows)
-- column: run_id VARCHAR -- kernels.run_id
-- column: rank INTEGER -- kernels.rank
-- column: step BIGINT -- kernels.step
-- column: name VARCHAR -- kernels.name
-- column: op_type VARCHAR -- kernels.op_type
-- column: task_type VARCHAR -- kernels.task_type
-- column: is_comm BOOLEAN -- communication kernel (kernels.is_comm, else HCCL task types and hcom*/nccl* names)
-- column: ts_ns BIGINT -- kernels.ts_ns
-- column: dur_ns BIGINT -- duration, ns (negative or null as 0)
-- column: end_ns BIGINT -- ts_ns + dur_ns
-- column: pmu_read BIGINT -- kernels.hbm_read_bytes (per-task PMU; null when not measured)
-- column: pmu_write BIGINT -- kernels.hbm_write_bytes (per-task PMU)
-- column: input_shapes VARCHAR -- kernels.input_shapes
-- column: input_dtypes VARCHAR -- kernels.input_dtypes
-- column: input_formats VARCHAR -- kernels.input_formats
-- column: output_shapes VARCHAR -- kernels.output_shapes
-- column: output_dtypes VARCHAR -- kernels.output_dtypes
-- column: output_formats VARCHAR -- kernels.output_formats
-- column: flops DOUBLE -- kernels.flops
-- column: ub_read_bytes BIGINT -- kernels.ub_read_bytes
-- column: ub_write_bytes BIGINT -- kernels.ub_write_bytes
-- column: l2_read_bytes BIGINT -- kernels.l2_read_bytes
-- column: l2_write_bytes BIGINT -- kernels.l2_write_bytes
-- column: l2_hit_rate DOUBLE -- kernels.l2_hit_rate
-- column: stream_id BIGINT -- kernels.stream_id
-- column: task_id BIGINT -- kernels.task_id
-- column: mac_ratio DOUBLE -- kernels.mac_ratio
-- column: block_dim BIGINT -- kernels.block_dim
-- column: vec_ratio DOUBLE -- kernels.vec_ratio
-- column: scalar_ratio DOUBLE -- kernels.scalar_ratio
-- column: mte2_ratio DOUBLE -- kernels.mte2_ratio
-- column: mte3_ratio DOUBLE -- kernels.mte3_ratio
-- column: mte1_ratio DOUBLE -- kernels.metrics['aic_mte1_ratio'] (L1 -> L0A/L0B, on-chip; PipeUtilization)
-- column: fixpipe_ratio DOUBLE -- kernels.metrics['aic_fixpipe_ratio'] (L0C -> GM/L1; PipeUtilization)
-- column: first_out_shape VARCHAR -- the first output's shape ('' when none)
-- column: first_out_dtype VARCHAR -- the first output's dtype ('' when none)
-- column: modeled_read BIGINT -- input tensor bytes from shapes x dtype sizes (0 for write-only ops; index-style ops: the rows touched, see below; null when unresolved)
-- column: modeled_write BIGINT -- output tensor bytes from shapes x dtype sizes (index-style ops: the rows touched; null when unresolved)
-- column: sampled_read BIGINT -- read bytes apportioned to the kernel from the HBM counter samples by overlap (every kernel the samples' windows overlap gets its share, so the shares add up to the samples' bytes; only where counter_coverage is resolved are they the kernel's own traffic, and only there does hbm_bytes_source take them)
-- column: sampled_write BIGINT -- write bytes apportioned the same way
-- column: sample_period_ns BIGINT -- the rank's HBM counter sampling period, ns (null: no counters)
-- column: counter_coverage VARCHAR -- resolved | unresolved (period > 2 x duration) | outside (the counters' span) | null (no counters)
-- column: hbm_bytes_source VARCHAR -- the source chosen: pmu | sampled | modeled | null (none: unresolved)
-- column: compute_seq BIGINT -- position among the rank's compute kernels on the same stream, in time order (null for communication)
-- column: prev_op VARCHAR -- _op_name of the compute kernel just before on the stream
-- column: prev_end_ns BIGINT -- its end, ns
-- column: prev_out_shape VARCHAR -- its first output shape
-- column: prev_out_dtype VARCHAR -- its first output dtype
-- column: prev2_out_shape VARCHAR -- first output shape of the compute kernel two before
-- column: prev2_out_dtype VARCHAR -- its first output dtype
-- column: read_bytes BIGINT -- HBM read bytes from the chosen source
-- column: write_bytes BIGINT -- HBM write bytes from the chosen source
-- column: hbm_bytes BIGINT -- read_bytes + write_bytes
--
-- One row per kernel with its HBM bytes from every source and the chosen one (see the header), and where it sits
-- on its stream: compute_seq (position among the rank's compute kernels on the same stream, in time order; null
-- for communication), its first output (first_out_shape / first_out_dtype: the first ';' item, trimmed; '' when
-- none) and, for compute kernels, those of the one or two compute kernels just before it on the stream
-- (prev_op = _op_name(op_type, name), prev_end_ns, prev_out_shape / prev_out_dtype,
-- prev2_out_shape / prev2_out_dtype; null when there is none): producer -> consumer queries read neighbours
-- from these columns instead of joining the kernels to themselves.
--
-- Modeled bytes of index-style operators (_index_kind): tensor sizes would count a whole source table for a
-- gather of a few rows. gather: the output holds index count x row size, so read = output + every input but
-- the largest (the indices; the largest input is the table), write = output; scatter / index_put: read = every
-- input but the largest (indices and updates), write = the largest of those (the updates); slice: read = write =
-- output. Without at least two inputs (gather, scatter) or an output (slice) they stay unresolved (null).
WITH k0 AS MATERIALIZED (
    SELECT row_number() OVER () AS kid, run_id, rank, step, name, op_type, task_type,
           _is_comm(is_comm, task_type, name) AS is_comm,
           ts_ns, greatest(coalesce(dur_ns, 0), 0) AS dur_ns, ts_ns + greatest(coalesce(dur_ns, 0), 0) AS end_ns,
           hbm_read_bytes AS pmu_read, hbm_write_bytes AS pmu_write,
           input_shapes, input_dtypes, input_formats, output_shapes, output_dtypes, output_formats,
           flops, ub_read_bytes, ub_write_bytes, l2_read_bytes, l2_write_bytes, l2_hit_rate, stream_id, task_id,
           mac_ratio, block_dim, vec_ratio, scalar_ratio, mte2_ratio, mte3_ratio,
           map_extract_value(metrics, 'aic_mte1_ratio')::DOUBLE AS mte1_ratio,
           map_extract_value(metrics, 'aic_fixpipe_ratio')::DOUBLE AS fixpipe_ratio,
           trim(string_split(coalesce(output_shapes, ''), ';')[1]) AS first_out_shape,
           trim(string_split(coalesce(output_dtypes, ''), ';')[1]) AS first_out_dtype
    FROM kernels
    -- CUPTI range-profiler rows span counter replay, not kernel time: kept in kernels for their counters only
    WHERE ts_ns IS NOT NULL AND coalesce(task_type, '') <> 'cuda_profiler_range'
), sig AS (
    -- modeled bytes, relationally (unnest + aggregates: lambdas over nested lists cost ~100 us per kernel),
    -- once per distinct (shapes, dtypes) text: shapes repeat every step, so this is small on big stores
    SELECT DISTINCT shapes, dtypes FROM (
        SELECT input_shapes AS shapes, input_dtypes AS dtypes FROM k0
        UNION ALL SELECT output_shapes, output_dtypes FROM k0)
    WHERE upper(trim(shapes)) NOT IN ('', 'N/A') AND dtypes IS NOT NULL
), tens AS (
    -- one row per tensor (i = position), then one row per dimension
    SELECT shapes, dtypes, unnest(string_split(shapes, ';')) AS shape,
           generate_subscripts(string_split(shapes, ';'), 1) AS i, string_split(dtypes, ';') AS dl
    FROM sig
), dims AS (
    SELECT shapes, dtypes, i, dl, trim(unnest(string_split(trim(shape, ' "[]()'), ','))) AS dim FROM tens
), tb AS (
    -- bytes of one tensor: product of its dims (an empty shape is a scalar; a negative or unparsable dim makes
    -- it unknown) x the size of its dtype (one dtype given for several tensors applies to all)
    SELECT shapes, dtypes,
           CASE WHEN bool_and(dim = '' OR TRY_CAST(dim AS BIGINT) >= 0)
                THEN product(CASE WHEN dim = '' THEN 1 ELSE TRY_CAST(dim AS BIGINT) END) END
           * _dtype_bytes(any_value(dl)[CASE WHEN len(any_value(dl)) = 1 THEN 1 ELSE i END]) AS b
    FROM dims GROUP BY shapes, dtypes, i
), modeled AS (
    -- null when any tensor is unknown: a partial sum never passes for the whole
    SELECT shapes, dtypes, CASE WHEN count(b) = count(*) THEN round(sum(b))::BIGINT END AS total,
           count(*) AS n_tensors,
           -- the index-style model's parts: all tensors but the largest, and the largest of those
           CASE WHEN count(b) = count(*) THEN round(sum(b) - max(b))::BIGINT END AS but_largest,
           CASE WHEN count(b) = count(*) AND count(*) >= 2
                THEN round(list_sort(list(b), 'DESC')[2])::BIGINT END AS second_largest
    FROM tb GROUP BY shapes, dtypes
), w AS MATERIALIZED (
    SELECT * FROM _hbm_windows()
), span AS (
    -- window index of the kernel's start and end (ASOF: the last window starting at or before the instant)
    -- (narrow columns only: the one wide copy of the kernels is k0; ranks of a million kernels derive in bounded memory)
    SELECT k.kid, k.run_id, k.rank, k.ts_ns, k.end_ns, coalesce(a.wi, 1) AS wi0, b.wi AS wi1
    FROM (SELECT kid, run_id, rank, ts_ns, end_ns FROM k0) k
    ASOF LEFT JOIN w a ON k.run_id = a.run_id AND k.rank = a.rank AND k.ts_ns >= a.win_start
    ASOF LEFT JOIN w b ON k.run_id = b.run_id AND k.rank = b.rank AND k.end_ns >= b.win_start
), ov AS (
    SELECT s.kid, w.run_id, w.rank, w.wi, w.read_bps, w.write_bps, w.win_end - w.win_start AS win_ns,
           greatest(least(s.end_ns, w.win_end) - greatest(s.ts_ns, w.win_start), 0) AS ov_ns
    FROM (SELECT kid, run_id, rank, ts_ns, end_ns, unnest(range(wi0, wi1 + 1)) AS wi FROM span WHERE wi1 IS NOT NULL) s
    JOIN w ON s.run_id = w.run_id AND s.rank = w.rank AND s.wi = w.wi
    WHERE s.end_ns > w.win_start AND s.ts_ns < w.win_end
       OR (s.ts_ns = s.end_ns AND s.ts_ns >= w.win_start AND s.ts_ns < w.win_end)
), shares AS (
    SELECT kid,
           read_bps * win_ns / 1e9 * CASE WHEN tot_ns > 0 THEN ov_ns / tot_ns ELSE 0 END AS r,
           write_bps * win_ns / 1e9 * CASE WHEN tot_ns > 0 THEN ov_ns / tot_ns ELSE 0 END AS wr
    FROM (SELECT *, sum(ov_ns) OVER (PARTITION BY run_id, rank, wi) AS tot_ns FROM ov)
), sampled AS (
    SELECT kid, round(sum(r))::BIGINT AS sampled_read, round(sum(wr))::BIGINT AS sampled_write
    FROM shares GROUP BY kid
), seqs AS (
    -- position among the rank's compute kernels on the same stream, in time order, and the kernels before it
    -- (null for communication): queries find a kernel's neighbours here instead of sorting again
    SELECT kid,
           CASE WHEN NOT is_comm THEN row_number() OVER s END AS compute_seq,
           CASE WHEN NOT is_comm THEN lag(op) OVER s END AS prev_op,
           CASE WHEN NOT is_comm THEN lag(end_ns) OVER s END AS prev_end_ns,
           CASE WHEN NOT is_comm THEN lag(first_out_shape) OVER s END AS prev_out_shape,
           CASE WHEN NOT is_comm THEN lag(first_out_dtype) OVER s END AS prev_out_dtype,
           CASE WHEN NOT is_comm THEN lag(first_out_shape, 2) OVER s END AS prev2_out_shape,
           CASE WHEN NOT is_comm THEN lag(first_out_dtype, 2) OVER s END AS prev2_out_dtype
    FROM (SELECT kid, run_id, rank, stream_id, is_comm, ts_ns, end_ns, _op_name(op_type, name) AS op,
                 first_out_shape, first_out_dtype FROM k0)
    WINDOW s AS (PARTITION BY run_id, rank, stream_id, is_comm ORDER BY ts_ns, kid)
), cov AS (
    -- counter_coverage: does the rank's HBM counter sampling resolve this kernel's own bytes?
    SELECT k0.kid, sp.period_ns AS sample_period_ns,
           CASE WHEN sp.period_ns IS NULL THEN NULL
                WHEN k0.ts_ns < sp.first_ns OR k0.end_ns > sp.last_ns THEN 'outside'
                WHEN sp.period_ns <= 2 * k0.dur_ns THEN 'resolved'
                ELSE 'unresolved' END AS counter_coverage
    FROM (SELECT kid, run_id, rank, ts_ns, end_ns, dur_ns FROM k0) k0
    LEFT JOIN _hbm_sampling() sp ON sp.run_id = k0.run_id AND sp.rank = k0.rank
), ix AS (
    -- the byte-model kind of each distinct operator (regex matches once per operator, not once per kernel)
    SELECT op, _index_kind(op) AS kind, _is_write_only(op) AS write_only
    FROM (SELECT DISTINCT _op_name(op_type, name) AS op FROM k0)
), b AS (
    SELECT k0.*,
           CASE ix.kind
                WHEN 'gather' THEN CASE WHEN mi.n_tensors >= 2 THEN mo.total + mi.but_largest END
                WHEN 'scatter' THEN CASE WHEN mi.n_tensors >= 2 THEN mi.but_largest END
                WHEN 'slice' THEN mo.total
                ELSE CASE WHEN ix.write_only AND mi.total IS NOT NULL THEN 0 ELSE mi.total END
           END AS modeled_read,
           CASE ix.kind
                WHEN 'gather' THEN CASE WHEN mi.n_tensors >= 2 THEN mo.total END
                WHEN 'scatter' THEN CASE WHEN mi.n_tensors >= 2 THEN mi.second_largest END
                ELSE mo.total
           END AS modeled_write,
           s.sampled_read, s.sampled_write, c.sample_period_ns, c.counter_coverage,
           CASE WHEN k0.pmu_read IS NOT NULL OR k0.pmu_write IS NOT NULL THEN 'pmu'
                WHEN s.sampled_read IS NOT NULL AND c.counter_coverage = 'resolved' AND NOT k0.is_comm THEN 'sampled'
                WHEN ix.kind IS NOT NULL AND modeled_read IS NULL AND modeled_write IS NULL THEN NULL
                WHEN mi.total IS NOT NULL OR mo.total IS NOT NULL THEN 'modeled' END AS hbm_bytes_source,
           q.compute_seq, q.prev_op, q.prev_end_ns, q.prev_out_shape, q.prev_out_dtype, q.prev2_out_shape, q.prev2_out_dtype
    FROM k0
    LEFT JOIN ix ON ix.op IS NOT DISTINCT FROM _op_name(k0.op_type, k0.name)
    LEFT JOIN modeled mi ON mi.shapes = k0.input_shapes AND mi.dtypes = k0.input_dtypes
    LEFT JOIN modeled mo ON mo.shapes = k0.output_shapes AND mo.dtypes = k0.output_dtypes
    LEFT JOIN sampled s ON s.kid = k0.kid
    LEFT JOIN seqs q ON q.kid = k0.kid
    LEFT JOIN cov c ON c.kid = k0.kid
)
SELECT *,
       CASE hbm_bytes_source WHEN 'pmu' THEN coalesce(pmu_read, 0) WHEN 'sampled' THEN sampled_read
            WHEN 'modeled' THEN coalesce(modeled_read, 0) END AS read_bytes,
       CASE hbm_bytes_source WHEN 'pmu' THEN coalesce(pmu_write, 0) WHEN 'sampled' THEN sampled_write
            WHEN 'modeled' THEN coalesce(modeled_write, 0) END AS write_bytes,
       CASE hbm_bytes_source WHEN 'pmu' THEN coalesce(pmu_read, 0) + coalesce(pmu_write, 0)
            WHEN 'sampled' THEN sampled_read + sampled_write
            WHEN 'modeled' THEN coalesce(modeled_read, 0) + coalesce(modeled_write, 0) END AS hbm_bytes
FROM b;
