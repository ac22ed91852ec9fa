-- name: bw_segments
-- description: The device timeline cut into constant pieces: kernels, HBM bandwidth and communication parts running
-- grain: one row per constant piece of the device timeline inside a step window (run_id, rank, seg_start)
-- level: rank
-- order: seg_start
-- column: run_id VARCHAR -- run
-- column: rank INTEGER -- rank
-- column: step BIGINT -- step of the window the piece is in
-- column: window_source VARCHAR -- as step_windows.window_source
-- column: win_start BIGINT -- window start, ns
-- column: win_end BIGINT -- window end, ns
-- column: seg_start BIGINT -- piece start, ns
-- column: seg_end BIGINT -- piece end (exclusive), ns
-- column: dur_ns BIGINT -- seg_end - seg_start, ns
-- column: n_comp BIGINT -- compute kernels running (host-to-device copies included)
-- column: n_kernels BIGINT -- kernels running (communication included)
-- column: n_copy BIGINT -- host-to-device copies running
-- column: bw_bps DOUBLE -- device HBM bandwidth in the piece, bytes/s (see bw_source)
-- column: rank_source VARCHAR -- where the rank's bytes came from: pmu | sampled | modeled | mixed
-- column: bw_source VARCHAR -- evidence grade of bw_bps: pmu | sampled | modeled | none
-- column: in_counter_span BOOLEAN -- the piece lies inside the span of the rank's HBM counter samples
-- column: n_comm BIGINT -- communication parts running
-- column: n_peer_wait BIGINT -- of them, in peer wait
-- column: n_unsplit BIGINT -- of them, with no transit split recorded
-- column: transit_share DOUBLE -- mean transit_frac of the parts running (unsplit count as 0)
--
-- The device timeline per rank, cut into constant pieces inside the step windows: one row per piece with the
-- number of compute kernels (n_comp; host-to-device copies count, n_copy of them are such copies) and of all
-- kernels (n_kernels) running, the device HBM bandwidth (bw_bps: every running kernel's bytes / duration,
-- communication kernels included), where the rank's bytes came from (rank_source: pmu | sampled | modeled |
-- mixed), the bandwidth's evidence grade (bw_source: pmu | sampled | modeled, see the header), and the
-- communication parts (_comm_parts_base) running: how many (n_comm), how many of them in peer wait
-- (n_peer_wait), how many with no transit split (n_unsplit) and the mean transit_frac of those running
-- (transit_share; parts without a split count as 0 there). in_counter_span: the piece lies inside the span of
-- the rank's HBM counter samples (after a series' last sample its bandwidth is not known: not zero).
-- One sweep: +/- events at kernel starts/ends, at communication part edges and at counter window edges (all
-- of them on a rank whose bandwidth is sampled, the span's two elsewhere: cwe), running sums in time order;
-- step window edges are extra cut points. (Communication edges cut the bandwidth pieces too: a constant piece cut in
-- two carries the same bandwidth, so every sum over pieces is unchanged, and the timeline needs no second
-- sweep over all the bandwidth pieces' edges to add communication.)
-- The running sums are streaming windows (an empty OVER) over the events sorted once by (run, rank, time),
-- cheaper than a window partitioned by rank, which sorts them and sums through a segment tree. The sums run on
-- across rank edges, so they must return to exactly 0 at each rank's end: every rank's +/- events cancel, and
-- the fractional ones are summed as integers in fixed point (bandwidths as _bps_fixed, transit shares in units
-- of 1e-18), which also keeps a group of ranks built in one session equal to each rank built alone
-- (tests/test_many_ranks.py).
WITH kb AS MATERIALIZED (
    SELECT run_id, rank, ts_ns, end_ns, is_comm, _bps_fixed(coalesce(hbm_bytes, 0) * 1e9 / dur_ns) AS bw,
           hbm_bytes_source,
           _is_h2d_copy(is_comm, task_type, name)::INTEGER AS cp
    FROM kernel_bytes WHERE dur_ns > 0
), cw AS MATERIALIZED (
    -- the counters' own bandwidth step function (read + write), for ranks whose bandwidth is sampled
    SELECT run_id, rank, win_start, win_end, _bps_fixed(read_bps + write_bps) AS bps FROM _hbm_windows()
), src AS MATERIALIZED (
    -- where the rank's bytes came from: one source when all its kernels with bytes share it, else mixed; and
    -- which series gives its device bandwidth (bw_source): per-task PMU bytes when it has any, else its HBM
    -- counters when it has them, else the modeled lower bound
    SELECT k.run_id, k.rank,
           CASE WHEN min(hbm_bytes_source) = max(hbm_bytes_source) THEN min(hbm_bytes_source)
                WHEN count(hbm_bytes_source) > 0 THEN 'mixed' END AS rank_source,
           CASE WHEN bool_or(hbm_bytes_source = 'pmu') THEN 'pmu'
                WHEN EXISTS (SELECT 1 FROM cw WHERE cw.run_id = k.run_id AND cw.rank = k.rank) THEN 'sampled'
                WHEN count(hbm_bytes_source) > 0 THEN 'modeled' END AS bw_source
    FROM kb k GROUP BY k.run_id, k.rank
), cwe AS (
    -- the counter edges the sweep cuts at: every window's on a rank whose bandwidth is sampled (the counters'
    -- step function is its bandwidth), elsewhere only the span's first start and last end (the windows tile
    -- the span without gaps, and in_counter_span is all those ranks read of them): a rank with per-task PMU
    -- bytes and HBM counters too was otherwise cut at every sample, pieces of the same bandwidth (a third of
    -- the 8 x 290 MB benchmark cluster's timeline)
    SELECT cw.run_id, cw.rank, cw.win_start, cw.win_end, cw.bps
    FROM cw JOIN src ON src.run_id = cw.run_id AND src.rank = cw.rank WHERE src.bw_source = 'sampled'
    UNION ALL
    SELECT cw.run_id, cw.rank, min(cw.win_start), max(cw.win_end), 0::HUGEINT
    FROM cw LEFT JOIN src ON src.run_id = cw.run_id AND src.rank = cw.rank
    WHERE src.bw_source IS DISTINCT FROM 'sampled'
    GROUP BY cw.run_id, cw.rank
), win AS MATERIALIZED (
    -- wid: the window's number on its rank; a piece's window is the running sum of +wid at window starts and
    -- -wid at ends (the windows do not overlap), found by an equality join instead of an ASOF search
    SELECT *, row_number() OVER (PARTITION BY run_id, rank ORDER BY win_start, step) AS wid FROM step_windows
), cp AS MATERIALIZED (
    SELECT run_id, rank, ts_ns, wait_end_ns, end_ns, transit_frac,
           round(coalesce(transit_frac, 0) * 1e18)::HUGEINT AS tf
    FROM _comm_parts_base()
), ev AS (
    -- (compute, kernels, bandwidth, copies, communication parts, in peer wait, transit_frac, no transit split,
    -- counter bandwidth, window) changes; bandwidths and transit_frac in fixed point (dbw, dcb: _bps_fixed;
    -- dtf: 1e-18)
    SELECT run_id, rank, ts_ns AS t, CASE WHEN is_comm THEN 0 ELSE 1 END AS dc, 1 AS dk, bw AS dbw, cp AS dp,
           0 AS dm, 0 AS dpw, 0::HUGEINT AS dtf, 0 AS du, 0::HUGEINT AS dcb, 0 AS dcs, 0 AS dw FROM kb
    UNION ALL SELECT run_id, rank, end_ns, CASE WHEN is_comm THEN 0 ELSE -1 END, -1, -bw, -cp, 0, 0, 0, 0, 0, 0, 0 FROM kb
    UNION ALL SELECT run_id, rank, win_start, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, wid FROM win
    UNION ALL SELECT run_id, rank, win_end, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -wid FROM win
    UNION ALL SELECT run_id, rank, ts_ns, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0 FROM cp WHERE wait_end_ns > ts_ns
    UNION ALL SELECT run_id, rank, wait_end_ns, 0, 0, 0, 0, -1, -1, 0, 0, 0, 0, 0 FROM cp WHERE wait_end_ns > ts_ns
    UNION ALL SELECT run_id, rank, wait_end_ns, 0, 0, 0, 0, 1, 0, tf, (transit_frac IS NULL)::INTEGER, 0, 0, 0
              FROM cp WHERE end_ns > wait_end_ns
    UNION ALL SELECT run_id, rank, end_ns, 0, 0, 0, 0, -1, 0, -tf, -(transit_frac IS NULL)::INTEGER, 0, 0, 0
              FROM cp WHERE end_ns > wait_end_ns
    UNION ALL SELECT run_id, rank, win_start, 0, 0, 0, 0, 0, 0, 0, 0, bps, 1, 0 FROM cwe
    UNION ALL SELECT run_id, rank, win_end, 0, 0, 0, 0, 0, 0, 0, 0, -bps, -1, 0 FROM cwe
), pts AS (
    SELECT run_id, rank, t, sum(dc) AS dc, sum(dk) AS dk, sum(dbw) AS dbw, sum(dp) AS dp,
           sum(dm) AS dm, sum(dpw) AS dpw, sum(dtf) AS dtf, sum(du) AS du, sum(dcb) AS dcb, sum(dcs) AS dcs, sum(dw) AS dw
    FROM ev GROUP BY run_id, rank, t
), seg AS (
    SELECT run_id, rank, t AS seg_start,
           CASE WHEN lead(rank) OVER () = rank AND lead(run_id) OVER () = run_id THEN lead(t) OVER () END AS seg_end,
           sum(dc) OVER c AS n_comp, sum(dk) OVER c AS n_kernels, sum(dp) OVER c AS n_copy, sum(dbw) OVER c AS bw_sum,
           sum(dm) OVER c AS n_comm, sum(dpw) OVER c AS n_peer_wait, sum(dtf) OVER c AS transit_sum,
           sum(du) OVER c AS n_unsplit, sum(dcb) OVER c AS counter_bw, sum(dcs) OVER c AS n_counter,
           sum(dw) OVER c AS wid
    FROM (SELECT * FROM pts ORDER BY run_id, rank, t)
    WINDOW c AS (ROWS UNBOUNDED PRECEDING)
)
SELECT seg.run_id, seg.rank, win.step, win.window_source, win.win_start, win.win_end,
       seg.seg_start, seg.seg_end, seg.seg_end - seg.seg_start AS dur_ns,
       seg.n_comp::BIGINT AS n_comp, seg.n_kernels::BIGINT AS n_kernels, seg.n_copy::BIGINT AS n_copy,
       CASE WHEN src.bw_source = 'sampled' THEN _fixed_bps(greatest(seg.counter_bw, 0))
            WHEN seg.n_kernels > 0 THEN _fixed_bps(greatest(seg.bw_sum, 0)) ELSE 0 END AS bw_bps,
       src.rank_source, src.bw_source, seg.n_counter > 0 AS in_counter_span,
       seg.n_comm::BIGINT AS n_comm, seg.n_peer_wait::BIGINT AS n_peer_wait, seg.n_unsplit::BIGINT AS n_unsplit,
       CASE WHEN seg.n_comm > 0 THEN seg.transit_sum / 1e18 / seg.n_comm ELSE 0 END AS transit_share
FROM seg
JOIN win ON seg.run_id = win.run_id AND seg.rank = win.rank AND seg.wid = win.wid
LEFT JOIN src ON src.run_id = seg.run_id AND src.rank = seg.rank
WHERE seg.seg_end IS NOT NULL AND seg.seg_end > seg.seg_start AND seg.seg_start < win.win_end;
