-- name: ub_l2_rates
-- description: UB utilisation (UB bandwidth vs the UB peak) and L2 hit rate (weighted by traffic), overall and per operator; null with a reason when the dump lacks the metrics.
-- param: top_n INTEGER = 50            -- operator rows to return (by device time), after the overall row
-- param: peak_ub_bps DOUBLE = NULL     -- Unified Buffer peak bandwidth, bytes/s (traceql fills it from the device preset)
-- column: run_id VARCHAR               -- run
-- column: scope VARCHAR                -- overall | op
-- column: name VARCHAR                 -- operator name (null for overall)
-- column: op_type VARCHAR              -- operator type (null for overall)
-- column: calls BIGINT                 -- kernel launches (compute kernels only)
-- column: dur_ns BIGINT                -- device time, ns
-- column: ub_bytes BIGINT              -- UB bytes read + written (kernels.ub_read_bytes + ub_write_bytes)
-- column: ub_bw_bps DOUBLE             -- ub_bytes / device time of the calls that have UB data, bytes/s
-- column: ub_utilization DOUBLE        -- ub_bw_bps / peak_ub_bps, 0..1 (article: > 0.9 good reuse, < 0.5 data not reused in UB)
-- column: l2_hit_rate DOUBLE           -- L2 hit rate 0..1, weighted by each call's traffic (article: < 0.5 unfriendly access pattern)
-- column: l2_weight VARCHAR            -- what weighted the hit rate: l2_bytes | hbm_bytes | dur_ns (one choice per run)
-- column: l2_source VARCHAR            -- pmu (kernels.l2_hit_rate) | l2_cache (l2_cache table) | mixed
-- column: reason VARCHAR               -- why a value is null (missing metrics, unknown peak), else null
--
-- Definitions: UB utilisation of a set of calls = their UB bytes / their device time / peak_ub_bps: a
-- time-weighted mean of each call's UB bandwidth. L2 hit rate of a set of calls = sum(hit_rate x weight) /
-- sum(weight) over calls with a rate, weight = the call's L2 traffic (l2_read + l2_write bytes) when every rated
-- call has it, else its HBM bytes (chosen source, _helpers.sql) when every rated call has them, else its
-- device time. Per-call rates come from kernels.l2_hit_rate, else from the l2_cache table matched on
-- (rank, stream_id, task_id, op name). Communication kernels are left out.
WITH kb AS MATERIALIZED (
    SELECT k.*, coalesce(k.l2_hit_rate, lc.hit_rate) AS hit,
           CASE WHEN k.l2_hit_rate IS NOT NULL THEN 'pmu' WHEN lc.hit_rate IS NOT NULL THEN 'l2_cache' END AS hit_src,
           CASE WHEN k.ub_read_bytes IS NOT NULL OR k.ub_write_bytes IS NOT NULL
                THEN coalesce(k.ub_read_bytes, 0) + coalesce(k.ub_write_bytes, 0) END AS ub
    FROM kernel_bytes k
    LEFT JOIN (SELECT run_id, rank, stream_id, task_id, op_name, avg(hit_rate) AS hit_rate
               FROM l2_cache WHERE hit_rate IS NOT NULL GROUP BY ALL) lc
      ON lc.run_id = k.run_id AND lc.rank = k.rank AND lc.stream_id = k.stream_id AND lc.task_id = k.task_id
     AND lc.op_name = k.name
    WHERE NOT k.is_comm
), wchoice AS (
    SELECT run_id,
           CASE WHEN bool_and(l2_read_bytes IS NOT NULL OR l2_write_bytes IS NOT NULL) FILTER (WHERE hit IS NOT NULL) THEN 'l2_bytes'
                WHEN bool_and(hbm_bytes IS NOT NULL) FILTER (WHERE hit IS NOT NULL) THEN 'hbm_bytes'
                ELSE 'dur_ns' END AS l2_weight,
           count(ub) > 0 AS has_ub, count(hit) > 0 AS has_hit
    FROM kb GROUP BY run_id
), w AS (
    SELECT kb.*, c.l2_weight, c.has_ub, c.has_hit,
           CASE c.l2_weight WHEN 'l2_bytes' THEN coalesce(l2_read_bytes, 0) + coalesce(l2_write_bytes, 0)
                            WHEN 'hbm_bytes' THEN hbm_bytes ELSE dur_ns END::DOUBLE AS wt
    FROM kb JOIN wchoice c USING (run_id)
), g AS (
    SELECT run_id, CASE WHEN grouping(name) = 1 THEN 'overall' ELSE 'op' END AS scope, name, op_type,
           count(*) AS calls, sum(dur_ns)::BIGINT AS dur_ns,
           sum(ub)::BIGINT AS ub_bytes,
           sum(ub) * 1e9 / nullif(sum(dur_ns) FILTER (WHERE ub IS NOT NULL), 0) AS ub_bw_bps,
           sum(hit * wt) FILTER (WHERE hit IS NOT NULL) / nullif(sum(wt) FILTER (WHERE hit IS NOT NULL), 0) AS l2_hit_rate,
           any_value(l2_weight) AS l2_weight,
           CASE WHEN min(hit_src) = max(hit_src) THEN min(hit_src) WHEN count(hit_src) > 0 THEN 'mixed' END AS l2_source,
           bool_or(has_ub) AS has_ub, bool_or(has_hit) AS has_hit
    FROM w
    GROUP BY GROUPING SETS ((run_id), (run_id, name, op_type))
), r AS (
    SELECT *, ub_bw_bps / $peak_ub_bps::DOUBLE AS ub_utilization,
           row_number() OVER (PARTITION BY run_id, scope ORDER BY dur_ns DESC, name) AS rn
    FROM g
)
SELECT run_id, scope, name, op_type, calls, dur_ns, ub_bytes, ub_bw_bps, ub_utilization, l2_hit_rate,
       CASE WHEN l2_hit_rate IS NOT NULL THEN l2_weight END AS l2_weight, l2_source,
       nullif(concat_ws('; ',
           CASE WHEN NOT has_ub THEN 'no UB bandwidth metrics in the dump (profile with aic_metrics=MemoryUB or Memory)'
                WHEN ub_bytes IS NULL THEN 'no UB metrics for this operator'
                WHEN $peak_ub_bps::DOUBLE IS NULL THEN 'UB peak unknown for this device (pass --param peak_ub_bps=BYTES_PER_S)' END,
           CASE WHEN NOT has_hit THEN 'no L2 hit rates in the dump (l2_cache Hit Rate N/A and no L2Cache PMU metrics; profile with aic_metrics=L2Cache)'
                WHEN l2_hit_rate IS NULL THEN 'no L2 hit rate for this operator' END), '') AS reason
FROM r
WHERE scope = 'overall' OR rn <= $top_n
ORDER BY run_id, scope = 'op', dur_ns DESC, name;
