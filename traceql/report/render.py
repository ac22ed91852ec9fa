"""Render one self-contained HTML file: the verdict, the findings with their evidence charts, per-rank detail,
operators, run metadata and how to reproduce every number.

Self-contained: Vega, Vega-Lite and vega-embed come from vl-convert-python's bundle
(`vl_convert.javascript_bundle()`, the same libraries vl-convert renders PNG/SVG with) and are inlined; chart
data is inlined in the specs. Nothing is fetched: the page's Content-Security-Policy allows no network source
at all, and only the page's own two scripts run (pinned by their SHA-256 hashes).

Safe with untrusted dumps: every text from a dump (operator names, formats, messages quoting them) goes through
Jinja2 autoescaping in HTML, and into the chart specs as JSON inside <script type="application/json"> with
`<`, `>`, `&`, U+2028 and U+2029 written as \\u escapes, so no value can close the script element. Vega draws
text as SVG text nodes and vega-embed's tooltip escapes HTML. The CSP's script hashes are a second line: an
injected inline script or event handler would not run even if escaping failed.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from .._duck import reraise_interrupt
from ..commandline import command
from ..errors import QueryError, TraceQLError
from ..findings.headline import headline_parts
from ..findings.legend import LEGEND
from ..rows import HbmUtilizationRow, WaitAttributionRow
from . import gpu_panels
from .headers import human_header, important_first
from .page import bundle_cache_dir, bundle_versions, fmt_value, render_page, script_json

TEMPLATES = Path(__file__).with_name("templates")

# Which charts back which finding (the rest appear in the per-rank and operator sections).
FINDING_CHARTS: dict[str, list[str]] = {
    "bandwidth_bound": ["hbm_timeline"],
    "comm_waits_on_memory": ["wait_steps"],
    "top_hbm_ops": ["op_hbm_bytes"],
    "operator_fusion": ["op_hbm_bytes"],
    "ub_reuse": ["ub_l2", "op_hbm_bytes"],
    "memory_layout": ["layout_transforms"],
    "prefetch_overlap": ["step_breakdown"],
    "matmul_tiling": ["roofline"],
    "gradient_checkpointing": ["hbm_ranks"],
    "slow_rank": ["wait_steps"],
    "aicpu_ops": ["top_ops"],
    "free_time": ["step_breakdown"],
}
VERDICT_CHARTS = ["wait_attribution", "hbm_ranks"]
RANK_CHARTS = ["hbm_timeline", "wait_steps", "step_breakdown"]
OPERATOR_CHARTS = ["op_hbm_bytes", "top_ops", "roofline", "ub_l2", "layout_transforms"]


# ---- the report -----------------------------------------------------------------------------------------------
@dataclass
class _Charts:
    """Chart specs of one report, built once each (a chart shown in several sections shares its spec)."""

    session: Any  # traceql.analysis.Analysis: every table comes from its query cache
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    shown: dict[str, str] = field(default_factory=dict)  # chart -> anchor of its first appearance
    _n: int = 0

    def table(self, query: str, params: dict[str, Any]) -> Any:
        return self.session.query(query, params)

    def spec(self, name: str) -> None:
        from .. import charts

        if name in self.specs:
            return
        cdef = charts.get(name)
        ranks = self.session.ranks_count
        try:
            args = {s.arg: self.table(s.query, s.params_for(ranks)) for s in cdef.sources}
            self.specs[name] = charts.to_spec(cdef.builder(**args))
        except Exception as e:  # noqa: BLE001  # one failing chart must not lose the rest of the report
            reraise_interrupt(e)  # ...but Ctrl-C during a chart's query ends the report (exit 130)
            why = (
                str(e)
                if isinstance(e, QueryError)
                else f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}"
            )
            self.problems.append(f"chart {name}: {why}")
            self.specs[name] = charts.to_spec(
                charts.message_chart(cdef.description, f"This chart could not be drawn: {why}")
            )

    def place(self, name: str) -> dict[str, Any]:
        """A container for chart `name` (its spec is built on first use)."""
        self.spec(name)
        self._n += 1
        anchor = f"chart-{name}-{self._n}"
        first = self.shown.setdefault(name, anchor)
        return {"name": name, "anchor": anchor, "first": first == anchor, "first_anchor": first}


def _finding_view(f: Any) -> dict[str, Any]:
    cols: list[str] = []
    for row in f.top_ops[:10]:
        for k in row:
            if k not in cols:
                cols.append(k)
    cols = important_first(cols)
    # (text, numeric?) per cell: numbers stay on one line, right-aligned
    rows = [
        [
            (
                fmt_value(row.get(c), c),
                isinstance(row.get(c), (int, float)) and not isinstance(row.get(c), bool),
            )
            for c in cols
        ]
        for row in f.top_ops[:10]
    ]
    # (header for people, SQL/JSON name for the tooltip, value)
    evidence = [(human_header(k), k, fmt_value(v, k)) for k, v in f.evidence.items() if k != "outcome"]
    sv = f.saving or {}
    saving = None
    if sv.get("value") is not None:
        saving = f"{sv['value']:,.2f} {sv.get('unit') or ''}".strip()
        if sv.get("share_of_step") is not None:
            # a unit said of the window (no step marker: findings.windows) makes the share one of the window too
            of = "of the window" if "window" in str(sv.get("unit") or "") else "of a step"
            saving += f" ({100 * sv['share_of_step']:.1f}% {of})"
    return {
        "id": f.id,
        "title": f.title,
        "severity": f.severity,
        "fired": f.fired,
        "message": f.message,
        "optimisation": f.optimisation,
        "step": f.checklist_step,
        "suggestion": f.suggestion,
        "query": f.query,
        "evidence": evidence,
        "top_cols": [(human_header(c), c) for c in cols],  # (header, SQL name for the tooltip)
        "top_rows": rows,
        "saving": saving,
        "saving_method": sv.get("method") or "",
        "charts": [],
    }


def build_context(
    store: Any = None,
    run_id: str | None = None,
    *,
    device: str | None = None,
    peaks: Any = None,
    baseline: str | None = None,
) -> dict[str, Any]:
    """Everything the report template shows, computed through findings.evaluate and the chart registry."""
    from .. import findings
    from ..analysis import Analysis, planner_threads
    from ..version import __version__

    # findings' planner runs the queries 4 at a time; the charts read its cache
    session = Analysis(
        store, run_id, device=device, peaks=peaks, baseline=baseline, threads=planner_threads()
    )
    try:
        rep = findings.evaluate_session(session)
        info = session.info
        ch = _Charts(session)
        kind = session.device_kind
        gpu_panels.stub_hbm_charts(kind, session, ch.specs)  # a GPU without DRAM bytes: say so, no empty axes
        placed = _place_charts(rep, ch, kind)
        wait = ch.table("wait_attribution", {})
        util = ch.table("hbm_utilization", {})
    finally:
        session.close()
    rid = rep.run_id
    v = rep.verdict
    what_changed = _what_changed(store, baseline, rid, device, peaks, ch)  # may place charts: before specs
    return {
        "run_id": rid,
        "version": __version__,
        "headline": v.get("headline", ""),
        "short": headline_parts(v)["short"] if "short" not in v else v["short"],
        "caveats": headline_parts(v)["caveats"] if "caveats" not in v else v["caveats"],
        "legend": _legend(str(v.get("step_windows", "")).startswith("none")),
        "bound": v.get("bound"),
        "tiles": _tiles(v),
        "shares": [(k.replace("_", "/"), fmt_value(x, "share")) for k, x in (v.get("shares") or {}).items()],
        "verdict_charts": placed["verdict_charts"],
        "findings": placed["findings"],
        "silent": gpu_panels.silent(kind, [_finding_view(f) for f in rep.findings if not f.fired]),
        "summary": rep.to_dict()["summary"],
        "rank_rows": _rank_rows(wait, util),
        "rank_charts": placed["rank_charts"],
        "op_charts": placed["op_charts"],
        "meta": gpu_panels.meta(kind, _meta(rep, info, baseline)),
        "warnings": [str(w) for w in info.get("warnings", [])][:50],
        "problems": ch.problems,
        "reproduce": _reproduce(rid, info, store, device, peaks, baseline, kind),
        "specs": ch.specs,
        "what_changed": what_changed,
    }


def _legend(windows_only: bool) -> list[tuple[str, str, str, str]]:
    """The legend's rows; said of the one profiled window when the run has no step marker (findings.windows)."""
    rows = [(t.group, t.word, t.meaning, t.example) for t in LEGEND]
    if not windows_only:
        return rows
    from ..findings.windows import reword

    return [(g, w, reword(m), reword(e)) for g, w, m, e in rows]


