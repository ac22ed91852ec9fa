-- name: activation_memory
-- description: Device memory held per step from the allocator records: the low and the peak of allocated bytes inside each step window, their difference (the activations kept for the backward pass) and the peak reserved - the numbers behind the article's gradient checkpointing trade-off.
-- rank_filter: output
-- column: run_id VARCHAR               -- run
-- column: scope VARCHAR                -- run | rank | step: what the row aggregates
-- column: rank INTEGER                 -- rank (null for scope run)
-- column: step BIGINT                  -- step (scope step only)
-- column: steps BIGINT                 -- rank-steps with allocator samples in the row
-- column: component VARCHAR            -- allocator the numbers come from (PTA, PTA+GE, GE, ... ; the first with samples in the preference order PTA, PTA+GE, GE, APP, other)
-- column: samples BIGINT               -- allocator samples inside the windows
-- column: min_allocated_bytes BIGINT   -- lowest allocated bytes inside a step (weights, optimizer state, buffers)
-- column: max_allocated_bytes BIGINT   -- highest allocated bytes inside a step
-- column: activation_bytes BIGINT      -- max - min allocated inside a step: memory that comes and goes within the step (activations saved for backward, workspaces); mean over steps for rank/run rows
-- column: peak_reserved_bytes BIGINT   -- highest reserved bytes (the caching allocator's pool)
-- column: reason VARCHAR               -- why the numbers are null (no allocator records), else null
--
-- Definitions: allocator samples are memory rows of kind record with allocated_bytes (memory_record.csv,
-- npu_mem); one component per rank is used so different allocators are never mixed. Samples are assigned to
-- step windows (derived/step_windows.sql) by time; a rank without step windows has none.
WITH win AS MATERIALIZED (
    SELECT * FROM step_windows
), rec AS (
    SELECT run_id, rank, component, ts_ns, allocated_bytes, reserved_bytes,
           CASE upper(coalesce(component, '')) WHEN 'PTA' THEN 1 WHEN 'PTA+GE' THEN 2 WHEN 'GE' THEN 3 WHEN 'APP' THEN 4 ELSE 5 END AS pref
    FROM memory WHERE kind = 'record' AND ts_ns IS NOT NULL AND allocated_bytes IS NOT NULL
), pick AS (
    SELECT run_id, rank, arg_min(component, pref) AS component FROM rec GROUP BY run_id, rank
), s AS (
    SELECT r.*, w.step
    FROM rec r JOIN pick p ON p.run_id = r.run_id AND p.rank = r.rank AND p.component IS NOT DISTINCT FROM r.component
    ASOF JOIN win w ON w.run_id = r.run_id AND w.rank = r.rank AND r.ts_ns >= w.win_start
    WHERE r.ts_ns < w.win_end
), per_step AS (
    SELECT run_id, rank, step, any_value(component) AS component, count(*) AS samples,
           min(allocated_bytes) AS lo, max(allocated_bytes) AS hi, max(reserved_bytes) AS res
    FROM s GROUP BY run_id, rank, step
), agg AS (
    SELECT run_id, rank, step,
           CASE WHEN grouping(rank) = 1 THEN 'run' WHEN grouping(step) = 1 THEN 'rank' ELSE 'step' END AS scope,
           count(*) AS steps,
           CASE WHEN min(component) = max(component) THEN min(component) ELSE 'mixed' END AS component,
           sum(samples) AS samples, min(lo) AS lo, max(hi) AS hi, avg(hi - lo) AS act, max(res) AS res
    FROM per_step
    GROUP BY GROUPING SETS ((run_id), (run_id, rank), (run_id, rank, step))
)
SELECT ru.run_id, coalesce(a.scope, 'run') AS scope, a.rank, a.step, coalesce(a.steps, 0)::BIGINT AS steps, a.component,
       coalesce(a.samples, 0)::BIGINT AS samples, a.lo::BIGINT AS min_allocated_bytes, a.hi::BIGINT AS max_allocated_bytes,
       round(a.act)::BIGINT AS activation_bytes, a.res::BIGINT AS peak_reserved_bytes,
       CASE WHEN a.scope IS NULL THEN 'no allocator records inside the step windows (profile with profile_memory=True)' END AS reason
FROM runs ru LEFT JOIN agg a ON a.run_id = ru.run_id
ORDER BY ru.run_id, a.rank NULLS FIRST, a.step NULLS FIRST, a.scope = 'step';
