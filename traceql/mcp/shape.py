"""From traceql's JSON documents (traceql.findings/N, traceql.compare/N) and Arrow results to MCP answers.

Only choosing and labelling happen here: the bound, the confidence, the headline and each finding's grade are
the documents' own. Each stated number gets the grade of what it rests on: the HBM figures the verdict's
hbm_evidence grade, the memory/compute split that grade too (it decides which compute was HBM-saturated),
times and the communication and idle shares the profiler's timestamps (measured).
"""

from __future__ import annotations

from typing import Any

from .answers import clean_number, envelope, number, readable

_TIMESTAMPS = ("measured", "profiler timestamps")
#: a finding's message or a caveat longer than this is clipped (the CLI's markdown has it whole)
_TEXT = 400


def _capture_advice(doc: dict[str, Any]) -> str | None:
    from ..grades import CAPTURE_ADVICE

    v = doc.get("verdict") or {}
    kind = v.get("device_kind")
    if kind == "cpu":
        return CAPTURE_ADVICE["gpu"] + "; or " + CAPTURE_ADVICE["ascend"]
    return CAPTURE_ADVICE["gpu" if kind == "gpu" else "ascend"]


def _caveats(v: dict[str, Any], hbm_grade: str, device_note: str) -> list[str]:
    out: list[str] = []
    cap = v.get("capture") or {}
    if v.get("confidence") == "cannot tell":
        out.append(
            "the bound cannot be judged from this dump (confidence: cannot tell): report it as undecided"
        )
    if cap.get("complete") is False:
        missing = cap.get("missing_ranks") or "?"
        out.append(
            f"{cap.get('ranks_captured')} of {cap.get('job_ranks')} ranks captured (missing: {missing}): "
            "job-wide statements rest on the captured ranks only"
        )
    kc = cap.get("kernel_coverage")
    if isinstance(kc, (int, float)) and kc < 0.9:
        out.append(
            f"the device task list covers {kc:.0%} of the device time: every share rests on part of each step"
        )
    if hbm_grade == "modeled":
        out.append("HBM bytes are modeled from tensor sizes: a lower bound, never a measurement")
    elif hbm_grade == "sampled":
        out.append(
            "HBM bandwidth is sampled at a period: see hbm_utilization's grade_detail for what it resolves"
        )
    elif hbm_grade in ("insufficient", "unresolved"):
        out.append("the dump does not resolve HBM traffic: state no HBM number; quote capture_advice")
    if device_note and "preset" in device_note:
        out.append(f"device peaks: {device_note}")
    return out


def verdict_answer(doc: dict[str, Any]) -> dict[str, Any]:
    v = doc.get("verdict") or {}
    ev = v.get("hbm_evidence") or {}
    g, gd = _grade(ev.get("grade")), str(ev.get("detail") or "")
    shares = v.get("shares") or {}
    nums = [
        number("hbm_utilization", v.get("hbm_utilization"), "%", g, gd, rank=v.get("hbm_utilization_rank")),
        number(
            "hbm_mean_utilization",
            v.get("hbm_mean_utilization"),
            "%",
            "sampled",
            "time-weighted mean of the samples",
        ),
        number("hbm_max_sample", v.get("hbm_max_sample"), "%", "sampled", "the highest sample"),
        number(
            "hbm_busy_utilization_bound",
            v.get("hbm_busy_utilization_bound"),
            "%",
            "sampled",
            "the most the utilisation while computing can be",
        ),
        number("memory_share", shares.get("memory"), "%", g, "compute time at saturated HBM / step"),
        number("compute_share", shares.get("compute"), "%", g, "other compute time / step"),
        number("communication_share", shares.get("communication"), "%", *_TIMESTAMPS),
        number("idle_host_share", shares.get("idle_host"), "%", *_TIMESTAMPS),
        number("compute_fraction", v.get("compute_fraction"), "%", *_TIMESTAMPS),
        number(
            "scaling_efficiency",
            v.get("scaling_efficiency"),
            "%",
            *_TIMESTAMPS,
            method=v.get("scaling_method"),
        ),
        number("mean_step", _ms_to_ns(v.get("mean_step_ms")), "ns", *_TIMESTAMPS),
        *_compute_bounds_numbers(v.get("compute_bounds")),
    ]
    nums = [n for n in nums if n["value"] is not None]
    dev = doc.get("device") or {}
    note = str(dev.get("note") or "")
    advice = _capture_advice(doc) if (g not in ("measured",) or v.get("confidence") != "judged") else None
    return envelope(
        "verdict",
        run=doc.get("run_id"),
        source_document=doc.get("format"),
        bound=v.get("bound"),
        confidence=v.get("confidence"),
        headline=v.get("headline"),
        evidence={"grade": g, "detail": gd},
        numbers=nums,
        capture={k: clean_number(x) for k, x in (v.get("capture") or {}).items()},
        device={
            "kind": v.get("device_kind"),
            "preset": dev.get("preset"),
            "peak_hbm_bps": (dev.get("peaks") or {}).get("peak_hbm_bps"),
        },
        ranks=v.get("ranks"),
        steps=v.get("steps"),
        caveats=_caveats(v, g, note),
        capture_advice=advice,
        fired=(doc.get("summary") or {}).get("fired"),
        next=f"findings(run={doc.get('run_id')!r}) for what to do, ranked by saving",
    )


