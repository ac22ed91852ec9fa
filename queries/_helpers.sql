-- _helpers.sql: macros shared by the queries in this folder (not a query itself: files starting with `_`
-- are helpers). traceql loads every helper before running a query; in the stock duckdb shell run
-- `.read views.sql` in the store directory, then `.read <repo>/queries/_helpers.sql`, then the query.
--
-- Definitions used by several queries (written once, here):
--
-- * Compute vs communication kernels: a kernel is communication when kernels.is_comm is true; when a parser
--   left is_comm null, HCCL task types and hcom*/nccl* names count as communication. Everything else that
--   runs on the device (AI Core/Vector/CPU tasks, CUDA kernels, memcpy/memset) is compute.
--
-- * Per-kernel HBM bytes and where they came from (`hbm_bytes_source`), best first:
--     pmu      kernels.hbm_read_bytes / hbm_write_bytes (measured per task by the profiler).
--     sampled  the device HBM counters (counters.track 'HBM', metric read_bw / write_bw, unit bytes/s, one
--              series per channel; a sample holds until the next sample of the same series, the last sample
--              of a series holds for no time). All channels are summed into one device read and one device
--              write bandwidth step function per rank. Each constant piece ("window") carries
--              bandwidth x length bytes; those bytes are split among the kernels that overlap the window in
--              proportion to each kernel's overlap time with it (two kernels overlapping the same 2 ms of a
--              window get equal shares; a window no kernel overlaps keeps its bytes unattributed). Kernels are
--              matched to windows with ASOF joins on their start and end, then an equi-join on the window
--              index range they span: linear in kernels + windows, never a range join.
--              A sample is the mean over its period (20 ms on torch_npu's default sampling), so a kernel's share
--              is its own traffic only when the kernel is not much shorter than the period: a kernel uses its
--              sampled bytes only when period <= 2 x its duration (counter_coverage 'resolved'); otherwise
--              ('unresolved': e.g. 17 us kernels under 20 ms samples get the window's mean bandwidth whatever
--              they did) or outside the counters' span ('outside') it falls back to modeled bytes.
--              Communication kernels never take sampled bytes: a collective waiting 70 ms overlaps windows whose
--              traffic is other engines' (its own transfer is in comm_ops / comm_bandwidth).
--     modeled  input + output tensor bytes from shapes x dtype sizes (a lower bound: no re-reads, no
--              workspace). Reads = inputs, writes = outputs; write-only operators (ZerosLike, Fill, Empty...:
--              _is_write_only) read nothing. A lower bound never enters a utilisation compared with the
--              70% / 80% lines.
--   A kernel uses its best available source; a kernel outside the counter span and without shapes has none.
--   (Kernels with PMU bytes still take their overlap share of a sampled window; their own PMU bytes are used.)
--
-- * Evidence grade of a rank's HBM bandwidth (bw_source in _bw_segments, the grade findings cite):
--     measured  per-task PMU bytes (pmu): the device bandwidth at an instant is the running kernels' bytes
--               spread over their run time;
--     sampled   HBM counter samples, no PMU bytes: the device bandwidth at an instant is the counters' step
--               function itself (never sampled bytes packed into kernel time, which inflates bandwidth by
--               1 / busy fraction); resolved in time only to the sampling period;
--     modeled   tensor sizes only: a lower bound, shown but never tested against the lines;
--     none      no byte source at all.
--
-- * Device HBM bandwidth at an instant (for utilisation and saturation): with PMU bytes (or modeled bytes only),
--   the sum over the kernels running at that instant of (kernel HBM bytes / kernel duration): each kernel's
--   bytes are spread evenly over its run time; with counter samples and no PMU bytes, the counters' value then.
--   Utilisation = that bandwidth / the device peak (peak_hbm_bps, from traceql/devices.py or a param).
--
-- * Step windows (per run, rank, step): when the steps table has start times for a rank, its rows
--   [ts_ns, ts_ns + dur_ns) are the windows (for torch_npu dumps: the host ProfilerStep#N span); otherwise
--   each kernels.step value (null = one window for the whole dump) spans from its first kernel start to its
--   last kernel end. The profiler's step_trace_time.csv step is the device span inside a window (first to last
--   device op = Computing + Communication(Not Overlapped) + Free; Preparing is before it): step_breakdown
--   reports both. A window is cut at the start of the next one so windows never overlap. The last window of a
--   rank is extended to the end of the device work that started in it (device_tail_ns: how much), so kernels
--   still running after the last step marker are counted.

-- Bytes per element of a dtype as Ascend (FLOAT, DT_BF16...) or PyTorch (float, c10::Half...) write it.
CREATE OR REPLACE MACRO _dtype_bytes(t) AS (
    CASE regexp_replace(lower(trim(t)), '^(dt_|torch\.|c10::|acl_)', '')
        WHEN 'float' THEN 4 WHEN 'float32' THEN 4 WHEN 'fp32' THEN 4 WHEN 'single' THEN 4 WHEN 'tf32' THEN 4
        WHEN 'float16' THEN 2 WHEN 'fp16' THEN 2 WHEN 'half' THEN 2
        WHEN 'bf16' THEN 2 WHEN 'bfloat16' THEN 2
        WHEN 'double' THEN 8 WHEN 'float64' THEN 8 WHEN 'fp64' THEN 8
        WHEN 'int8' THEN 1 WHEN 'uint8' THEN 1 WHEN 'bool' THEN 1 WHEN 'char' THEN 1
        WHEN 'signed char' THEN 1 WHEN 'unsigned char' THEN 1 WHEN 'byte' THEN 1
        WHEN 'qint8' THEN 1 WHEN 'quint8' THEN 1 WHEN 'hifloat8' THEN 1
        WHEN 'float8_e4m3fn' THEN 1 WHEN 'float8_e5m2' THEN 1 WHEN 'fp8' THEN 1
        WHEN 'int16' THEN 2 WHEN 'uint16' THEN 2 WHEN 'short' THEN 2 WHEN 'short int' THEN 2
        WHEN 'int32' THEN 4 WHEN 'uint32' THEN 4 WHEN 'int' THEN 4 WHEN 'unsigned int' THEN 4 WHEN 'qint32' THEN 4
        WHEN 'int64' THEN 8 WHEN 'uint64' THEN 8 WHEN 'long' THEN 8 WHEN 'long int' THEN 8
        WHEN 'long long' THEN 8 WHEN 'long long int' THEN 8
        WHEN 'complex32' THEN 4 WHEN 'complex64' THEN 8 WHEN 'complex128' THEN 16
        WHEN 'int4' THEN 0.5 WHEN 'uint4' THEN 0.5
    END
);

-- Elements of one shape text ("32,3,224,224"; "" = scalar = 1); null when a dim is unknown or negative
-- (dynamic). list_reduce propagates a null dim to the product.
CREATE OR REPLACE MACRO _shape_elems(s) AS (
    CASE WHEN s IS NULL OR upper(trim(s)) = 'N/A' THEN NULL
         ELSE list_reduce(
             list_transform(string_split(trim(s, ' "[]()'), ','),
                            lambda d: CASE WHEN trim(d) = '' THEN 1::DOUBLE
                                           WHEN TRY_CAST(trim(d) AS BIGINT) >= 0 THEN TRY_CAST(trim(d) AS BIGINT)::DOUBLE END),
             lambda a, b: a * b, 1::DOUBLE) END
);

-- Bytes of each `;`-separated shape with its `;`-separated dtype (one dtype applies to all shapes).
CREATE OR REPLACE MACRO _tensors_list(shapes, dtypes) AS (
    list_transform(
        string_split(shapes, ';'),
        lambda s, i: _shape_elems(s) * _dtype_bytes(
            string_split(dtypes, ';')[CASE WHEN len(string_split(dtypes, ';')) = 1 THEN 1 ELSE i END]))
);

-- Sum of a _tensors_list; null when anything is unknown, so a partial sum never passes for the whole.
CREATE OR REPLACE MACRO _list_total(b) AS (
    CASE WHEN len(b) > 0 AND list_count(b) = len(b) THEN round(list_sum(b))::BIGINT END
);

-- Total tensor bytes (for ad hoc use; _kernel_bytes computes the list once per kernel instead).
CREATE OR REPLACE MACRO _tensors_bytes(shapes, dtypes) AS (
    CASE WHEN shapes IS NOT NULL AND dtypes IS NOT NULL AND upper(trim(shapes)) NOT IN ('', 'N/A')
         THEN _list_total(_tensors_list(shapes, dtypes)) END
);

-- Communication test used when kernels.is_comm is null.
CREATE OR REPLACE MACRO _is_comm(is_comm, task_type, name) AS (
    coalesce(is_comm, upper(task_type) IN ('HCCL', 'COMMUNICATION') OR name ILIKE 'hcom%' OR name ILIKE '%nccl%', false)
);

-- An operator's type as the queries group by it: op_type, or the kernel name when the dump has none (N/A).
CREATE OR REPLACE MACRO _op_name(op_type, name) AS (
    coalesce(nullif(op_type, 'N/A'), name)
);

-- A host-to-device copy running on the device (memcpy task/kernel named H2D/HtoD, or Ascend's MEMCPY_ASYNC).
CREATE OR REPLACE MACRO _is_h2d_copy(is_comm, task_type, name) AS (
    NOT _is_comm(is_comm, task_type, name)
    AND (task_type ILIKE '%memcpy%' OR name ILIKE 'memcpy%' OR name = 'MEMCPY_ASYNC')
    AND (name ILIKE '%htod%' OR name ILIKE '%h2d%' OR name ILIKE '%host to device%' OR name = 'MEMCPY_ASYNC')
);

-- The device HBM bandwidth counter samples (counters track 'HBM', read_bw / write_bw in bytes/s, one series per
-- channel; averaged/total series are left out so channels are not counted twice), with each series' next sample.
CREATE OR REPLACE MACRO _hbm_samples() AS TABLE
SELECT run_id, rank, channel, metric, ts_ns, value,
       value - coalesce(lag(value) OVER w, 0) AS d,
       lead(ts_ns) OVER w AS next_ts
FROM counters
WHERE upper(track) = 'HBM' AND metric IN ('read_bw', 'write_bw') AND unit = 'bytes/s'
  AND ts_ns IS NOT NULL AND value IS NOT NULL
  AND NOT (coalesce(channel, '') ILIKE '%avg%' OR coalesce(channel, '') ILIKE '%average%'
           OR coalesce(channel, '') ILIKE '%total%')
WINDOW w AS (PARTITION BY run_id, rank, channel, metric ORDER BY ts_ns);

-- Device HBM read/write bandwidth per rank as a step function: one row per constant window.
CREATE OR REPLACE MACRO _hbm_windows() AS TABLE
WITH s AS (
    SELECT * FROM _hbm_samples()
), deltas AS (
    -- value changes of every series; a series stops contributing at its last sample
    SELECT run_id, rank, metric, ts_ns, d FROM s
    UNION ALL
    SELECT run_id, rank, metric, ts_ns, -value FROM s WHERE next_ts IS NULL
), pts AS (
    SELECT run_id, rank, ts_ns,
           sum(CASE WHEN metric = 'read_bw' THEN d ELSE 0 END) AS d_read,
           sum(CASE WHEN metric = 'write_bw' THEN d ELSE 0 END) AS d_write
    FROM deltas GROUP BY run_id, rank, ts_ns
), cum AS (
    SELECT run_id, rank, ts_ns AS win_start,
           lead(ts_ns) OVER (PARTITION BY run_id, rank ORDER BY ts_ns) AS win_end,
           greatest(sum(d_read) OVER (PARTITION BY run_id, rank ORDER BY ts_ns ROWS UNBOUNDED PRECEDING), 0) AS read_bps,
           greatest(sum(d_write) OVER (PARTITION BY run_id, rank ORDER BY ts_ns ROWS UNBOUNDED PRECEDING), 0) AS write_bps
    FROM pts
)
SELECT run_id, rank, win_start, win_end, read_bps, write_bps,
       row_number() OVER (PARTITION BY run_id, rank ORDER BY win_start) AS wi
FROM cum WHERE win_end > win_start;

-- How each rank's HBM counters were sampled: period_ns (the median gap between consecutive samples of one
-- series: what the counters resolve in time), series, the span they cover and the highest summed read + write
-- bandwidth of any window (max_bps). A counter sample is a mean over its period: it resolves a kernel's
-- bandwidth only when the kernel is not much shorter than the period (see _kernel_bytes).
CREATE OR REPLACE MACRO _hbm_sampling() AS TABLE
WITH g AS (
    SELECT run_id, rank, channel, metric, next_ts - ts_ns AS gap FROM _hbm_samples() WHERE next_ts > ts_ns
), p AS (
    SELECT run_id, rank, median(gap)::BIGINT AS period_ns, count(DISTINCT (channel, metric)) AS series
    FROM g GROUP BY run_id, rank
), w AS (
    SELECT run_id, rank, min(win_start) AS first_ns, max(win_end) AS last_ns, max(read_bps + write_bps) AS max_bps
    FROM _hbm_windows() GROUP BY run_id, rank
)
SELECT w.run_id, w.rank, p.period_ns, p.series, w.first_ns, w.last_ns, w.max_bps
FROM w JOIN p ON p.run_id = w.run_id AND p.rank = w.rank;

-- Operators that only write their output (a fill or a fresh allocation): in the byte model they read nothing,
-- whatever input tensor the profiler lists (ZerosLike lists the tensor whose shape it copies).
CREATE OR REPLACE MACRO _is_write_only(op) AS (
    regexp_matches(lower(coalesce(op, '')),
                   '^(aten::)?(zeroslike|zeros_like|zeros|zero_|oneslike|ones_like|ones|fill|fill_|fills|fillv2|fill_v2|empty|emptylike|empty_like|empty_strided|memset|memsetzero|new_zeros|new_ones|new_empty|full|full_like)$')
);

-- One row per kernel with its HBM bytes from every source and the chosen one (see the header), and where it sits
-- on its stream: compute_seq (position among the rank's compute kernels on the same stream, in time order; null
-- for communication), its first output (first_out_shape / first_out_dtype: the first ';' item, trimmed; '' when
-- none) and, for compute kernels, those of the one or two compute kernels just before it on the stream
-- (prev_op = _op_name(op_type, name), prev_end_ns, prev_out_shape / prev_out_dtype,
-- prev2_out_shape / prev2_out_dtype; null when there is none): producer -> consumer queries read neighbours
-- from these columns instead of joining the kernels to themselves.
CREATE OR REPLACE MACRO _kernel_bytes() AS TABLE
WITH k0 AS MATERIALIZED (
    SELECT row_number() OVER () AS kid, run_id, rank, step, name, op_type, task_type,
           _is_comm(is_comm, task_type, name) AS is_comm,
           ts_ns, greatest(coalesce(dur_ns, 0), 0) AS dur_ns, ts_ns + greatest(coalesce(dur_ns, 0), 0) AS end_ns,
           hbm_read_bytes AS pmu_read, hbm_write_bytes AS pmu_write,
           input_shapes, input_dtypes, input_formats, output_shapes, output_dtypes, output_formats,
           flops, ub_read_bytes, ub_write_bytes, l2_read_bytes, l2_write_bytes, l2_hit_rate, stream_id, task_id,
           mac_ratio, block_dim,
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
    SELECT shapes, dtypes, CASE WHEN count(b) = count(*) THEN round(sum(b))::BIGINT END AS total
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
), b AS (
    SELECT k0.*,
           CASE WHEN _is_write_only(_op_name(k0.op_type, k0.name)) AND mi.total IS NOT NULL THEN 0 ELSE mi.total END
               AS modeled_read,
           mo.total AS modeled_write, s.sampled_read, s.sampled_write, c.sample_period_ns, c.counter_coverage,
           CASE WHEN k0.pmu_read IS NOT NULL OR k0.pmu_write IS NOT NULL THEN 'pmu'
                WHEN s.sampled_read IS NOT NULL AND c.counter_coverage = 'resolved' AND NOT k0.is_comm THEN 'sampled'
                WHEN mi.total IS NOT NULL OR mo.total IS NOT NULL THEN 'modeled' END AS hbm_bytes_source,
           q.compute_seq, q.prev_op, q.prev_end_ns, q.prev_out_shape, q.prev_out_dtype, q.prev2_out_shape, q.prev2_out_dtype
    FROM k0
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

-- Step windows per run/rank/step (see the header).
CREATE OR REPLACE MACRO _step_windows() AS TABLE
WITH st AS (
    SELECT run_id, rank, step, ts_ns AS win_start, ts_ns + dur_ns AS win_end, 'steps' AS window_source
    FROM steps WHERE ts_ns IS NOT NULL AND dur_ns IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY run_id, rank, step ORDER BY source, ts_ns) = 1  -- one row per step
), ks AS (
    SELECT run_id, rank, step, min(ts_ns) AS win_start, max(ts_ns + greatest(coalesce(dur_ns, 0), 0)) AS win_end,
           'kernels' AS window_source
    FROM kernels
    WHERE ts_ns IS NOT NULL AND coalesce(task_type, '') <> 'cuda_profiler_range'
      AND NOT EXISTS (SELECT 1 FROM st WHERE st.run_id = kernels.run_id AND st.rank = kernels.rank)
    GROUP BY run_id, rank, step
), u AS (
    SELECT * FROM st UNION ALL SELECT * FROM ks
), cut AS (
    SELECT run_id, rank, step, win_start, window_source,
           least(win_end, coalesce(lead(win_start) OVER o, win_end)) AS win_end,
           lead(win_start) OVER o IS NULL AS is_last
    FROM u WINDOW o AS (PARTITION BY run_id, rank ORDER BY win_start, step)
), tail AS (
    -- device work still running after the last host step marker ends (a GPU runs behind the host: the last
    -- ProfilerStep's kernels often finish after it) belongs to that step, not to nobody
    SELECT c.run_id, c.rank, max(k.ts_ns + greatest(coalesce(k.dur_ns, 0), 0)) AS last_end
    FROM (SELECT * FROM cut WHERE is_last AND window_source = 'steps') c
    JOIN kernels k ON k.run_id = c.run_id AND k.rank = c.rank
    WHERE k.ts_ns >= c.win_start AND coalesce(k.task_type, '') <> 'cuda_profiler_range'
    GROUP BY c.run_id, c.rank
)
SELECT c.run_id, c.rank, c.step, c.win_start,
       CASE WHEN c.is_last THEN greatest(c.win_end, coalesce(t.last_end, c.win_end)) ELSE c.win_end END AS win_end,
       c.window_source,
       CASE WHEN c.is_last THEN greatest(coalesce(t.last_end, c.win_end) - c.win_end, 0) ELSE 0 END AS device_tail_ns
FROM cut c LEFT JOIN tail t ON t.run_id = c.run_id AND t.rank = c.rank;

-- Communication ops per rank, matched across ranks (one row per op and rank).
-- Source: comm_ops (the profiler's communication analysis, with transit time) for every rank that has rows
-- there, otherwise the rank's communication kernels (no transit split). Duplicate comm_ops rows for the same op
-- (same rank, name and start) from several files are kept once, preferring a row with transit time.
-- Matching: a collective is issued in the same order by every member of its group, so the k-th collective of
-- group G on one rank is the k-th collective of G on every other rank (`ordinal`; ops without a group name
-- form one group). The match is trusted only when all members agree on the op type (types_agree).
-- p2p ops (kind p2p, or send/receive names) are not matched. last_rank is the member that started last.
-- Clocks: ranks write their own clocks, which can be off by milliseconds to minutes. clock_offset_ns is the
-- rank's offset from the reference rank (the lowest rank with trusted matches): the median over shared
-- collectives of (its end - the reference rank's end), since every member of a collective ends within the
-- transfer time of the others; applied (else 0) only when larger than the collectives' own skew (the median
-- duration of the shorter member). Arrivals are compared on aligned clocks, and first/last_arrival_ns are
-- given on the rank's own clock; last_rank_offset_ns is the late member's offset (queries/clock_offsets.sql
-- reports the same estimate with its basis).
CREATE OR REPLACE MACRO _comm_events() AS TABLE
WITH co AS MATERIALIZED (
    SELECT run_id, rank, step, name, lower(op_type) AS op_type, group_name, kind, ts_ns,
           greatest(dur_ns, 0) AS dur_ns, transit_ns, 'comm_ops' AS comm_source
    FROM comm_ops
    WHERE ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND coalesce(name, '') <> 'Total Op Info'
    QUALIFY row_number() OVER (PARTITION BY run_id, rank, name, ts_ns ORDER BY transit_ns IS NULL, source) = 1
), ck AS (
    SELECT k.run_id, k.rank, k.step, k.name, lower(k.op_type) AS op_type, NULL::VARCHAR AS group_name,
           NULL::VARCHAR AS kind, k.ts_ns, greatest(coalesce(k.dur_ns, 0), 0) AS dur_ns, NULL::BIGINT AS transit_ns,
           'kernels' AS comm_source
    FROM kernels k
    ANTI JOIN (SELECT DISTINCT run_id, rank FROM co) c ON k.run_id = c.run_id AND k.rank = c.rank
    WHERE k.ts_ns IS NOT NULL AND _is_comm(k.is_comm, k.task_type, k.name)
), m AS (
    SELECT *, coalesce(group_name, '') AS group_key,
           coalesce(kind = 'p2p', false) OR name ILIKE '%send%' OR name ILIKE '%receive%' OR name ILIKE '%recv%' AS is_p2p
    FROM (SELECT * FROM co UNION ALL SELECT * FROM ck)
), o AS (
    SELECT *, row_number() OVER (PARTITION BY run_id, rank, group_key, is_p2p ORDER BY ts_ns, name) AS ordinal FROM m
), i AS (
    SELECT *, count(*) OVER inst AS n_ranks,
           coalesce(min(op_type) OVER inst = max(op_type) OVER inst, true) AS types_agree
    FROM o WINDOW inst AS (PARTITION BY run_id, group_key, is_p2p, ordinal)
), tm AS (
    -- trusted matches, for the clock offsets
    SELECT run_id, rank, group_key, ordinal, ts_ns + dur_ns AS end_ns, dur_ns FROM i
    WHERE NOT is_p2p AND types_agree AND n_ranks > 1
), ref AS (
    SELECT run_id, min(rank) AS ref_rank FROM tm GROUP BY run_id
), est AS (
    SELECT c.run_id, c.rank, quantile_disc(c.end_ns - x.end_ns, 0.5) AS off,
           quantile_disc(least(c.dur_ns, x.dur_ns), 0.5) AS skew
    FROM tm c JOIN ref r ON r.run_id = c.run_id
    JOIN tm x ON x.run_id = c.run_id AND x.rank = r.ref_rank AND x.group_key = c.group_key AND x.ordinal = c.ordinal
    GROUP BY c.run_id, c.rank
), a AS (
    SELECT i.*, coalesce(CASE WHEN abs(e.off) > e.skew THEN e.off END, 0)::BIGINT AS clock_offset_ns
    FROM i LEFT JOIN est e ON e.run_id = i.run_id AND e.rank = i.rank
)
SELECT run_id, rank, step, name, op_type, group_name, kind, is_p2p, comm_source, group_key, ordinal,
       ts_ns, dur_ns, ts_ns + dur_ns AS end_ns, transit_ns, n_ranks,
       min(ts_ns - clock_offset_ns) OVER inst + clock_offset_ns AS first_arrival_ns,
       max(ts_ns - clock_offset_ns) OVER inst + clock_offset_ns AS last_arrival_ns,
       arg_max(rank, ts_ns - clock_offset_ns) OVER inst AS last_rank,
       types_agree, clock_offset_ns,
       arg_max(clock_offset_ns, ts_ns - clock_offset_ns) OVER inst AS last_rank_offset_ns
FROM a
WINDOW inst AS (PARTITION BY run_id, group_key, is_p2p, ordinal);

-- Each communication op split in two parts (no parameters: stored by traceql.derive via _timeline_base):
--   peer wait [ts_ns, wait_end_ns): from this rank's start until the last member of the collective started
--     (empty when this rank started last, for p2p, or when the match is not trusted);
--   rest [wait_end_ns, end_ns): transit_frac of it moves data: the profiler's transit time / the rest's length
--     (capped at 1); null when the dump records no transit split (communication kernels only, Level0 dumps):
--     how much of that time moved data is then unknown, never assumed.
CREATE OR REPLACE MACRO _comm_parts_base() AS TABLE
WITH ce AS (
    SELECT *, CASE WHEN NOT is_p2p AND types_agree AND n_ranks > 1 AND last_rank <> rank AND last_arrival_ns > ts_ns
                   THEN least(last_arrival_ns, end_ns) ELSE ts_ns END AS wait_end_ns
    FROM _comm_events()
)
SELECT *, 'comm' AS part,
       CASE WHEN end_ns > wait_end_ns
            THEN CASE WHEN transit_ns IS NOT NULL THEN least(greatest(transit_ns, 0) / (end_ns - wait_end_ns), 1) END
            ELSE 0 END AS transit_frac
FROM ce;

-- The device timeline per rank, cut into constant pieces inside the step windows: one row per piece with the
-- number of compute kernels (n_comp; host-to-device copies count, n_copy of them are such copies) and of all
-- kernels (n_kernels) running, the device HBM bandwidth (bw_bps: every running kernel's bytes / duration,
-- communication kernels included), where the rank's bytes came from (rank_source: pmu | sampled | modeled |
-- mixed), the bandwidth's evidence grade (bw_source: pmu | sampled | modeled, see the header), and the
-- communication parts (_comm_parts_base) running: how many (n_comm), how many of them in peer wait
-- (n_peer_wait), how many with no transit split (n_unsplit) and the mean transit_frac of those running
-- (transit_share; parts without a split count as 0 there). in_counter_span: the piece lies inside the span of
-- the rank's HBM counter samples (after a series' last sample its bandwidth is not known: not zero).
-- One sweep: +/- events at kernel starts/ends and at communication part edges, running sums in time order;
-- window edges are extra cut points. (Communication edges cut the bandwidth pieces too: a constant piece cut in
-- two carries the same bandwidth, so every sum over pieces is unchanged, and the timeline needs no second
-- sweep over all the bandwidth pieces' edges to add communication.)
CREATE OR REPLACE MACRO _bw_segments() AS TABLE
WITH kb AS MATERIALIZED (
    SELECT run_id, rank, ts_ns, end_ns, is_comm, coalesce(hbm_bytes, 0) * 1e9 / dur_ns AS bw, hbm_bytes_source,
           _is_h2d_copy(is_comm, task_type, name)::INTEGER AS cp
    FROM _kernel_bytes() WHERE dur_ns > 0
), cw AS MATERIALIZED (
    -- the counters' own bandwidth step function (read + write), for ranks whose bandwidth is sampled
    SELECT run_id, rank, win_start, win_end, read_bps + write_bps AS bps FROM _hbm_windows()
), src AS (
    -- where the rank's bytes came from: one source when all its kernels with bytes share it, else mixed; and
    -- which series gives its device bandwidth (bw_source): per-task PMU bytes when it has any, else its HBM
    -- counters when it has them, else the modeled lower bound
    SELECT k.run_id, k.rank,
           CASE WHEN min(hbm_bytes_source) = max(hbm_bytes_source) THEN min(hbm_bytes_source)
                WHEN count(hbm_bytes_source) > 0 THEN 'mixed' END AS rank_source,
           CASE WHEN bool_or(hbm_bytes_source = 'pmu') THEN 'pmu'
                WHEN EXISTS (SELECT 1 FROM cw WHERE cw.run_id = k.run_id AND cw.rank = k.rank) THEN 'sampled'
                WHEN count(hbm_bytes_source) > 0 THEN 'modeled' END AS bw_source
    FROM kb k GROUP BY k.run_id, k.rank
), win AS MATERIALIZED (
    SELECT * FROM _step_windows()
), cp AS MATERIALIZED (
    SELECT run_id, rank, ts_ns, wait_end_ns, end_ns, transit_frac FROM _comm_parts_base()
), ev AS (
    -- (compute, kernels, bandwidth, copies, communication parts, in peer wait, transit_frac, no transit split,
    -- counter bandwidth) changes
    SELECT run_id, rank, ts_ns AS t, CASE WHEN is_comm THEN 0 ELSE 1 END AS dc, 1 AS dk, bw AS dbw, cp AS dp,
           0 AS dm, 0 AS dpw, 0.0 AS dtf, 0 AS du, 0.0 AS dcb, 0 AS dcs FROM kb
    UNION ALL SELECT run_id, rank, end_ns, CASE WHEN is_comm THEN 0 ELSE -1 END, -1, -bw, -cp, 0, 0, 0.0, 0, 0.0, 0 FROM kb
    UNION ALL SELECT run_id, rank, win_start, 0, 0, 0, 0, 0, 0, 0.0, 0, 0.0, 0 FROM win
    UNION ALL SELECT run_id, rank, win_end, 0, 0, 0, 0, 0, 0, 0.0, 0, 0.0, 0 FROM win
    UNION ALL SELECT run_id, rank, ts_ns, 0, 0, 0, 0, 1, 1, 0.0, 0, 0.0, 0 FROM cp WHERE wait_end_ns > ts_ns
    UNION ALL SELECT run_id, rank, wait_end_ns, 0, 0, 0, 0, -1, -1, 0.0, 0, 0.0, 0 FROM cp WHERE wait_end_ns > ts_ns
    UNION ALL SELECT run_id, rank, wait_end_ns, 0, 0, 0, 0, 1, 0, coalesce(transit_frac, 0), (transit_frac IS NULL)::INTEGER, 0.0, 0
              FROM cp WHERE end_ns > wait_end_ns
    UNION ALL SELECT run_id, rank, end_ns, 0, 0, 0, 0, -1, 0, -coalesce(transit_frac, 0), -(transit_frac IS NULL)::INTEGER, 0.0, 0
              FROM cp WHERE end_ns > wait_end_ns
    UNION ALL SELECT run_id, rank, win_start, 0, 0, 0, 0, 0, 0, 0.0, 0, bps, 1 FROM cw
    UNION ALL SELECT run_id, rank, win_end, 0, 0, 0, 0, 0, 0, 0.0, 0, -bps, -1 FROM cw
), pts AS (
    SELECT run_id, rank, t, sum(dc) AS dc, sum(dk) AS dk, sum(dbw) AS dbw, sum(dp) AS dp,
           sum(dm) AS dm, sum(dpw) AS dpw, sum(dtf) AS dtf, sum(du) AS du, sum(dcb) AS dcb, sum(dcs) AS dcs
    FROM ev GROUP BY run_id, rank, t
), seg AS (
    SELECT run_id, rank, t AS seg_start, lead(t) OVER (PARTITION BY run_id, rank ORDER BY t) AS seg_end,
           sum(dc) OVER c AS n_comp, sum(dk) OVER c AS n_kernels, sum(dp) OVER c AS n_copy, sum(dbw) OVER c AS bw_sum,
           sum(dm) OVER c AS n_comm, sum(dpw) OVER c AS n_peer_wait, sum(dtf) OVER c AS transit_sum,
           sum(du) OVER c AS n_unsplit, sum(dcb) OVER c AS counter_bw, sum(dcs) OVER c AS n_counter
    FROM pts
    WINDOW c AS (PARTITION BY run_id, rank ORDER BY t ROWS UNBOUNDED PRECEDING)
)
SELECT seg.run_id, seg.rank, win.step, win.window_source, win.win_start, win.win_end,
       seg.seg_start, seg.seg_end, seg.seg_end - seg.seg_start AS dur_ns,
       seg.n_comp::BIGINT AS n_comp, seg.n_kernels::BIGINT AS n_kernels, seg.n_copy::BIGINT AS n_copy,
       CASE WHEN src.bw_source = 'sampled' THEN greatest(seg.counter_bw, 0)
            WHEN seg.n_kernels > 0 THEN greatest(seg.bw_sum, 0) ELSE 0 END AS bw_bps,
       src.rank_source, src.bw_source, seg.n_counter > 0 AS in_counter_span,
       seg.n_comm::BIGINT AS n_comm, seg.n_peer_wait::BIGINT AS n_peer_wait, seg.n_unsplit::BIGINT AS n_unsplit,
       CASE WHEN seg.n_comm > 0 THEN seg.transit_sum / seg.n_comm ELSE 0 END AS transit_share
FROM seg
ASOF JOIN win ON seg.run_id = win.run_id AND seg.rank = win.rank AND seg.seg_start >= win.win_start
LEFT JOIN src ON src.run_id = seg.run_id AND src.rank = seg.rank
WHERE seg.seg_end IS NOT NULL AND seg.seg_end > seg.seg_start AND seg.seg_start < win.win_end;

-- Saturated compute: an instant where a compute kernel runs and the device HBM bandwidth is at least
-- sat_threshold x peak_hbm_bps. The saturated bandwidth pieces only, each with the saturated time before it
-- (a prefix sum), so saturated time up to any instant p is one ASOF look-up: the last saturated piece starting
-- at or before p gives sat_before_ns + (least(p, seg_end) - seg_start). (Unsaturated pieces add nothing, and
-- leaving them out shrinks the sort behind the prefix sum to the saturated part of the timeline.)
CREATE OR REPLACE MACRO _sat_segments(sat_threshold, peak_hbm_bps) AS TABLE
SELECT *, sum(dur_ns) OVER (PARTITION BY run_id, rank ORDER BY seg_start ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
          AS sat_before_ns
FROM (SELECT *, true AS sat FROM _bw_segments() WHERE n_comp > 0 AND bw_bps >= sat_threshold * peak_hbm_bps);

-- The parts with peer_sat_frac: the share of the peer-wait interval the late member (last_rank) spent in
-- saturated compute (two ASOF look-ups into its saturated-time prefix sums).
CREATE OR REPLACE MACRO _comm_parts(sat_threshold, peak_hbm_bps) AS TABLE
WITH ss AS MATERIALIZED (
    SELECT run_id, rank, seg_start, seg_end, sat, sat_before_ns FROM _sat_segments(sat_threshold, peak_hbm_bps)
), ce AS MATERIALIZED (
    SELECT * FROM _comm_parts_base()
), probes AS (
    -- the late member's saturated time before each peer-wait edge (0 before its first saturated piece); both
    -- edges in one ASOF pass
    -- (run_id, rank, group_key, is_p2p, ordinal) identifies an op (_comm_events numbers ops per group)
    -- (the probe instants moved onto the late member's clock: - own offset + its offset)
    SELECT pr.run_id, pr.rank, pr.group_key, pr.is_p2p, pr.ordinal, pr.edge,
           coalesce(s.sat_before_ns, 0) + coalesce(least(pr.p, s.seg_end) - s.seg_start, 0) AS sat_at
    FROM (SELECT run_id, rank, group_key, is_p2p, ordinal, last_rank,
                 ts_ns - clock_offset_ns + last_rank_offset_ns AS p, 0 AS edge FROM ce WHERE wait_end_ns > ts_ns
          UNION ALL
          SELECT run_id, rank, group_key, is_p2p, ordinal, last_rank,
                 wait_end_ns - clock_offset_ns + last_rank_offset_ns, 1 FROM ce WHERE wait_end_ns > ts_ns) pr
    ASOF LEFT JOIN ss s ON s.run_id = pr.run_id AND s.rank = pr.last_rank AND pr.p >= s.seg_start
), q AS (
    SELECT ce.*, a.sat_at AS sat_a, b.sat_at AS sat_b
    FROM ce
    LEFT JOIN probes a ON a.edge = 0 AND a.run_id = ce.run_id AND a.rank = ce.rank AND a.group_key = ce.group_key
         AND a.is_p2p = ce.is_p2p AND a.ordinal = ce.ordinal
    LEFT JOIN probes b ON b.edge = 1 AND b.run_id = ce.run_id AND b.rank = ce.rank AND b.group_key = ce.group_key
         AND b.is_p2p = ce.is_p2p AND b.ordinal = ce.ordinal
)
SELECT * EXCLUDE (sat_a, sat_b),
       CASE WHEN wait_end_ns > ts_ns THEN least(greatest((coalesce(sat_b, 0) - coalesce(sat_a, 0)) / (wait_end_ns - ts_ns), 0), 1)
            ELSE 0 END AS peer_sat_frac
FROM q;

-- The full per-rank timeline inside the step windows without parameters (stored by traceql.derive): the pieces
-- of _bw_segments (cut wherever compute, bandwidth or communication changes) as t0/t1 with, per step,
-- first_busy / last_busy: the step's first start and last end of anything running (compute or communication).
-- idle_kind: for a segment with nothing running, preparing (before first_busy), tail (after last_busy) or free
-- (in between); prep/free/tail_before_ns: idle time of that kind on the rank before the segment (prefix sums:
-- idle time in any interval is two look-ups). Segments tile every step window.
CREATE OR REPLACE MACRO _timeline_base() AS TABLE
WITH tl AS (
    SELECT run_id, rank, step, window_source, win_start, win_end, seg_start AS t0, seg_end AS t1, dur_ns,
           n_comp, n_copy, bw_bps, bw_source, n_comm, n_peer_wait, n_unsplit, transit_share
    FROM _bw_segments()
), tb AS (
    SELECT *,
           min(t0) FILTER (WHERE n_comp > 0 OR n_comm > 0) OVER w AS first_busy,
           max(t1) FILTER (WHERE n_comp > 0 OR n_comm > 0) OVER w AS last_busy
    FROM tl
    WINDOW w AS (PARTITION BY run_id, rank, step)
), tk AS (
    SELECT *,
           CASE WHEN n_comp > 0 OR n_comm > 0 THEN NULL
                WHEN first_busy IS NULL OR t1 <= first_busy THEN 'preparing'
                WHEN t0 >= last_busy THEN 'tail' ELSE 'free' END AS idle_kind
    FROM tb
)
SELECT *,
       coalesce(sum(CASE WHEN idle_kind = 'preparing' THEN dur_ns ELSE 0 END) OVER p, 0) AS prep_before_ns,
       coalesce(sum(CASE WHEN idle_kind = 'free' THEN dur_ns ELSE 0 END) OVER p, 0) AS free_before_ns,
       coalesce(sum(CASE WHEN idle_kind = 'tail' THEN dur_ns ELSE 0 END) OVER p, 0) AS tail_before_ns
FROM tk
WINDOW p AS (PARTITION BY run_id, rank ORDER BY t0 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING);

-- _timeline_base with the parameter-dependent parts: sat (compute running at >= sat_threshold x peak, judged
-- only on measured or sampled bandwidth: a modeled lower bound never decides saturation) and the shares of the
-- communication parts running: peer_hbm_share (mean peer_sat_frac of those in peer wait), peer_wait_share (in
-- peer wait), unsplit_share (no transit split recorded) and transit_share.
-- The peer-wait parts' peer_sat_frac are summed by a sweep over the parts alone (their edges are segment edges
-- of the base), then looked up per segment.
CREATE OR REPLACE MACRO _timeline(sat_threshold, peak_hbm_bps) AS TABLE
WITH cp AS (
    SELECT run_id, rank, ts_ns, wait_end_ns, peer_sat_frac FROM _comm_parts(sat_threshold, peak_hbm_bps)
    WHERE wait_end_ns > ts_ns
), ev AS (
    SELECT run_id, rank, ts_ns AS t, peer_sat_frac AS d FROM cp
    UNION ALL SELECT run_id, rank, wait_end_ns, -peer_sat_frac FROM cp
), ps AS (
    SELECT run_id, rank, t,
           sum(sum(d)) OVER (PARTITION BY run_id, rank ORDER BY t ROWS UNBOUNDED PRECEDING) AS peer_sat_sum
    FROM ev GROUP BY run_id, rank, t
)
SELECT tb.run_id, tb.rank, tb.step, tb.window_source, tb.win_start, tb.win_end, tb.t0, tb.t1, tb.dur_ns,
       tb.n_comp, tb.bw_bps, tb.bw_source,
       coalesce(tb.n_comp > 0 AND tb.bw_source IN ('pmu', 'sampled') AND tb.bw_bps >= sat_threshold * peak_hbm_bps,
                false) AS sat,
       tb.n_comm, tb.n_peer_wait,
       CASE WHEN tb.n_comm > 0 THEN coalesce(tb.peer_sat_sum, 0) / tb.n_comm ELSE 0 END AS peer_hbm_share,
       CASE WHEN tb.n_comm > 0 THEN tb.n_peer_wait / tb.n_comm ELSE 0 END AS peer_wait_share,
       CASE WHEN tb.n_comm > 0 THEN tb.n_unsplit / tb.n_comm ELSE 0 END AS unsplit_share,
       tb.transit_share, tb.first_busy, tb.last_busy
FROM (
    -- only segments with a part in peer wait can have a peer share: the look-up runs for those alone (a small
    -- fraction of the timeline), the rest get 0
    SELECT tb.*, ps.peer_sat_sum FROM _timeline_base() tb
    ASOF LEFT JOIN ps ON ps.run_id = tb.run_id AND ps.rank = tb.rank AND tb.t0 >= ps.t
    WHERE tb.n_peer_wait > 0
    UNION ALL
    SELECT tb.*, 0 FROM _timeline_base() tb WHERE tb.n_peer_wait = 0) tb;

-- Each timeline segment's time in the parts wait_attribution reports (c_sat + c_other + m_transit + m_peer +
-- m_peer_other + m_after + m_unsplit + idle + host = dur_ns; m_other = m_peer_other + m_after; see
-- wait_attribution.sql) and in step_breakdown's phases (computing, comm_no = communication not overlapped,
-- overlapped, preparing, tail). One definition, read by wait_attribution, step_groups and the findings that
-- cite waiting (comm_waits_on_memory, slow_rank), so their totals agree by construction.
--   m_peer        waiting for a late captured peer while it computed at saturated HBM bandwidth
--   m_peer_other  waiting for a late captured peer otherwise
--   m_after       communication after every captured member arrived, not moving data: HCCL sync / idle, or
--                 waiting for ranks that are not in the dump (wait_attribution names it by the capture's coverage)
--   m_unsplit     communication whose transit / wait split the dump does not record (Level0, kernels only)
CREATE OR REPLACE MACRO _timeline_parts(sat_threshold, peak_hbm_bps) AS TABLE
SELECT run_id, rank, step, t0, t1, dur_ns,
       CASE WHEN n_comp > 0 AND sat THEN dur_ns ELSE 0 END AS c_sat,
       CASE WHEN n_comp > 0 AND NOT sat THEN dur_ns ELSE 0 END AS c_other,
       CASE WHEN n_comp = 0 AND n_comm > 0 THEN dur_ns * transit_share ELSE 0 END AS m_transit,
       CASE WHEN n_comp = 0 AND n_comm > 0 THEN dur_ns * peer_hbm_share ELSE 0 END AS m_peer,
       CASE WHEN n_comp = 0 AND n_comm > 0 THEN dur_ns * greatest(peer_wait_share - peer_hbm_share, 0) ELSE 0 END AS m_peer_other,
       CASE WHEN n_comp = 0 AND n_comm > 0 THEN dur_ns * greatest(1 - peer_wait_share - unsplit_share - transit_share, 0) ELSE 0 END AS m_after,
       CASE WHEN n_comp = 0 AND n_comm > 0 THEN dur_ns * unsplit_share ELSE 0 END AS m_unsplit,
       CASE WHEN n_comp = 0 AND n_comm > 0 THEN dur_ns * (1 - transit_share - peer_hbm_share - unsplit_share) ELSE 0 END AS m_other,
       CASE WHEN n_comp = 0 AND n_comm = 0 AND t0 >= first_busy AND t1 <= last_busy THEN dur_ns ELSE 0 END AS idle,
       CASE WHEN n_comp = 0 AND n_comm = 0 AND NOT coalesce(t0 >= first_busy AND t1 <= last_busy, false) THEN dur_ns ELSE 0 END AS host,
       CASE WHEN n_comp > 0 THEN dur_ns ELSE 0 END AS computing,
       CASE WHEN n_comp = 0 AND n_comm > 0 THEN dur_ns ELSE 0 END AS comm_no,
       CASE WHEN n_comp > 0 AND n_comm > 0 THEN dur_ns ELSE 0 END AS overlapped,
       CASE WHEN n_comp = 0 AND n_comm = 0 AND NOT coalesce(t0 >= first_busy AND t1 <= last_busy, false)
                 AND (first_busy IS NULL OR t1 <= first_busy) THEN dur_ns ELSE 0 END AS preparing,
       CASE WHEN n_comp = 0 AND n_comm = 0 AND first_busy IS NOT NULL AND t0 >= last_busy THEN dur_ns ELSE 0 END AS tail,
       CASE WHEN n_comp > 0 THEN bw_bps * dur_ns ELSE 0 END AS comp_bw_ns,
       bw_source
FROM _timeline(sat_threshold, peak_hbm_bps);

-- How much of the job the dump holds, per run: ranks_captured (ranks with kernels, communication or steps) and
-- job_ranks, the job's size as the dump itself records it: a recorded world size (profiler_metadata
-- distributed_args, Kineto distributedInfo) when there is one, else at least the highest rank id it names + 1
-- (ids are 0-based: communication_matrix source / destination ranks, profiler_metadata parallel groups'
-- global_ranks, msprof-analyze communication_group.json). job_ranks_exact: from a world size, or every id
-- 0..N-1 is named; else (ids with gaps) a lower bound. missing_ranks: the ids below job_ranks with no data
-- (none listed from a world size alone).
CREATE OR REPLACE MACRO _capture_coverage() AS TABLE
WITH cap AS (
    SELECT DISTINCT run_id, rank FROM (
        SELECT run_id, rank FROM kernels UNION ALL SELECT run_id, rank FROM comm_ops
        UNION ALL SELECT run_id, rank FROM steps) WHERE rank IS NOT NULL
), named AS (
    SELECT run_id, src_rank AS r, 'communication_matrix' AS src FROM comm_matrix WHERE src_rank IS NOT NULL
    UNION ALL SELECT run_id, dst_rank, 'communication_matrix' FROM comm_matrix WHERE dst_rank IS NOT NULL
    UNION ALL SELECT run_id, unnest(TRY_CAST(value AS INTEGER[])), 'parallel groups' FROM run_meta
              WHERE key LIKE '%.global_ranks' AND TRY_CAST(value AS INTEGER[]) IS NOT NULL
    UNION ALL SELECT run_id, unnest(flatten(TRY_CAST(value AS INTEGER[][]))), 'communication groups' FROM run_meta
              WHERE key LIKE 'communication_group.%' AND TRY_CAST(value AS INTEGER[][]) IS NOT NULL
), ws AS (
    SELECT run_id, max(TRY_CAST(value AS BIGINT)) AS world_size FROM run_meta
    WHERE regexp_matches(key, '(^|\.)(world_size|rank_size|rankSize)$') GROUP BY run_id
), ids AS (
    SELECT run_id, r, string_agg(DISTINCT src, ', ' ORDER BY src) AS srcs FROM named WHERE r >= 0 GROUP BY run_id, r
), per AS (
    SELECT c.run_id, count(*) AS ranks_captured, list(c.rank ORDER BY c.rank) AS captured
    FROM cap c GROUP BY c.run_id
), nm AS (
    SELECT i.run_id, max(i.r) + 1 AS named_ranks, count(*) AS named_ids, string_agg(DISTINCT i.srcs, '; ') AS named_from
    FROM ids i GROUP BY i.run_id
), sized AS (
    SELECT p.run_id, p.ranks_captured, p.captured, ws.world_size, nm.named_from,
           -- every id from 0 to the highest is named (an 8-rank group's matrix lists 0-7): the dump's own count
           coalesce(nm.named_ids = nm.named_ranks, false) AS ids_complete,
           greatest(p.ranks_captured, coalesce(nm.named_ranks, 0), coalesce(ws.world_size, 0)) AS job_ranks,
           greatest(p.ranks_captured, coalesce(nm.named_ranks, 0)) AS by_ids
    FROM per p LEFT JOIN nm ON nm.run_id = p.run_id LEFT JOIN ws ON ws.run_id = p.run_id
)
SELECT run_id, ranks_captured::BIGINT AS ranks_captured, job_ranks::BIGINT AS job_ranks,
       CASE WHEN coalesce(world_size, 0) >= by_ids AND world_size IS NOT NULL THEN 'world size'
            WHEN by_ids > ranks_captured THEN named_from
            ELSE 'ranks captured' END AS job_ranks_source,
       (world_size IS NOT NULL AND world_size >= by_ids) OR (world_size IS NULL AND ids_complete) AS job_ranks_exact,
       CASE WHEN coalesce(world_size, 0) > by_ids THEN []::INTEGER[]
            ELSE list_filter(range(0, job_ranks::INTEGER), lambda x: NOT list_contains(captured, x)) END AS missing_ranks,
       captured AS captured_ranks
FROM sized;
