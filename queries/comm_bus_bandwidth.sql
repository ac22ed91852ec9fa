-- name: comm_bus_bandwidth
-- description: Per collective: algorithm bandwidth (the op's buffer / its time) and bus bandwidth (algorithm bandwidth x the collective's traffic factor for its rank count), the numbers nccl-tests / hccl_test print, beside the transit bandwidth the profiler measured.
-- param: top_n INTEGER = 1000          -- rows to return (longest ops first)
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- rank
-- column: step BIGINT                  -- step id
-- column: name VARCHAR                 -- op name (hcom_allReduce__586_0_1)
-- column: op_type VARCHAR              -- collective type, lower case
-- column: group_name VARCHAR           -- communication group
-- column: data_type VARCHAR            -- element type of the buffer
-- column: data_bytes BIGINT            -- the op's buffer, count x element size, bytes (null: the profiler marks the size invalid)
-- column: rank_size INTEGER            -- ranks in the communicator
-- column: rank_size_source VARCHAR     -- rankSize (the db's COMMUNICATION_OP.rankSize) | ranks_in_dump (ranks of this run with ops in the group: a lower bound when the dump holds part of the job) | unknown
-- column: time_ns BIGINT               -- the op's elapse time, ns (what nccl-tests times)
-- column: alg_bw_bps DOUBLE            -- data_bytes / time, bytes/s
-- column: bus_factor DOUBLE            -- allreduce 2(n-1)/n; allgather, reducescatter, alltoall (n-1)/n; broadcast, reduce, send, recv 1
-- column: bus_bw_bps DOUBLE            -- alg_bw_bps x bus_factor, bytes/s: comparable with the link's peak whatever the rank count
-- column: transit_bw_bps DOUBLE        -- bytes / transit_ns, the profiler's own measure (bytes over all transports while moving data)
-- column: size_status VARCHAR          -- ok | invalid (dataType RESERVED/N/A/INVALID_TYPE or an invalid count) | not_recorded (text exports)
--
-- Definitions: the bus-bandwidth factors are those of NVIDIA nccl-tests (doc/PERFORMANCE.md): for an
-- allreduce each rank sends and receives 2(n-1)/n of the buffer, for allgather / reducescatter / alltoall
-- (n-1)/n (buffer = the whole gathered / scattered data), broadcast and reduce move the buffer once. Unknown
-- collective types and a missing rank count leave the factor null. The size comes only from db exports
-- (COMMUNICATION_OP count x ENUM_HCCL_DATA_TYPE size, parsers._db_tables.comm_op_sizes_sql); text exports
-- record bytes per transport, not the op's buffer.
WITH g AS (
    SELECT run_id, group_name, count(DISTINCT rank) AS n FROM comm_ops WHERE group_name IS NOT NULL GROUP BY ALL
), o AS (
    SELECT c.*, coalesce(c.rank_size, CASE WHEN c.data_bytes IS NOT NULL THEN g.n END) AS n,
           CASE WHEN c.rank_size IS NOT NULL THEN 'rankSize'
                WHEN g.n IS NOT NULL AND c.data_bytes IS NOT NULL THEN 'ranks_in_dump' ELSE 'unknown' END AS n_src,
           regexp_replace(lower(coalesce(c.op_type, '')), '[^a-z]', '', 'g') AS t
    FROM comm_ops c LEFT JOIN g ON g.run_id = c.run_id AND g.group_name = c.group_name
    WHERE coalesce(c.kind, 'collective') <> 'p2p' OR c.data_bytes IS NOT NULL
), f AS (
    SELECT *, CASE WHEN n IS NULL OR n < 1 THEN NULL
                   WHEN t LIKE 'allreduce%' THEN 2.0 * (n - 1) / n
                   WHEN t LIKE 'allgather%' OR t LIKE 'reducescatter%' OR t LIKE 'alltoall%' THEN (n - 1)::DOUBLE / n
                   WHEN t LIKE 'broadcast%' OR t LIKE 'reduce%' OR t LIKE 'send%' OR t LIKE 'recv%' OR t LIKE 'receive%'
                        THEN 1.0 END AS factor
    FROM o
)
SELECT run_id, rank, step, name, op_type, group_name, data_type, data_bytes, n::INTEGER AS rank_size,
       n_src AS rank_size_source, dur_ns AS time_ns,
       data_bytes / NULLIF(dur_ns, 0) * 1e9 AS alg_bw_bps, factor AS bus_factor,
       data_bytes / NULLIF(dur_ns, 0) * 1e9 * factor AS bus_bw_bps,
       bytes / NULLIF(transit_ns, 0) * 1e9 AS transit_bw_bps,
       CASE WHEN data_bytes IS NOT NULL THEN 'ok'
            WHEN data_type IS NOT NULL OR source LIKE '%COMMUNICATION_OP%' THEN 'invalid'
            ELSE 'not_recorded' END AS size_status
FROM f
ORDER BY dur_ns DESC NULLS LAST, run_id, rank, ts_ns
LIMIT $top_n;
