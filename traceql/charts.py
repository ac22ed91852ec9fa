"""Altair charts, each drawn from query results (queries/*.sql), never computing a metric itself.

    from traceql import charts
    chart = charts.make("hbm_timeline", store, run_id="resnet-8card", device="ascend910b")
    charts.save(chart, "hbm.png")                      # .png .svg (vl-convert, offline) .html .json

Two layers:
- builders (`hbm_timeline_chart(timeline, steps)`, `op_hbm_bytes_chart(table)`, ...) are pure: Arrow tables
  in, an Altair chart out, no I/O. They pick and rename columns, filter rows to the scope they draw and set
  units for display (ns -> ms, bytes/s -> GB/s, inside Vega-Lite transforms); every number comes from a query.
  Binning and aggregation happen in SQL, so a chart's data stays small whatever the trace size (hbm_timeline
  bins time, step_groups merges consecutive steps, top-N queries cap operators). Altair's row limit is never
  lifted.
- `CHARTS` (the registry: which queries with which params feed which builder), `data()`, `make()`, `save()`.

An empty or unusable result (no kernels, no peak, no FLOPs...) gives a chart with a one-line explanation,
so a report always draws every chart and says why one is empty.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import QueryError, TraceQLError
from .jsonsafe import json_safe

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from .analysis import Analysis

# An Altair top-level chart (alt.Chart, LayerChart, VConcatChart, FacetChart...). Typed Any: Altair's own
# annotations are partial (untyped Data, Any-returning builders), so a precise type would only add casts.
ChartT = Any

WIDTH = 680  # px, the plotting area of a full-width chart
MAX_RANK_PANELS = 8  # hbm_timeline: one panel per rank up to this many ranks, a rank x time heatmap beyond
# Rows a chart's data may hold. Per-rank queries scale their bins/groups down with the rank count (Source.per_rank)
# so a 1,000-rank run stays under it (Altair refuses more than 5,000 rows by default: a 26-rank hbm_timeline was
# an internal MaxRowsError and the whole report was lost); to_spec raises Altair's limit to this bound only.
ROW_BUDGET = 20_000
MAX_FACET_RANKS = 16  # wait_steps: one facet row per rank up to this many, an even sample of ranks beyond
FORMATS = (".png", ".svg", ".html", ".json")

# The eight parts of a rank's step time (wait_attribution / step_groups columns), in stacking order, with a label
# and a colour: reds = memory, green = other compute, blues = communication, greys = idle/host.
WAIT_PARTS: list[tuple[str, str, str]] = [
    ("compute_hbm_saturated_ns", "compute, HBM-saturated", "#d62728"),
    ("comm_wait_peer_hbm_ns", "comm waiting on HBM-saturated peer", "#ff9896"),
    ("compute_other_ns", "compute, other", "#2ca02c"),
    ("comm_transit_ns", "comm transit", "#1f77b4"),
    ("comm_wait_other_ns", "comm waiting, other", "#aec7e8"),
    ("comm_unsplit_ns", "comm, moving/waiting not recorded", "#6baed6"),
    ("idle_ns", "idle (between device ops)", "#c7c7c7"),
    ("host_ns", "host (before/after device ops)", "#7f7f7f"),
]

# step_breakdown chart: traceql's split of each step (step_groups) beside the profiler's step_trace numbers.
STEP_PARTS: list[tuple[str, str | None, str, str]] = [
    # (traceql column, profiler column, label, colour)
    ("computing_ns", "profiler_computing_ns", "computing", "#2ca02c"),
    ("comm_not_overlapped_ns", "profiler_comm_not_overlapped_ns", "communication not overlapped", "#1f77b4"),
    ("idle_ns", "profiler_free_ns", "free", "#c7c7c7"),
    ("preparing_ns", "profiler_preparing_ns", "preparing", "#7f7f7f"),
    ("tail_ns", None, "after last device op", "#bcbd22"),
]


# ---- small helpers ------------------------------------------------------------------------------------------
def _inline(rows: list[dict[str, Any]]) -> Any:
    """Small inline data (reference lines, messages) as Vega-Lite `data.values`."""
    import altair as alt

    return alt.Data(values=rows)  # type: ignore[no-untyped-call]


def _meta(table: pa.Table, key: str) -> Any:
    raw = (table.schema.metadata or {}).get(f"traceql.{key}".encode())
    if raw is None:
        return None
    text = raw.decode()
    try:
        return json.loads(text)
    except ValueError:
        return text


def peaks_of(table: pa.Table) -> dict[str, float | None]:
    """The device peaks a query result was computed with (queries.run puts them in the schema metadata)."""
    p = _meta(table, "peaks")
    return p if isinstance(p, dict) else {}


def _line_threshold(param: str) -> float:
    """The article's lines (80% bottleneck, 70% not-bandwidth) as hbm_utilization declares them."""
    from . import queries

    p = queries.get("hbm_utilization").param(param)
    if p is None or p.default is None:  # pragma: no cover - the header declares both
        raise QueryError(f"hbm_utilization lacks the {param} param the charts draw")
    return float(p.default)


def _select(table: pa.Table, columns: list[str], rename: dict[str, str] | None = None) -> pa.Table:
    """Only the columns a chart draws (keeps the embedded data small), optionally renamed for display."""
    t = table.select([c for c in columns if c in table.column_names])
    if rename:
        t = t.rename_columns([rename.get(c, c) for c in t.column_names])
    return t


def _rows(table: pa.Table, column: str, value: Any) -> pa.Table:
    import pyarrow.compute as pc

    return table.filter(pc.equal(table[column], value))


def _has_values(table: pa.Table, column: str) -> bool:
    return column in table.column_names and table.num_rows > 0 and table[column].null_count < table.num_rows


