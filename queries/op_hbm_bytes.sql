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
-- column: model_holds BOOLEAN          -- false when the operator's modeled bytes would move faster than the device's HBM peak: the model cannot hold, so its modeled bytes are left out of every byte column, the share and the ranking (listed last, with model_note); null without a peak
-- column: model_note VARCHAR           -- why the model cannot hold (modeled GB, time, x peak); null when it holds
--
-- Definitions: per-kernel bytes and their sources are defined in derived/kernel_bytes.sql: pmu when the
-- kernel has hbm_read/write_bytes; sampled when the rank has HBM counters whose period resolves the kernel
-- (device bandwidth samples split among the kernels overlapping each sample window by overlap time);
-- modeled from tensor shapes otherwise (a lower bound where the model holds). An operator whose modeled bytes,
-- over the time of its modeled calls, exceed the device peak is physically impossible: the model cannot hold
-- for it (a gather or a broadcast counted by tensor size), so those bytes are never summed, ranked or shared;
-- the row keeps its measured/sampled part only and says why (model_holds, model_note).
-- Communication kernels are included (HCCL/NCCL move data through HBM too).
WITH kb AS MATERIALIZED (
    SELECT * FROM kernel_bytes
), ops AS (
    SELECT run_id, name, op_type,
           count(*) AS calls,
           count(hbm_bytes) AS calls_with_bytes,
           count(hbm_bytes) FILTER (WHERE hbm_bytes_source = 'modeled') AS count_mod,
           sum(dur_ns)::BIGINT AS dur_ns,
           sum(read_bytes)::BIGINT AS hbm_read_bytes,
           sum(write_bytes)::BIGINT AS hbm_write_bytes,
           sum(hbm_bytes)::BIGINT AS hbm_bytes,
           sum(dur_ns) FILTER (WHERE hbm_bytes IS NOT NULL) AS bytes_dur_ns,
           CASE WHEN min(hbm_bytes_source) = max(hbm_bytes_source) THEN min(hbm_bytes_source)
                WHEN count(hbm_bytes_source) > 0 THEN 'mixed' END AS hbm_bytes_source,
           sum(coalesce(pmu_read, 0) + coalesce(pmu_write, 0)) FILTER (WHERE pmu_read IS NOT NULL OR pmu_write IS NOT NULL)::BIGINT AS pmu_bytes,
           sum(sampled_read + sampled_write) FILTER (WHERE hbm_bytes_source = 'sampled')::BIGINT AS sampled_bytes,
           sum(coalesce(modeled_read, 0) + coalesce(modeled_write, 0)) FILTER (WHERE modeled_read IS NOT NULL OR modeled_write IS NOT NULL)::BIGINT AS modeled_bytes,
           sum(CASE WHEN hbm_bytes_source = 'pmu' THEN hbm_bytes END)
               FILTER (WHERE modeled_read IS NOT NULL AND modeled_write IS NOT NULL) AS measured_both,
           sum(modeled_read + modeled_write)
               FILTER (WHERE hbm_bytes_source = 'pmu' AND modeled_read IS NOT NULL AND modeled_write IS NOT NULL) AS modeled_both,
           sum(hbm_bytes) FILTER (WHERE hbm_bytes_source = 'modeled') AS mod_bytes,
           sum(dur_ns) FILTER (WHERE hbm_bytes_source = 'modeled') AS mod_dur_ns,
           sum(read_bytes) FILTER (WHERE hbm_bytes_source <> 'modeled')::BIGINT AS kept_read,
           sum(write_bytes) FILTER (WHERE hbm_bytes_source <> 'modeled')::BIGINT AS kept_write,
           sum(dur_ns) FILTER (WHERE hbm_bytes_source <> 'modeled') AS kept_dur_ns,
           CASE WHEN count(*) FILTER (WHERE hbm_bytes_source <> 'modeled') = 0 THEN NULL
                WHEN min(hbm_bytes_source) FILTER (WHERE hbm_bytes_source <> 'modeled')
                     = max(hbm_bytes_source) FILTER (WHERE hbm_bytes_source <> 'modeled')
                THEN min(hbm_bytes_source) FILTER (WHERE hbm_bytes_source <> 'modeled') ELSE 'mixed' END AS kept_source
    FROM kb
    GROUP BY run_id, name, op_type
), held AS (
    SELECT *, CASE WHEN $peak_hbm_bps::DOUBLE IS NULL THEN NULL
                   ELSE NOT coalesce(mod_bytes * 1e9 / nullif(mod_dur_ns, 0) > $peak_hbm_bps::DOUBLE, false) END
              AS model_holds
    FROM ops
), ops2 AS (
    SELECT run_id, name, op_type, calls, dur_ns, pmu_bytes, sampled_bytes, modeled_bytes, measured_both, modeled_both,
           model_holds,
           CASE WHEN model_holds IS NOT DISTINCT FROM false
                THEN printf('model cannot hold: %.3f GB modeled (tensor sizes) in %.3f ms is %.1fx the HBM peak',
                            mod_bytes / 1e9, mod_dur_ns / 1e6, mod_bytes * 1e9 / mod_dur_ns / $peak_hbm_bps::DOUBLE) END
               AS model_note,
           CASE WHEN model_holds IS NOT DISTINCT FROM false THEN count_kept ELSE calls_with_bytes END AS calls_with_bytes,
           CASE WHEN model_holds IS NOT DISTINCT FROM false THEN kept_read ELSE hbm_read_bytes END AS hbm_read_bytes,
           CASE WHEN model_holds IS NOT DISTINCT FROM false THEN kept_write ELSE hbm_write_bytes END AS hbm_write_bytes,
           CASE WHEN model_holds IS NOT DISTINCT FROM false THEN kept_read + kept_write ELSE hbm_bytes END AS hbm_bytes,
           CASE WHEN model_holds IS NOT DISTINCT FROM false THEN kept_dur_ns ELSE bytes_dur_ns END AS bytes_dur_ns,
           CASE WHEN model_holds IS NOT DISTINCT FROM false THEN kept_source ELSE hbm_bytes_source END AS hbm_bytes_source
    FROM (SELECT *, calls_with_bytes - count_mod AS count_kept FROM held)
)
SELECT run_id, name, op_type, calls, calls_with_bytes, dur_ns, hbm_read_bytes, hbm_write_bytes, hbm_bytes,
       hbm_bytes / 1e9 AS hbm_gb,
       hbm_bytes / nullif(sum(hbm_bytes) OVER (PARTITION BY run_id), 0) AS share,
       hbm_bytes * 1e9 / nullif(bytes_dur_ns, 0) AS achieved_bw_bps,
       hbm_bytes * 1e9 / nullif(bytes_dur_ns, 0) / $peak_hbm_bps::DOUBLE AS bw_utilization,
       hbm_bytes_source, pmu_bytes, sampled_bytes, modeled_bytes,
       measured_both / nullif(modeled_both, 0) AS measured_over_modeled,
       model_holds, model_note
FROM ops2
ORDER BY model_holds IS NOT DISTINCT FROM false, hbm_bytes DESC NULLS LAST, dur_ns DESC, name
LIMIT $top_n;
