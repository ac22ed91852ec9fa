-- name: timeline_base
-- description: The step timeline: bw_segments with busy span and idle kinds, and idle-time prefix sums
-- grain: one row per segment (run_id, rank, t0); segments tile every step window
-- level: rank
-- order: t0
-- column: run_id VARCHAR -- run
-- column: rank INTEGER -- rank
-- column: step BIGINT -- step
-- column: window_source VARCHAR -- as step_windows.window_source
-- column: win_start BIGINT -- window start, ns
-- column: win_end BIGINT -- window end, ns
-- column: t0 BIGINT -- segment start, ns
-- column: t1 BIGINT -- segment end (exclusive), ns
-- column: dur_ns BIGINT -- t1 - t0, ns
-- column: n_comp BIGINT -- as bw_segments.n_comp
-- column: n_copy BIGINT -- as bw_segments.n_copy
-- column: bw_bps DOUBLE -- as bw_segments.bw_bps
-- column: bw_source VARCHAR -- as bw_segments.bw_source
-- column: n_comm BIGINT -- as bw_segments.n_comm
-- column: n_peer_wait BIGINT -- as bw_segments.n_peer_wait
-- column: n_unsplit BIGINT -- as bw_segments.n_unsplit
-- column: transit_share DOUBLE -- as bw_segments.transit_share
-- column: first_busy BIGINT -- the step's first start of anything running (compute or communication), ns
-- column: last_busy BIGINT -- the step's last end of anything running, ns
-- column: idle_kind VARCHAR -- for a segment with nothing running: preparing | free | tail; else null
-- column: prep_before_ns DOUBLE -- preparing idle time on the rank before this segment, ns (prefix sum)
-- column: free_before_ns DOUBLE -- free idle time on the rank before this segment, ns (prefix sum)
-- column: tail_before_ns DOUBLE -- tail idle time on the rank before this segment, ns (prefix sum)
-- column: gap_no BIGINT -- for a free segment: busy segments (anything running) on the rank before it; the touching free segments of one Free gap share it; else null
--
-- The full per-rank timeline inside the step windows without parameters (stored by traceql.derive): the pieces
-- of bw_segments (cut wherever compute, bandwidth or communication changes) as t0/t1 with, per step,
-- first_busy / last_busy: the step's first start and last end of anything running (compute or communication).
-- idle_kind: for a segment with nothing running, preparing (before first_busy), tail (after last_busy) or free
-- (in between); prep/free/tail_before_ns: idle time of that kind on the rank before the segment (DOUBLE, as the
-- stored Parquet has them whether computed or read; prefix sums:
-- idle time in any interval is two look-ups). Segments tile every step window, so the free segments between two
-- busy ones touch and form one Free gap: gap_no, the count of busy segments before them, names it (from the
-- same ordered pass as the prefix sums, so a reader groups by it instead of finding which segments touch).
WITH tl AS (
    SELECT run_id, rank, step, window_source, win_start, win_end, seg_start AS t0, seg_end AS t1, dur_ns,
           n_comp, n_copy, bw_bps, bw_source, n_comm, n_peer_wait, n_unsplit, transit_share
    FROM bw_segments
), tb AS (
    SELECT *,
           min(t0) FILTER (WHERE n_comp > 0 OR n_comm > 0) OVER w AS first_busy,
           max(t1) FILTER (WHERE n_comp > 0 OR n_comm > 0) OVER w AS last_busy
    FROM tl
    WINDOW w AS (PARTITION BY run_id, rank, step)
), tk AS (
    SELECT *,
           CASE WHEN n_comp > 0 OR n_comm > 0 THEN NULL
                WHEN first_busy IS NULL OR t1 <= first_busy THEN 'preparing'
                WHEN t0 >= last_busy THEN 'tail' ELSE 'free' END AS idle_kind
    FROM tb
)
SELECT *,
       coalesce(sum(CASE WHEN idle_kind = 'preparing' THEN dur_ns ELSE 0 END) OVER p, 0)::DOUBLE AS prep_before_ns,
       coalesce(sum(CASE WHEN idle_kind = 'free' THEN dur_ns ELSE 0 END) OVER p, 0)::DOUBLE AS free_before_ns,
       coalesce(sum(CASE WHEN idle_kind = 'tail' THEN dur_ns ELSE 0 END) OVER p, 0)::DOUBLE AS tail_before_ns,
       CASE WHEN idle_kind = 'free' THEN coalesce(sum(CASE WHEN idle_kind IS NULL THEN 1 ELSE 0 END) OVER p, 0) END::BIGINT AS gap_no
FROM tk
WINDOW p AS (PARTITION BY run_id, rank ORDER BY t0 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING);
