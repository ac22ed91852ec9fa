-- name: pipeline_stages
-- description: Each rank's pipeline-parallel stage where the dump records its pipeline groups by name (profiler_metadata parallel_group_info and msprof-analyze communication_group.json groups named pp): ranks of one pipeline group are different stages, doing different work by design.
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- global rank
-- column: stage INTEGER                -- its position in its pipeline group (0 = first stage)
-- column: stages INTEGER               -- the pipeline group's size (number of stages)
-- column: pp_group VARCHAR             -- the pipeline group's ranks, comma-separated
-- column: source VARCHAR               -- profiler_metadata pp group | communication_group pp group
--
-- A pipeline group lists one rank per stage in stage order (Megatron's pp group, torch_npu's parallel_group_info
-- `group_name: pp`, communication_group.json's comm_group_parallel_info `pg_name: pp`). Unnamed groups are not
-- read as stages: communication_group.json's "p2p" list is every rank with send/recv ops (the whole world in
-- msinsight's 8-rank TP2/PP2/DP2 sample, whose pp groups are [0,4] ...), not a pipeline.
WITH grp AS (
    SELECT run_id, regexp_replace(key, '\.global_ranks$', '') AS g, TRY_CAST(value AS INTEGER[]) AS ranks
    FROM run_meta WHERE key LIKE '%.global_ranks' AND TRY_CAST(value AS INTEGER[]) IS NOT NULL
), gname AS (
    SELECT run_id, regexp_replace(key, '\.group_name$', '') AS g, lower(value) AS group_name
    FROM run_meta WHERE key LIKE '%.group_name'
), pp AS (
    SELECT DISTINCT grp.run_id, grp.ranks, 'profiler_metadata pp group' AS source, 0 AS pri
    FROM grp JOIN gname USING (run_id, g)
    WHERE (gname.group_name = 'pp' OR gname.group_name LIKE '%pipeline%') AND len(grp.ranks) > 1
    UNION ALL
    SELECT DISTINCT rs.run_id, TRY_CAST(rs.value AS INTEGER[]), 'communication_group pp group', 1
    FROM run_meta rs JOIN run_meta pn ON pn.run_id = rs.run_id
         AND regexp_replace(pn.key, '\.pg_name$', '') = regexp_replace(rs.key, '\.rank_set$', '')
    WHERE rs.key LIKE 'communication_group.group.%.rank_set' AND pn.key LIKE 'communication_group.group.%.pg_name'
          AND lower(pn.value) = 'pp' AND TRY_CAST(rs.value AS INTEGER[]) IS NOT NULL
), pos AS (
    SELECT run_id, unnest(ranks) AS rank, generate_subscripts(ranks, 1) - 1 AS stage, len(ranks) AS stages,
           array_to_string(ranks, ',') AS pp_group, source, pri
    FROM pp WHERE len(ranks) > 1
)
SELECT run_id, rank::INTEGER AS rank, stage::INTEGER AS stage, stages::INTEGER AS stages, pp_group, source
FROM pos
QUALIFY row_number() OVER (PARTITION BY run_id, rank ORDER BY pri, stages DESC, pp_group) = 1
ORDER BY run_id, rank;
