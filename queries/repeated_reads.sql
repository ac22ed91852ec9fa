-- name: repeated_reads
-- description: Tensors read again and again from HBM by nearby kernels on one stream (the same shape and dtype read by several kernels close together, not just handed from producer to consumer): how many extra HBM reads, their bytes and time (the article's UB data reuse: load once into the Unified Buffer).
-- param: top_n INTEGER = 20            -- tensor rows to return (by extra bytes), after the run row
-- param: min_bytes BIGINT = 1048576    -- ignore tensors smaller than this, bytes
-- param: max_distance INTEGER = 4      -- two reads belong to one burst when at most this many kernels apart on the stream
-- param: min_reads INTEGER = 3         -- a burst counts when this many kernels read the tensor
-- column: run_id VARCHAR               -- run
-- column: scope VARCHAR                -- run (totals) | tensor (one row per tensor shape, dtype and reader pattern)
-- column: tensor_shape VARCHAR         -- shape of the re-read tensor (null for scope run)
-- column: tensor_dtype VARCHAR         -- its dtype
-- column: tensor_bytes BIGINT          -- its size, bytes (shape x dtype)
-- column: readers VARCHAR              -- operator types reading it in one burst, in order, ' -> ' between them
-- column: bursts BIGINT                -- bursts found (all ranks, streams and steps)
-- column: reads BIGINT                 -- kernel reads of the tensor in those bursts
-- column: extra_reads BIGINT           -- reads beyond the first of each burst (what UB reuse would avoid)
-- column: extra_bytes BIGINT           -- extra_reads x tensor_bytes
-- column: readers_dur_ns BIGINT        -- device time of the reading kernels, ns
-- column: readers_hbm_bytes BIGINT     -- HBM bytes of the reading kernels (chosen source)
-- column: extra_ns BIGINT              -- extra_bytes at the readers' achieved bandwidth (capped at their time), ns
-- column: compute_ns BIGINT            -- all compute kernels' device time in the run, ns
-- column: example_names VARCHAR        -- kernel names of one burst
--
-- Definitions: a read is an input of a compute kernel (shape and dtype from the dump; one dtype applies to every
-- input when the dump gives one) of at least min_bytes, counted once per kernel, and not the first output of the
-- kernel just before it on the stream (that hand-off is the fusion case, see fusion_chains). Reads of the same
-- (shape, dtype) on one (rank, stream, step) form a burst while consecutive reads are at most max_distance
-- kernels apart (the same op in the next step reads the next batch, not the same tensor). Same shape and dtype is taken as the same tensor: the dump has no tensor addresses, so this is a
-- heuristic (an element-wise op reading two different tensors of one shape counts once per kernel, not twice).
WITH kb AS MATERIALIZED (
    SELECT kid, run_id, rank, step, stream_id, compute_seq AS seq, name, _op_name(op_type, name) AS op,
           ts_ns, dur_ns, hbm_bytes, coalesce(input_shapes, '') AS ins_txt, coalesce(input_dtypes, '') AS ind_txt,
           coalesce(prev_out_shape, '') AS prev_out_s, coalesce(prev_out_dtype, '') AS prev_out_d
    FROM kernel_bytes WHERE NOT is_comm
), sig AS (
    -- the distinct input tensors of each distinct input signature (shapes repeat every step, so the list work
    -- runs once per signature), with their bytes
    SELECT DISTINCT ins_txt, ind_txt, t.s AS shape, t.d AS dtype, _shape_elems(t.s) * _dtype_bytes(t.d) AS tbytes
    FROM (SELECT ins_txt, ind_txt, unnest(list_transform(string_split(ins_txt, ';'), lambda s, i: {'s': trim(s),
                 'd': trim(string_split(ind_txt, ';')[CASE WHEN len(string_split(ind_txt, ';')) = 1 THEN 1 ELSE i END])})) AS t
          FROM (SELECT DISTINCT ins_txt, ind_txt FROM kb))
    WHERE t.s <> ''
), big AS (
    -- each kernel's big input tensors, except the one its predecessor on the stream (stored prev_out_*) just wrote
    SELECT k.kid, k.run_id, k.rank, k.step, k.stream_id, k.name, k.op, k.ts_ns, k.dur_ns, k.hbm_bytes, k.seq,
           g.shape, g.dtype, g.tbytes
    FROM kb k
    JOIN sig g ON g.ins_txt = k.ins_txt AND g.ind_txt = k.ind_txt
    WHERE g.tbytes >= $min_bytes::BIGINT
      AND NOT (g.shape = k.prev_out_s AND g.dtype = k.prev_out_d)
), ord AS (
    -- one sort of the reads by (rank, stream, step, tensor) and position; the windows below have an empty
    -- OVER, so DuckDB runs them as streaming windows in that order (it keeps it: the DuckDB docs' "Order
    -- Preservation"); two windows partitioned by those columns sorted the reads twice
    SELECT * FROM big ORDER BY run_id, rank, stream_id, step, shape, dtype, seq
), isl AS (
    -- burst: the count of burst starts so far, a start being a read more than max_distance kernels after the
    -- read before it. The number runs on across (rank, stream, step, tensor) edges, and every use below groups
    -- or joins by those columns with it, so a burst never spans two of them
    SELECT *, sum(CASE WHEN seq - coalesce(prev_seq, -1000000) > $max_distance::INTEGER THEN 1 ELSE 0 END)
                  OVER (ROWS UNBOUNDED PRECEDING) AS burst
    FROM (SELECT *, lag(seq) OVER () AS prev_seq FROM ord)
), kept AS (
    -- the bursts with enough reads, counted first: most bursts are one or two reads, and the ordered
    -- string_aggs below buffer and sort every group they run on
    SELECT run_id, rank, stream_id, step, shape, dtype, burst
    FROM isl GROUP BY ALL
    HAVING count(*) >= $min_reads::INTEGER
), bursts AS (
    SELECT run_id, rank, stream_id, step, shape, dtype, burst, any_value(tbytes) AS tbytes, count(*) AS n,
           string_agg(op, ' -> ' ORDER BY seq) AS readers, string_agg(name, ' -> ' ORDER BY seq) AS names,
           sum(dur_ns) AS dur, sum(hbm_bytes) AS bytes, min(ts_ns) AS t0
    FROM isl i
    -- (IS NOT DISTINCT FROM: a dump without steps or streams has null ones, and they group together above)
    SEMI JOIN kept k ON k.run_id = i.run_id AND k.rank = i.rank AND k.stream_id IS NOT DISTINCT FROM i.stream_id
         AND k.step IS NOT DISTINCT FROM i.step AND k.shape IS NOT DISTINCT FROM i.shape
         AND k.dtype IS NOT DISTINCT FROM i.dtype AND k.burst = i.burst
    GROUP BY run_id, rank, stream_id, step, shape, dtype, burst
), bt AS (
    SELECT *, (n - 1) * tbytes AS extra,
           CASE WHEN bytes > 0 AND dur > 0 THEN least((n - 1) * tbytes / (bytes / dur), dur) END AS extra_t
    FROM bursts
), tot AS (
    SELECT run_id, sum(dur_ns)::BIGINT AS compute_ns FROM kb GROUP BY run_id
), g AS (
    SELECT run_id, CASE WHEN grouping(shape) = 1 THEN 'run' ELSE 'tensor' END AS scope,
           shape AS tensor_shape, dtype AS tensor_dtype, round(any_value(tbytes))::BIGINT AS tensor_bytes, readers,
           count(*) AS bursts, sum(n)::BIGINT AS reads, sum(n - 1)::BIGINT AS extra_reads,
           round(sum(extra))::BIGINT AS extra_bytes, sum(dur)::BIGINT AS readers_dur_ns,
           round(sum(bytes))::BIGINT AS readers_hbm_bytes, round(sum(extra_t))::BIGINT AS extra_ns,
           arg_min(names, (t0, names)) AS example_names
    FROM bt
    GROUP BY GROUPING SETS ((run_id), (run_id, shape, dtype, readers))
), r AS (
    SELECT ru.run_id, coalesce(g.scope, 'run') AS scope, g.tensor_shape, g.tensor_dtype,
           CASE WHEN g.scope = 'tensor' THEN g.tensor_bytes END AS tensor_bytes, g.readers,
           coalesce(g.bursts, 0) AS bursts, coalesce(g.reads, 0) AS reads, coalesce(g.extra_reads, 0) AS extra_reads,
           coalesce(g.extra_bytes, 0) AS extra_bytes, coalesce(g.readers_dur_ns, 0) AS readers_dur_ns,
           g.readers_hbm_bytes, g.extra_ns, coalesce(t.compute_ns, 0) AS compute_ns, g.example_names
    FROM runs ru
    LEFT JOIN g ON g.run_id = ru.run_id
    LEFT JOIN tot t ON t.run_id = ru.run_id
)
SELECT run_id, scope, tensor_shape, tensor_dtype, tensor_bytes, readers, bursts, reads, extra_reads, extra_bytes,
       readers_dur_ns, readers_hbm_bytes, extra_ns, compute_ns, example_names
FROM (SELECT *, row_number() OVER (PARTITION BY run_id, scope ORDER BY extra_ns DESC NULLS LAST, extra_bytes DESC, tensor_shape, readers) AS rn FROM r)
WHERE scope = 'run' OR rn <= $top_n
ORDER BY run_id, scope = 'tensor', extra_ns DESC NULLS LAST, extra_bytes DESC, tensor_shape, readers;
