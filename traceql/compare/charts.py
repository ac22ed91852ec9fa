"""The two comparison charts (Altair, like traceql/charts.py: pure, no I/O, no metric math — they reshape the
numbers of a Comparison dict): the step split of base and cand side by side, and the HBM traffic delta per
operator type with each delta's evidence grade."""

from __future__ import annotations

from typing import Any

WIDTH = 680

# one colour per part, the families of traceql.charts.WAIT_PARTS (reds memory, green compute, blues
# communication, greys idle/host)
_COLOURS = {
    "compute_hbm_saturated_ns": "#d62728",
    "comm_wait_peer_hbm_ns": "#ff9896",
    "compute_other_ns": "#2ca02c",
    "comm_transit_ns": "#1f77b4",
    "comm_wait_peer_other_ns": "#aec7e8",
    "comm_wait_missing_ranks_ns": "#9edae5",
    "comm_wait_sync_ns": "#c5dbee",
    "comm_unsplit_ns": "#6baed6",
    "idle_ns": "#c7c7c7",
    "host_ns": "#7f7f7f",
}
_GRADE_COLOURS = {
    "measured": "#1f77b4",
    "sampled": "#9467bd",
    "modeled": "#ff7f0e",
    "mixed": "#8c564b",
    "none": "#c7c7c7",
}


def _data(values: list[dict[str, Any]]) -> Any:
    """Inline chart data (Altair's Data constructor carries no type annotations)."""
    import altair as alt

    return alt.Data(values=values)  # type: ignore[no-untyped-call]


def step_split_chart(d: dict[str, Any]) -> Any:
    """Before/after bars of the step split (ms per step of one rank), one stacked bar per side."""
    import altair as alt

    rows = []
    parts = d["step"]["parts"]
    order = list(parts)
    for side in ("base", "cand"):
        run = d[side]["run_id"]
        for k, p in parts.items():
            if p[side] is not None:
                rows.append(
                    {
                        "side": f"{side}: {run}",
                        "part": p["label"],
                        "ms": p[side] / 1e6,
                        "order": order.index(k),
                    }
                )
    domain = [parts[k]["label"] for k in order]
    colours = [_COLOURS.get(k, "#bcbd22") for k in order]
    v = d.get("verdict") or {}
    sub = f"verdict: {v.get('verdict', 'none (not comparable)')}; ms per step of one rank (query wait_attribution)"
    return (
        alt.Chart(_data(rows))
        .mark_bar()
        .encode(
            y=alt.Y("side:N", title=None, sort=None),
            x=alt.X("ms:Q", title="ms per step", stack="zero"),
            color=alt.Color(
                "part:N",
                title=None,
                scale=alt.Scale(domain=domain, range=colours),
                legend=alt.Legend(orient="bottom", columns=3, labelLimit=260),
            ),
            order=alt.Order("order:Q"),
            tooltip=[alt.Tooltip("side:N"), alt.Tooltip("part:N"), alt.Tooltip("ms:Q", format=",.4f")],
        )
        .properties(
            width=WIDTH,
            height=90,
            title={"text": "Step time: where it went, before vs after", "subtitle": sub},
        )
    )


def traffic_delta_chart(d: dict[str, Any], top: int = 15) -> Any:
    """HBM bytes per step, cand - base, per operator type, coloured by the delta's evidence grade."""
    import altair as alt

    rows = [
        {
            "op_type": r["op_type"],
            "delta_gb": r["delta"]["hbm_bytes_per_step"] / 1e9,
            "grade": r["delta_grade"] or "none",
            "base_gb": ((r["base"] or {}).get("hbm_bytes_per_step") or 0) / 1e9,
            "cand_gb": ((r["cand"] or {}).get("hbm_bytes_per_step") or 0) / 1e9,
        }
        for r in d["traffic"]["by_op_type"]
        if r["delta"]["hbm_bytes_per_step"]
    ][:top]
    title = {
        "text": "HBM traffic change per operator type (GB per step of one rank, cand - base)",
        "subtitle": "colour: the delta's evidence grade, the weaker of its two sides (measured = PMU)",
    }
    if not rows:
        return (
            alt.Chart(_data([{"t": "No operator type's HBM traffic changed."}]))
            .mark_text(align="left", fontSize=13)
            .encode(text="t:N")
            .properties(width=WIDTH, height=40, title=title)
        )
    grades = list(_GRADE_COLOURS)
    return (
        alt.Chart(_data(rows))
        .mark_bar()
        .encode(
            y=alt.Y("op_type:N", title=None, sort="-x"),
            x=alt.X("delta_gb:Q", title="GB per step, cand - base"),
            color=alt.Color(
                "grade:N",
                title="grade",
                scale=alt.Scale(domain=grades, range=[_GRADE_COLOURS[g] for g in grades]),
            ),
            tooltip=[
                alt.Tooltip("op_type:N"),
                alt.Tooltip("base_gb:Q", format=",.4f", title="base GB/step"),
                alt.Tooltip("cand_gb:Q", format=",.4f", title="cand GB/step"),
                alt.Tooltip("delta_gb:Q", format="+,.4f"),
                alt.Tooltip("grade:N"),
            ],
        )
        .properties(width=WIDTH, height=max(60, 22 * len(rows)), title=title)
    )
