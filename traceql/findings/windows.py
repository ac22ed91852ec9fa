"""Wording for a run without step markers: one window over all its device work, never "per step".

The checks compute their numbers per step window (derived table step_windows). A trace with no step marker
(no ProfilerStep, no steps table) has one window per rank spanning its device work, so "12854 ms per step" is a
total over the profiled window that looks like a step time (HTA warns that such a trace has no steps). Here the
findings' and the verdict's text is reworded so that every number reads as what it is, and the verdict says
why once. The numbers themselves are unchanged.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .model import Finding

if TYPE_CHECKING:  # pragma: no cover
    from .context import Context

WINDOW = "the profiled window"
NOTE = (
    "no step marker in the trace (no ProfilerStep, no engine step annotation): every number below covers "
    "the one profiled window of each rank's device work; mark steps to get step times"
)
NOTE_MARKED = (
    "the trace marks {n} engine step window(s) (traceql query phases lists them, with their prefill / decode "
    "label), but these checks do not cut the timeline by them yet: every number below covers the one profiled "
    "window of each rank's device work"
)
# (pattern, replacement), applied in order: the longer phrases first
_REWORD: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p, re.IGNORECASE), r)
    for p, r in (
        (r"\b(the )?step windows?\b", WINDOW),  # first: "in the step windows" is one phrase
        (r"\bms/step\b", "ms in the window"),
        (r"\b(calls|kernels|GB|MB|bytes)/step\b", r"\1 in the window"),
        (r"/step\b", " in the window"),
        (r"\bper (rank-)?step( of one rank)?\b", "over " + WINDOW),
        (r"\b(of|in|during) (each|every|the) step\b", r"\1 " + WINDOW),
        (r"\beach step\b", WINDOW),
        (r"\bof a step\b", "of the window"),
        (r"\bthe step (begins|starts|ends)\b", r"the window \1"),
        (r"\bstep time\b", "window time"),
    )
]


def reword(text: str) -> str:
    """`text` with its per-step phrases said of the one profiled window."""
    for pat, rep in _REWORD:
        text = pat.sub(rep, text)
    return text


def reword_spec(node: Any) -> Any:
    """A chart spec (Vega-Lite JSON) with its titles, subtitles and texts reworded; data and fields unchanged."""
    if isinstance(node, dict):
        return {
            k: (reword(v) if k in ("title", "subtitle", "text") and isinstance(v, str) else reword_spec(v))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [reword_spec(x) for x in node]
    return node


def has_steps(ctx: Context) -> bool:
    """Whether any rank of the run has step windows from a step marker (not one window over the kernels)."""
    return session_has_steps(ctx.session)


def session_has_steps(session: Any) -> bool:
    """has_steps for an analysis session (traceql.analysis.Analysis), as compare uses it."""
    sql = "SELECT count(*) FROM step_windows WHERE run_id = $r AND step IS NOT NULL"
    cur = session.con.cursor()
    try:
        session.scope(cur, for_sql=sql)  # step_windows is derived: defined on a scoped cursor
        return bool(cur.execute(sql, {"r": session.run_id}).fetchall()[0][0])
    finally:
        cur.close()


def _finding(f: Finding) -> Finding:
    saving = dict(f.saving)
    if isinstance(saving.get("unit"), str):
        saving["unit"] = reword(saving["unit"])
    if isinstance(saving.get("method"), str):
        saving["method"] = reword(saving["method"])
    return replace(f, message=reword(f.message), suggestion=reword(f.suggestion), saving=saving)


def apply(
    ctx: Context, findings: list[Finding], verdict: dict[str, Any]
) -> tuple[list[Finding], dict[str, Any]]:
    """Findings and verdict reworded for a run without step markers; unchanged when it has steps."""
    if has_steps(ctx):
        return findings, verdict
    v = dict(verdict)
    v["headline"] = reword(str(v.get("headline") or ""))
    marked = marker_windows(ctx)
    if v.get("bound") is not None:  # a judged verdict: say once why its numbers are window totals
        v["headline"] += "; " + (NOTE if not marked else NOTE_MARKED.format(n=marked))
    v["step_windows"] = "none: one window per rank (no ProfilerStep)"
    v["marker_windows"] = marked
    return [_finding(f) for f in findings], v


def marker_windows(ctx: Context) -> int:
    """How many engine-marker windows (queries/phases.sql, source other than none) the run has."""
    t = ctx.session.query("phases", {"step_marker": ctx.session.step_marker})
    return sum(1 for s in t.column("source").to_pylist() if s != "none")
