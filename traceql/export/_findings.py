"""Findings as timeline slices: one slice per fired finding per evidence window, on each rank it concerns.

traceql's Finding model (traceql/findings.py) carries numbers, not time windows, so the windows are found here
from what each finding's evidence names, and every slice says which rule picked it (`window_basis`):

- slow_rank, comm_waits_on_memory (a late rank): the collectives where that rank arrived last; on the late
  rank the slice is its lateness (first member's arrival -> its own arrival), on the others their wait for it
  (own start -> the late rank's arrival). Matching: _helpers.sql _comm_events.
- operator_fusion (a fused chain): each occurrence of the chain's operator-type sequence on a compute stream,
  from the first kernel's start to the last one's end.
- every other finding: the step windows of the ranks it names (evidence rank keys), else of every rank: its
  numbers are per-step aggregates, so the steps are the narrowest window the model has; a dump without steps
  gives one window over the whole rank.
At most MAX_PER_FINDING slices per finding and rank (the first ones in time); `windows_shown`/`windows_total`
say when the cap cut.
"""

from __future__ import annotations

import json
from typing import Any

from ._session import Session

MAX_PER_FINDING = 2000
_RANK_KEYS = ("slow_rank", "late_rank", "waiting_rank", "fast_rank", "max_rank", "rank")
_RANK_LIST_KEYS = ("saturated_ranks", "ranks")


def _ranks_named(ev: dict[str, Any], sess: Session) -> list[int]:
    named: set[int] = set()
    for k in _RANK_KEYS:
        v = ev.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            named.add(v)
    for k in _RANK_LIST_KEYS:
        v = ev.get(k)
        if isinstance(v, list):
            named.update(x for x in v if isinstance(x, int) and not isinstance(x, bool))
    chosen = [r for r in sess.ranks if r in named]
    return chosen or list(sess.ranks)


def _late_rank_windows(sess: Session, late: int) -> list[tuple[int, int, int, str]]:
    """Arrivals compared on aligned clocks (each member shifted by its applied offset), returned on each rank's
    own clock like every other row."""
    shifts = ", ".join(f"({int(r)}, {int(o)})" for r, o in sess.shift.items()) or "(NULL, 0)"
    rows = sess.rows(
        f"""
WITH sh AS (SELECT * FROM (VALUES {shifts}) t(rank, off)),
ce AS (
    SELECT c.rank, c.group_key, c.ordinal, coalesce(sh.off, 0) AS off,
           c.ts_ns - coalesce(sh.off, 0) AS a_ts, c.end_ns - coalesce(sh.off, 0) AS a_end
    FROM comm_events c LEFT JOIN sh ON sh.rank = c.rank
    WHERE NOT c.is_p2p AND c.types_agree AND c.n_ranks > 1
), inst AS (
    SELECT group_key, ordinal, min(a_ts) AS first_a, max(a_ts) AS last_a, arg_max(rank, a_ts) AS last_rank
    FROM ce GROUP BY group_key, ordinal
)
SELECT ce.rank,
       CASE WHEN ce.rank = $late THEN i.first_a ELSE ce.a_ts END + ce.off AS t0,
       CASE WHEN ce.rank = $late THEN ce.a_ts ELSE least(i.last_a, ce.a_end) END + ce.off AS t1
FROM ce JOIN inst i ON i.group_key = ce.group_key AND i.ordinal = ce.ordinal
WHERE i.last_rank = $late
ORDER BY ce.rank, t0""",
        {"late": late},
    )
    out = []
    for r in rows:
        if int(r["rank"]) not in sess.ranks or r["t1"] <= r["t0"]:
            continue
        if sess.windows is not None:
            lo, hi = sess.windows.get(int(r["rank"]), (0, -1))
            if not lo <= r["t0"] < hi:
                continue
        basis = (
            f"rank {late}'s lateness: the collectives where it arrived last (first member's arrival -> its own)"
            if r["rank"] == late
            else f"this rank's wait for rank {late} in the collectives where rank {late} arrived last"
        )
        out.append((int(r["rank"]), int(r["t0"]), int(r["t1"]), basis))
    return out


