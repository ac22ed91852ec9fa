-- _bounds.sql: what bounds each device task, from the best evidence the task has (one definition, used by
-- op_bounds, bound_shares and roofline; findings read those queries). Not a query itself.
--
-- The evidence ladder, best first (the task's `grade`):
--   measured  per-task PMU bytes (Memory / MemoryAccess aic-metrics): HBM utilisation = bytes / duration / peak.
--   pipe      per-task pipe utilisation (PipeUtilization: every Level1+ kernel_details / op_summary): the share
--             of the core's cycles each pipe is busy, at the task's own resolution.
--   sampled   HBM counter samples whose period resolves the task (kernel_bytes.counter_coverage 'resolved').
--   modeled   tensor-size bytes (and FLOPs): a bound only, and only where the model holds (within the peak).
--   insufficient  none of these: the bound is 'unknown'.
--
-- What each pipe means (CANN msprof PipeUtilization; ratios are busy cycles / the core's total cycles):
--   MTE2 (aic_mte2 / aiv_mte2)  GM -> L1/UB loads: reads from HBM (through L2).       -> memory
--   MTE3 (aiv_mte3)             UB -> GM stores: writes to HBM.                         -> memory
--   MTE1 (aic_mte1)             L1 -> L0A/L0B: on-chip, never HBM.                      -> neither (not a roof)
--   cube (aic_mac) / vector (aiv_vec)  the compute units.                               -> compute
--   scalar (ai*_scalar)         address arithmetic, control flow, issuing the other pipes' instructions: not a
--                               roof of the roofline; a task held by it is latency-bound, cause 'scalar'.
--   fixpipe (aic_fixpipe)       L0C -> GM or L1 (the cube's results with on-the-fly conversion): its target is
--                               not recorded, so it never counts as HBM traffic; a task held by it is
--                               latency-bound, cause 'fixpipe' (the cube output path).
--
-- The rule (thresholds are parameters; defaults 0.8 as MindStudio Insight's operator roofline):
--   memory   a memory pipe (MTE2, MTE3) busy >= mem_line of the task's time, or measured / sampled / modeled
--            HBM bytes >= mem_line of the peak;
--   compute  cube or vector busy >= compute_line (measured FLOPs >= compute_line of the peak FLOP/s);
--            both memory and compute: the busier pipe wins (a tie goes to compute);
--   latency  pipe evidence with neither: the cause the data shows, first that holds: 'scalar' (scalar pipe busy
--            >= scalar_line), 'fixpipe' (fixpipe busy >= mem_line), 'few_blocks' (block_dim < few_blocks x the
--            most blocks any task of the same core type used in the run: cores idle), 'short_task' (shorter than
--            short_ns: launch and scheduling dominate), 'poor_overlap' (no pipe near its roof: the pipes wait on
--            each other or on sync);
--   unknown  bytes below the line but nothing to tell compute from latency, or no evidence.
CREATE OR REPLACE MACRO _task_bounds(peak_hbm_bps, peak_flops, mem_line, compute_line, scalar_line, short_ns,
                                     few_blocks) AS TABLE
WITH t AS (
    SELECT run_id, rank, kid, step, name, op_type, task_type, ts_ns, dur_ns, block_dim, hbm_bytes_source, hbm_bytes,
           flops, mac_ratio, vec_ratio, scalar_ratio, mte1_ratio, fixpipe_ratio,
           greatest(mte2_ratio, mte3_ratio) AS mem_pipe,
           greatest(mac_ratio, vec_ratio) AS compute_pipe,
           (mac_ratio IS NOT NULL OR vec_ratio IS NOT NULL OR mte2_ratio IS NOT NULL OR mte3_ratio IS NOT NULL)
               AS has_pipe,
           CASE WHEN dur_ns > 0 AND peak_hbm_bps IS NOT NULL AND hbm_bytes IS NOT NULL
                THEN hbm_bytes * 1e9 / dur_ns / peak_hbm_bps END AS bw_util,
           CASE WHEN dur_ns > 0 AND peak_flops IS NOT NULL AND flops IS NOT NULL
                THEN flops * 1e9 / dur_ns / peak_flops END AS flops_util,
           max(block_dim) OVER (PARTITION BY run_id, upper(coalesce(task_type, ''))) AS max_blocks
    FROM kernel_bytes
    WHERE NOT is_comm
), g AS (
    SELECT *,
           CASE WHEN hbm_bytes_source = 'pmu' AND bw_util IS NOT NULL THEN 'measured'
                WHEN has_pipe THEN 'pipe'
                WHEN hbm_bytes_source = 'sampled' AND bw_util IS NOT NULL THEN 'sampled'
                -- a modeled figure above the peak cannot hold: it is no evidence at all
                WHEN hbm_bytes_source = 'modeled' AND bw_util IS NOT NULL AND bw_util <= 1 THEN 'modeled'
                ELSE 'insufficient' END AS grade
    FROM t
), b AS (
    SELECT *,
           CASE grade
                WHEN 'measured' THEN CASE WHEN bw_util >= mem_line THEN 'memory'
                                          WHEN flops_util >= compute_line THEN 'compute'
                                          WHEN flops_util IS NOT NULL THEN 'latency'
                                          WHEN has_pipe AND compute_pipe >= compute_line THEN 'compute'
                                          WHEN has_pipe THEN 'latency'
                                          ELSE 'unknown' END
                WHEN 'pipe' THEN CASE WHEN compute_pipe >= compute_line AND compute_pipe >= coalesce(mem_pipe, 0) THEN 'compute'
                                      WHEN mem_pipe >= mem_line THEN 'memory'
                                      WHEN compute_pipe >= compute_line THEN 'compute'
                                      ELSE 'latency' END
                WHEN 'sampled' THEN CASE WHEN bw_util >= mem_line THEN 'memory' ELSE 'unknown' END
                WHEN 'modeled' THEN CASE WHEN bw_util >= mem_line THEN 'memory' ELSE 'unknown' END
                ELSE 'unknown' END AS bound
    FROM g
)
SELECT *,
       CASE WHEN bound <> 'latency' THEN NULL
            WHEN scalar_ratio >= scalar_line THEN 'scalar'
            WHEN fixpipe_ratio >= mem_line THEN 'fixpipe'
            WHEN upper(coalesce(task_type, '')) IN ('AI_CORE', 'AI_VECTOR_CORE', 'MIX_AIC', 'MIX_AIV')
                 AND block_dim > 0 AND max_blocks > 0 AND block_dim < few_blocks * max_blocks THEN 'few_blocks'
            WHEN dur_ns < short_ns THEN 'short_task'
            ELSE 'poor_overlap' END AS cause
FROM b;
