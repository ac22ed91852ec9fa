-- name: hbm_sampling
-- description: How each rank's HBM counters were sampled: period, series, span and the highest summed bandwidth
-- grain: one row per rank with HBM counter samples (run_id, rank)
-- level: rank
-- order: rank
-- column: run_id VARCHAR -- run
-- column: rank INTEGER -- rank
-- column: period_ns BIGINT -- median gap between consecutive samples of one series, ns: what the counters resolve in time
-- column: series BIGINT -- (channel, metric) series sampled
-- column: first_ns BIGINT -- first window start (hbm_windows), ns
-- column: last_ns BIGINT -- last window end, ns
-- column: max_bps DOUBLE -- highest summed read + write bandwidth of any window, bytes/s
--
-- A counter sample is a mean over its period: it resolves a kernel's bandwidth only when the kernel is not much
-- shorter than the period (kernel_bytes' counter_coverage). Stored once per rank (_hbm_sampling()); period_ns and
-- series come from hbm_windows, which sorts the samples.
SELECT run_id, rank, any_value(period_ns) AS period_ns, any_value(series) AS series, min(win_start) AS first_ns,
       max(win_end) AS last_ns, max(read_bps + write_bps) AS max_bps
FROM hbm_windows
GROUP BY run_id, rank
HAVING any_value(period_ns) IS NOT NULL;
