-- name: comm_events
-- description: Communication ops matched across ranks (k-th op of a group), with arrival times and clock offsets
-- grain: one row per communication op (run_id, rank, group_key, is_p2p, ordinal)
-- level: run
-- order: ts_ns, ordinal
-- column: run_id VARCHAR -- run
-- column: rank INTEGER -- rank
-- column: step BIGINT -- step the op ran in (comm_ops.step)
-- column: name VARCHAR -- op name as the profiler wrote it
-- column: op_type VARCHAR -- collective type, lower case (allreduce, allgather...)
-- column: group_name VARCHAR -- communication group as the profiler names it
-- column: kind VARCHAR -- comm_ops.kind (collective | p2p | ...)
-- column: is_p2p BOOLEAN -- point-to-point (send/receive): never matched across ranks
-- column: comm_source VARCHAR -- where the op came from: 'comm_ops', or the communication kernels when the dump has no comm_ops
-- column: group_key VARCHAR -- the group the op is matched within (group_name, else the op type)
-- column: ordinal BIGINT -- k: this is the k-th op of its group on this rank (matching key across ranks)
-- column: ts_ns BIGINT -- start on the rank's own clock, ns
-- column: dur_ns BIGINT -- duration, ns (negative clamped to 0)
-- column: end_ns BIGINT -- ts_ns + dur_ns
-- column: transit_ns BIGINT -- time the profiler says data moved (null: not recorded)
-- column: n_ranks BIGINT -- ranks holding the k-th op of this group
-- column: first_arrival_ns BIGINT -- earliest member start, on this rank's clock, ns
-- column: last_arrival_ns BIGINT -- latest member start, on this rank's clock, ns
-- column: last_rank INTEGER -- the member that started last
-- column: types_agree BOOLEAN -- every member has the same op type (a match to trust)
-- column: clock_offset_ns BIGINT -- this rank's clock offset from the reference rank, ns (0 when not applied)
-- column: last_rank_offset_ns BIGINT -- the late member's clock offset, ns
--
-- Communication ops per rank, matched across ranks (one row per op and rank).
-- Source: comm_ops (the profiler's communication analysis, with transit time) for every rank that has rows
-- there, otherwise the rank's communication kernels (no transit split). Duplicate comm_ops rows for the same op
-- (same rank, name and start) from several files are kept once, preferring a row with transit time.
-- Matching: a collective is issued in the same order by every member of its group, so the k-th collective of
-- group G on one rank is the k-th collective of G on every other rank (`ordinal`; ops without a group name
-- form one group). The match is trusted only when all members agree on the op type (types_agree).
-- p2p ops (kind p2p, or send/receive names) are not matched. last_rank is the member that started last (members
-- starting at the same aligned ns: the highest rank, so the answer never depends on the order rows are read).
-- Clocks: ranks write their own clocks, which can be off by milliseconds to minutes. clock_offset_ns is the
-- rank's offset from the reference rank (the lowest rank with trusted matches): the median over shared
-- collectives of (its end - the reference rank's end), since every member of a collective ends within the
-- transfer time of the others; applied (else 0) only when larger than the collectives' own skew (the median
-- duration of the shorter member). Arrivals are compared on aligned clocks, and first/last_arrival_ns are
-- given on the rank's own clock; last_rank_offset_ns is the late member's offset (queries/clock_offsets.sql
-- reports the same estimate with its basis).
WITH co AS MATERIALIZED (
    SELECT run_id, rank, step, name, lower(op_type) AS op_type, group_name, kind, ts_ns,
           greatest(dur_ns, 0) AS dur_ns, transit_ns, 'comm_ops' AS comm_source
    FROM comm_ops
    WHERE ts_ns IS NOT NULL AND dur_ns IS NOT NULL AND coalesce(name, '') <> 'Total Op Info'
    QUALIFY row_number() OVER (PARTITION BY run_id, rank, name, ts_ns ORDER BY transit_ns IS NULL, source) = 1
), ck AS (
    SELECT k.run_id, k.rank, k.step, k.name, lower(k.op_type) AS op_type, NULL::VARCHAR AS group_name,
           NULL::VARCHAR AS kind, k.ts_ns, greatest(coalesce(k.dur_ns, 0), 0) AS dur_ns, NULL::BIGINT AS transit_ns,
           'kernels' AS comm_source
    FROM kernels k
    ANTI JOIN (SELECT DISTINCT run_id, rank FROM co) c ON k.run_id = c.run_id AND k.rank = c.rank
    WHERE k.ts_ns IS NOT NULL AND _is_comm(k.is_comm, k.task_type, k.name)
), m AS (
    SELECT *, coalesce(group_name, '') AS group_key,
           coalesce(kind = 'p2p', false) OR name ILIKE '%send%' OR name ILIKE '%receive%' OR name ILIKE '%recv%' AS is_p2p
    FROM (SELECT * FROM co UNION ALL SELECT * FROM ck)
), o AS (
    SELECT *, row_number() OVER (PARTITION BY run_id, rank, group_key, is_p2p ORDER BY ts_ns, name) AS ordinal FROM m
), i AS (
    SELECT *, count(*) OVER inst AS n_ranks,
           coalesce(min(op_type) OVER inst = max(op_type) OVER inst, true) AS types_agree
    FROM o WINDOW inst AS (PARTITION BY run_id, group_key, is_p2p, ordinal)
), tm AS (
    -- trusted matches, for the clock offsets
    SELECT run_id, rank, group_key, ordinal, ts_ns + dur_ns AS end_ns, dur_ns FROM i
    WHERE NOT is_p2p AND types_agree AND n_ranks > 1
), ref AS (
    SELECT run_id, min(rank) AS ref_rank FROM tm GROUP BY run_id
), est AS (
    SELECT c.run_id, c.rank, quantile_disc(c.end_ns - x.end_ns, 0.5) AS off,
           quantile_disc(least(c.dur_ns, x.dur_ns), 0.5) AS skew
    FROM tm c JOIN ref r ON r.run_id = c.run_id
    JOIN tm x ON x.run_id = c.run_id AND x.rank = r.ref_rank AND x.group_key = c.group_key AND x.ordinal = c.ordinal
    GROUP BY c.run_id, c.rank
), a AS (
    SELECT i.*, coalesce(CASE WHEN abs(e.off) > e.skew THEN e.off END, 0)::BIGINT AS clock_offset_ns
    FROM i LEFT JOIN est e ON e.run_id = i.run_id AND e.rank = i.rank
)
SELECT run_id, rank, step, name, op_type, group_name, kind, is_p2p, comm_source, group_key, ordinal,
       ts_ns, dur_ns, ts_ns + dur_ns AS end_ns, transit_ns, n_ranks,
       min(ts_ns - clock_offset_ns) OVER inst + clock_offset_ns AS first_arrival_ns,
       max(ts_ns - clock_offset_ns) OVER inst + clock_offset_ns AS last_arrival_ns,
       arg_max(rank, (ts_ns - clock_offset_ns, rank)) OVER inst AS last_rank,
       types_agree, clock_offset_ns,
       arg_max(clock_offset_ns, (ts_ns - clock_offset_ns, rank)) OVER inst AS last_rank_offset_ns
FROM a
WINDOW inst AS (PARTITION BY run_id, group_key, is_p2p, ordinal);
