-- name: capture_coverage
-- description: How much of the job the dump holds: ranks captured vs the job's size as the dump records it (a world size, or at least the highest rank id named), the missing rank ids, each rank's evidence inventory (kernel list, steps, counters, communication, host), and how much of the profiler's computing time the device task list holds.
-- column: run_id VARCHAR               -- run
-- column: scope VARCHAR                -- run | rank (one row per rank with its evidence inventory)
-- column: rank INTEGER                 -- rank (null on the run row)
-- column: ranks_captured BIGINT        -- ranks with kernels, communication ops or steps in the dump (run row)
-- column: job_ranks BIGINT             -- the job's size as the dump records it (run row): exact or a lower bound (job_ranks_exact); null when nothing records it
-- column: job_ranks_source VARCHAR     -- where job_ranks comes from: world size | communication_matrix | parallel groups | communication groups | ranks captured | not recorded
-- column: job_ranks_exact BOOLEAN      -- job_ranks is a recorded world size or every id 0..job_ranks-1 is in the dump (else "at least job_ranks")
-- column: complete BOOLEAN             -- every rank of the job is in the dump (null when the job size is not recorded)
-- column: missing_ranks VARCHAR        -- rank ids below job_ranks with no data ('' when only a world size is known)
-- column: captured_ranks VARCHAR       -- rank ids with data
-- column: kernels BIGINT               -- device tasks in the task list (kernel_details / op_summary / kernels), profiler ranges left out
-- column: kernel_list BOOLEAN          -- the rank has a device task list (false: its compute is not recorded, not zero)
-- column: compute_ns BIGINT            -- summed device time of its non-communication tasks, ns (null without a task list)
-- column: steps BIGINT                 -- rank-steps in the dump (step markers or the profiler's step breakdown)
-- column: steps_reported BIGINT        -- rank-steps with the profiler's step breakdown (step_trace_time Computing)
-- column: step_computing_ns BIGINT     -- the profiler's own Computing time over those rank-steps, ns
-- column: counters BIGINT              -- counter samples (HBM, frequency, ...)
-- column: comm_ops BIGINT              -- communication ops recorded as such (communication.json, the db's communication tables, Kineto collectives)
-- column: comm_tasks BIGINT            -- communication tasks in the task list (hcom_* / HCCL, NCCL kernels): a task list's excerpt of them, no op records
-- column: host_ops BIGINT              -- host (framework) operators
-- column: kernel_coverage DOUBLE       -- the task list's compute time in the reported steps / the profiler's Computing time there, 0..1; null without a step breakdown
-- column: kernel_span_coverage DOUBLE  -- first kernel start to last kernel end per reported step / the step's device time (computing + communication not overlapped + free), 0..1: the span, shown beside kernel_coverage only
-- column: evidence VARCHAR             -- what the rank (run: the dump) records and what it lacks, in words
--
-- Definitions: _helpers.sql _capture_coverage. A job is judged from its ranks only when complete: ranks outside
-- the dump can be the ones everybody waits for. kernel_coverage is by kernel time, not span: a 21-kernel excerpt
-- can span most of a step while holding a third of its computing time; tasks running side by side on several
-- streams add up, so each rank-step is capped at the profiler's Computing time.
WITH cov AS (
    SELECT * FROM _capture_coverage()
), st AS (
    SELECT s.run_id, s.rank, s.step, s.computing_ns,
           coalesce(s.computing_ns, 0) + coalesce(s.comm_not_overlapped_ns, 0) + coalesce(s.free_ns, 0) AS device_ns
    FROM steps s WHERE s.step IS NOT NULL AND s.computing_ns IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY s.run_id, s.rank, s.step ORDER BY s.source) = 1
), kr AS (
    SELECT run_id, rank, step, ts_ns, dur_ns, _is_comm(is_comm, task_type, name) AS comm
    FROM kernels WHERE coalesce(task_type, '') <> 'cuda_profiler_range'
), ks AS (
    SELECT run_id, rank, step, max(ts_ns + greatest(coalesce(dur_ns, 0), 0)) - min(ts_ns) AS span_ns,
           coalesce(sum(greatest(dur_ns, 0)) FILTER (WHERE NOT comm), 0) AS kernel_ns
    FROM kr WHERE ts_ns IS NOT NULL AND step IS NOT NULL
    GROUP BY run_id, rank, step
), kstep AS (
    SELECT st.run_id, st.rank, least(coalesce(ks.kernel_ns, 0), st.computing_ns) AS kernel_ns, st.computing_ns,
           least(coalesce(ks.span_ns, 0), st.device_ns) AS span_ns, st.device_ns
    FROM st LEFT JOIN ks ON ks.run_id = st.run_id AND ks.rank = st.rank AND ks.step = st.step
), kc AS (
    SELECT run_id, rank, count(*) AS steps_reported, sum(computing_ns) AS step_computing_ns,
           sum(kernel_ns) AS kernel_ns, sum(span_ns) AS span_ns, sum(device_ns) AS device_ns
    FROM kstep GROUP BY run_id, rank
), kn AS (
    SELECT run_id, rank, count(*) AS kernels, sum(greatest(dur_ns, 0)) FILTER (WHERE NOT comm) AS compute_ns,
           count(*) FILTER (WHERE comm) AS comm_tasks
    FROM kr GROUP BY run_id, rank
), sn AS (
    SELECT run_id, rank, count(DISTINCT coalesce(step, -1)) AS steps FROM steps GROUP BY run_id, rank
), cn AS (
    SELECT run_id, rank, count(*) AS counters FROM counters GROUP BY run_id, rank
), co AS (
    SELECT run_id, rank, count(*) AS comm_ops FROM comm_ops GROUP BY run_id, rank
), ho AS (
    SELECT run_id, rank, count(*) AS host_ops FROM host_ops GROUP BY run_id, rank
), rk AS (
    SELECT run_id, rank FROM (
        SELECT run_id, rank FROM kn UNION SELECT run_id, rank FROM sn UNION SELECT run_id, rank FROM cn
        UNION SELECT run_id, rank FROM co UNION SELECT run_id, rank FROM ho) WHERE rank >= 0
), inv AS (
    SELECT rk.run_id, rk.rank, coalesce(kn.kernels, 0) AS kernels, coalesce(kn.kernels, 0) > 0 AS kernel_list,
           kn.compute_ns, coalesce(sn.steps, 0) AS steps, coalesce(kc.steps_reported, 0) AS steps_reported,
           kc.step_computing_ns, coalesce(cn.counters, 0) AS counters,
           coalesce(co.comm_ops, 0) AS comm_ops, coalesce(kn.comm_tasks, 0) AS comm_tasks,
           coalesce(ho.host_ops, 0) AS host_ops,
           kc.kernel_ns, kc.span_ns, kc.device_ns
    FROM rk
    LEFT JOIN kn ON kn.run_id = rk.run_id AND kn.rank = rk.rank
    LEFT JOIN sn ON sn.run_id = rk.run_id AND sn.rank = rk.rank
    LEFT JOIN kc ON kc.run_id = rk.run_id AND kc.rank = rk.rank
    LEFT JOIN cn ON cn.run_id = rk.run_id AND cn.rank = rk.rank
    LEFT JOIN co ON co.run_id = rk.run_id AND co.rank = rk.rank
    LEFT JOIN ho ON ho.run_id = rk.run_id AND ho.rank = rk.rank
), scoped AS (
    SELECT run_id, 'rank' AS scope, rank, kernels, kernel_list, compute_ns, steps, steps_reported,
           step_computing_ns, counters, comm_ops, comm_tasks, host_ops, kernel_ns, span_ns, device_ns
    FROM inv
    UNION ALL
    SELECT run_id, 'run', NULL, sum(kernels), bool_or(kernel_list), sum(compute_ns), sum(steps), sum(steps_reported),
           sum(step_computing_ns), sum(counters), sum(comm_ops), sum(comm_tasks), sum(host_ops), sum(kernel_ns), sum(span_ns),
           sum(device_ns)
    FROM inv GROUP BY run_id
)
SELECT s.run_id, s.scope, s.rank::INTEGER AS rank,
       CASE WHEN s.scope = 'run' THEN cov.ranks_captured END AS ranks_captured,
       CASE WHEN s.scope = 'run' THEN cov.job_ranks END AS job_ranks,
       CASE WHEN s.scope = 'run' THEN cov.job_ranks_source END AS job_ranks_source,
       CASE WHEN s.scope = 'run' THEN cov.job_ranks_exact END AS job_ranks_exact,
       CASE WHEN s.scope = 'run' THEN cov.ranks_captured >= cov.job_ranks END AS complete,
       CASE WHEN s.scope = 'run' THEN array_to_string(cov.missing_ranks, ',') END AS missing_ranks,
       CASE WHEN s.scope = 'run' THEN array_to_string(cov.captured_ranks, ',') END AS captured_ranks,
       s.kernels::BIGINT AS kernels, s.kernel_list,
       CASE WHEN s.kernel_list THEN s.compute_ns END::BIGINT AS compute_ns,
       s.steps::BIGINT AS steps, s.steps_reported::BIGINT AS steps_reported,
       s.step_computing_ns::BIGINT AS step_computing_ns, s.counters::BIGINT AS counters,
       s.comm_ops::BIGINT AS comm_ops, s.comm_tasks::BIGINT AS comm_tasks, s.host_ops::BIGINT AS host_ops,
       s.kernel_ns / nullif(s.step_computing_ns, 0) AS kernel_coverage,
       s.span_ns / nullif(s.device_ns, 0) AS kernel_span_coverage,
       concat_ws('; ',
           CASE WHEN s.kernel_list THEN printf('task list (%d tasks)', s.kernels) ELSE 'task list not recorded' END,
           CASE WHEN s.steps > 0 THEN printf('%d steps', s.steps) ELSE 'no step markers' END,
           CASE WHEN s.counters > 0 THEN printf('%d counter samples', s.counters) ELSE 'no counters' END,
           CASE WHEN s.comm_ops > 0 THEN printf('%d communication ops', s.comm_ops)
                WHEN s.comm_tasks > 0 THEN printf('no communication records (%d communication tasks in the task list)', s.comm_tasks)
                ELSE 'no communication' END,
           CASE WHEN s.host_ops > 0 THEN printf('%d host ops', s.host_ops) ELSE 'no host ops' END) AS evidence
FROM scoped s LEFT JOIN cov ON cov.run_id = s.run_id
ORDER BY s.run_id, s.scope = 'rank', s.rank;
