-- name: aicore_freq
-- description: AI Core frequency throttling: per rank and per operator type, the AI Core clock the kernels ran at (AICORE_FREQ / trace_view 'AI Core Freq' samples) against the rated clock, and whether it fell below it (msprof-analyze advisor's AI Core frequency check).
-- param: rated_mhz DOUBLE = NULL      -- rated AI Core clock, MHz; default: the dump's info.json aic_frequency, else platform_config cube_freq
-- param: threshold DOUBLE = 0.05      -- decrease ratio at or above which a row is throttled (the advisor's DECREASE_FREQ_RATIO)
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- rank
-- column: scope VARCHAR                -- rank (all compute kernels of the rank) | op (one operator type)
-- column: op_type VARCHAR              -- operator type (scope op), else null
-- column: kernels BIGINT               -- compute kernels with a frequency sample in effect at their start
-- column: dur_ns BIGINT                -- their device time, ns
-- column: avg_mhz DOUBLE               -- device-time-weighted mean clock, MHz
-- column: min_mhz DOUBLE               -- lowest clock a kernel started at, MHz
-- column: max_mhz DOUBLE               -- highest, MHz
-- column: rated_mhz DOUBLE             -- the rated clock the ratio is taken against, MHz (null: unknown)
-- column: rated_source VARCHAR         -- param | info.json (DeviceInfo.aic_frequency) | platform_config (AICoreSpec.cube_freq) | unknown
-- column: decrease_ratio DOUBLE        -- (rated - avg) / rated: the share of the rated clock lost; null when the rated clock is unknown
-- column: throttled BOOLEAN            -- decrease_ratio >= threshold
--
-- Definitions: msprof-analyze's advisor (msprof_analyze/advisor/analyzer/computation/ai_core_freq/
-- ai_core_freq_checker.py, AICoreFreqChecker) takes per operator the frequencies sampled while it ran and flags
-- it when sum(max_freq - f) / (max_freq x n) >= 0.05, max_freq being the configured aic_frequency. Here each
-- compute kernel takes the sample in effect at its start (a sample holds until the next one of its series,
-- the counters convention) and the mean is weighted by device time, so long kernels count more; the rated
-- clock is a param, else the dump's own msprof info.json aic_frequency (the clock msprof converts PMU cycles
-- with), else CANN's platform_config cube_freq. Measured: the samples (AICORE_FREQ is sampled on change and
-- periodically); the rated clock is the vendor's figure as the dump or the platform file records it.
WITH f AS (
    SELECT run_id, rank, ts_ns, value AS mhz FROM counters
    WHERE track = 'AI Core Freq' AND metric = 'freq' AND value > 0
), rated AS (
    SELECT run_id, rank,
           coalesce($rated_mhz,
                    max(TRY_CAST(value AS DOUBLE)) FILTER (WHERE key = 'info.DeviceInfo.aic_frequency'),
                    max(TRY_CAST(value AS DOUBLE)) FILTER (WHERE key = 'platform_config.AICoreSpec.cube_freq')) AS mhz,
           CASE WHEN $rated_mhz IS NOT NULL THEN 'param'
                WHEN max(TRY_CAST(value AS DOUBLE)) FILTER (WHERE key = 'info.DeviceInfo.aic_frequency') IS NOT NULL
                     THEN 'info.json'
                WHEN max(TRY_CAST(value AS DOUBLE)) FILTER (WHERE key = 'platform_config.AICoreSpec.cube_freq') IS NOT NULL
                     THEN 'platform_config'
                ELSE 'unknown' END AS src
    FROM (SELECT run_id, rank, key, value FROM run_meta
          UNION ALL SELECT DISTINCT run_id, rank, NULL, NULL FROM f) m
    GROUP BY run_id, rank
), fr AS (
    -- per rank: its first sample and whether the clock ever changed
    SELECT run_id, rank, min(ts_ns) AS first_ts, min(mhz) AS lo, max(mhz) AS hi FROM f GROUP BY run_id, rank
), kc AS (
    SELECT run_id, rank, coalesce(op_type, name) AS op_type, ts_ns, dur_ns FROM kernels
    WHERE NOT coalesce(is_comm, false) AND dur_ns > 0
), k AS (
    -- a rank whose clock never changed (the usual case: throttling is what this query looks for) ran every
    -- kernel from its first sample on at that clock, with no look-up; elsewhere each kernel takes the sample in
    -- effect at its start (an ASOF join sorts every kernel of the rank)
    SELECT kc.run_id, kc.rank, kc.op_type, kc.ts_ns, kc.dur_ns, fr.lo AS mhz
    FROM kc JOIN fr ON fr.run_id = kc.run_id AND fr.rank = kc.rank AND fr.lo = fr.hi
    WHERE kc.ts_ns >= fr.first_ts
    UNION ALL
    SELECT kc.run_id, kc.rank, kc.op_type, kc.ts_ns, kc.dur_ns, f.mhz
    FROM (SELECT * FROM kc SEMI JOIN fr ON fr.run_id = kc.run_id AND fr.rank = kc.rank AND fr.lo < fr.hi) kc
    ASOF JOIN f ON f.run_id = kc.run_id AND f.rank = kc.rank AND kc.ts_ns >= f.ts_ns
), agg AS (
    SELECT run_id, rank, 'rank' AS scope, NULL::VARCHAR AS op_type, count(*) AS kernels, sum(dur_ns) AS dur_ns,
           sum(mhz * dur_ns) / sum(dur_ns) AS avg_mhz, min(mhz) AS min_mhz, max(mhz) AS max_mhz
    FROM k GROUP BY run_id, rank
    UNION ALL
    SELECT run_id, rank, 'op', op_type, count(*), sum(dur_ns), sum(mhz * dur_ns) / sum(dur_ns), min(mhz), max(mhz)
    FROM k GROUP BY run_id, rank, op_type
)
SELECT a.run_id, a.rank, a.scope, a.op_type, a.kernels::BIGINT AS kernels, a.dur_ns::BIGINT AS dur_ns,
       a.avg_mhz, a.min_mhz, a.max_mhz, r.mhz AS rated_mhz, coalesce(r.src, 'unknown') AS rated_source,
       (r.mhz - a.avg_mhz) / NULLIF(r.mhz, 0) AS decrease_ratio,
       coalesce((r.mhz - a.avg_mhz) / NULLIF(r.mhz, 0) >= $threshold, false) AS throttled
FROM agg a LEFT JOIN rated r ON r.run_id = a.run_id AND r.rank = a.rank
ORDER BY a.run_id, a.rank, a.scope DESC, a.dur_ns DESC, a.op_type;