def _place_charts(rep: Any, ch: _Charts, kind: str) -> dict[str, Any]:
    """Place every chart the page shows, in page order (the verdict's, each fired finding's, ranks', ops')."""
    verdict_charts = [ch.place(n) for n in VERDICT_CHARTS]
    finding_views = []
    for f in rep.fired:  # already in impact order (findings.order): the same order as the CLI and JSON
        view = _finding_view(f)
        view["charts"] = [ch.place(n) for n in FINDING_CHARTS.get(f.id, [])]
        finding_views.append(view)
    placed = {
        "verdict_charts": verdict_charts,
        "findings": finding_views,
        "rank_charts": [ch.place(n) for n in RANK_CHARTS],
        "op_charts": [ch.place(n) for n in gpu_panels.charts(kind, OPERATOR_CHARTS)],
    }
    if str(rep.verdict.get("step_windows", "")).startswith("none"):  # no step marker: no "per step" titles
        from ..findings.windows import reword_spec

        ch.specs = {k: reword_spec(v) for k, v in ch.specs.items()}
    return placed


def _scope_rows(t: Any, scope: str) -> list[dict[str, Any]]:
    """The rows of one scope as dicts, filtered in Arrow before the conversion."""
    import pyarrow.compute as pc

    return list(t.filter(pc.equal(t["scope"], scope)).to_pylist())


