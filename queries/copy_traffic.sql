-- name: copy_traffic
-- description: Device memory copies per rank and direction from the copies table (msprof / torch_npu db MEMCPY_INFO): how many, the exact bytes, their device time and the bandwidth they reached - the evidence a host-to-device upload or a device-to-device copy costs.
-- column: run_id VARCHAR        -- run
-- column: rank INTEGER          -- rank
-- column: direction VARCHAR     -- host to device, device to host, device to device... (ENUM_MEMCPY_OPERATION name)
-- column: copies BIGINT         -- copies
-- column: bytes BIGINT          -- bytes copied (MEMCPY_INFO.size, exact)
-- column: dur_ns BIGINT         -- summed copy time on the device, ns
-- column: bw_bps DOUBLE         -- bytes / dur_ns x 1e9, bytes/s (null when no time)
--
-- Measured: sizes are the runtime's own (MEMCPY_INFO), times the TASK rows of the MEMCPY_ASYNC tasks.
SELECT run_id, rank, coalesce(direction, 'unknown') AS direction, count(*) AS copies, sum(bytes)::BIGINT AS bytes,
       sum(greatest(dur_ns, 0))::BIGINT AS dur_ns,
       CASE WHEN sum(greatest(dur_ns, 0)) > 0 THEN sum(bytes) * 1e9 / sum(greatest(dur_ns, 0)) END AS bw_bps
FROM copies
GROUP BY ALL
ORDER BY run_id, rank, bytes DESC, direction;
