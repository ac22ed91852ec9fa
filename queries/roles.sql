-- name: roles
-- description: RL runs: each role's ranks (verl actor_update, actor_compute_log_prob, rollout ...: the folder each rank's profile came from), its device work and busy share; one row per role.
-- rank_filter: output
-- column: run_id VARCHAR               -- run
-- column: role VARCHAR                 -- the role folder (run_meta traceql.role; '(none)' when a rank has none)
-- column: ranks BIGINT                 -- ranks of the role
-- column: rank_list VARCHAR            -- their rank ids, comma-separated
-- column: kernels BIGINT               -- device ops of those ranks
-- column: kernel_ns BIGINT             -- their summed device time, ns
-- column: span_ns BIGINT               -- first to last device op, summed over the role's ranks, ns
-- column: busy_ns BIGINT               -- union of the device ops per rank (overlapping streams once), summed, ns
-- column: busy_share DOUBLE            -- busy_ns / span_ns
--
-- The role of a rank is written at ingest (traceql.parsers.roles): the nearest folder above its profile that
-- a profiler did not make. A run whose ranks carry one role (or none) is not an RL run split by role.
WITH r AS (
    SELECT DISTINCT run_id, rank, value AS role FROM run_meta WHERE key = 'traceql.role'
), k AS (
    SELECT run_id, rank, ts_ns AS s, ts_ns + greatest(coalesce(dur_ns, 0), 0) AS e, coalesce(dur_ns, 0) AS d
    FROM kernels WHERE ts_ns IS NOT NULL AND coalesce(task_type, '') <> 'cuda_profiler_range'
), o AS (
    SELECT *, max(e) OVER (PARTITION BY run_id, rank ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM k
), per_rank AS (
    SELECT run_id, rank, count(*) AS kernels, sum(d) AS kernel_ns, max(e) - min(s) AS span_ns
    FROM k GROUP BY run_id, rank
), busy AS (
    -- the union of the kernels' intervals, by a sweep: each kernel adds the part of it past every earlier
    -- kernel's end (one ordered pass; numbering islands of overlapping kernels took a second one)
    SELECT run_id, rank, sum(greatest(e - greatest(s, coalesce(prev_end, s)), 0)) AS busy_ns
    FROM o GROUP BY ALL
)
SELECT p.run_id, coalesce(r.role, '(none)') AS role, count(*)::BIGINT AS ranks,
       string_agg(p.rank::VARCHAR, ',' ORDER BY p.rank) AS rank_list, sum(p.kernels)::BIGINT AS kernels,
       sum(p.kernel_ns)::BIGINT AS kernel_ns, sum(p.span_ns)::BIGINT AS span_ns, sum(b.busy_ns)::BIGINT AS busy_ns,
       sum(b.busy_ns) / nullif(sum(p.span_ns), 0)::DOUBLE AS busy_share
FROM per_rank p JOIN busy b USING (run_id, rank) LEFT JOIN r USING (run_id, rank)
GROUP BY p.run_id, coalesce(r.role, '(none)')
ORDER BY role;
