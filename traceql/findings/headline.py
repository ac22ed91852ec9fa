"""The verdict as a reader takes it in: a headline of at most HEADLINE_MAX characters that starts with the bound
(or "cannot tell"), and the caveats (missing ranks, coverage, evidence) as a short list.

The verdict's full sentence stays in verdict["headline"] (JSON keeps it whole); this module only adds
verdict["short"] and verdict["caveats"], computed from the verdict's structured fields and its text."""

from __future__ import annotations

import re
from typing import Any

HEADLINE_MAX = 160

# the bound words the verdict templates start with (rules.toml [verdict])
_BOUND_PREFIX = re.compile(r"^(memory|communication|compute|host/idle)-bound:\s*")
# the prefixes verdict.py puts before the template's sentence on a partial capture
_PARTIAL = re.compile(r"^\d+ of [^;]*? ranks captured \([^)]*\);\s*")


def lead_of(verdict: dict[str, Any]) -> str:
    """The headline's first words: the bound when judged, else "cannot tell" (with the lean, when there is one)."""
    bound = verdict.get("bound")
    if bound and verdict.get("confidence") == "judged":
        return f"{bound}-bound"
    if bound:
        partial = (verdict.get("capture") or {}).get("complete") is False
        return f"cannot tell ({'these ranks look' if partial else 'looks'} {bound}-bound)"
    return "cannot tell"


def main_clause(full: str) -> str:
    """The template's own sentence without the bound word, the partial-capture wrapper and the coverage note
    (those become caveats), cut at its first ';' (the rest is detail the full text keeps)."""
    text = full.split("; note: ", 1)[0]
    if "On these ranks: " in text:
        text = text.split("On these ranks: ", 1)[1]
    text = _PARTIAL.sub("", text)
    text = _BOUND_PREFIX.sub("", text)
    return text.split("; ", 1)[0].strip()


def shorten(text: str, limit: int = HEADLINE_MAX) -> str:
    """At most `limit` characters, cut at a word boundary with an ellipsis (never mid-number)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:(")
    return cut + "…"


NO_STEP_MARKERS = (
    "no step markers in the dump: every figure covers the whole capture as one window (first to last kernel)"
)


def caveats_of(verdict: dict[str, Any], step_markers: bool = True) -> list[str]:
    """What limits the verdict, one short line each, from its structured fields (and whether the dump marks its
    steps: without markers every per-step figure is per capture)."""
    out: list[str] = []
    if not step_markers and verdict.get("bound"):
        out.append(NO_STEP_MARKERS)
    cap = verdict.get("capture") or {}
    if cap.get("complete") is False:
        job = cap.get("job_ranks")
        job_text = str(job) if cap.get("job_ranks_exact") else f"at least {job}"
        ids = cap.get("missing_ranks")
        out.append(
            f"only {cap.get('ranks_captured')} of {job_text} ranks captured"
            + (f" (missing: {ids})" if ids else "")
        )
    kc = cap.get("kernel_coverage")
    if kc is not None and kc < 0.9:
        out.append(
            f"the device task list covers only {kc:.0%} of the device time; shares rest on part of each step"
        )
    cb = verdict.get("compute_bounds")
    if (
        cb
    ):  # what bounds the compute time, task by task (docs/bounds.md): the answer where HBM bytes are missing
        cause = f"; latency mostly {cb['top_cause_text']}" if cb.get("top_cause_text") else ""
        out.append(
            shorten(
                f"compute time by {cb['grade']} evidence: {cb['memory_share']:.0%} memory-bound, "
                f"{cb['compute_share']:.0%} compute-bound, {cb['latency_share']:.0%} latency-bound"
                + (f", {cb['unknown_share']:.0%} not resolved" if cb["unknown_share"] >= 0.005 else "")
                + cause,
                120,
            )
        )
    ev = verdict.get("hbm_evidence") or {}
    if ev.get("grade") and ev["grade"] != "measured" and verdict.get("bound"):
        out.append(shorten(f"HBM evidence is {ev['grade']}: {ev.get('detail', '')}".rstrip(": "), 120))
    if verdict.get("confidence") == "cannot tell" and verdict.get("bound"):
        out.append("the evidence cannot decide the bound: read the full verdict (--format json or markdown)")
    return out


def headline_parts(verdict: dict[str, Any], step_markers: bool = True) -> dict[str, Any]:
    """{"short": the headline (<= HEADLINE_MAX chars, bound first), "caveats": [short lines]}."""
    clause = main_clause(str(verdict.get("headline", "")))
    short = lead_of(verdict) + (f": {clause}" if clause else "")
    return {"short": shorten(short), "caveats": caveats_of(verdict, step_markers)}


def has_step_markers(con: Any, run_id: str) -> bool:
    """Whether the run's step windows come from step markers (a steps table or kernels with step ids); a dump
    without them has one window per rank with no step id, so a "per step" figure is per capture."""
    import duckdb

    try:
        row = con.execute(
            "SELECT count(*) FILTER (WHERE step IS NOT NULL), count(*) FROM step_windows WHERE run_id = $r",
            {"r": run_id},
        ).fetchall()[0]
    except (
        duckdb.CatalogException
    ):  # a run with no device tables has no step windows: no per-step figure either
        return True
    return bool(row[0]) or not row[1]


def verdict_markdown(verdict: dict[str, Any]) -> list[str]:
    """The verdict block of the markdown findings: the bold headline, the caveats as a list, the full text."""
    parts = headline_parts(verdict) if "short" not in verdict else verdict
    out = [f"**{parts['short']}**", ""]
    if parts["caveats"]:
        out += [f"- {c}" for c in parts["caveats"]] + [""]
    full = str(verdict.get("headline", ""))
    if full and full != parts["short"]:
        out += [f"Full verdict: {full}", ""]
    return out