def _rank_rows(wait: Any, util: Any) -> list[dict[str, Any]]:
    """The per-rank table: wait_attribution's shares beside hbm_utilization's bytes."""
    # typed rows (traceql/rows.py, from the queries' column headers): mypy sees a renamed column here; only the
    # rank rows are converted (the step rows are ~30k on an 8-rank cluster: 0.35 CPU-s as Python dicts)
    util_rows = cast("list[HbmUtilizationRow]", _scope_rows(util, "rank"))
    hbm_by_rank = {r["rank"]: r for r in util_rows}
    rank_rows = []
    for r in cast("list[WaitAttributionRow]", _scope_rows(wait, "rank")):
        h: HbmUtilizationRow | dict[str, None] = hbm_by_rank.get(r["rank"]) or {}
        rank_rows.append(
            {
                "rank": r["rank"],
                "steps": r["steps"],
                "mean_step": fmt_value(r["mean_step_ns"], "mean_step_ns"),
                "verdict": r["verdict"] or "–",
                "memory": fmt_value(r["memory_share"], "share"),
                "communication": fmt_value(r["communication_share"], "share"),
                "compute": fmt_value(r["compute_share"], "share"),
                "idle_host": fmt_value(r["idle_host_share"], "share"),
                "hbm_busy": fmt_value(h.get("busy_utilization"), "utilization"),
                "hbm_bytes": fmt_value(h.get("hbm_bytes"), "hbm_bytes"),
                "source": h.get("hbm_bytes_source") or "–",
            }
        )
    return rank_rows


def _reproduce(
    rid: str,
    info: dict[str, Any],
    store: Any,
    device: str | None,
    peaks: Any,
    baseline: str | None,
    kind: str,
) -> dict[str, Any]:
    """The commands that reproduce the page: ingest, findings, report, and each chart with its queries."""
    from .. import charts

    hbm_gbps = None
    if isinstance(peaks, dict) and peaks.get("peak_hbm_bps") is not None:
        hbm_gbps = float(peaks["peak_hbm_bps"]) / 1e9
    return {
        "ingest": command("ingest", str(info.get("source", "DUMP")), extra=["--name", rid]),
        "findings": command(
            "findings", run=rid, store=store, device=device, peak_hbm_gbps=hbm_gbps, baseline=baseline
        ),
        "report": command(
            "report",
            run=rid,
            store=store,
            device=device,
            peak_hbm_gbps=hbm_gbps,
            baseline=baseline,
            extra=["-o", f"{rid}.html"],
        ),
        "charts": [
            {
                "name": n,
                "description": charts.get(n).description,
                "chart": command(
                    "chart",
                    n,
                    run=rid,
                    store=store,
                    device=device,
                    peak_hbm_gbps=hbm_gbps,
                    extra=["-o", f"{n}.png"],
                ),
                "queries": charts.reproduce(n, rid, store=store, device=device, peak_hbm_gbps=hbm_gbps),
            }
            for n in gpu_panels.charts(kind, list(charts.CHARTS))
        ],
    }