def _compute_bounds_numbers(cb: Any) -> list[dict[str, Any]]:
    """The compute time's split by per-task evidence (verdict.compute_bounds, docs/bounds.md), graded by it."""
    if not isinstance(cb, dict):
        return []
    g = _grade(cb.get("grade"))
    detail = "share of compute time in tasks of this class (per-task pipe utilisation or PMU bytes)"
    return [
        number(f"compute_{k}_bound_share", cb.get(f"{k}_share"), "%", g, detail)
        for k in ("memory", "compute", "latency")
    ]


def _ms_to_ns(ms: Any) -> float | None:
    return float(ms) * 1e6 if isinstance(ms, (int, float)) else None


def _saving_key(f: dict[str, Any]) -> tuple[float, float]:
    s = f.get("saving") or {}
    share, value = s.get("share_of_step"), s.get("value")
    # ranked by the saving's share of the step (comparable across units), then its value; none: last
    return (
        -(share if isinstance(share, (int, float)) else -1.0),
        -(value if isinstance(value, (int, float)) else -1.0),
    )


def _finding(f: dict[str, Any]) -> dict[str, Any]:
    s = f.get("saving") or {}
    gr = f.get("grade") or {}
    g = _grade(gr.get("grade"))
    unit = str(s.get("unit") or "")
    value = clean_number(s.get("value"))
    shown = None if value is None else f"{value:.3g} {unit}".strip()
    share = clean_number(s.get("share_of_step"))
    if shown and isinstance(share, (int, float)):
        shown += f" ({share * 100:.3g}% of the step)"
    out: dict[str, Any] = {
        "id": f.get("id"),
        "title": f.get("title"),
        "severity": f.get("severity"),
        "grade": g,
        "grade_detail": gr.get("detail"),
        "saving": {
            "value": value,
            "unit": unit or None,
            "share_of_step": share,
            "shown": shown,
            "grade": g,
            "method": _clip(s.get("method")),
        },
        "message": _clip(f.get("message")),
        "suggestion": _clip(f.get("suggestion")),
        "query": f.get("query"),
    }
    if gr.get("capture"):
        out["capture_advice"] = gr["capture"]
    return out


def _clip(text: Any) -> Any:
    if isinstance(text, str) and len(text) > _TEXT:
        return text[: _TEXT - 1] + "…"
    return text


def findings_answer(doc: dict[str, Any], limit: int) -> dict[str, Any]:
    fs = list(doc.get("findings") or [])
    fired = sorted((f for f in fs if f.get("fired")), key=_saving_key)
    quiet = [
        {
            "id": f.get("id"),
            "outcome": (f.get("evidence") or {}).get("outcome"),
            "grade": _grade((f.get("grade") or {}).get("grade")),
        }
        for f in fs
        if not f.get("fired")
    ]
    v = doc.get("verdict") or {}
    return envelope(
        "findings",
        run=doc.get("run_id"),
        bound=v.get("bound"),
        confidence=v.get("confidence"),
        headline=v.get("headline"),
        checks=len(fs),
        fired=len(fired),
        returned_findings=min(limit, len(fired)),
        ranked_by="saving.share_of_step, then saving.value; findings with no saving estimate last",
        findings=[_finding(f) for f in fired[:limit]],
        not_fired=quiet,
        source_document=doc.get("format"),
    )


def rows_answer(
    tool: str, table: Any, limit: int, *, total: int | None = None, **head: Any
) -> dict[str, Any]:
    """Rows of an Arrow table (the first `limit`), its columns with types, the total count; and which columns
    grade the rows' figures (a library query's evidence / *_source columns)."""
    from ..jsonsafe import json_safe

    cols = [{"name": f.name, "type": str(f.type)} for f in table.schema]
    n = table.num_rows if total is None else total
    # a null cell is left out of its row (columns names every column): a wide table such as kernels is
    # mostly nulls for any one profiler, and an agent pays for each character
    rows = [
        {k: x for k, x in json_safe(r).items() if x is not None} for r in table.slice(0, limit).to_pylist()
    ]
    graded = [c["name"] for c in cols if c["name"] in ("evidence", "grade") or c["name"].endswith("_source")]
    note = (
        "times are the profiler's timestamps (measured); bytes and bandwidth are graded per row by "
        + ", ".join(graded)
        if graded
        else "times and counts are the profiler's own (measured); byte or bandwidth figures here carry no grade "
        "column: look up kernel_bytes.hbm_bytes_source before stating one as measured"
    )
    return envelope(
        tool,
        **head,
        columns=cols,
        total_rows=n,
        returned_rows=len(rows),
        rows=rows,
        grade_columns=graded,
        grade_note=note,
    )


