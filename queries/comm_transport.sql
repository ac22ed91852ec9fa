-- name: comm_transport
-- description: Communication per transport (HCCS, PCIE, SIO, RDMA, SDMA): bytes, transit time and achieved bandwidth per op and per rank/link type, ops whose transit size is small (SDMA < 16 MB, RDMA < 1 MB) and packets not 512-byte aligned - the inputs of Ascend's advisor checks (slow link, small packets, byte alignment).
-- param: min_sdma_bytes BIGINT = 16000000 -- an SDMA transfer below this is a small packet (msprof-analyze advisor: 16 MB, MB = 1e6 as communication.json writes sizes)
-- param: min_rdma_bytes BIGINT = 1000000  -- an RDMA transfer below this is a small packet (advisor: 1 MB)
-- param: align_bytes BIGINT = 512      -- packet sizes above this that are not a multiple of it are unaligned (advisor: 512)
-- param: min_link_bytes BIGINT = 1000000 -- ops below this are left out of the per-link bandwidth (latency, not bandwidth, sets their time)
-- rank_filter: output
-- column: run_id VARCHAR               -- run
-- column: scope VARCHAR                -- run (totals) | link (one rank and transport) | op (one op, rank and transport)
-- column: rank INTEGER                 -- rank (null for scope run)
-- column: step BIGINT                  -- step (scope op)
-- column: name VARCHAR                 -- op name (scope op)
-- column: group_name VARCHAR           -- communication group (scope op)
-- column: transport VARCHAR            -- HCCS, PCIE, SIO, RDMA, SDMA (SDMA = the on-node links together, as the profiler writes it)
-- column: ops BIGINT                   -- op rows in the row (scope run: SDMA and RDMA op rows, the denominator of the small-packet ratio)
-- column: bytes BIGINT                 -- transit size, bytes (scope run: the physical links, SDMA left out so nothing counts twice)
-- column: transit_ns BIGINT            -- transit time, ns
-- column: bandwidth_bps DOUBLE         -- bytes / transit time, bytes/s (scope link: over ops of at least min_link_bytes)
-- column: small_ops BIGINT             -- SDMA ops below min_sdma_bytes + RDMA ops below min_rdma_bytes
-- column: small_bytes BIGINT           -- their bytes
-- column: packets BIGINT               -- packets in the profiler's size distribution
-- column: unaligned_packets BIGINT     -- packets above align_bytes whose size is not a multiple of it
-- column: unaligned_ops BIGINT         -- ops with at least one unaligned packet
-- column: has_packet_sizes BOOLEAN     -- whether the dump has a packet size distribution for the row
--
-- Definitions: rows of comm_bandwidth except the per-step 'Total Op Info' aggregate. Small packets as
-- msprof-analyze's PacketChecker counts them: per op, the SDMA (or RDMA) transit size below the threshold. Byte
-- alignment from the Size Distribution of communication.json (packet size -> count).
WITH cb AS MATERIALIZED (
    SELECT run_id, rank, step, name, group_name, upper(transport) AS transport, bytes, transit_ns,
           packet_sizes IS NOT NULL AND cardinality(packet_sizes) > 0 AS has_ps,
           CASE WHEN packet_sizes IS NOT NULL THEN list_sum(list_transform(map_entries(packet_sizes), lambda e: e.value)) END AS packets,
           CASE WHEN packet_sizes IS NOT NULL THEN list_sum(list_transform(map_entries(packet_sizes), lambda e:
               CASE WHEN TRY_CAST(e.key AS DOUBLE) > $align_bytes::BIGINT
                         AND TRY_CAST(e.key AS DOUBLE) % $align_bytes::BIGINT <> 0 THEN e.value ELSE 0 END)) END AS unaligned
    FROM comm_bandwidth
    WHERE coalesce(name, '') <> 'Total Op Info' AND transport IS NOT NULL
), ops AS (
    SELECT *,
           CASE WHEN transport = 'SDMA' THEN bytes < $min_sdma_bytes::BIGINT
                WHEN transport = 'RDMA' THEN bytes < $min_rdma_bytes::BIGINT END AS small
    FROM cb
), op_rows AS (
    SELECT run_id, 'op' AS scope, rank, step, name, group_name, transport, 1 AS ops, bytes, transit_ns,
           bytes * 1e9 / nullif(transit_ns, 0) AS bandwidth_bps,
           CASE WHEN small THEN 1 ELSE 0 END AS small_ops, CASE WHEN small THEN bytes ELSE 0 END AS small_bytes,
           packets, unaligned AS unaligned_packets, CASE WHEN unaligned > 0 THEN 1 ELSE 0 END AS unaligned_ops,
           has_ps AS has_packet_sizes
    FROM ops
), link_rows AS (
    SELECT run_id, 'link' AS scope, rank, NULL AS step, NULL AS name, NULL AS group_name, transport, count(*) AS ops,
           sum(bytes) AS bytes, sum(transit_ns) AS transit_ns,
           sum(bytes) FILTER (WHERE bytes >= $min_link_bytes::BIGINT) * 1e9
               / nullif(sum(transit_ns) FILTER (WHERE bytes >= $min_link_bytes::BIGINT), 0) AS bandwidth_bps,
           sum(small_ops) AS small_ops, sum(small_bytes) AS small_bytes, sum(packets) AS packets,
           sum(unaligned_packets) AS unaligned_packets, sum(unaligned_ops) AS unaligned_ops,
           bool_or(has_packet_sizes) AS has_packet_sizes
    FROM op_rows GROUP BY run_id, rank, transport
), run_rows AS (
    SELECT ru.run_id, 'run' AS scope, NULL AS rank, NULL AS step, NULL AS name, NULL AS group_name, NULL AS transport,
           count(o.run_id) FILTER (WHERE o.transport IN ('SDMA', 'RDMA')) AS ops,
           coalesce(sum(o.bytes) FILTER (WHERE o.transport <> 'SDMA'), sum(o.bytes)) AS bytes,
           coalesce(sum(o.transit_ns) FILTER (WHERE o.transport <> 'SDMA'), sum(o.transit_ns)) AS transit_ns,
           NULL AS bandwidth_bps, coalesce(sum(o.small_ops), 0) AS small_ops, coalesce(sum(o.small_bytes), 0) AS small_bytes,
           sum(o.packets) AS packets, coalesce(sum(o.unaligned_packets), 0) AS unaligned_packets,
           coalesce(sum(o.unaligned_ops), 0) AS unaligned_ops, coalesce(bool_or(o.has_packet_sizes), false) AS has_packet_sizes
    FROM runs ru LEFT JOIN op_rows o ON o.run_id = ru.run_id
    GROUP BY ru.run_id
), u AS (
    SELECT * FROM run_rows UNION ALL SELECT * FROM link_rows UNION ALL SELECT * FROM op_rows
)
SELECT run_id, scope, rank::INTEGER AS rank, step::BIGINT AS step, name::VARCHAR AS name, group_name::VARCHAR AS group_name,
       transport::VARCHAR AS transport, ops::BIGINT AS ops, bytes::BIGINT AS bytes, transit_ns::BIGINT AS transit_ns,
       bandwidth_bps::DOUBLE AS bandwidth_bps, small_ops::BIGINT AS small_ops, small_bytes::BIGINT AS small_bytes,
       round(packets)::BIGINT AS packets, round(unaligned_packets)::BIGINT AS unaligned_packets,
       unaligned_ops::BIGINT AS unaligned_ops, has_packet_sizes::BOOLEAN AS has_packet_sizes
FROM u
ORDER BY run_id, CASE scope WHEN 'run' THEN 0 WHEN 'link' THEN 1 ELSE 2 END, rank, transport, step, name;
