-- name: hbm_windows
-- description: Device HBM read/write bandwidth per rank as a step function from the HBM counter samples
-- grain: one row per constant window of a rank's summed HBM bandwidth (run_id, rank, wi)
-- level: rank
-- order: win_start
-- column: run_id VARCHAR -- run
-- column: rank INTEGER -- rank
-- column: win_start BIGINT -- window start, ns (a sample of some series)
-- column: win_end BIGINT -- window end, ns (the next sample of any series)
-- column: read_bps DOUBLE -- summed read bandwidth of the series in the window, bytes/s
-- column: write_bps DOUBLE -- summed write bandwidth, bytes/s
-- column: wi BIGINT -- window index within the rank, from 1 in time order
-- column: period_ns BIGINT -- the rank's sampling period: median gap between consecutive samples of one series, ns (the same on every row of the rank)
-- column: series BIGINT -- (channel, metric) series sampled on the rank (the same on every row)
--
-- The counters track 'HBM' (read_bw / write_bw, bytes/s, one series per channel: _hbm_samples) summed over the
-- series: each sample holds its value until the series' next sample, and a series stops contributing at its
-- last sample. Stored once per rank: kernel_bytes (sampled bytes, counter coverage), bw_segments and the
-- queries read it instead of sorting the counter samples again (_hbm_windows()). The rank's sampling period
-- and series count ride along on every row (hbm_sampling reads them here: the samples are sorted once).
WITH s AS MATERIALIZED (
    SELECT * FROM _hbm_samples()
), p AS (
    SELECT run_id, rank, median(next_ts - ts_ns) FILTER (WHERE next_ts > ts_ns)::BIGINT AS period_ns,
           count(DISTINCT (channel, metric)) FILTER (WHERE next_ts > ts_ns) AS series
    FROM s GROUP BY run_id, rank
), deltas AS (
    -- value changes of every series; a series stops contributing at its last sample
    SELECT run_id, rank, metric, ts_ns, d FROM s
    UNION ALL
    SELECT run_id, rank, metric, ts_ns, -_bps_fixed(value) FROM s WHERE next_ts IS NULL
), pts AS (
    SELECT run_id, rank, ts_ns,
           sum(CASE WHEN metric = 'read_bw' THEN d ELSE 0 END) AS d_read,
           sum(CASE WHEN metric = 'write_bw' THEN d ELSE 0 END) AS d_write
    FROM deltas GROUP BY run_id, rank, ts_ns
), cum AS (
    SELECT run_id, rank, ts_ns AS win_start,
           lead(ts_ns) OVER (PARTITION BY run_id, rank ORDER BY ts_ns) AS win_end,
           _fixed_bps(greatest(sum(d_read) OVER (PARTITION BY run_id, rank ORDER BY ts_ns ROWS UNBOUNDED PRECEDING), 0)) AS read_bps,
           _fixed_bps(greatest(sum(d_write) OVER (PARTITION BY run_id, rank ORDER BY ts_ns ROWS UNBOUNDED PRECEDING), 0)) AS write_bps
    FROM pts
)
SELECT c.run_id, c.rank, c.win_start, c.win_end, c.read_bps, c.write_bps,
       row_number() OVER (PARTITION BY c.run_id, c.rank ORDER BY c.win_start) AS wi, p.period_ns, p.series
FROM cum c LEFT JOIN p ON p.run_id = c.run_id AND p.rank = c.rank
WHERE c.win_end > c.win_start;
