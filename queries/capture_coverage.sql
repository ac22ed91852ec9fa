-- name: capture_coverage
-- description: How much of the job the dump holds: ranks captured vs the job's size as the dump records it (communication matrix, parallel groups, world size), the missing rank ids, and how much of each rank's step the device task list covers.
-- column: run_id VARCHAR               -- run
-- column: ranks_captured BIGINT        -- ranks with kernels, communication ops or steps in the dump
-- column: job_ranks BIGINT             -- the job's size as the dump records it (>= ranks_captured)
-- column: job_ranks_source VARCHAR     -- where job_ranks comes from: communication_matrix | parallel groups | communication groups | world size | ranks captured
-- column: job_ranks_exact BOOLEAN      -- job_ranks is a recorded world size or every id 0..job_ranks-1 is named (else a lower bound: the highest id named + 1)
-- column: complete BOOLEAN             -- every rank of the job is in the dump
-- column: missing_ranks VARCHAR        -- rank ids below job_ranks with no data ('' when only a world size is known)
-- column: captured_ranks VARCHAR       -- rank ids with data
-- column: steps_reported BIGINT        -- rank-steps with a profiler step breakdown (step_trace_time)
-- column: kernel_coverage DOUBLE       -- device time the task list covers / the device time step_trace_time reports (computing + communication not overlapped + free), over those rank-steps, 0..1; null without a step breakdown
--
-- Definitions: _helpers.sql _capture_coverage. A job is judged from its ranks only when complete: ranks outside
-- the dump can be the ones everybody waits for. kernel_coverage compares the span of the kernels in each
-- reported step (first start to last end) with the step's device span from step_trace_time; a task list
-- covering less than the step (a partial capture or data_simplification) says so here.
WITH cov AS (
    SELECT * FROM _capture_coverage()
), st AS (
    SELECT s.run_id, s.rank, s.step,
           coalesce(s.computing_ns, 0) + coalesce(s.comm_not_overlapped_ns, 0) + coalesce(s.free_ns, 0) AS device_ns
    FROM steps s WHERE s.step IS NOT NULL AND s.computing_ns IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY s.run_id, s.rank, s.step ORDER BY s.source) = 1
), ks AS (
    SELECT run_id, rank, step, max(ts_ns + greatest(coalesce(dur_ns, 0), 0)) - min(ts_ns) AS span_ns
    FROM kernels WHERE ts_ns IS NOT NULL AND step IS NOT NULL AND coalesce(task_type, '') <> 'cuda_profiler_range'
    GROUP BY run_id, rank, step
), kc AS (
    SELECT st.run_id, count(*) AS steps_reported,
           sum(least(coalesce(ks.span_ns, 0), st.device_ns)) / nullif(sum(st.device_ns), 0) AS kernel_coverage
    FROM st LEFT JOIN ks ON ks.run_id = st.run_id AND ks.rank = st.rank AND ks.step = st.step
    GROUP BY st.run_id
)
SELECT cov.run_id, cov.ranks_captured, cov.job_ranks, cov.job_ranks_source, cov.job_ranks_exact,
       cov.ranks_captured >= cov.job_ranks AS complete,
       array_to_string(cov.missing_ranks, ',') AS missing_ranks,
       array_to_string(cov.captured_ranks, ',') AS captured_ranks,
       coalesce(kc.steps_reported, 0)::BIGINT AS steps_reported, kc.kernel_coverage
FROM cov LEFT JOIN kc ON kc.run_id = cov.run_id
ORDER BY cov.run_id;