def _tiles(v: dict[str, Any]) -> list[tuple[str, str]]:
    """The verdict's headline tiles: bound, HBM utilisation, evidence, capture, scaling, mean step."""
    return [
        ("bound", v.get("bound") or "–"),
        (
            "HBM utilisation while computing"
            + (f" (rank {v['hbm_utilization_rank']})" if v.get("hbm_utilization_rank") is not None else ""),
            fmt_value(v.get("hbm_utilization"), "utilization")
            if v.get("hbm_utilization") is not None
            else ("unresolved" if v.get("hbm_mean_utilization") is not None else "not known"),
        ),
        ("HBM evidence", str((v.get("hbm_evidence") or {}).get("grade") or "–")),
        ("ranks captured", _ranks_tile(v.get("capture") or {})),
        # a scaling efficiency needs a baseline run; without one the tile is the compute fraction, named so
        (
            (
                "scaling efficiency (" + str(v.get("scaling_method")).removeprefix("baseline:") + ")",
                f"{v['scaling_efficiency']:.2f}",
            )
            if v.get("scaling_efficiency") is not None
            else (
                "compute fraction",
                f"{v['compute_fraction']:.2f}" if v.get("compute_fraction") is not None else "–",
            )
        ),
        ("mean step", fmt_value(v.get("mean_step_ms"), "mean_step_ms")),
    ]


def _meta(rep: Any, info: dict[str, Any], baseline: str | None) -> list[tuple[str, str]]:
    """The page's provenance table: the run, the device and peaks used, the versions."""
    from .. import findings
    from ..version import __version__

    used_peaks = rep.device.get("peaks") or {}
    return [
        ("run", rep.run_id),
        ("source", str(info.get("source", "–"))),
        ("format", str(info.get("format", "–"))),
        ("parser version", str(info.get("parser_version", "–"))),
        ("device in the dump", str(info.get("device") or "not recorded")),
        ("ranks", ", ".join(map(str, info.get("ranks", [])))),
        ("ingested at", str(info.get("ingested_at", "–"))),
        ("device preset used", str(rep.device.get("preset") or "detected from the dump")),
        ("how the peaks were chosen", str(rep.device.get("note") or "–")),
        ("HBM peak", fmt_value(used_peaks.get("peak_hbm_bps"), "peak_hbm_bps")),
        ("UB peak", fmt_value(used_peaks.get("peak_ub_bps"), "peak_ub_bps")),
        ("L2 peak", fmt_value(used_peaks.get("peak_l2_bps"), "peak_l2_bps")),
        (
            "peak FLOP/s",
            f"{used_peaks['peak_flops'] / 1e12:,.0f} TFLOP/s" if used_peaks.get("peak_flops") else "–",
        ),
        ("baseline run", baseline or "none (scaling efficiency = compute fraction)"),
        ("rules version", str(rep.rules_version)),
        ("findings format", findings.FORMAT_ID),
        ("traceql version", __version__),
        ("generated at", _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()),
        ("chart libraries (inlined)", ", ".join(f"{k} {x}" for k, x in bundle_versions().items())),
    ]


def _what_changed(
    store: Any, baseline: str | None, rid: str, device: str | None, peaks: Any, ch: _Charts
) -> Any:
    """The "what changed" section against --baseline (traceql.compare.report); None without a baseline."""
    if not baseline:
        return None
    from ..compare.report import section

    try:
        s = section(store, baseline, rid, device=device, peaks=peaks)
    except TraceQLError as e:  # the comparison failing must not lose the rest of the report
        ch.problems.append(f"what changed: {e}")
        return None
    ch.specs.update(s["specs"])
    return s["view"]


def render_report(
    store: Any = None,
    run_id: str | None = None,
    *,
    device: str | None = None,
    peaks: Any = None,
    baseline: str | None = None,
) -> str:
    """The report for one run (default: the most recently ingested) as one HTML string."""
    from markupsafe import Markup

    ctx = build_context(store, run_id, device=device, peaks=peaks, baseline=baseline)
    specs = ctx.pop("specs")
    return render_page(
        "report.html.j2",
        bundle_cache_dir(store),
        specs_json=Markup(script_json(specs)),
        libs=bundle_versions(),
        **ctx,
    )


def write_report(path: str | Path, store: Any = None, run_id: str | None = None, **kw: Any) -> Path:
    p = Path(path)
    if p.suffix.lower() not in (".html", ".htm"):
        raise TraceQLError(f"{p}: the report is an HTML file; give a path ending in .html")
    from ..out_file import check, write_text

    check(p)  # a directory at the path: refused before the report is built
    write_text(p, render_report(store, run_id, **kw))  # temp + rename: an interrupt leaves no half report
    return p


def _ranks_tile(cap: dict[str, Any]) -> str:
    """'2 of 8', '2 of at least 8' or '2 (job size not recorded)': the job size as the dump records it."""
    from ..findings.coverage import job_text

    n = cap.get("ranks_captured") or "–"
    if cap.get("job_ranks") is None:
        return f"{n} (job size not recorded)"
    return f"{n} of {job_text(cap)}"
