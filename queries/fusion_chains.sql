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
WITH kb AS MATERIALIZED (
    SELECT kid, run_id, rank, stream_id, name, coalesce(nullif(op_type, 'N/A'), name) AS op, ts_ns, dur_ns, end_ns,
           hbm_bytes, hbm_bytes_source,
           string_split(coalesce(input_shapes, ''), ';') AS in_s,
           string_split(coalesce(input_dtypes, ''), ';') AS in_d,
           trim(string_split(coalesce(output_shapes, ''), ';')[1]) AS out_s,
           trim(string_split(coalesce(output_dtypes, ''), ';')[1]) AS out_d
    FROM _kernel_bytes() WHERE NOT is_comm
), sig AS (
    -- inputs as (shape, dtype) pairs; one dtype applies to every input when the dump gives one. Once per
    -- distinct input signature (shapes repeat every step), joined back to the kernels
    SELECT in_s, in_d, list_transform(in_s, lambda s, i: {'s': trim(s),
                 'd': trim(in_d[CASE WHEN len(in_d) = 1 THEN 1 ELSE i END])}) AS inputs
    FROM (SELECT DISTINCT in_s, in_d FROM kb)
), osig AS (
    SELECT out_s, out_d, _shape_elems(out_s) * _dtype_bytes(out_d) AS out_bytes
    FROM (SELECT DISTINCT out_s, out_d FROM kb)
), ins AS (
    SELECT kb.*, sig.inputs, osig.out_bytes
    FROM kb
    JOIN sig ON sig.in_s = kb.in_s AND sig.in_d = kb.in_d
    JOIN osig ON osig.out_s IS NOT DISTINCT FROM kb.out_s AND osig.out_d IS NOT DISTINCT FROM kb.out_d
), seq AS (
    SELECT *,
           lag(op) OVER w AS a_op, lag(end_ns) OVER w AS a_end, lag(out_s) OVER w AS a_out_s, lag(out_d) OVER w AS a_out_d,
           lag(out_bytes) OVER w AS a_out_bytes,
           lag(out_s, 2) OVER w AS a2_out_s, lag(out_d, 2) OVER w AS a2_out_d
    FROM ins
    WINDOW w AS (PARTITION BY run_id, rank, stream_id ORDER BY ts_ns, kid)
), links AS (
    SELECT *,
           coalesce(regexp_matches(op, $consumer_regex)
                    AND (regexp_matches(a_op, $consumer_regex) OR regexp_matches(a_op, $producer_regex))
                    AND ts_ns - a_end <= $max_gap_ns::BIGINT
                    AND a_out_s IS NOT NULL AND a_out_s <> ''
                    AND list_contains(list_transform(inputs, lambda t: t.s || '|' || t.d), a_out_s || '|' || a_out_d),
                    false) AS is_link
    FROM seq
), linked AS (
    SELECT *,
           lag(is_link) OVER w AS a_linked, lead(is_link) OVER w AS b_linked,
           sum(CASE WHEN is_link THEN 0 ELSE 1 END) OVER (w ROWS UNBOUNDED PRECEDING) AS chain_no
    FROM links
    WINDOW w AS (PARTITION BY run_id, rank, stream_id ORDER BY ts_ns, kid)
), lk AS (
    -- bytes a link saves: the producer's output it no longer writes + the inputs it no longer reads; once per
    -- distinct (input signature, producer outputs) pair, joined back to the links
    SELECT DISTINCT in_s, in_d, a_out_s, a_out_d, coalesce(a_linked, false) AS al, a2_out_s, a2_out_d
    FROM linked WHERE is_link
), lks AS (
    SELECT lk.*, coalesce(list_sum(list_transform(sig.inputs, lambda t:
               CASE WHEN (t.s = lk.a_out_s AND t.d = lk.a_out_d) OR (lk.al AND t.s = lk.a2_out_s AND t.d = lk.a2_out_d)
                    THEN _shape_elems(t.s) * _dtype_bytes(t.d) ELSE 0 END)), 0) AS in_saved
    FROM lk JOIN sig ON sig.in_s = lk.in_s AND sig.in_d = lk.in_d
), per_kernel AS (
    SELECT l.*, CASE WHEN l.is_link THEN coalesce(l.a_out_bytes, 0) + lks.in_saved ELSE 0 END AS link_saved
    FROM linked l
    LEFT JOIN lks ON l.is_link AND lks.in_s = l.in_s AND lks.in_d = l.in_d AND lks.a_out_s IS NOT DISTINCT FROM l.a_out_s
         AND lks.a_out_d IS NOT DISTINCT FROM l.a_out_d AND lks.al = coalesce(l.a_linked, false)
         AND lks.a2_out_s IS NOT DISTINCT FROM l.a2_out_s AND lks.a2_out_d IS NOT DISTINCT FROM l.a2_out_d
    WHERE l.is_link OR coalesce(l.b_linked, false)  -- members of chains of 2 or more kernels only
), chains AS (
    SELECT run_id, rank, stream_id, chain_no,
           string_agg(op, ' -> ' ORDER BY ts_ns, kid) AS pattern,
           string_agg(name, ' -> ' ORDER BY ts_ns, kid) AS names,
           arg_min(out_s, (ts_ns, kid)) AS first_out,
           count(*) AS n, sum(dur_ns) AS dur, sum(dur_ns) FILTER (WHERE is_link) AS cdur,
           sum(hbm_bytes) AS bytes, sum(hbm_bytes) FILTER (WHERE is_link) AS cbytes,
           sum(link_saved) AS saved,
           min(hbm_bytes_source) AS src_min, max(hbm_bytes_source) AS src_max, min(ts_ns) AS t0
    FROM per_kernel
    GROUP BY run_id, rank, stream_id, chain_no
    HAVING count(*) >= 2
), chains_t AS (
    SELECT *, CASE WHEN cbytes > 0 AND cdur > 0 THEN least(saved / (cbytes / cdur), cdur) END AS saved_t
    FROM chains
), tot AS (
    SELECT run_id, sum(dur_ns)::BIGINT AS compute_ns FROM kb GROUP BY run_id
), g AS (
    SELECT run_id, CASE WHEN grouping(pattern) = 1 THEN 'run' ELSE 'pattern' END AS scope, pattern,
           count(*) AS occurrences, count(DISTINCT rank) AS ranks, sum(n)::BIGINT AS calls,
           sum(dur)::BIGINT AS dur_ns, sum(cdur)::BIGINT AS consumer_dur_ns, round(sum(bytes))::BIGINT AS chain_hbm_bytes,
           round(sum(saved))::BIGINT AS saved_bytes, round(sum(saved_t))::BIGINT AS saved_ns,
           CASE WHEN min(src_min) = max(src_max) THEN min(src_min) WHEN max(src_max) IS NOT NULL THEN 'mixed' END AS hbm_bytes_source,
           arg_min(names, (t0, rank, stream_id)) AS example_names, arg_min(first_out, (t0, rank, stream_id)) AS example_shape
    FROM chains_t
    GROUP BY GROUPING SETS ((run_id), (run_id, pattern))
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