def compare_answer(doc: dict[str, Any]) -> dict[str, Any]:
    comp = doc.get("comparability") or {}
    v = doc.get("verdict") or {}
    step = doc.get("step") or {}
    traffic = ((doc.get("traffic") or {}).get("totals") or {}).get("all") or {}
    hbm = _weakest([_grade((traffic.get(s) or {}).get("grade")) for s in ("base", "cand")])
    parts = [
        {
            "part": k,
            "label": p.get("label"),
            **{side: clean_number(p.get(side)) for side in ("base", "cand", "delta")},
            "shown": _delta_text(p.get("base"), p.get("cand")),
            # which compute was HBM-saturated rests on the HBM bytes' grade; the other parts on timestamps
            "grade": hbm if "hbm" in k or k.startswith("compute") else "measured",
        }
        for k, p in (step.get("parts") or {}).items()
        if isinstance(p, dict)
    ]
    parts.sort(key=lambda p: -abs(p["delta"] or 0.0))
    ops = doc.get("operators") or {}
    fd = doc.get("findings") or {}
    b, c = v.get("base") or {}, v.get("cand") or {}
    return envelope(
        "compare",
        base=(doc.get("base") or {}).get("run_id"),
        cand=(doc.get("cand") or {}).get("run_id"),
        comparable=comp.get("comparable"),
        refusals=comp.get("refusals"),
        verdict=v.get("verdict"),
        why=v.get("why"),
        step=[
            number("base_mean_step", b.get("mean"), "ns", *_TIMESTAMPS, n=b.get("n")),
            number("cand_mean_step", c.get("mean"), "ns", *_TIMESTAMPS, n=c.get("n")),
            number("delta", v.get("delta_ns"), "ns", *_TIMESTAMPS, relative=clean_number(v.get("delta_rel"))),
        ],
        traffic={
            side: {
                "hbm_bytes_per_step": number(
                    "hbm_bytes_per_step",
                    (traffic.get(side) or {}).get("hbm_bytes_per_step"),
                    "bytes",
                    _grade((traffic.get(side) or {}).get("grade")),
                ),
            }
            for side in ("base", "cand")
        },
        step_parts=parts,
        differences=comp.get("differences"),
        operators_counts=ops.get("counts"),
        operators_changed=_changed_ops(ops.get("changed") or [])[:10],
        findings_resolved=[f.get("id") for f in fd.get("resolved") or []],
        findings_new=[f.get("id") for f in fd.get("new") or []],
        findings_persisting=[f.get("id") for f in fd.get("persisting") or []],
        source_document=doc.get("format"),
    )


def _changed_ops(changed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The changed operators, most device time moved first, each figure with its grade (device time:
    timestamps; HBM bytes: the weaker of the two runs' grades)."""

    def pair(op: dict[str, Any], key: str, unit: str, grade: str) -> dict[str, Any]:
        b, c = (op.get("base") or {}).get(key), (op.get("cand") or {}).get(key)
        d = (op.get("delta") or {}).get(key)
        ok = isinstance(b, (int, float)) and isinstance(c, (int, float))
        shown = f"{readable(b, unit)} -> {readable(c, unit)}" if ok else None
        return {
            "base": clean_number(b),
            "cand": clean_number(c),
            "delta": clean_number(d),
            "shown": shown,
            "grade": grade,
        }

    out: list[dict[str, Any]] = []
    for op in changed:
        hbm = _weakest([_grade((op.get(s) or {}).get("grade")) for s in ("base", "cand")])
        out.append(
            {
                "op_type": op.get("op_type"),
                "shapes": op.get("shapes"),
                "dtypes": op.get("dtypes"),
                "is_comm": op.get("is_comm"),
                "calls_per_step": [(op.get(s) or {}).get("calls_per_step") for s in ("base", "cand")],
                "dur_per_step": pair(op, "dur_ns_per_step", "ns", "measured"),
                "hbm_bytes_per_step": pair(op, "hbm_bytes_per_step", "bytes", hbm),
            }
        )
    out.sort(key=lambda o: -abs(o["dur_per_step"]["delta"] or 0.0))
    return out


def _grade(g: Any) -> str:
    """A document's grade word as a grade: traceql.compare says "none" where a run has no HBM bytes (the dump
    cannot tell: insufficient) and "mixed" where measured and modeled rows meet (grades.weakest: modeled)."""
    from ..grades import GRADES

    if g in GRADES:
        return str(g)
    return "modeled" if g == "mixed" else "insufficient"


def _weakest(grades: list[str]) -> str:
    from ..grades import GRADES

    order = list(GRADES)
    return max(grades, key=lambda g: order.index(g) if g in order else len(order))


def _delta_text(base: Any, cand: Any) -> str | None:
    if not isinstance(base, (int, float)) or not isinstance(cand, (int, float)):
        return None
    return f"{readable(base, 'ns')} -> {readable(cand, 'ns')} ({readable(cand - base, 'ns')})"
