-- name: phases
-- description: Steps and phases from any marker: ProfilerStep, a --step-marker regex, SGLang step[...], vLLM execute_model / execute_<tokens>_context_<n>_generation_<m>, mstx ranges; each window labelled prefill / decode / mixed / train / unknown with its batch and tokens; no marker: one window labelled so.
-- param: step_marker VARCHAR = ''      -- a regular expression over host range names that marks the steps (replaces the built-in markers when given)
-- rank_filter: output
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- rank
-- column: phase BIGINT                 -- window index within the rank, 0-based in time order
-- column: source VARCHAR               -- ProfilerStep | step_marker | sglang | execute_context_generation (vLLM's execute_<tokens>_context_<n>_generation_<m>) | vllm_execute_model | mstx | none (no marker: one window over the device work)
-- column: marker VARCHAR               -- the marker's name as the trace writes it (the outermost one when markers nest); null for source none
-- column: inner_markers VARCHAR        -- the markers nested in it (SGLang's step[...] inside execute_...), ' | '-separated in time order; null when none
-- column: kind VARCHAR                 -- prefill | decode | mixed | train | unknown: what the marker says (train: a ProfilerStep with backward ops in it)
-- column: batch_size BIGINT            -- requests in the step (SGLang bs=, vLLM context + generation), when the marker says
-- column: tokens BIGINT                -- tokens in the step (SGLang toks=, vLLM execute_<tokens>), when the marker says
-- column: context_reqs BIGINT          -- vLLM: requests in context (prefill) phase
-- column: generation_reqs BIGINT       -- vLLM: requests in generation (decode) phase
-- column: win_start BIGINT             -- window start (the marker's start), ns
-- column: win_end BIGINT               -- window end: the marker's end, or the end of the device work launched inside it when later, ns
-- column: kernels BIGINT               -- device ops launched inside the marker (correlation), or in the window for source none / ProfilerStep
-- column: kernel_ns BIGINT             -- their summed device time, ns
--
-- Markers are host ranges (host_ops rows with a duration). Built-in names (when step_marker is ''):
--   ProfilerStep#N (the steps table, written by the parsers from torch.profiler / torch_npu step markers)
--   SGLang   step[EXTEND|DECODE|MIXED bs=<n> toks=<n>]                EXTEND = prefill
--   vLLM     execute_<tokens>_context_<n>(...)_generation_<m>(...)   n > 0, m = 0: prefill; n = 0: decode; both: mixed
--   vLLM     execute_model (the worker's step; says nothing of the phase: unknown)
--   mstx     a torch_npu mstx range (host_ops cat 'mstx') whose message is one of the above
-- Markers nested in another marker (SGLang's step[...] inside its execute_... range) do not make windows of
-- their own: the outermost marker does, and takes the inner one's batch / tokens where it has none.
-- The steps table wins over engine markers; a --step-marker regex replaces both.
WITH m0 AS (
    SELECT run_id, rank, name, cat, ts_ns AS s, ts_ns + dur_ns AS e,
           regexp_extract(name, '^step\[([A-Z_]+) bs=([0-9]+) toks=([0-9]+)\]$', ['mode', 'bs', 'toks']) AS sg,
           regexp_extract(name, '^execute_([0-9]+)_context_([0-9]+).*_generation_([0-9]+)',
                          ['toks', 'ctx', 'gen']) AS vl
    FROM host_ops
    WHERE dur_ns > 0 AND ts_ns IS NOT NULL
      AND CASE WHEN $step_marker <> '' THEN regexp_matches(name, $step_marker)
               ELSE regexp_matches(name, '^(step\[[A-Z_]+ bs=[0-9]+ toks=[0-9]+\]$|execute_[0-9]+_context_[0-9]+|execute_model$)')
          END
), m AS (
    SELECT run_id, rank, name, s, e,
           CASE WHEN $step_marker <> '' THEN 'step_marker'
                WHEN cat = 'mstx' THEN 'mstx'
                WHEN sg.mode <> '' THEN 'sglang'
                WHEN vl.toks <> '' THEN 'execute_context_generation'
                ELSE 'vllm_execute_model' END AS source,
           CASE WHEN sg.mode = 'EXTEND' THEN 'prefill' WHEN sg.mode = 'DECODE' THEN 'decode'
                WHEN sg.mode = 'MIXED' THEN 'mixed'
                WHEN vl.toks <> '' AND vl.ctx::BIGINT > 0 AND vl.gen::BIGINT = 0 THEN 'prefill'
                WHEN vl.toks <> '' AND vl.ctx::BIGINT = 0 AND vl.gen::BIGINT > 0 THEN 'decode'
                WHEN vl.toks <> '' AND vl.ctx::BIGINT > 0 AND vl.gen::BIGINT > 0 THEN 'mixed'
                ELSE 'unknown' END AS kind,
           CASE WHEN sg.bs <> '' THEN sg.bs::BIGINT
                WHEN vl.toks <> '' THEN vl.ctx::BIGINT + vl.gen::BIGINT END AS batch_size,
           CASE WHEN sg.toks <> '' THEN sg.toks::BIGINT WHEN vl.toks <> '' THEN vl.toks::BIGINT END AS tokens,
           CASE WHEN vl.ctx <> '' THEN vl.ctx::BIGINT END AS context_reqs,
           CASE WHEN vl.gen <> '' THEN vl.gen::BIGINT END AS generation_reqs
    FROM m0
), outer_m AS (
    -- a marker inside another marker of the same rank is not a window of its own
    SELECT * FROM m
    WHERE NOT EXISTS (SELECT 1 FROM m o WHERE o.run_id = m.run_id AND o.rank = m.rank
                      AND o.s <= m.s AND o.e >= m.e AND (o.s, o.e, o.name) <> (m.s, m.e, m.name))
), labelled AS (
    -- the outer marker takes an inner marker's phase, batch and tokens where it says none
    SELECT o.run_id, o.rank, o.name, o.s, o.e, o.source,
           CASE WHEN o.kind <> 'unknown' THEN o.kind ELSE coalesce(max(i.kind) FILTER (WHERE i.kind <> 'unknown'), 'unknown') END AS kind,
           coalesce(o.batch_size, max(i.batch_size)) AS batch_size, coalesce(o.tokens, max(i.tokens)) AS tokens,
           coalesce(o.context_reqs, max(i.context_reqs)) AS context_reqs,
           coalesce(o.generation_reqs, max(i.generation_reqs)) AS generation_reqs,
           string_agg(i.name, ' | ' ORDER BY i.s) AS inner_markers
    FROM outer_m o LEFT JOIN m i ON i.run_id = o.run_id AND i.rank = o.rank AND i.s >= o.s AND i.e <= o.e
         AND (i.s, i.e, i.name) <> (o.s, o.e, o.name)
    GROUP BY o.run_id, o.rank, o.name, o.s, o.e, o.source, o.kind, o.batch_size, o.tokens, o.context_reqs,
             o.generation_reqs
), launched AS (
    -- the device ops launched inside each marker (host launch -> device op by correlation)
    SELECT l.run_id, l.rank, l.s, l.name, count(k.ts_ns) AS kernels, sum(k.dur_ns) AS kernel_ns,
           max(k.ts_ns + greatest(coalesce(k.dur_ns, 0), 0)) AS dev_end
    FROM labelled l
    JOIN host_ops h ON h.run_id = l.run_id AND h.rank = l.rank AND h.ts_ns >= l.s AND h.ts_ns < l.e
         AND h.correlation_id IS NOT NULL
    JOIN kernels k ON k.run_id = h.run_id AND k.rank = h.rank AND k.connection_id = h.correlation_id
         AND coalesce(k.task_type, '') <> 'cuda_profiler_range'
    GROUP BY ALL
), engine AS (
    SELECT l.run_id, l.rank, l.source, l.name AS marker, l.inner_markers, l.kind, l.batch_size, l.tokens, l.context_reqs,
           l.generation_reqs, l.s AS win_start, greatest(l.e, coalesce(x.dev_end, l.e)) AS win_end,
           coalesce(x.kernels, 0) AS kernels, coalesce(x.kernel_ns, 0) AS kernel_ns
    FROM labelled l LEFT JOIN launched x ON x.run_id = l.run_id AND x.rank = l.rank AND x.s = l.s AND x.name = l.name
), prof0 AS (
    -- ProfilerStep windows (step_windows from the steps table: non-overlapping within a rank)
    SELECT run_id, rank, step, win_start, win_end FROM step_windows
    WHERE window_source = 'steps' AND $step_marker = ''
      AND NOT EXISTS (SELECT 1 FROM engine g WHERE g.run_id = step_windows.run_id AND g.rank = step_windows.rank
                      AND g.source = 'mstx')
), prof_of AS (
    -- which window holds each kernel / backward op: the last one starting at or before it (ASOF), if it has not
    -- ended. The windows do not overlap, so that is the one window whose [start, end) holds the instant; a
    -- range join tested every window of the rank against every kernel (a rank's steps x its kernels).
    -- Empty windows hold nothing and are left out (a tie on the start would hide the window after them).
    SELECT run_id, rank, step, win_start, win_end FROM prof0 WHERE win_end > win_start
), pk0 AS (
    -- the kernels of the ranks that have such windows
    SELECT run_id, rank, step, ts_ns, dur_ns FROM kernels k
    WHERE ts_ns IS NOT NULL AND coalesce(task_type, '') <> 'cuda_profiler_range'
      AND EXISTS (SELECT 1 FROM prof_of w WHERE w.run_id = k.run_id AND w.rank = k.rank)
), prof_kernels AS (
    -- a kernel whose own step's window holds its start is in that window (a hash look-up: the only window
    -- that holds it); the others, through the ASOF search, which sorts the kernels it is given
    SELECT run_id, rank, win_start, count(*) AS kernels, sum(dur_ns) AS kernel_ns
    FROM (
        SELECT w.run_id, w.rank, w.win_start, k.dur_ns
        FROM pk0 k JOIN prof_of w ON w.run_id = k.run_id AND w.rank = k.rank AND w.step = k.step
             AND k.ts_ns >= w.win_start AND k.ts_ns < w.win_end
        UNION ALL
        SELECT w.run_id, w.rank, w.win_start, k.dur_ns
        FROM (SELECT * FROM pk0 k ANTI JOIN prof_of w ON w.run_id = k.run_id AND w.rank = k.rank
                  AND w.step = k.step AND k.ts_ns >= w.win_start AND k.ts_ns < w.win_end) k
        ASOF JOIN prof_of w ON k.run_id = w.run_id AND k.rank = w.rank AND k.ts_ns >= w.win_start
        WHERE k.ts_ns < w.win_end)
    GROUP BY ALL
), prof_train AS (
    -- windows with backward ops in them
    SELECT DISTINCT w.run_id, w.rank, w.win_start
    FROM (SELECT run_id, rank, ts_ns FROM host_ops
          WHERE ts_ns IS NOT NULL AND (name ILIKE '%Backward%' OR name LIKE 'autograd::engine::evaluate_function%')) b
    ASOF JOIN prof_of w ON b.run_id = w.run_id AND b.rank = w.rank AND b.ts_ns >= w.win_start
    WHERE b.ts_ns < w.win_end
), prof_k AS (
    -- ProfilerStep windows, train when backward ops run in them, with the kernels that start in them
    SELECT w.run_id, w.rank, 'ProfilerStep' AS source, 'ProfilerStep#' || w.step AS marker, NULL AS inner_markers,
           CASE WHEN t.win_start IS NOT NULL THEN 'train' ELSE 'unknown' END AS kind,
           NULL::BIGINT AS batch_size, NULL::BIGINT AS tokens, NULL::BIGINT AS context_reqs,
           NULL::BIGINT AS generation_reqs, w.win_start, w.win_end,
           coalesce(pk.kernels, 0) AS kernels, coalesce(pk.kernel_ns, 0) AS kernel_ns
    FROM prof0 w
    LEFT JOIN prof_train t ON t.run_id = w.run_id AND t.rank = w.rank AND t.win_start = w.win_start
         AND w.win_end > w.win_start
    LEFT JOIN prof_kernels pk ON pk.run_id = w.run_id AND pk.rank = w.rank AND pk.win_start = w.win_start
         AND w.win_end > w.win_start
), marked AS (
    SELECT * FROM prof_k
    UNION ALL
    SELECT * FROM engine e
    WHERE NOT EXISTS (SELECT 1 FROM prof_k p WHERE p.run_id = e.run_id AND p.rank = e.rank)
), none_w AS (
    -- no marker on this rank: one window over its device work, labelled so
    SELECT k.run_id, k.rank, 'none' AS source, NULL AS marker, NULL AS inner_markers, 'unknown' AS kind, NULL::BIGINT AS batch_size,
           NULL::BIGINT AS tokens, NULL::BIGINT AS context_reqs, NULL::BIGINT AS generation_reqs,
           min(k.ts_ns) AS win_start, max(k.ts_ns + greatest(coalesce(k.dur_ns, 0), 0)) AS win_end,
           count(*) AS kernels, coalesce(sum(k.dur_ns), 0) AS kernel_ns
    FROM kernels k
    WHERE k.ts_ns IS NOT NULL AND coalesce(k.task_type, '') <> 'cuda_profiler_range'
      AND NOT EXISTS (SELECT 1 FROM marked x WHERE x.run_id = k.run_id AND x.rank = k.rank)
    GROUP BY k.run_id, k.rank
), u AS (
    SELECT * FROM marked UNION ALL SELECT * FROM none_w
)
SELECT run_id, rank::INTEGER AS rank, (row_number() OVER (PARTITION BY run_id, rank ORDER BY win_start, marker) - 1)::BIGINT AS phase,
       source, marker, inner_markers, kind, batch_size, tokens, context_reqs, generation_reqs, win_start::BIGINT AS win_start,
       win_end::BIGINT AS win_end, kernels::BIGINT AS kernels, kernel_ns::BIGINT AS kernel_ns
FROM u
ORDER BY run_id, rank, win_start, marker;
