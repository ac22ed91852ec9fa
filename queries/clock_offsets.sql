-- name: clock_offsets
-- description: Per-rank clock offset estimated from matched collectives (every member ends within the transfer time of the others), with the collectives' own skew it is compared against and whether traceql applies it (traceql export does).
-- rank_filter: output
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- rank
-- column: ref_rank INTEGER             -- the reference rank (its clock is the one the offsets align to; null without matched collectives)
-- column: n_matched BIGINT             -- matched collectives shared with the reference rank the estimate rests on
-- column: offset_ns BIGINT             -- median of (this rank's collective end - the reference rank's), ns; subtract it to align
-- column: skew_ns BIGINT               -- median duration of the shorter member of those collectives: the ends' own spread on aligned clocks, ns
-- column: residual_ns BIGINT           -- median |end difference - offset_ns|, ns: how consistent the estimate is
-- column: applied BOOLEAN              -- |offset_ns| > skew_ns: the offset exceeds the collectives' own skew, so it is applied
-- column: basis VARCHAR                -- what the number rests on, in words
--
-- Definitions:
-- * Ranks write their own clocks; they can be off by milliseconds to minutes. Every member of a collective ends
-- within the transfer time of the others (nobody leaves before the last member arrived and the data moved), so
-- the end of a matched collective is the same instant on every rank up to that transfer time. Per rank:
--   offset_ns   = median over the collectives it shares with the reference rank (the lowest rank that has any
--                 matched collective) of (its end - the reference rank's end), ns: subtract it from the rank's
--                 times to put them on the reference rank's clock;
--   skew_ns     = median over those collectives of the shorter member's duration: how far apart the ends of
--                 a collective can be on aligned clocks (the collectives' own skew);
--   residual_ns = median of |end difference - offset_ns|: how consistent the estimate is;
--   applied     = |offset_ns| > skew_ns: only then is the offset distinguishable from the collectives' own skew
--                 and worth applying (real dumps on synchronised clocks give offsets below it).
-- Matching is comm_events' (the k-th collective of a group on one rank is the k-th on every rank; only trusted
-- matches: not p2p, more than one member, all members agree on the op type).
-- Not a helper macro on purpose: helpers load before every query (and into traceql.derive's build session),
-- so a macro here would tie every query to comm_events' columns. To apply the offsets in another query, join
-- this query's body (or copy it into a macro) on (run_id, rank).
WITH ce AS (
    SELECT run_id, rank, group_key, ordinal, ts_ns, end_ns, dur_ns
    FROM comm_events
    WHERE NOT is_p2p AND types_agree AND n_ranks > 1
), ref AS (
    SELECT run_id, min(rank) AS ref_rank FROM ce GROUP BY run_id
), pairs AS (
    SELECT c.run_id, c.rank, r.ref_rank, c.end_ns - x.end_ns AS d_end, least(c.dur_ns, x.dur_ns) AS short_ns
    FROM ce c
    JOIN ref r ON r.run_id = c.run_id
    JOIN ce x ON x.run_id = c.run_id AND x.rank = r.ref_rank AND x.group_key = c.group_key AND x.ordinal = c.ordinal
), est AS (
    SELECT run_id, rank, any_value(ref_rank) AS ref_rank, count(*) AS n_matched,
           quantile_disc(d_end, 0.5) AS offset_ns, quantile_disc(short_ns, 0.5) AS skew_ns
    FROM pairs GROUP BY run_id, rank
), res AS (
    SELECT e.run_id, e.rank, quantile_disc(abs(p.d_end - e.offset_ns), 0.5) AS residual_ns
    FROM est e JOIN pairs p ON p.run_id = e.run_id AND p.rank = e.rank
    GROUP BY e.run_id, e.rank
), ranks AS (
    SELECT DISTINCT run_id, rank FROM kernels
    UNION SELECT DISTINCT run_id, rank FROM comm_ops  -- ranks with device or communication rows
)
SELECT rk.run_id, rk.rank, coalesce(e.ref_rank, r.ref_rank) AS ref_rank,
       coalesce(e.n_matched, 0)::BIGINT AS n_matched,
       coalesce(e.offset_ns, 0)::BIGINT AS offset_ns,
       e.skew_ns::BIGINT AS skew_ns,
       s.residual_ns::BIGINT AS residual_ns,
       coalesce(abs(e.offset_ns) > e.skew_ns, false) AS applied,
       CASE WHEN e.n_matched IS NULL AND r.ref_rank IS NULL THEN 'no matched collectives in the run: offset 0 assumed'
            WHEN e.n_matched IS NULL THEN 'no collective shared with the reference rank: offset 0 assumed'
            WHEN rk.rank = e.ref_rank THEN 'reference rank'
            ELSE 'median end difference over ' || e.n_matched || ' matched collectives' END AS basis
FROM ranks rk
LEFT JOIN est e ON e.run_id = rk.run_id AND e.rank = rk.rank
LEFT JOIN res s ON s.run_id = rk.run_id AND s.rank = rk.rank
LEFT JOIN ref r ON r.run_id = rk.run_id
ORDER BY run_id, rank;
