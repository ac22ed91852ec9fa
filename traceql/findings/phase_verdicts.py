"""What saturates first per phase kind (prefill / decode / mixed / train / unknown), from the phase windows of
queries/phases.sql.

Per window: the device busy time (union of the kernels that run inside it, so overlapping streams count once),
and the HBM bytes those kernels moved where the dump measured them (kernel_bytes.pmu_read + pmu_write). Per
kind: windows, mean batch / tokens / window time, busy share, and HBM utilisation = bytes / busy time / peak
when every kernel has measured bytes and the peak is known; otherwise unknown, said so. The call per kind:
idle-bound when the device is busy under half of its windows, memory-bound at or above the saturation line,
not memory-bound below the not-bound line, else "cannot tell" with the reason. Decode is where the method fits
best: small batches stream the weights and the KV cache from HBM every token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict, cast

if TYPE_CHECKING:  # pragma: no cover
    from .context import Context

IDLE_LINE = 0.5  # busy under half the window: the host / scheduler, not the device, sets the pace

SQL = """
WITH w AS (SELECT * FROM phase_rows),
k AS (
    SELECT w.rank, w.phase, kb.ts_ns AS s, kb.end_ns AS e, kb.pmu_read, kb.pmu_write
    FROM w JOIN kernel_bytes kb ON kb.run_id = $r AND kb.rank = w.rank AND kb.ts_ns >= w.win_start
         AND kb.ts_ns < w.win_end AND kb.end_ns > kb.ts_ns
), o AS (
    SELECT *, max(e) OVER (PARTITION BY rank, phase ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
              AS prev_end
    FROM k
), isl AS (
    SELECT *, sum(CASE WHEN prev_end IS NULL OR s > prev_end THEN 1 ELSE 0 END)
              OVER (PARTITION BY rank, phase ORDER BY s, e) AS island
    FROM o
), busy AS (
    SELECT rank, phase, sum(e2 - s2) AS busy_ns FROM (
        SELECT rank, phase, island, min(s) AS s2, max(e) AS e2 FROM isl GROUP BY ALL) GROUP BY ALL
), bytes AS (
    SELECT rank, phase, count(*) AS n, count(pmu_read) AS measured,
           sum(coalesce(pmu_read, 0) + coalesce(pmu_write, 0)) AS hbm_bytes
    FROM k GROUP BY ALL
)
SELECT w.rank, w.phase, w.kind, w.batch_size, w.tokens, w.win_end - w.win_start AS window_ns,
       coalesce(b.busy_ns, 0) AS busy_ns, coalesce(y.n, 0) AS n, coalesce(y.measured, 0) AS measured,
       y.hbm_bytes
FROM w LEFT JOIN busy b USING (rank, phase) LEFT JOIN bytes y USING (rank, phase)
ORDER BY w.rank, w.phase
"""


class PhaseWindow(TypedDict):
    """A row of SQL above: one phase window (queries/phases.sql) with its device busy time and measured bytes."""

    rank: int
    phase: int
    kind: str | None
    batch_size: int | None
    tokens: int | None
    window_ns: int  # win_end - win_start (phases.sql gives every window both)
    busy_ns: int  # 0 without kernels
    n: int  # kernels in the window
    measured: int  # of those, with PMU bytes
    hbm_bytes: int | None  # null without kernels


def per_window(ctx: Context) -> list[PhaseWindow]:
    """One row per phase window with its busy time and measured bytes."""
    phase_rows = ctx.session.query("phases", {"step_marker": ctx.session.step_marker})
    cur = ctx.session.con.cursor()
    try:
        ctx.session.scope(cur, for_sql=SQL)  # kernel_bytes is derived: defined on a scoped cursor
        cur.register("phase_rows", phase_rows)
        res = cur.execute(SQL, {"r": ctx.run_id})
        cols = [d[0] for d in res.description]
        # the SQL's select list is PhaseWindow's fields, in order (tests/test_typed_rows.py holds that)
        return [cast("PhaseWindow", dict(zip(cols, r, strict=True))) for r in res.fetchall()]
    finally:
        cur.close()


def _mean(xs: list[Any]) -> float | None:
    v = [float(x) for x in xs if x is not None]
    return sum(v) / len(v) if v else None


def summarise(
    rows: list[PhaseWindow], peak_bps: float | None, sat: float, not_bound: float
) -> list[dict[str, Any]]:
    """Per phase kind: the windows' numbers and what saturates first (or why that cannot be told)."""
    out = []
    for kind in sorted({r["kind"] for r in rows}, key=lambda k: ("prefill", "decode", "mixed", "train").index(k)
                       if k in ("prefill", "decode", "mixed", "train") else 9):  # fmt: skip
        rs = [r for r in rows if r["kind"] == kind]
        window, busy = sum(r["window_ns"] for r in rs), sum(r["busy_ns"] for r in rs)
        n, measured = sum(r["n"] for r in rs), sum(r["measured"] for r in rs)
        util = None
        if peak_bps and busy and n and measured == n:
            util = sum(float(r["hbm_bytes"] or 0) for r in rs) / (busy / 1e9) / peak_bps
        busy_share = busy / window if window else 0.0
        if busy_share < IDLE_LINE:
            call = f"host/idle: the device is busy {busy_share:.0%} of these windows"
        elif util is not None and util >= sat:
            call = f"memory-bound: HBM at {util:.0%} of peak while busy"
        elif util is not None and util < not_bound:
            call = f"not memory-bound: HBM at {util:.0%} of peak while busy (compute or latency)"
        elif util is not None:
            call = f"cannot tell: HBM at {util:.0%} of peak, between the lines"
        else:
            why = "no device peak" if not peak_bps else "no measured HBM bytes for its kernels"
            call = f"device busy {busy_share:.0%}; memory- vs compute-bound cannot be told ({why})"
        out.append({
            "kind": kind, "windows": len(rs), "batch_size": _mean([r["batch_size"] for r in rs]),
            "tokens": _mean([r["tokens"] for r in rs]), "mean_window_ms": window / len(rs) / 1e6,
            "busy_share": busy_share, "hbm_utilization": util, "call": call,
        })  # fmt: skip
    return out


def text(kinds: list[dict[str, Any]]) -> str:
    parts = []
    for k in kinds:
        size = ", ".join(
            f"{lab} {v:.0f}"
            for lab, v in (("batch", k["batch_size"]), ("tokens", k["tokens"]))
            if v is not None
        )
        parts.append(
            f"{k['kind']} ({k['windows']} window(s){', ' + size if size else ''}, {k['mean_window_ms']:.2f} ms each): "
            f"{k['call']}"
        )
    return "per phase: " + "; ".join(parts)


def of(ctx: Context) -> list[dict[str, Any]] | None:
    """The per-phase summary when the run has engine-marker windows (prefill / decode ... from SGLang, vLLM,
    mstx or a --step-marker regex); None for ProfilerStep-only or unmarked runs (the run verdict is theirs)."""
    sources = set(
        ctx.session.query("phases", {"step_marker": ctx.session.step_marker}).column("source").to_pylist()
    )
    if not sources - {"none", "ProfilerStep"}:
        return None
    rows = per_window(ctx)
    return summarise(rows, ctx.peak(), ctx.sat, ctx.not_bound) if rows else None


def attach(ctx: Context, verdict: dict[str, Any]) -> dict[str, Any]:
    """The verdict with `phases` (per kind) and their one-line call added to its headline, when there are any."""
    if verdict.get("graph_capture"):
        return verdict  # no device work recorded: nothing to split
    kinds = of(ctx)
    if not kinds:
        return verdict
    return {**verdict, "phases": kinds, "headline": f"{verdict.get('headline', '')}; {text(kinds)}"}
