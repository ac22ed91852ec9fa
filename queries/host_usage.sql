-- name: host_usage
-- description: Host-side load per rank from the msprof host_sys tables (CPU_USAGE, HOST_MEM_USAGE, HOST_DISK_USAGE, HOST_NETWORK_USAGE counters): mean and peak usage of each resource and the busiest CPU - the evidence behind a host-bound verdict.
-- column: run_id VARCHAR      -- run
-- column: rank INTEGER        -- rank
-- column: resource VARCHAR    -- Host CPU | Host Memory | Host Disk | Host Network
-- column: samples BIGINT      -- usage samples (all CPUs for Host CPU)
-- column: mean_usage DOUBLE   -- mean usage 0..1 over the samples (Host CPU: over every CPU and sample)
-- column: max_usage DOUBLE    -- highest single sample 0..1
-- column: busiest_channel VARCHAR -- Host CPU: the cpuId with the highest mean usage; '' otherwise
-- column: busiest_mean DOUBLE -- that CPU's mean usage 0..1 (Host CPU), else mean_usage
--
-- Sampled at the host_sys period. One saturated CPU (busiest_mean near 1) with the device idle between
-- kernels points at a single-threaded host (dispatch, data loading); mean_usage alone hides it.
WITH u AS (
    SELECT run_id, rank, track AS resource, channel, value FROM counters
    WHERE track IN ('Host CPU', 'Host Memory', 'Host Disk', 'Host Network') AND metric = 'usage' AND unit = 'ratio'
), per_channel AS (
    SELECT run_id, rank, resource, channel, avg(value) AS m FROM u GROUP BY ALL
)
SELECT u.run_id, u.rank, u.resource, count(*) AS samples, avg(u.value) AS mean_usage, max(u.value) AS max_usage,
       CASE WHEN u.resource = 'Host CPU' THEN arg_max(p.channel, p.m) ELSE '' END AS busiest_channel,
       max(p.m) AS busiest_mean
FROM u JOIN per_channel p ON p.run_id = u.run_id AND p.rank = u.rank AND p.resource = u.resource AND p.channel = u.channel
GROUP BY u.run_id, u.rank, u.resource
ORDER BY u.run_id, u.rank, u.resource;
