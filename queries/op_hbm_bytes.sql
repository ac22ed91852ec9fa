-- name: op_hbm_bytes
-- description: Operators ranked by HBM traffic (the article's "top 10 operators by HBM bytes"): calls, device time, read/write bytes, share of the run's HBM bytes, achieved bandwidth vs the device peak, and where the bytes came from.
-- param: top_n INTEGER = 10            -- rows to return (top N operators by HBM bytes)
-- param: peak_hbm_bps DOUBLE = NULL    -- device HBM peak, bytes/s (traceql fills it from the device preset)
-- column: run_id VARCHAR               -- run
-- column: name VARCHAR                 -- operator (kernel) name as the profiler wrote it
-- column: op_type VARCHAR              -- operator type (MatMulV2, TransData...)
-- column: calls BIGINT                 -- kernel launches of this operator (all ranks in scope)
-- column: calls_with_bytes BIGINT      -- calls that have HBM bytes from some source (the byte columns sum these)
-- column: dur_ns BIGINT                -- total device time, ns
-- column: hbm_read_bytes BIGINT        -- HBM bytes read (chosen source, see hbm_bytes_source)
-- column: hbm_write_bytes BIGINT       -- HBM bytes written
-- column: hbm_bytes BIGINT             -- read + write bytes
-- column: hbm_gb DOUBLE                -- hbm_bytes / 1e9 (the article's GB column)
-- column: share DOUBLE                 -- hbm_bytes / all operators' HBM bytes in the run, 0..1
-- column: achieved_bw_bps DOUBLE       -- hbm_bytes / device time of the calls that have bytes, bytes/s
-- column: bw_utilization DOUBLE        -- achieved_bw_bps / peak_hbm_bps, 0..1 (null when the peak is unknown); above 1 is implausible (a data or model problem: `traceql check` lists it), never a finding
-- column: hbm_bytes_source VARCHAR     -- pmu | sampled | modeled when every call with bytes has that source; mixed otherwise
-- column: pmu_bytes BIGINT             -- bytes from per-task PMU counters (calls that have them), else null
-- column: sampled_bytes BIGINT         -- bytes apportioned from the HBM counter samples to calls the sampling resolves (see kernel_bytes), else null
-- column: modeled_bytes BIGINT         -- input + output tensor bytes from shapes x dtypes, else null
-- column: measured_over_modeled DOUBLE -- PMU bytes / modeled bytes over calls having both: >1 means re-reads (no UB reuse); never from sampled bytes (a sample's share is not the kernel's own traffic)
-- column: model_holds BOOLEAN          -- false when some calls' modeled bytes would move faster than the device's HBM peak: the model cannot hold for them, so their bytes are left out of every byte column, the share and the ranking (model_note says how many); null without a peak
-- column: model_note VARCHAR           -- why the model cannot hold (modeled GB, time, x peak); null when it holds
--
-- Definitions: per-kernel bytes and their sources are defined in derived/kernel_bytes.sql: pmu when the
-- kernel has hbm_read/write_bytes; sampled when the rank has HBM counters whose period resolves the kernel
-- (device bandwidth samples split among the kernels overlapping each sample window by overlap time);
-- modeled from tensor shapes otherwise (a lower bound where the model holds). A call whose modeled bytes over
-- its duration exceed the device peak is physically impossible: the model cannot hold for it (a gather or a
-- broadcast counted by tensor size; `traceql check` lists the same calls as modeled_above_peak, against the
-- same peak), so its bytes are never summed, ranked or shared; the row says how many (model_holds, model_note).
-- Communication kernels are included (HCCL/NCCL move data through HBM too).
WITH kb AS MATERIALIZED (
    -- a kernel whose modeled bytes over its duration exceed the peak: the model cannot hold for it (the same test
    -- as `traceql check`'s modeled_above_peak, with the same peak); its modeled bytes are left out below
    SELECT *, coalesce(hbm_bytes_source = 'modeled' AND dur_ns > 0
                       AND hbm_bytes * 1e9 / dur_ns > $peak_hbm_bps::DOUBLE, false) AS cannot_hold
    FROM kernel_bytes
), ops AS (
    SELECT run_id, name, op_type,
           count(*) AS calls,
           count(hbm_bytes) FILTER (WHERE NOT cannot_hold) AS calls_with_bytes,
           count(*) FILTER (WHERE cannot_hold) AS calls_cannot_hold,
           sum(dur_ns)::BIGINT AS dur_ns,
           sum(read_bytes) FILTER (WHERE NOT cannot_hold)::BIGINT AS hbm_read_bytes,
           sum(write_bytes) FILTER (WHERE NOT cannot_hold)::BIGINT AS hbm_write_bytes,
           sum(hbm_bytes) FILTER (WHERE NOT cannot_hold)::BIGINT AS hbm_bytes,
           sum(dur_ns) FILTER (WHERE hbm_bytes IS NOT NULL AND NOT cannot_hold) AS bytes_dur_ns,
           CASE WHEN min(hbm_bytes_source) FILTER (WHERE NOT cannot_hold) = max(hbm_bytes_source) FILTER (WHERE NOT cannot_hold)
                THEN min(hbm_bytes_source) FILTER (WHERE NOT cannot_hold)
                WHEN count(hbm_bytes_source) FILTER (WHERE NOT cannot_hold) > 0 THEN 'mixed' END AS hbm_bytes_source,
           sum(coalesce(pmu_read, 0) + coalesce(pmu_write, 0)) FILTER (WHERE pmu_read IS NOT NULL OR pmu_write IS NOT NULL)::BIGINT AS pmu_bytes,
           sum(sampled_read + sampled_write) FILTER (WHERE hbm_bytes_source = 'sampled')::BIGINT AS sampled_bytes,
           sum(coalesce(modeled_read, 0) + coalesce(modeled_write, 0))
               FILTER (WHERE (modeled_read IS NOT NULL OR modeled_write IS NOT NULL) AND NOT cannot_hold)::BIGINT AS modeled_bytes,
           sum(CASE WHEN hbm_bytes_source = 'pmu' THEN hbm_bytes END)
               FILTER (WHERE modeled_read IS NOT NULL AND modeled_write IS NOT NULL) AS measured_both,
           sum(modeled_read + modeled_write)
               FILTER (WHERE hbm_bytes_source = 'pmu' AND modeled_read IS NOT NULL AND modeled_write IS NOT NULL) AS modeled_both,
           sum(hbm_bytes) FILTER (WHERE cannot_hold) AS lost_bytes,
           sum(dur_ns) FILTER (WHERE cannot_hold) AS lost_dur_ns,
           max(hbm_bytes * 1e9 / dur_ns) FILTER (WHERE cannot_hold) AS lost_max_bps
    FROM kb
    GROUP BY run_id, name, op_type
)
SELECT run_id, name, op_type, calls, calls_with_bytes, dur_ns, hbm_read_bytes, hbm_write_bytes, hbm_bytes,
       hbm_bytes / 1e9 AS hbm_gb,
       hbm_bytes / nullif(sum(hbm_bytes) OVER (PARTITION BY run_id), 0) AS share,
       hbm_bytes * 1e9 / nullif(bytes_dur_ns, 0) AS achieved_bw_bps,
       hbm_bytes * 1e9 / nullif(bytes_dur_ns, 0) / $peak_hbm_bps::DOUBLE AS bw_utilization,
       hbm_bytes_source, pmu_bytes, sampled_bytes, modeled_bytes,
       measured_both / nullif(modeled_both, 0) AS measured_over_modeled,
       CASE WHEN $peak_hbm_bps::DOUBLE IS NULL THEN NULL ELSE calls_cannot_hold = 0 END AS model_holds,
       CASE WHEN calls_cannot_hold > 0
            THEN printf('model cannot hold for %d of %d calls: %.3f GB modeled (tensor sizes) in %.3f ms, up to %.1fx the HBM peak; left out',
                        calls_cannot_hold, calls, lost_bytes / 1e9, lost_dur_ns / 1e6, lost_max_bps / $peak_hbm_bps::DOUBLE) END
           AS model_note
FROM ops
-- (a total order, op_type last: the first N rows of a larger top_n are this top_n's rows, which the analysis
-- session relies on to serve a chart's top 10 from findings' top 50)
ORDER BY hbm_bytes DESC NULLS LAST, dur_ns DESC, name, op_type
LIMIT $top_n;