def _chain_windows(sess: Session, pattern: str) -> list[tuple[int, int, int, str]]:
    types = [t.strip() for t in pattern.split("->") if t.strip()]
    if len(types) < 2:
        return []
    n = len(types)
    rows = sess.rows(
        f"""
WITH k AS (
    SELECT rank, stream_id, ts_ns, end_ns, _op_name(op_type, name) AS op FROM kernel_bytes
    WHERE NOT is_comm AND {sess.where()}
), w AS (
    SELECT rank, ts_ns,
           list(op) OVER f AS ops, max(end_ns) OVER f AS t1
    FROM k WINDOW f AS (PARTITION BY rank, stream_id ORDER BY ts_ns ROWS BETWEEN CURRENT ROW AND {n - 1} FOLLOWING)
)
SELECT rank, ts_ns AS t0, t1 FROM w WHERE ops = $types ORDER BY rank, t0""",
        {"types": types},
    )
    return [
        (int(r["rank"]), int(r["t0"]), int(r["t1"]), f"an occurrence of the chain {pattern} on one stream")
        for r in rows
        if r["t1"] > r["t0"]
    ]


def _step_windows(sess: Session, ranks: list[int]) -> list[tuple[int, int, int, str]]:
    rows = sess.rows(f"""
SELECT rank, step, win_start, win_end FROM step_windows
WHERE win_end > win_start AND {sess.where("win_start")} ORDER BY rank, win_start""")
    out = [
        (
            int(r["rank"]),
            int(r["win_start"]),
            int(r["win_end"]),
            "step windows: the finding's numbers are per-step aggregates with no narrower time window in traceql's model"
            + ("" if r["step"] is not None else " (the dump has no step ids: the whole rank)"),
        )
        for r in rows
        if int(r["rank"]) in ranks
    ]
    return out


def finding_windows(
    sess: Session, fid: str, evidence: dict[str, Any], top_ops: list[dict[str, Any]]
) -> list[tuple[int, int, int, str]]:
    """(rank, start_ns, end_ns, basis) on the rank's own clock."""
    if fid in ("slow_rank", "comm_waits_on_memory"):
        late = evidence.get("slow_rank", evidence.get("late_rank"))
        if isinstance(late, int) and not isinstance(late, bool):
            got = _late_rank_windows(sess, late)
            if got:
                return got
    if fid == "operator_fusion":
        got = []
        for op in top_ops:
            if isinstance(op.get("pattern"), str):
                got += _chain_windows(sess, op["pattern"])
        if got:
            return sorted(got)
    return _step_windows(sess, _ranks_named(evidence, sess))


def _saving_text(s: dict[str, Any]) -> str:
    v = s.get("value")
    if v is None:
        return "not quantified" + (f" ({s['method']})" if s.get("method") else "")
    return f"{v:.4g} {s.get('unit') or ''}".strip() + (f" ({s['method']})" if s.get("method") else "")


def finding_slices(
    sess: Session, store: Any, device: str | None, peaks: dict[str, float] | None
) -> list[dict[str, Any]]:
    """Slice rows (the SLICE_BASE columns + args) for every fired finding of the run."""
    from .. import findings
    from ._timeline_rows import FINDINGS_TRACK

    rep = findings.evaluate(store, sess.run_id, device=device, peaks=peaks)
    out: list[dict[str, Any]] = []
    for f in rep.fired:
        d = f.to_dict()
        wins = finding_windows(sess, f.id, d["evidence"], d["top_ops"])
        per_rank: dict[int, int] = {}
        for r, _, _, _ in wins:
            per_rank[r] = per_rank.get(r, 0) + 1
        shown: dict[int, int] = {}
        for r, t0, t1, basis in wins:
            if shown.get(r, 0) >= MAX_PER_FINDING:
                continue
            shown[r] = shown.get(r, 0) + 1
            out.append(
                {
                    "rank": r,
                    "track": FINDINGS_TRACK,
                    "ts_ns": t0,
                    "dur_ns": t1 - t0,
                    "name": f.id,
                    "cat": "traceql.finding",
                    "flow_in": None,
                    "flow_out": None,
                    "title": f.title,
                    "severity": f.severity,
                    "message": f.message,
                    "saving": _saving_text(d["saving"]),
                    "query": f.query,
                    "suggestion": f.suggestion,
                    "window_basis": basis,
                    "windows_total": per_rank[r],
                    "windows_shown": min(per_rank[r], MAX_PER_FINDING),
                    "evidence": json.dumps(d["evidence"], sort_keys=True, default=str),
                }
            )
    out.sort(key=lambda x: (x["rank"], x["ts_ns"], -x["dur_ns"]))
    return out