def message_chart(title: str, text: str, subtitle: str | None = None, width: int = WIDTH) -> ChartT:
    """A chart that only says why there is nothing to draw (so a report still shows every chart)."""
    import altair as alt

    lines = _wrap(text, max(30, width // 7))
    data = _inline([{"i": i, "line": ln} for i, ln in enumerate(lines)])
    return (
        alt.Chart(data, title=_title(title, subtitle))
        .mark_text(align="left", baseline="top", fontSize=13, color="#555")
        .encode(x=alt.value(0), y=alt.Y("i:O", axis=None), text="line:N")
        .properties(width=width, height=22 * len(lines))
    )


def _wrap(text: str, width: int) -> list[str]:
    out: list[str] = []
    for para in str(text).splitlines() or [""]:
        line = ""
        for word in para.split(" "):
            if line and len(line) + 1 + len(word) > width:
                out.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        out.append(line)
    return out


def _title(text: str, subtitle: str | list[str] | None = None) -> Any:
    import altair as alt

    if subtitle:
        return alt.TitleParams(text=text, subtitle=subtitle, anchor="start", subtitleColor="#555")
    return alt.TitleParams(text=text, anchor="start")


def _fmt_gbps(bps: float) -> str:
    return f"{bps / 1e9:,.0f} GB/s"


# ---- builders: HBM ------------------------------------------------------------------------------------------
def _hbm_timeline_subtitle(
    timeline: pa.Table, n_ranks: int, width_ms: float, peak: float | None
) -> list[str]:
    sub = [f"bins of {width_ms:.3g} ms; bytes per kernel spread over its run time (query hbm_timeline)"]
    n_bins = len(set(timeline["bin"].to_pylist())) if "bin" in timeline.column_names else 0
    if n_ranks * 200 > ROW_BUDGET and n_bins:
        sub.append(
            f"{n_ranks} ranks: {n_bins} bins per rank (coarser than the usual 200, to keep the chart "
            f"under {ROW_BUDGET:,} points)"
        )
    if peak:
        sub.append(
            f"peak {_fmt_gbps(peak)} (red), {_line_threshold('sat_threshold'):.0%} bottleneck line (orange), "
            f"{_line_threshold('low_threshold'):.0%} not-bandwidth-bound line (grey)"
        )
    else:
        sub.append("HBM peak unknown (pass --device): no peak lines")
    return sub


def _step_shading(steps: pa.Table | None, rank: Any) -> list[Any]:
    """Every other step of `rank` shaded (step_windows), as the first layer of its timeline panel."""
    import altair as alt

    if steps is None or not steps.num_rows:
        return []
    s = _select(_rows(steps, "rank", rank), ["rank", "step", "step_index", "start_ms", "end_ms", "dur_ms"])
    if not s.num_rows:
        return []
    return [
        alt.Chart(s)
        .transform_filter("datum.step_index % 2 == 0")
        .mark_rect(color="#1f77b4", opacity=0.07)
        .encode(
            x="start_ms:Q",
            x2="end_ms:Q",
            tooltip=[
                alt.Tooltip("step:O"),
                alt.Tooltip("dur_ms:Q", title="step (ms)", format=",.3f"),
            ],
        )
    ]


def hbm_timeline_chart(timeline: pa.Table, steps: pa.Table | None = None) -> ChartT:
    """HBM bandwidth over time per rank (hbm_timeline bins) with the peak and the article's 80% / 70% lines,
    steps shaded (step_windows), and the operators dominating each bin on hover."""
    import altair as alt

    title = "HBM bandwidth over time"
    if timeline.num_rows == 0:
        return message_chart(title, "No device kernels in this run: nothing to put on a timeline.")
    peak = peaks_of(timeline).get("peak_hbm_bps")
    width_ms = _bin_width_ms(timeline)
    t = _select(
        timeline,
        ["rank", "t_ms", "bw_bps", "utilization", "read_bytes", "write_bytes", "top_ops", "hbm_bytes_source"],
    )
    ranks = sorted(set(t["rank"].to_pylist()))
    tooltip = [
        alt.Tooltip("rank:O"),
        alt.Tooltip("t_ms:Q", title="bin start (ms)", format=",.3f"),
        alt.Tooltip("gbps:Q", title="GB/s", format=",.1f"),
        alt.Tooltip("utilization:Q", title="of peak", format=".0%"),
        alt.Tooltip("read_gb:Q", title="read GB", format=",.3f"),
        alt.Tooltip("write_gb:Q", title="write GB", format=",.3f"),
        alt.Tooltip("top_ops:N", title="top operators (share of bytes)"),
        alt.Tooltip("hbm_bytes_source:N", title="bytes from"),
    ]
    sub = _hbm_timeline_subtitle(timeline, len(ranks), width_ms, peak)

    base = alt.Chart(t).transform_calculate(
        gbps="datum.bw_bps / 1e9",
        t_end=f"datum.t_ms + {width_ms!r}",
        read_gb="datum.read_bytes / 1e9",
        write_gb="datum.write_bytes / 1e9",
    )

    if len(ranks) > MAX_RANK_PANELS:
        color_field = "utilization:Q" if peak else "gbps:Q"
        heat = (
            base.mark_rect()
            .encode(
                x=alt.X("t_ms:Q", title="time from the first kernel (ms)"),
                x2="t_end:Q",
                y=alt.Y("rank:O", title="rank"),
                color=alt.Color(
                    color_field,
                    title="of peak" if peak else "GB/s",
                    scale=alt.Scale(scheme="inferno"),
                    legend=alt.Legend(format=".0%" if peak else ",.0f"),
                ),
                tooltip=tooltip,
            )
            .properties(width=WIDTH, height=max(120, 10 * len(ranks)))
        )
        return heat.properties(title=_title(title, sub))

    panels = []
    y_max = max([x for x in t["bw_bps"].to_pylist() if x is not None] + [peak or 0.0]) / 1e9 * 1.05 or 1.0
    rules = _peak_rules(peak)
    for i, r in enumerate(ranks):
        x_title = (
            "time from the first kernel (ms)" if i == len(ranks) - 1 else None
        )  # one axis title, at the bottom
        layers = _step_shading(steps, r)
        layers.append(
            base.transform_filter(f"datum.rank == {int(r)}")
            .mark_rect(color="#4c78a8")
            .encode(
                x=alt.X("t_ms:Q", title=x_title),
                x2="t_end:Q",
                y=alt.Y("gbps:Q", title=f"rank {r} GB/s", scale=alt.Scale(domain=[0, y_max])),
                tooltip=tooltip,
            )
        )
        if rules is not None:
            layers.append(rules)
        panels.append(alt.layer(*layers).properties(width=WIDTH, height=150 if len(ranks) <= 2 else 90))
    return alt.vconcat(*panels, spacing=8).properties(title=_title(title, sub))


def _bin_width_ms(timeline: pa.Table) -> float:
    """Width of the query's bins (every bin has the same width), read off the first row."""
    first = timeline.slice(0, 1).to_pylist()[0]
    return (int(first["bin_end_ns"]) - int(first["bin_start_ns"])) / 1e6


def _peak_rules(peak: float | None) -> ChartT | None:
    """Horizontal lines: the device peak and the article's 80% / 70% lines, in GB/s."""
    import altair as alt

    if not peak:
        return None
    sat, low = _line_threshold("sat_threshold"), _line_threshold("low_threshold")
    lines = _inline(
        [
            {"line": "peak", "gbps": peak / 1e9, "color": "#d62728"},
            {"line": f"{sat:.0%} of peak (HBM bottleneck)", "gbps": sat * peak / 1e9, "color": "#ff7f0e"},
            {
                "line": f"{low:.0%} of peak (below: not bandwidth-bound)",
                "gbps": low * peak / 1e9,
                "color": "#7f7f7f",
            },
        ]
    )
    return (
        alt.Chart(lines)
        .mark_rule(strokeDash=[4, 3], strokeWidth=1.5)
        .encode(
            y="gbps:Q",
            color=alt.Color("color:N", scale=None),
            tooltip=["line:N", alt.Tooltip("gbps:Q", format=",.0f")],
        )
    )


def hbm_ranks_chart(utilization: pa.Table) -> ChartT:
    """Per rank: time-weighted HBM utilisation while computing (the article's number) against the 80% / 70%
    lines, with the highest instantaneous utilisation as a tick (hbm_utilization, scope rank)."""
    import altair as alt

    title = "HBM utilisation per rank while computing"
    t = _rows(utilization, "scope", "rank")
    if t.num_rows == 0:
        return message_chart(title, "No device kernels in this run: no HBM utilisation to show.")
    if not _has_values(t, "busy_utilization"):
        if _has_values(t, "utilization") and _has_values(t, "busy_utilization_max"):
            return message_chart(
                title,
                "HBM counters only, sampled too coarsely to resolve the kernels: bandwidth "
                "while computing is bounded, not measured (query hbm_utilization: "
                "utilization, busy_utilization_max, sample_period_ns).",
            )
        if _has_values(t, "modeled_utilization_lower") and not _has_values(t, "utilization"):
            return message_chart(
                title,
                "Only tensor sizes in this dump: a modeled lower bound, never drawn against "
                "the 80% / 70% lines (capture with Memory aic-metrics for measured bytes).",
            )
        return message_chart(
            title,
            "HBM peak unknown for this device, so utilisation cannot be computed: pass "
            "--device (a preset) or --peak-hbm-gbps.",
        )
    sat, low = _line_threshold("sat_threshold"), _line_threshold("low_threshold")
    t = _select(
        t,
        [
            "rank",
            "busy_utilization",
            "max_utilization",
            "frac_busy_saturated",
            "busy_bw_bps",
            "hbm_bytes_source",
            "verdict",
        ],
    )
    tooltip = [
        alt.Tooltip("rank:O"),
        alt.Tooltip("busy_utilization:Q", title="utilisation while computing", format=".1%"),
        alt.Tooltip("busy_gbps:Q", title="GB/s while computing", format=",.0f"),
        alt.Tooltip("max_utilization:Q", title="highest instant", format=".0%"),
        alt.Tooltip("frac_busy_saturated:Q", title=f"compute time >= {sat:.0%}", format=".0%"),
        alt.Tooltip("verdict:N"),
        alt.Tooltip("hbm_bytes_source:N", title="bytes from"),
    ]
    base = alt.Chart(t).transform_calculate(busy_gbps="datum.busy_bw_bps / 1e9")
    x = alt.X(
        "busy_utilization:Q",
        title="HBM bandwidth / peak",
        axis=alt.Axis(format="%"),
        scale=alt.Scale(domain=[0, 1.05], clamp=True),
    )
    bars = base.mark_bar().encode(
        y=alt.Y("rank:O", title="rank"),
        x=x,
        color=alt.condition(f"datum.busy_utilization >= {sat}", alt.value("#d62728"), alt.value("#4c78a8")),
        tooltip=tooltip,
    )
    ticks = base.mark_tick(color="black", thickness=2).encode(
        y="rank:O", x="max_utilization:Q", tooltip=tooltip
    )
    lines = (
        alt.Chart(_inline([{"v": sat, "c": "#ff7f0e"}, {"v": low, "c": "#7f7f7f"}]))
        .mark_rule(strokeDash=[4, 3])
        .encode(x="v:Q", color=alt.Color("c:N", scale=None))
    )
    sub = (
        f"bars: mean while computing (query hbm_utilization, busy_utilization); tick: highest instant; lines: "
        f"{sat:.0%} bottleneck, {low:.0%} not-bandwidth-bound; peak {_fmt_gbps(peaks_of(utilization).get('peak_hbm_bps') or 0)}"
    )
    return alt.layer(bars, ticks, lines).properties(
        width=WIDTH, height=max(60, 24 * t.num_rows), title=_title(title, sub)
    )


def op_hbm_bytes_chart(ops: pa.Table) -> ChartT:
    """Top operators by HBM bytes, read and write stacked, with each row's byte source and share (op_hbm_bytes)."""
    import altair as alt

    title = "Top operators by HBM traffic"
    if ops.num_rows == 0 or not _has_values(ops, "hbm_bytes"):
        return message_chart(
            title, "No operator has HBM bytes (no PMU memory metrics, HBM counters or tensor shapes)."
        )
    t = _select(
        ops,
        [
            "name",
            "op_type",
            "calls",
            "dur_ns",
            "hbm_read_bytes",
            "hbm_write_bytes",
            "hbm_bytes",
            "share",
            "bw_utilization",
            "hbm_bytes_source",
            "measured_over_modeled",
        ],
    )
    tooltip = [
        alt.Tooltip("name:N", title="operator"),
        alt.Tooltip("op_type:N", title="type"),
        alt.Tooltip("calls:Q"),
        alt.Tooltip("hbm_gb:Q", title="HBM GB", format=",.3f"),
        alt.Tooltip("share:Q", title="share of run bytes", format=".1%"),
        alt.Tooltip("bw_utilization:Q", title="achieved / peak BW", format=".0%"),
        alt.Tooltip("hbm_bytes_source:N", title="bytes from"),
        alt.Tooltip("measured_over_modeled:Q", title="measured / modeled bytes", format=".2f"),
    ]
    order = alt.EncodingSortField(field="hbm_bytes", op="max", order="descending")
    base = alt.Chart(t).transform_calculate(hbm_gb="datum.hbm_bytes / 1e9")
    bars = (
        base.transform_fold(["hbm_read_bytes", "hbm_write_bytes"], as_=["direction", "bytes"])
        .transform_calculate(
            gb="datum.bytes / 1e9",
            dir="datum.direction == 'hbm_read_bytes' ? 'read' : 'write'",
        )
        .mark_bar()
        .encode(
            y=alt.Y("name:N", sort=order, title=None, axis=alt.Axis(labelLimit=300)),
            x=alt.X("gb:Q", title="HBM GB (read + write)", stack="zero"),
            color=alt.Color(
                "dir:N",
                title="HBM",
                scale=alt.Scale(domain=["read", "write"], range=["#4c78a8", "#f58518"]),
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=tooltip,
        )
    )
    labels = (
        base.transform_calculate(
            label="datum.hbm_bytes_source + ' · ' + format(datum.share, '.1%')",
        )
        .mark_text(align="left", dx=4, fontSize=11, color="#333")
        .encode(y=alt.Y("name:N", sort=order), x="hbm_gb:Q", text="label:N", tooltip=tooltip)
    )
    sub = "label: where the bytes came from (pmu > sampled > modeled) and share of the run's HBM bytes (query op_hbm_bytes)"
    return alt.layer(bars, labels).properties(
        width=WIDTH - 160, height=max(80, 22 * t.num_rows), title=_title(title, sub)
    )


# roofline.sql's three classes: latency = neither roof reached
BOUND_COLOURS = {"memory": "#d62728", "compute": "#2ca02c", "latency": "#7f7f7f"}


def roofline_chart(roof: pa.Table) -> ChartT:
    """Operators by arithmetic intensity vs achieved FLOP/s under the device roof, sized by device time
    (roofline). Without FLOPs for any operator: achieved bandwidth per operator against the HBM peak."""
    import altair as alt

    title = "Roofline: operators against the device roof"
    if roof.num_rows == 0:
        return message_chart(title, "No device kernels in this run.")
    peaks = peaks_of(roof)
    bw, flops = peaks.get("peak_hbm_bps"), peaks.get("peak_flops")
    import pyarrow.compute as pc

    pts = roof.filter(
        pc.and_(pc.is_valid(roof["arithmetic_intensity"]), pc.greater(roof["arithmetic_intensity"], 0))
    )
    pts = pts.filter(pc.greater(pts["achieved_flops_per_s"], 0)) if pts.num_rows else pts
    if pts.num_rows == 0:
        return _bandwidth_bars(roof, bw, title + " (no FLOPs known: achieved bandwidth instead)")
    t = _select(
        pts,
        [
            "name",
            "op_type",
            "calls",
            "dur_ns",
            "flops_source",
            "hbm_bytes_source",
            "arithmetic_intensity",
            "achieved_flops_per_s",
            "achieved_bw_bps",
            "bw_utilization",
            "flops_utilization",
            "bound",
            "bound_grade",
        ],
    )
    tooltip = [
        alt.Tooltip("name:N", title="operator"),
        alt.Tooltip("op_type:N", title="type"),
        alt.Tooltip("calls:Q"),
        alt.Tooltip("dur_ms:Q", title="device ms", format=",.3f"),
        alt.Tooltip("arithmetic_intensity:Q", title="FLOP/byte", format=",.2f"),
        alt.Tooltip("tflops:Q", title="achieved TFLOP/s", format=",.2f"),
        alt.Tooltip("bw_utilization:Q", title="achieved / peak BW", format=".0%"),
        alt.Tooltip("flops_utilization:Q", title="achieved / peak FLOP/s", format=".0%"),
        alt.Tooltip("bound:N"),
        alt.Tooltip("bound_grade:N", title="bound from"),
        alt.Tooltip("flops_source:N", title="FLOPs from"),
        alt.Tooltip("hbm_bytes_source:N", title="bytes from"),
    ]
    points = (
        alt.Chart(t)
        .transform_calculate(tflops="datum.achieved_flops_per_s / 1e12", dur_ms="datum.dur_ns / 1e6")
        .mark_circle(opacity=0.75, stroke="black", strokeWidth=0.5)
        .encode(
            x=alt.X(
                "arithmetic_intensity:Q",
                title="arithmetic intensity (FLOP/byte)",
                scale=alt.Scale(type="log"),
            ),
            y=alt.Y("tflops:Q", title="achieved TFLOP/s", scale=alt.Scale(type="log")),
            size=alt.Size("dur_ms:Q", title="device ms", scale=alt.Scale(range=[30, 900])),
            color=alt.Color(
                "bound:N",
                title="bound by",
                scale=alt.Scale(domain=list(BOUND_COLOURS), range=list(BOUND_COLOURS.values())),
            ),
            tooltip=tooltip,
        )
    )
    layers = [points]
    skipped = roof.num_rows - pts.num_rows
    sub = [
        f"{pts.num_rows} operators with FLOPs (measured or modeled, query roofline)"
        + (f"; {skipped} without FLOPs (convolutions, unknown types) not shown" if skipped else "")
    ]
    if bw and flops:
        ai = [x for x in t["arithmetic_intensity"].to_pylist() if x]
        ridge = flops / bw
        lo, hi = min(min(ai) / 2, ridge / 10), max(max(ai) * 2, ridge * 10)
        # The roof: bandwidth-bound slope (peak_hbm_bps x intensity) up to the ridge point, then flat at peak_flops.
        roof_line = _inline(
            [
                {"ai": lo, "tf": lo * bw / 1e12},
                {"ai": ridge, "tf": flops / 1e12},
                {"ai": hi, "tf": flops / 1e12},
            ]
        )
        layers.insert(
            0, alt.Chart(roof_line).mark_line(color="#444", strokeWidth=1.5).encode(x="ai:Q", y="tf:Q")
        )
        sub.append(
            f"roof: HBM {_fmt_gbps(bw)} x intensity up to the ridge point {ridge:,.0f} FLOP/byte, then "
            f"{flops / 1e12:,.0f} TFLOP/s"
        )
    else:
        sub.append("device peak FLOP/s or HBM bandwidth unknown (pass --device): no roof drawn")
    return alt.layer(*layers).properties(width=WIDTH - 120, height=360, title=_title(title, sub))


def _bandwidth_bars(roof: pa.Table, peak: float | None, title: str) -> ChartT:
    import altair as alt

    t = _select(
        roof, ["name", "op_type", "calls", "dur_ns", "achieved_bw_bps", "bw_utilization", "hbm_bytes_source"]
    )
    if not _has_values(t, "achieved_bw_bps"):
        return message_chart(title, "No operator has HBM bytes or FLOPs: nothing to place against the roof.")
    tooltip = [
        alt.Tooltip("name:N", title="operator"),
        alt.Tooltip("op_type:N", title="type"),
        alt.Tooltip("calls:Q"),
        alt.Tooltip("dur_ms:Q", title="device ms", format=",.3f"),
        alt.Tooltip("gbps:Q", title="achieved GB/s", format=",.0f"),
        alt.Tooltip("bw_utilization:Q", title="of peak", format=".0%"),
        alt.Tooltip("hbm_bytes_source:N", title="bytes from"),
    ]
    base = alt.Chart(t).transform_calculate(gbps="datum.achieved_bw_bps / 1e9", dur_ms="datum.dur_ns / 1e6")
    bars = (
        base.transform_filter("isValid(datum.achieved_bw_bps)")
        .mark_bar(color="#4c78a8")
        .encode(
            y=alt.Y(
                "name:N",
                sort=alt.EncodingSortField(field="dur_ns", op="max", order="descending"),
                title=None,
                axis=alt.Axis(labelLimit=300),
            ),
            x=alt.X("gbps:Q", title="achieved HBM GB/s"),
            tooltip=tooltip,
        )
    )
    layers = [bars]
    if peak:
        layers.append(
            alt.Chart(_inline([{"gbps": peak / 1e9}]))
            .mark_rule(color="#d62728", strokeDash=[4, 3])
            .encode(x="gbps:Q")
        )
    sub = (
        "operators by device time (query roofline); red line: HBM peak"
        if peak
        else "HBM peak unknown (pass --device)"
    )
    return alt.layer(*layers).properties(
        width=WIDTH - 200, height=max(80, 16 * t.num_rows), title=_title(title, sub)
    )


# ---- builders: where the time goes --------------------------------------------------------------------------
def wait_attribution_chart(wait: pa.Table) -> ChartT:
    """Per rank, the share of step time in each of the seven parts (wait_attribution, scope rank): the
    picture of the article's story (one rank HBM-saturated, the others waiting for it in collectives)."""
    import altair as alt

    title = "Where each rank's step time goes"
    t = _rows(wait, "scope", "rank")
    if t.num_rows == 0 or not _has_values(t, "wall_ns"):
        return message_chart(title, "No step windows with device activity in this run.")
    cols = [c for c, _, _ in WAIT_PARTS]
    labels = {c: lab for c, lab, _ in WAIT_PARTS}
    t = _select(t, ["rank", "steps", "verdict", *cols], rename=labels)
    domain: list[Any] = [lab for _, lab, _ in WAIT_PARTS]
    chart = (
        alt.Chart(t)
        .transform_fold(domain, as_=["part", "ns"])
        .transform_calculate(
            ms_per_step="datum.ns / datum.steps / 1e6",
            order=f"indexof({json.dumps(domain)}, datum.part)",
        )
        .mark_bar()
        .encode(
            y=alt.Y("rank:O", title="rank"),
            x=alt.X("ns:Q", stack="normalize", title="share of step time", axis=alt.Axis(format="%")),
            color=alt.Color(
                "part:N",
                title=None,
                scale=alt.Scale(domain=domain, range=[c for _, _, c in WAIT_PARTS]),
                legend=alt.Legend(orient="bottom", columns=3, labelLimit=260),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("rank:O"),
                alt.Tooltip("part:N"),
                alt.Tooltip("ms_per_step:Q", title="ms per step", format=",.3f"),
                alt.Tooltip("verdict:N"),
            ],
        )
    )
    sub = (
        "reds: memory; green: other compute; blues: communication; greys: idle/host (query wait_attribution)"
    )
    return chart.properties(width=WIDTH, height=max(60, 26 * t.num_rows), title=_title(title, sub))


def wait_steps_chart(groups: pa.Table) -> ChartT:
    """Per rank and group of consecutive steps, the mean step split into the seven parts (step_groups)."""
    import altair as alt

    title = "Step time per rank, step by step"
    t = _rows(groups, "scope", "group")
    if t.num_rows == 0 or not _has_values(t, "window_ns"):
        return message_chart(title, "No step windows with device activity in this run.")
    labels = {c: lab for c, lab, _ in WAIT_PARTS}
    domain: list[Any] = [lab for _, lab, _ in WAIT_PARTS]
    t = _select(t, ["rank", "grp", "label", "steps", *labels], rename=labels)
    all_ranks = sorted(set(t["rank"].to_pylist()))
    sampled = ""
    if len(all_ranks) > MAX_FACET_RANKS:
        # one facet row per rank is unreadable (and megabytes) at hundreds of ranks: an even sample, said so
        import pyarrow as pa
        import pyarrow.compute as pc

        step = (len(all_ranks) - 1) / (MAX_FACET_RANKS - 1)
        keep = sorted({all_ranks[round(i * step)] for i in range(MAX_FACET_RANKS)})
        t = t.filter(pc.is_in(t["rank"], pa.array(keep, t.schema.field("rank").type)))
        sampled = f"; {len(keep)} of {len(all_ranks)} ranks shown, evenly spaced (query step_groups --rank N for any other)"
    n_ranks = len(set(t["rank"].to_pylist()))
    merged = max(t["steps"].to_pylist())
    chart = (
        alt.Chart(t)
        .transform_fold(domain, as_=["part", "ns"])
        .transform_calculate(
            ms_per_step="datum.ns / datum.steps / 1e6",
            order=f"indexof({json.dumps(domain)}, datum.part)",
        )
        .mark_bar()
        .encode(
            x=alt.X(
                "label:N",
                title="step",
                sort=alt.EncodingSortField(field="grp", op="min"),
                axis=alt.Axis(labelAngle=-45, labelOverlap=True),
            ),
            y=alt.Y("ms_per_step:Q", title="ms per step", stack="zero"),
            color=alt.Color(
                "part:N",
                title=None,
                scale=alt.Scale(domain=domain, range=[c for _, _, c in WAIT_PARTS]),
                legend=alt.Legend(orient="bottom", columns=3, labelLimit=260),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("rank:O"),
                alt.Tooltip("label:N", title="steps"),
                alt.Tooltip("steps:Q", title="steps merged"),
                alt.Tooltip("part:N"),
                alt.Tooltip("ms_per_step:Q", title="ms per step", format=",.3f"),
            ],
        )
        .properties(width=WIDTH, height=110 if n_ranks > 2 else 160)
    )
    sub = (
        "mean per step of each group (query step_groups"
        + (f"; up to {merged} consecutive steps merged per bar" if merged > 1 else "")
        + sampled
        + ")"
    )
    return (
        chart.facet(row=alt.Row("rank:O", title="rank"))
        .resolve_scale(x="independent")
        .properties(title=_title(title, sub))
    )


def step_breakdown_chart(groups: pa.Table) -> ChartT:
    """Per rank, the mean step split as the profiler's step_trace does (computing, communication not
    overlapped, free, preparing), traceql's numbers beside the profiler's own (step_groups, scope rank)."""
    import altair as alt

    title = "Step breakdown per rank: traceql vs the profiler's step_trace"
    t = _rows(groups, "scope", "rank")
    if t.num_rows == 0 or not _has_values(t, "window_ns"):
        return message_chart(title, "No step windows with device activity in this run.")
    rows: list[dict[str, Any]] = []
    for r in t.to_pylist():
        for ours, theirs, label, _ in STEP_PARTS:
            rows.append(
                {"rank": r["rank"], "source": "traceql", "part": label, "ns": r[ours], "steps": r["steps"]}
            )
            if theirs and r.get("profiler_step_ns") is not None and r.get(theirs) is not None:
                rows.append(
                    {
                        "rank": r["rank"],
                        "source": "profiler",
                        "part": label,
                        "ns": r[theirs],
                        "steps": r["steps"],
                    }
                )
    domain = [lab for _, _, lab, _ in STEP_PARTS]
    chart = (
        alt.Chart(_inline(rows))
        .transform_calculate(
            ms_per_step="datum.ns / datum.steps / 1e6",
            order=f"indexof({json.dumps(domain)}, datum.part)",
        )
        .mark_bar()
        .encode(
            y=alt.Y("source:N", title=None, sort=["traceql", "profiler"]),
            x=alt.X("ms_per_step:Q", title="ms per step", stack="zero"),
            color=alt.Color(
                "part:N",
                title=None,
                scale=alt.Scale(domain=domain, range=[c for *_, c in STEP_PARTS]),
                legend=alt.Legend(orient="bottom", columns=3, labelLimit=260),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("rank:O"),
                alt.Tooltip("source:N"),
                alt.Tooltip("part:N"),
                alt.Tooltip("ms_per_step:Q", title="ms per step", format=",.3f"),
            ],
        )
        .properties(width=WIDTH - 60, height=44)
    )
    sub = (
        "traceql recomputes the split from the kernels (query step_groups / step_breakdown); profiler: "
        "step_trace_time.csv as ingested (absent when the dump has none)"
    )
    return chart.facet(row=alt.Row("rank:O", title="rank")).properties(title=_title(title, sub))


# ---- builders: operators -------------------------------------------------------------------------------------
def ub_l2_chart(rates: pa.Table) -> ChartT:
    """UB utilisation and L2 hit rate per operator with the article's lines (UB > 90% good reuse, < 50% no reuse;
    L2 < 50% unfriendly access) (ub_l2_rates)."""
    import altair as alt

    title = "UB utilisation and L2 hit rate per operator"
    overall = _rows(rates, "scope", "overall").to_pylist() if rates.num_rows else []
    reason = (overall[0].get("reason") if overall else None) or "no operator rows"
    ops = _rows(rates, "scope", "op") if rates.num_rows else rates
    if not (_has_values(ops, "ub_utilization") or _has_values(ops, "l2_hit_rate")):
        return message_chart(title, f"No UB or L2 numbers for this run: {reason}.")
    panels = []
    for col, label, lines, what in (
        (
            "ub_utilization",
            "UB utilisation (UB bandwidth / UB peak)",
            [(0.9, "#2ca02c"), (0.5, "#d62728")],
            "UB",
        ),
        ("l2_hit_rate", "L2 hit rate (traffic-weighted)", [(0.5, "#d62728")], "L2"),
    ):
        if not _has_values(ops, col):
            panels.append(message_chart(label, f"No {what} numbers: {reason}.", width=WIDTH // 2 - 40))
            continue
        t = _select(ops, ["name", "op_type", "calls", "dur_ns", col, "l2_source", "l2_weight"])
        tooltip = [
            alt.Tooltip("name:N", title="operator"),
            alt.Tooltip("op_type:N", title="type"),
            alt.Tooltip("calls:Q"),
            alt.Tooltip("dur_ms:Q", title="device ms", format=",.3f"),
            alt.Tooltip(f"{col}:Q", format=".1%"),
        ]
        bars = (
            alt.Chart(t)
            .transform_filter(f"isValid(datum.{col})")
            .transform_calculate(dur_ms="datum.dur_ns / 1e6")
            .mark_bar(color="#4c78a8")
            .encode(
                y=alt.Y(
                    "name:N",
                    sort=alt.EncodingSortField(field="dur_ns", op="max", order="descending"),
                    title=None,
                    axis=alt.Axis(labelLimit=220),
                ),
                x=alt.X(f"{col}:Q", title=label, axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
                tooltip=tooltip,
            )
        )
        rule = (
            alt.Chart(_inline([{"v": v, "c": c} for v, c in lines]))
            .mark_rule(strokeDash=[4, 3])
            .encode(x="v:Q", color=alt.Color("c:N", scale=None))
        )
        n = sum(1 for v in t[col].to_pylist() if v is not None)
        panels.append(
            alt.layer(bars, rule).properties(width=WIDTH // 2 - 140, height=max(60, 16 * n), title=label)
        )
    sub = "operators by device time (query ub_l2_rates); lines: UB 90% good reuse / 50% no reuse, L2 50% unfriendly access"
    return alt.hconcat(*panels, spacing=30).properties(title=_title(title, sub))


def layout_transforms_chart(layouts: pa.Table) -> ChartT:
    """Time in layout/format conversions per (type, source format -> target format) (layout_transforms)."""
    import altair as alt

    title = "Layout / format conversions"
    if layouts.num_rows == 0:
        return message_chart(title, "No layout conversions (TransData, Transpose, format casts) in this run.")
    t = _select(
        layouts,
        [
            "op_type",
            "src_format",
            "dst_format",
            "src_dtype",
            "dst_dtype",
            "calls",
            "dur_ns",
            "share_of_compute",
            "hbm_bytes",
            "hbm_bytes_source",
            "example_name",
        ],
    )
    tooltip = [
        alt.Tooltip("conversion:N"),
        alt.Tooltip("calls:Q"),
        alt.Tooltip("dur_ms:Q", title="device ms", format=",.3f"),
        alt.Tooltip("share_of_compute:Q", title="share of compute time", format=".1%"),
        alt.Tooltip("hbm_gb:Q", title="HBM GB", format=",.3f"),
        alt.Tooltip("hbm_bytes_source:N", title="bytes from"),
        alt.Tooltip("src_dtype:N", title="dtype in"),
        alt.Tooltip("dst_dtype:N", title="dtype out"),
        alt.Tooltip("example_name:N", title="example"),
    ]
    chart = (
        alt.Chart(t)
        .transform_calculate(
            conversion="datum.op_type + ' ' + datum.src_format + ' → ' + datum.dst_format + ' (' + datum.src_dtype + ')'",
            dur_ms="datum.dur_ns / 1e6",
            hbm_gb="datum.hbm_bytes / 1e9",
        )
        .mark_bar()
        .encode(
            y=alt.Y(
                "conversion:N",
                sort=alt.EncodingSortField(field="dur_ns", op="max", order="descending"),
                title=None,
                axis=alt.Axis(labelLimit=320),
            ),
            x=alt.X("dur_ms:Q", title="device ms (all ranks in scope)"),
            color=alt.Color("op_type:N", title="type"),
            tooltip=tooltip,
        )
    )
    return chart.properties(
        width=WIDTH - 240,
        height=max(60, 20 * t.num_rows),
        title=_title(title, "conversions by device time (query layout_transforms)"),
    )


def top_ops_chart(ops: pa.Table) -> ChartT:
    """Operators by total device time, communication marked (top_ops)."""
    import altair as alt

    title = "Top operators by device time"
    if ops.num_rows == 0:
        return message_chart(title, "No device kernels in this run.")
    t = _select(ops, ["op", "task_types", "is_comm", "calls", "total_ns", "avg_ns", "share"])
    chart = (
        alt.Chart(t)
        .transform_calculate(
            total_ms="datum.total_ns / 1e6",
            avg_us="datum.avg_ns / 1e3",
            kind="datum.is_comm ? 'communication' : 'compute'",
        )
        .mark_bar()
        .encode(
            y=alt.Y(
                "op:N",
                sort=alt.EncodingSortField(field="total_ns", op="max", order="descending"),
                title=None,
                axis=alt.Axis(labelLimit=300),
            ),
            x=alt.X("total_ms:Q", title="device ms (all ranks in scope)"),
            color=alt.Color(
                "kind:N",
                title=None,
                scale=alt.Scale(domain=["compute", "communication"], range=["#2ca02c", "#1f77b4"]),
            ),
            tooltip=[
                alt.Tooltip("op:N", title="operator"),
                alt.Tooltip("task_types:N", title="task types"),
                alt.Tooltip("calls:Q"),
                alt.Tooltip("total_ms:Q", title="total ms", format=",.3f"),
                alt.Tooltip("avg_us:Q", title="mean µs", format=",.1f"),
                alt.Tooltip("share:Q", title="share of device time", format=".1%"),
            ],
        )
    )
    return chart.properties(
        width=WIDTH - 160,
        height=max(60, 20 * t.num_rows),
        title=_title(title, "query top_ops; concurrent streams counted separately"),
    )


# ---- registry -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Source:
    """One query feeding a builder argument."""

    arg: str
    query: str
    params: dict[str, Any] = field(default_factory=dict)
    # (param, its default, floor): a per-rank row count the query takes as a parameter, scaled down with the
    # run's rank count so ranks x rows stays under ROW_BUDGET (the aggregation happens in the SQL)
    per_rank: tuple[str, int, int] | None = None

    def params_for(self, ranks: int) -> dict[str, Any]:
        p = dict(self.params)
        if self.per_rank is not None:
            name, default, floor = self.per_rank
            p[name] = max(floor, min(int(p.get(name, default)), ROW_BUDGET // max(1, ranks)))
        return p


@dataclass(frozen=True)
class ChartDef:
    name: str
    description: str
    sources: tuple[Source, ...]
    builder: Callable[..., Any]

    @property
    def queries(self) -> list[str]:
        return [s.query for s in self.sources]


CHARTS: dict[str, ChartDef] = {
    c.name: c
    for c in [
        ChartDef(
            "hbm_timeline",
            "HBM bandwidth over time per rank, peak and 80%/70% lines, steps shaded, top operators per bin",
            (
                Source("timeline", "hbm_timeline", per_rank=("max_bins", 200, 10)),
                Source("steps", "step_windows"),
            ),
            hbm_timeline_chart,
        ),
        ChartDef(
            "hbm_ranks",
            "HBM utilisation per rank while computing, against the 80%/70% lines",
            (Source("utilization", "hbm_utilization"),),
            hbm_ranks_chart,
        ),
        ChartDef(
            "wait_attribution",
            "Where each rank's step time goes: HBM-saturated compute, other compute, comm transit, "
            "waiting on an HBM-saturated peer, other waiting, idle, host",
            (Source("wait", "wait_attribution"),),
            wait_attribution_chart,
        ),
        ChartDef(
            "wait_steps",
            "The same split per rank and step (consecutive steps merged on long runs)",
            (Source("groups", "step_groups", per_rank=("max_groups", 60, 1)),),
            wait_steps_chart,
        ),
        ChartDef(
            "step_breakdown",
            "Mean step per rank split like the profiler's step_trace, beside the profiler's own numbers",
            (Source("groups", "step_groups", per_rank=("max_groups", 60, 1)),),
            step_breakdown_chart,
        ),
        ChartDef(
            "op_hbm_bytes",
            "Top 10 operators by HBM bytes, read/write split, byte source marked",
            (Source("ops", "op_hbm_bytes", {"top_n": 10}),),
            op_hbm_bytes_chart,
        ),
        ChartDef(
            "roofline",
            "Operators by arithmetic intensity vs achieved FLOP/s under the device roof, sized by time",
            (Source("roof", "roofline", {"top_n": 40}),),
            roofline_chart,
        ),
        ChartDef(
            "ub_l2",
            "UB utilisation and L2 hit rate per operator, with the article's lines",
            # (findings' UB_L2 read asks the same top_n: one run of the query serves both)
            (Source("rates", "ub_l2_rates", {"top_n": 20}),),
            ub_l2_chart,
        ),
        ChartDef(
            "layout_transforms",
            "Time in layout/format conversions by source -> target format",
            (Source("layouts", "layout_transforms", {"top_n": 15}),),
            layout_transforms_chart,
        ),
        ChartDef(
            "top_ops",
            "Top operators by device time, communication marked",
            (Source("ops", "top_ops", {"top_n": 15}),),
            top_ops_chart,
        ),
    ]
}


def list_charts() -> list[ChartDef]:
    return list(CHARTS.values())


def get(name: str) -> ChartDef:
    if name not in CHARTS:
        from .suggest import did_you_mean

        raise TraceQLError(
            f"unknown chart {name!r}{did_you_mean(name, CHARTS)}; charts: {', '.join(CHARTS)} (traceql chart --list)"
        )
    return CHARTS[name]


def data(
    name: str,
    store: Any = None,
    *,
    run_id: str | None = None,
    rank: int | None = None,
    device: str | None = None,
    peaks: Any = None,
    session: Analysis | None = None,
) -> dict[str, pa.Table]:
    """Run the queries behind chart `name` in an analysis session (the given one, whose cache it shares, or
    one opened for the call); returns {builder argument: Arrow table}."""
    if session is None:
        from .analysis import Analysis

        with Analysis(store, run_id, device=device, peaks=peaks) as own:
            return data(name, rank=rank, session=own)
    spec = get(name)
    ranks = 1 if rank is not None else session.ranks_count
    return {s.arg: session.query(s.query, s.params_for(ranks), rank=rank) for s in spec.sources}


def make(
    name: str,
    store: Any = None,
    *,
    run_id: str | None = None,
    rank: int | None = None,
    device: str | None = None,
    peaks: Any = None,
    session: Analysis | None = None,
) -> ChartT:
    """Chart `name` for one run (default: the most recently ingested), or for the session's run."""
    return get(name).builder(
        **data(name, store, run_id=run_id, rank=rank, device=device, peaks=peaks, session=session)
    )


def reproduce(
    name: str,
    run_id: str,
    *,
    store: Any = None,
    device: str | None = None,
    rank: int | None = None,
    peak_hbm_gbps: float | None = None,
) -> list[str]:
    """The `traceql query` commands that print the numbers behind chart `name` (traceql.commandline)."""
    from .commandline import command

    return [
        command(
            "query",
            s.query,
            run=run_id,
            store=store,
            rank=rank,
            device=device,
            peak_hbm_gbps=peak_hbm_gbps,
            params=s.params,
        )
        for s in get(name).sources
    ]


# ---- export ---------------------------------------------------------------------------------------------------
def to_spec(chart: Any, validate: bool = False) -> dict[str, Any]:
    """The chart's Vega-Lite spec as plain JSON-safe data (NaN/inf -> null). validate: check it against the
    Vega-Lite schema (jsonschema over every chart, ~0.4 CPU-s of a report): the charts are traceql's own code,
    so tests/test_charts.py validates each one on the sample and the report skips it."""
    import altair as alt

    # every chart's data is bounded first (ROW_BUDGET, Source.per_rank); slack for bins rounding up
    with alt.data_transformers.enable("default", max_rows=2 * ROW_BUDGET):
        spec: dict[str, Any] = json_safe(chart.to_dict(validate=validate))
    return spec


def save(chart: Any, path: str | Path, *, scale: float = 2.0, store: Any = None) -> Path:
    """Write a chart by the file's suffix: .png/.svg (rendered offline by vl-convert), .html (self-contained,
    Vega inlined), .json (the Vega-Lite spec). store: the chart's store, where an .html page's script bundle is
    kept between runs (report.page.bundle_cache_dir); None bundles it each time."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in FORMATS:
        raise TraceQLError(
            f"{p}: unknown chart format {p.suffix or '(none)'!r}; use one of {', '.join(FORMATS)}"
        )
    from .out_file import check, write_bytes, write_text

    check(p)  # a directory or socket at the path: refused before the chart is rendered
    spec = to_spec(chart)
    if suffix == ".json":
        write_text(p, json.dumps(spec, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    elif suffix == ".html":
        from .report.page import bundle_cache_dir, chart_html

        title = _spec_title(spec)
        write_text(p, chart_html(spec, title, bundle_cache_dir(store) if store is not None else None))
    else:
        import vl_convert as vlc

        from .report.page import vl_version

        try:
            if suffix == ".svg":
                data = vlc.vegalite_to_svg(spec, vl_version=vl_version()).encode("utf-8")
            else:
                data = vlc.vegalite_to_png(spec, vl_version=vl_version(), scale=scale)
        except ValueError as e:  # vl-convert reports Vega errors as ValueError
            raise TraceQLError(
                f"{p}: could not render the chart ({str(e).splitlines()[0] if str(e) else e})"
            ) from None
        write_bytes(p, data)
    return p


def _spec_title(spec: dict[str, Any]) -> str:
    t = spec.get("title")
    if isinstance(t, dict):
        t = t.get("text")
    return str(t) if t else "traceql chart"
