-- name: hbm_timeline
-- description: HBM bandwidth binned over time per rank (for charts), with the operators that dominate each bin.
-- param: bin_ns BIGINT = 0             -- bin width, ns; 0 = the run's span / max_bins
-- param: max_bins INTEGER = 200        -- number of bins when bin_ns is 0
-- param: top_k INTEGER = 3             -- operators listed per bin in top_ops
-- param: peak_hbm_bps DOUBLE = NULL    -- device HBM peak, bytes/s (traceql fills it from the device preset)
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- rank
-- column: bin BIGINT                   -- bin index from the run's first kernel start (same bins on every rank)
-- column: bin_start_ns BIGINT          -- bin start, ns since Unix epoch
-- column: bin_end_ns BIGINT            -- bin end (exclusive), ns
-- column: t_ms DOUBLE                  -- bin start relative to the run's first kernel, ms (chart x axis)
-- column: read_bytes BIGINT            -- HBM bytes read in the bin
-- column: write_bytes BIGINT           -- HBM bytes written in the bin
-- column: hbm_bytes BIGINT             -- read + write
-- column: bw_bps DOUBLE                -- hbm_bytes / bin width, bytes/s
-- column: utilization DOUBLE           -- bw_bps / peak_hbm_bps, 0..1
-- column: kernel_ns BIGINT             -- kernel time inside the bin (concurrent kernels add up)
-- column: top_op VARCHAR               -- operator type (name when untyped) with the most HBM bytes in the bin
-- column: top_op_share DOUBLE          -- its share of the bin's HBM bytes, 0..1
-- column: top_ops VARCHAR              -- the top_k operators as "Type NN%", most bytes first
-- column: hbm_bytes_source VARCHAR     -- pmu | sampled | modeled when all kernels with bytes in the bin share it, else mixed
--
-- Definitions: each kernel's bytes (chosen source, _helpers.sql) are spread evenly over its run time and
-- split between the bins it overlaps by overlap length (a binned join: each kernel is expanded to the bin
-- indexes it spans, then grouped; no range join). Bins with no kernel are still returned (zero bytes).
WITH kb AS MATERIALIZED (
    SELECT run_id, rank, _op_name(op_type, name) AS op, ts_ns, dur_ns, end_ns,
           read_bytes, write_bytes, hbm_bytes_source
    FROM kernel_bytes
), span AS (
    SELECT run_id, min(ts_ns) AS t0, max(end_ns) AS t1,
           CASE WHEN $bin_ns::BIGINT > 0 THEN $bin_ns::BIGINT
                ELSE greatest(ceil((max(end_ns) - min(ts_ns)) / greatest($max_bins::INTEGER, 1)), 1)::BIGINT END AS w
    FROM kb GROUP BY run_id
), kbin AS (
    SELECT kb.*, s.t0, s.w,
           (kb.ts_ns - s.t0) // s.w AS b0,
           CASE WHEN kb.dur_ns > 0 THEN (kb.end_ns - 1 - s.t0) // s.w ELSE (kb.ts_ns - s.t0) // s.w END AS b1
    FROM kb JOIN span s USING (run_id)
), parts AS (
    SELECT run_id, rank, op, hbm_bytes_source, b,
           t0 + b * w AS bs, t0 + (b + 1) * w AS be,
           CASE WHEN dur_ns > 0 THEN (least(end_ns, t0 + (b + 1) * w) - greatest(ts_ns, t0 + b * w)) / dur_ns ELSE 1.0 END AS f,
           CASE WHEN dur_ns > 0 THEN least(end_ns, t0 + (b + 1) * w) - greatest(ts_ns, t0 + b * w) ELSE 0 END AS ov_ns,
           read_bytes, write_bytes
    FROM (SELECT *, unnest(range(b0, b1 + 1)) AS b FROM kbin)
), per_op AS (
    SELECT run_id, rank, b, op,
           sum(f * coalesce(read_bytes, 0)) AS r, sum(f * coalesce(write_bytes, 0)) AS wr, sum(ov_ns) AS ov_ns,
           min(hbm_bytes_source) AS src_min, max(hbm_bytes_source) AS src_max
    FROM parts GROUP BY run_id, rank, b, op
), per_bin AS (
    SELECT run_id, rank, b,
           sum(r) AS r, sum(wr) AS wr, sum(ov_ns) AS ov_ns,
           CASE WHEN min(src_min) = max(src_max) THEN min(src_min) WHEN max(src_max) IS NOT NULL THEN 'mixed' END AS src,
           list(op ORDER BY r + wr DESC, op) AS ops,
           list(r + wr ORDER BY r + wr DESC, op) AS op_bytes
    FROM per_op GROUP BY run_id, rank, b
), grid AS (
    SELECT s.run_id, rk.rank, g.b, s.t0, s.w
    FROM span s
    JOIN (SELECT DISTINCT run_id, rank FROM kb) rk USING (run_id)
    CROSS JOIN LATERAL (SELECT unnest(range(0, (s.t1 - s.t0 + s.w - 1) // s.w)) AS b) g
)
SELECT g.run_id, g.rank, g.b AS bin, g.t0 + g.b * g.w AS bin_start_ns, g.t0 + (g.b + 1) * g.w AS bin_end_ns,
       g.b * g.w / 1e6 AS t_ms,
       round(coalesce(p.r, 0))::BIGINT AS read_bytes,
       round(coalesce(p.wr, 0))::BIGINT AS write_bytes,
       round(coalesce(p.r, 0) + coalesce(p.wr, 0))::BIGINT AS hbm_bytes,
       (coalesce(p.r, 0) + coalesce(p.wr, 0)) * 1e9 / g.w AS bw_bps,
       (coalesce(p.r, 0) + coalesce(p.wr, 0)) * 1e9 / g.w / $peak_hbm_bps::DOUBLE AS utilization,
       round(coalesce(p.ov_ns, 0))::BIGINT AS kernel_ns,
       CASE WHEN p.op_bytes[1] > 0 THEN p.ops[1] END AS top_op,
       CASE WHEN p.op_bytes[1] > 0 THEN p.op_bytes[1] / (p.r + p.wr) END AS top_op_share,
       CASE WHEN p.r + p.wr > 0 THEN array_to_string(list_filter(list_transform(
                p.ops[1:$top_k::INTEGER],
                lambda o, i: CASE WHEN p.op_bytes[i] > 0
                                  THEN o || ' ' || round(100 * p.op_bytes[i] / (p.r + p.wr))::BIGINT || '%' END),
                lambda x: x IS NOT NULL), ', ') END AS top_ops,
       p.src AS hbm_bytes_source
FROM grid g
LEFT JOIN per_bin p ON p.run_id = g.run_id AND p.rank = g.rank AND p.b = g.b
ORDER BY g.run_id, g.rank, g.b;
