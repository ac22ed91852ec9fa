-- name: link_congestion
-- description: Is it the links? Per rank, the NIC/RoCE port statistics (NETDEV_STATS counters): PFC pause frames sent and received, and how many of the samples showing them fall inside the rank's communication ops - a congested link pauses its senders, a late peer does not.
-- column: run_id VARCHAR             -- run
-- column: rank INTEGER               -- rank
-- column: samples BIGINT             -- NETDEV_STATS samples
-- column: comm_ns BIGINT             -- the rank's communication op time (comm_ops), ns
-- column: pfc_tx_max DOUBLE          -- largest macTxPfcPkt value seen (PFC frames this port sent: it asked its peer to pause)
-- column: pfc_rx_max DOUBLE          -- largest macRxPfcPkt value seen (PFC frames received: the switch paused this port)
-- column: pfc_samples BIGINT         -- samples with a PFC frame count above 0 (either direction)
-- column: pfc_samples_in_comm BIGINT -- of those, samples taken inside a communication op of the rank
-- column: rx_bw_max_bps DOUBLE       -- highest MAC receive bandwidth sampled, bytes/s
-- column: tx_bw_max_bps DOUBLE       -- highest MAC transmit bandwidth sampled, bytes/s
-- column: congestion_seen BOOLEAN    -- pfc_samples_in_comm > 0: PFC pauses while communicating
--
-- Sampled: MSPROF-DB-DOC does not say whether the PFC counts are per sampling interval or running totals, so
-- only their presence (> 0) and maxima are used, never a rate. A rank with long peer waits (wait_attribution)
-- and no PFC frames points at a late peer, not at the links; with PFC frames inside its communication, at
-- congestion. No NETDEV_STATS rows (collected with --sys-io-profiling / sys_io): no row for the rank.
WITH n AS (
    SELECT run_id, rank, ts_ns,
           max(value) FILTER (WHERE metric = 'mac_tx_pfc_pkt') AS tx_pfc,
           max(value) FILTER (WHERE metric = 'mac_rx_pfc_pkt') AS rx_pfc,
           max(value) FILTER (WHERE metric = 'mac_rx_bandwidth') AS rx_bw,
           max(value) FILTER (WHERE metric = 'mac_tx_bandwidth') AS tx_bw
    FROM counters WHERE track = 'NETDEV'
    GROUP BY run_id, rank, ts_ns
), c AS (
    SELECT run_id, rank, ts_ns, ts_ns + greatest(coalesce(dur_ns, 0), 0) AS end_ns FROM comm_ops
    WHERE ts_ns IS NOT NULL
), inside AS (
    SELECT DISTINCT n.run_id, n.rank, n.ts_ns FROM n
    JOIN c ON c.run_id = n.run_id AND c.rank = n.rank AND n.ts_ns >= c.ts_ns AND n.ts_ns < c.end_ns
    WHERE coalesce(n.tx_pfc, 0) > 0 OR coalesce(n.rx_pfc, 0) > 0
), comm AS (
    SELECT run_id, rank, sum(end_ns - ts_ns)::BIGINT AS comm_ns FROM c GROUP BY ALL
)
SELECT n.run_id, n.rank, count(*) AS samples, any_value(comm.comm_ns) AS comm_ns,
       max(n.tx_pfc) AS pfc_tx_max, max(n.rx_pfc) AS pfc_rx_max,
       count(*) FILTER (WHERE coalesce(n.tx_pfc, 0) > 0 OR coalesce(n.rx_pfc, 0) > 0) AS pfc_samples,
       (SELECT count(*) FROM inside i WHERE i.run_id = n.run_id AND i.rank = n.rank) AS pfc_samples_in_comm,
       max(n.rx_bw) AS rx_bw_max_bps, max(n.tx_bw) AS tx_bw_max_bps,
       (SELECT count(*) FROM inside i WHERE i.run_id = n.run_id AND i.rank = n.rank) > 0 AS congestion_seen
FROM n LEFT JOIN comm ON comm.run_id = n.run_id AND comm.rank = n.rank
GROUP BY n.run_id, n.rank
ORDER BY n.run_id, n.rank;
