-- name: comm_skew
-- description: Every communication op per rank, matched across ranks: arrival skew, time spent waiting for the last member, who arrived last and how much of that wait the late member spent in HBM-saturated compute.
-- param: top_n INTEGER = 200           -- rows to return (largest peer wait first)
-- param: sat_threshold DOUBLE = 0.8    -- HBM utilisation at or above which compute counts as HBM-saturated
-- param: peak_hbm_bps DOUBLE = NULL    -- device HBM peak, bytes/s (traceql fills it from the device preset)
-- rank_filter: output
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- rank of this row's op
-- column: step BIGINT                  -- step id
-- column: name VARCHAR                 -- op name (hcom_allReduce__586_0_1...)
-- column: op_type VARCHAR              -- collective type, lower case
-- column: group_name VARCHAR           -- communication group
-- column: ordinal BIGINT               -- position of the op among its group's ops on this rank (the cross-rank match key)
-- column: ts_ns BIGINT                 -- start, ns
-- column: dur_ns BIGINT                -- elapsed time, ns
-- column: transit_ns BIGINT            -- profiler transit time, ns (null without a transit split)
-- column: n_ranks BIGINT               -- members found in the dump for this collective
-- column: arrival_skew_ns BIGINT       -- this rank's start - the first member's start, ns
-- column: peer_wait_ns BIGINT          -- this rank's wait for the last member: min(last start, own end) - own start, ns
-- column: last_rank INTEGER            -- the member that started last (null for p2p or unmatched ops)
-- column: last_rank_hbm_saturated_frac DOUBLE -- share of peer_wait_ns the last member spent in HBM-saturated compute, 0..1
-- column: is_p2p BOOLEAN               -- p2p ops (send/receive) are not matched
-- column: matched BOOLEAN              -- true when the match is trusted (>1 member, all members agree on the op type)
-- column: comm_source VARCHAR          -- comm_ops | kernels: where the op came from
--
-- Definitions: matching and saturation as in derived/comm_events.sql, _comm_parts): the k-th collective of
-- a group on one rank is the k-th of that group on every rank.
SELECT run_id, rank, step, name, op_type, group_name, ordinal, ts_ns, dur_ns, transit_ns, n_ranks,
       ts_ns - first_arrival_ns AS arrival_skew_ns,
       wait_end_ns - ts_ns AS peer_wait_ns,
       CASE WHEN NOT is_p2p AND types_agree AND n_ranks > 1 THEN last_rank END AS last_rank,
       CASE WHEN wait_end_ns > ts_ns THEN peer_sat_frac END AS last_rank_hbm_saturated_frac,
       is_p2p, (NOT is_p2p AND types_agree AND n_ranks > 1) AS matched, comm_source
FROM _comm_parts($sat_threshold::DOUBLE, $peak_hbm_bps::DOUBLE)
ORDER BY peer_wait_ns DESC, ts_ns, rank
LIMIT $top_n;
