-- name: fusion_chains
-- description: Producer->consumer chains of memory-bound operators on one stream that round-trip HBM (Conv->BN->ReLU, element-wise chains, unfused LayerNorm/Softmax pieces, Add after MatMul): how often each chain runs, the HBM bytes a fused operator would not move and the time that saves at the achieved bandwidth (the article's operator fusion).
-- param: top_n INTEGER = 20            -- pattern rows to return (by time saved), after the run row
-- param: max_gap_ns BIGINT = 1000000   -- a consumer must start within this long after its producer ends, ns
-- param: consumer_regex VARCHAR = '(?i)^(add|addv2|adds|sub|mul|muls|div|divs|realdiv|neg|abs|exp|log|sqrt|rsqrt|square|pow|maximum|minimum|relu|reluv2|relu6|leakyrelu|elu|gelu|fastgelu|fastgeluv2|silu|swish|sigmoid|tanh|hardswish|mish|cast|biasadd|axpy|axpyv2|bntrainingreduce|bntrainingupdate|bntrainingupdatev2|bntrainingupdatev3|bninfer|batchnorm|batchnormv3|layernorm|layernormv3|layernormv4|rmsnorm|reducemean|reducesum|reducemax|softmax|softmaxv2|dropoutdomask|dropoutdomaskv3|clipbyvalue)$' -- operator types that can be folded into the operator before them (memory-bound: element-wise, normalisation, activation, reduction)
-- param: producer_regex VARCHAR = '(?i)^(conv2d|conv2dv2|conv3d|matmul|matmulv2|matmulv3|batchmatmul|batchmatmulv2|batchmatmulv3|gemm|fullyconnection)$' -- operator types that can start a chain besides the consumer types (Conv, MatMul: the fused op keeps them and adds the epilogue)
-- column: run_id VARCHAR               -- run
-- column: scope VARCHAR                -- run (totals over every chain) | pattern (one row per chain pattern)
-- column: pattern VARCHAR              -- operator types of the chain in order, ' -> ' between them (null for scope run)
-- column: chain_len BIGINT             -- operators in the chain (null for scope run)
-- column: occurrences BIGINT           -- chains found (all ranks and steps)
-- column: ranks BIGINT                 -- ranks the pattern occurs on
-- column: calls BIGINT                 -- kernels in those chains
-- column: dur_ns BIGINT                -- device time of every kernel in the chains, ns
-- column: consumer_dur_ns BIGINT       -- device time of the foldable (non-first) kernels, ns
-- column: chain_hbm_bytes BIGINT       -- HBM bytes the chains' kernels move (chosen source, _helpers.sql)
-- column: saved_bytes BIGINT           -- HBM bytes a fused operator would not move: intermediates written by one kernel and read back by the next
-- column: saved_fraction DOUBLE        -- saved_bytes / chain_hbm_bytes, 0..1 (article: Conv->BN->ReLU 24 MB -> 8 MB = 0.67)
-- column: saved_ns BIGINT              -- time those bytes take at the consumers' achieved bandwidth, capped at consumer_dur_ns, ns
-- column: compute_ns BIGINT            -- all compute kernels' device time in the run (the denominator for shares), ns
-- column: hbm_bytes_source VARCHAR     -- pmu | sampled | modeled | mixed: where the chain kernels' bytes came from
-- column: example_names VARCHAR        -- kernel names of one occurrence, ' -> ' between them
-- column: example_shape VARCHAR        -- output shape of the first kernel of that occurrence (the intermediate)
--
-- Definitions: compute kernels of one (rank, stream) in start order. Kernel B is linked to the kernel A just
-- before it when B's type matches consumer_regex, A's type matches consumer_regex or producer_regex, B starts at
-- most max_gap_ns after A ends, and one of B's inputs has A's first output shape and dtype (B reads what A wrote).
-- A chain is a maximal run of linked kernels (2 or more). Bytes saved per link = A's first output (the write a
-- fused operator would not do) + every input of B that has the shape and dtype of A's first output or, when A
-- itself is linked, of the first output of the kernel before A (the re-reads, e.g. BNTrainingUpdate reading the
-- Conv output again) - tensor sizes from shapes x dtypes (_helpers.sql _dtype_bytes). Time saved = saved bytes /
-- (HBM bytes / device time of the chain's non-first kernels), at most their device time; null without bytes.
WITH kb AS NOT MATERIALIZED (
    -- (not materialised: each reader below scans kernel_bytes' Parquet for its own columns and rows, which
    -- costs less than one copy of every compute kernel's 20 columns)
    SELECT kid, run_id, rank, stream_id, compute_seq AS seq, name, _op_name(op_type, name) AS op,
           ts_ns, dur_ns, end_ns, hbm_bytes, hbm_bytes_source,
           coalesce(input_shapes, '') AS in_s, coalesce(input_dtypes, '') AS in_d,
           first_out_shape AS out_s, first_out_dtype AS out_d,
           prev_op, prev_end_ns, prev_out_shape, prev_out_dtype, prev2_out_shape, prev2_out_dtype
    FROM kernel_bytes WHERE NOT is_comm
), opc AS (
    -- operator classes once per distinct type
    SELECT op, coalesce(regexp_matches(op, $consumer_regex), false) AS is_consumer,
           coalesce(regexp_matches(op, $producer_regex), false) AS is_producer
    FROM (SELECT DISTINCT op FROM kb)
), sig AS (
    -- inputs as (shape, dtype) pairs; one dtype applies to every input when the dump gives one. Once per
    -- distinct input signature text (shapes repeat every step); kernels carry the text, not the lists
    SELECT in_s, in_d, list_transform(sl, lambda s, i: {'s': trim(s),
                 'd': trim(dl[CASE WHEN len(dl) = 1 THEN 1 ELSE i END])}) AS inputs
    FROM (SELECT in_s, in_d, string_split(in_s, ';') AS sl, string_split(in_d, ';') AS dl
          FROM (SELECT DISTINCT in_s, in_d FROM kb))
), osig AS (
    SELECT out_s, out_d, _shape_elems(out_s) * _dtype_bytes(out_d) AS out_bytes
    FROM (SELECT DISTINCT out_s, out_d FROM kb)
), cand AS (
    -- consumers with the kernel just before them on the stream (a) and the one before that (a2), from the
    -- neighbour columns kernel_bytes stores (no self-join, no re-sort)
    SELECT b.kid, b.run_id, b.rank, b.stream_id, b.seq, b.name, b.op, b.ts_ns, b.dur_ns, b.hbm_bytes,
           b.hbm_bytes_source, b.out_s, b.in_s, b.in_d,
           b.prev_op AS a_op, b.prev_end_ns AS a_end, b.prev_out_shape AS a_out_s, b.prev_out_dtype AS a_out_d,
           b.prev2_out_shape AS a2_out_s, b.prev2_out_dtype AS a2_out_d
    FROM kb b
    JOIN opc bo ON bo.op = b.op AND bo.is_consumer
    JOIN opc ao ON ao.op = b.prev_op AND (ao.is_consumer OR ao.is_producer)
    WHERE b.seq > 1 AND b.ts_ns - b.prev_end_ns <= $max_gap_ns::BIGINT AND b.prev_out_shape <> ''
), lpair AS (
    -- does B read A's first output? once per distinct (input signature, A output)
    SELECT DISTINCT in_s, in_d, a_out_s, a_out_d FROM cand
), lpair_t AS (
    -- (A's output bytes looked up here, once per distinct pair, not once per link)
    SELECT lp.*, list_contains(list_transform(sig.inputs, lambda t: t.s || '|' || t.d), lp.a_out_s || '|' || lp.a_out_d) AS reads_a,
           o.out_bytes AS a_out_bytes
    FROM lpair lp JOIN sig ON sig.in_s = lp.in_s AND sig.in_d = lp.in_d
    LEFT JOIN osig o ON o.out_s IS NOT DISTINCT FROM lp.a_out_s AND o.out_d IS NOT DISTINCT FROM lp.a_out_d
), links AS MATERIALIZED (
    SELECT c.*, lp.a_out_bytes
    FROM cand c
    JOIN lpair_t lp ON lp.in_s = c.in_s AND lp.in_d = c.in_d AND lp.a_out_s = c.a_out_s AND lp.a_out_d IS NOT DISTINCT FROM c.a_out_d
    WHERE lp.reads_a
), lpos AS MATERIALIZED (
    -- chains: runs of links at consecutive positions on one stream, each headed by the kernel before its first
    -- link. One sort of the links' narrow keys; the windows have an empty OVER, so DuckDB runs them as
    -- streaming windows in that order (the DuckDB docs' "Order Preservation"). A link starts a chain unless
    -- the link before it in that order is the kernel just before it on the same stream; chain: the count of
    -- starts so far (it runs on across streams and ranks, and every use groups or joins with them as well)
    SELECT run_id, rank, stream_id, seq, st = 0 AS a_linked, sum(st) OVER (ROWS UNBOUNDED PRECEDING) AS chain
    FROM (SELECT *, CASE WHEN lag(seq) OVER () = seq - 1 AND lag(stream_id) OVER () IS NOT DISTINCT FROM stream_id
                              AND lag(rank) OVER () = rank AND lag(run_id) OVER () = run_id THEN 0 ELSE 1 END AS st
          FROM (SELECT run_id, rank, stream_id, seq FROM links ORDER BY run_id, rank, stream_id, seq))
), linked AS (
    SELECT l.*, p.chain, p.a_linked
    FROM links l
    JOIN lpos p ON p.run_id = l.run_id AND p.rank = l.rank AND p.stream_id IS NOT DISTINCT FROM l.stream_id AND p.seq = l.seq
), lk AS (
    -- bytes a link saves: the producer's output it no longer writes + the inputs it no longer reads; once per
    -- distinct (input signature, producer outputs) pair
    SELECT DISTINCT in_s, in_d, a_out_s, a_out_d, a_linked AS al, a2_out_s, a2_out_d FROM linked
), lks AS (
    SELECT lk.*, coalesce(list_sum(list_transform(sig.inputs, lambda t:
               CASE WHEN (t.s = lk.a_out_s AND t.d = lk.a_out_d) OR (lk.al AND t.s = lk.a2_out_s AND t.d = lk.a2_out_d)
                    THEN _shape_elems(t.s) * _dtype_bytes(t.d) ELSE 0 END)), 0) AS in_saved
    FROM lk JOIN sig ON sig.in_s = lk.in_s AND sig.in_d = lk.in_d
), members AS (
    -- every kernel of every chain (heads and links) with what its link saves
    SELECT l.run_id, l.rank, l.stream_id, l.chain, l.seq, l.op, l.ts_ns, l.dur_ns, l.hbm_bytes,
           l.hbm_bytes_source, l.out_s, true AS is_link,
           coalesce(l.a_out_bytes, 0) + lks.in_saved AS link_saved
    FROM linked l
    JOIN lks ON lks.in_s = l.in_s AND lks.in_d = l.in_d AND lks.a_out_s = l.a_out_s
         AND lks.a_out_d IS NOT DISTINCT FROM l.a_out_d AND lks.al = l.a_linked
         AND lks.a2_out_s IS NOT DISTINCT FROM l.a2_out_s AND lks.a2_out_d IS NOT DISTINCT FROM l.a2_out_d
    UNION ALL
    SELECT k.run_id, k.rank, k.stream_id, p.chain, k.seq, k.op, k.ts_ns, k.dur_ns, k.hbm_bytes,
           k.hbm_bytes_source, k.out_s, false, 0
    FROM lpos p
    JOIN kb k ON k.run_id = p.run_id AND k.rank = p.rank AND k.stream_id IS NOT DISTINCT FROM p.stream_id AND k.seq = p.seq - 1
    WHERE NOT p.a_linked
), chains AS (
    SELECT any_value(run_id) AS run_id, any_value(rank) AS rank, any_value(stream_id) AS stream_id, min(seq) AS head_seq,
           -- (a plain list sorted afterwards: an ordered string_agg buffers and sorts every group, ~2x slower)
           array_to_string(list_transform(list_sort(list({'s': seq, 'op': op})), lambda m: m.op), ' -> ') AS pattern,
           arg_min(out_s, seq) AS first_out,
           count(*) AS n, sum(dur_ns) AS dur, sum(dur_ns) FILTER (WHERE is_link) AS cdur,
           sum(hbm_bytes) AS bytes, sum(hbm_bytes) FILTER (WHERE is_link) AS cbytes,
           sum(link_saved) AS saved,
           min(hbm_bytes_source) AS src_min, max(hbm_bytes_source) AS src_max, min(ts_ns) AS t0
    FROM members
    GROUP BY chain
), chains_t AS (
    SELECT *, CASE WHEN cbytes > 0 AND cdur > 0 THEN least(saved / (cbytes / cdur), cdur) END AS saved_t
    FROM chains
), tot AS (
    SELECT run_id, sum(dur_ns)::BIGINT AS compute_ns FROM kb GROUP BY run_id
), g0 AS (
    SELECT run_id, CASE WHEN grouping(pattern) = 1 THEN 'run' ELSE 'pattern' END AS scope, pattern,
           count(*) AS occurrences, count(DISTINCT rank) AS ranks, sum(n)::BIGINT AS calls,
           sum(dur)::BIGINT AS dur_ns, sum(cdur)::BIGINT AS consumer_dur_ns, round(sum(bytes))::BIGINT AS chain_hbm_bytes,
           round(sum(saved))::BIGINT AS saved_bytes, round(sum(saved_t))::BIGINT AS saved_ns,
           CASE WHEN min(src_min) = max(src_max) THEN min(src_min) WHEN max(src_max) IS NOT NULL THEN 'mixed' END AS hbm_bytes_source,
           -- the example: the earliest occurrence ((rank, stream, head) breaks ties)
           arg_min({'rank': rank, 'stream_id': stream_id, 'head_seq': head_seq, 'n': n}, (t0, rank, stream_id, head_seq)) AS ex,
           arg_min(first_out, (t0, rank, stream_id, head_seq)) AS example_shape
    FROM chains_t
    GROUP BY GROUPING SETS ((run_id), (run_id, pattern))
), exn AS (
    -- kernel names of the example chains only (a chain's kernels are the n consecutive ones from its head)
    SELECT e.run_id, e.ex.rank AS rank, e.ex.stream_id AS stream_id, e.ex.head_seq AS head_seq,
           string_agg(k.name, ' -> ' ORDER BY k.seq) AS names
    FROM kb k
    JOIN (SELECT DISTINCT run_id, ex FROM g0) e ON e.run_id = k.run_id AND k.rank = e.ex.rank
         AND k.stream_id IS NOT DISTINCT FROM e.ex.stream_id AND k.seq >= e.ex.head_seq AND k.seq < e.ex.head_seq + e.ex.n
    GROUP BY e.run_id, e.ex.rank, e.ex.stream_id, e.ex.head_seq
), g AS (
    SELECT g0.*, exn.names AS example_names
    FROM g0 LEFT JOIN exn ON exn.run_id = g0.run_id AND exn.rank = g0.ex.rank
         AND exn.stream_id IS NOT DISTINCT FROM g0.ex.stream_id AND exn.head_seq = g0.ex.head_seq
), r AS (
    -- the run row exists even when no chain was found (totals 0)
    SELECT ru.run_id, coalesce(g.scope, 'run') AS scope, g.pattern,
           CASE WHEN g.pattern IS NOT NULL THEN len(string_split(g.pattern, ' -> ')) END AS chain_len,
           coalesce(g.occurrences, 0) AS occurrences, coalesce(g.ranks, 0) AS ranks, coalesce(g.calls, 0) AS calls,
           coalesce(g.dur_ns, 0) AS dur_ns, coalesce(g.consumer_dur_ns, 0) AS consumer_dur_ns,
           g.chain_hbm_bytes, coalesce(g.saved_bytes, 0) AS saved_bytes,
           g.saved_bytes / nullif(g.chain_hbm_bytes, 0) AS saved_fraction, g.saved_ns,
           coalesce(t.compute_ns, 0) AS compute_ns, g.hbm_bytes_source, g.example_names, g.example_shape
    FROM runs ru
    LEFT JOIN g ON g.run_id = ru.run_id
    LEFT JOIN tot t ON t.run_id = ru.run_id
    WHERE g.scope IS NOT NULL OR NOT EXISTS (SELECT 1 FROM g WHERE g.run_id = ru.run_id)
)
SELECT run_id, scope, pattern, chain_len::BIGINT AS chain_len, occurrences, ranks, calls, dur_ns, consumer_dur_ns,
       chain_hbm_bytes, saved_bytes, saved_fraction, saved_ns, compute_ns, hbm_bytes_source, example_names, example_shape
FROM (SELECT *, row_number() OVER (PARTITION BY run_id, scope ORDER BY saved_ns DESC NULLS LAST, saved_bytes DESC, pattern) AS rn FROM r)
WHERE scope = 'run' OR rn <= $top_n
ORDER BY run_id, scope = 'pattern', saved_ns DESC NULLS LAST, saved_bytes DESC, pattern;
