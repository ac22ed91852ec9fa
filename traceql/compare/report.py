"""The report's "what changed" section (`traceql report --run CAND --baseline BASE`): the comparison's verdict,
comparability, step split, traffic and findings diff as template rows, plus its two chart specs."""

from __future__ import annotations

from typing import Any

from ..commandline import command
from .render import dgb_text, dms_text, gb_text, headline, ms_text


def section(
    store: Any, baseline: str, run_id: str, *, device: str | None = None, peaks: Any = None
) -> dict[str, Any]:
    """{"view": rows for _what_changed.html.j2, "specs": {chart name: Vega-Lite spec}}."""
    from ..charts import to_spec
    from . import compare
    from .charts import step_split_chart, traffic_delta_chart

    d = compare(store, baseline, run_id, device=device, peaks=peaks).to_dict()
    st, tr = d["step"], d["traffic"]
    f = d.get("findings") or {}
    view = {
        "headline": headline(d),
        "comparable": d["comparability"]["comparable"],
        "verdict": (d.get("verdict") or {}).get("verdict") or "not comparable",
        "differences": [
            x["effect"] if x["effect"].startswith(x["aspect"]) else f"{x['aspect']}: {x['effect']}"
            for x in d["comparability"]["differences"]
        ],
        "hidden": d["comparability"]["hidden_by_difference"],
        "steps": [
            (
                "step window",
                ms_text(st["wall_ns"]["base"]),
                ms_text(st["wall_ns"]["cand"]),
                dms_text(st["wall_ns"]["delta"]),
            )
        ]
        + [
            (p["label"], ms_text(p["base"]), ms_text(p["cand"]), dms_text(p["delta"]))
            for p in st["parts"].values()
        ],
        "traffic": [
            (
                r["op_type"],
                gb_text((r["base"] or {}).get("hbm_bytes_per_step")),
                gb_text((r["cand"] or {}).get("hbm_bytes_per_step")),
                dgb_text(r["delta"]["hbm_bytes_per_step"]),
                f"{(r['base'] or {}).get('grade', 'absent')} / {(r['cand'] or {}).get('grade', 'absent')}",
            )
            for r in tr["by_op_type"][:12]
        ],
        "ops": d["operators"]["counts"],
        "findings": [
            (k, x["id"], ((x.get("then") if k == "resolved" else x.get("now")) or {}).get("message", ""))
            for k in ("resolved", "new", "persisting")
            for x in f.get(k, [])
        ],
        "base": baseline,
        "command": command("compare", baseline, run_id, store=store),
        "charts": [
            {"name": "compare_step_split", "anchor": "chart-compare_step_split"},
            {"name": "compare_traffic", "anchor": "chart-compare_traffic"},
        ],
    }
    specs = {
        "compare_step_split": to_spec(step_split_chart(d)),
        "compare_traffic": to_spec(traffic_delta_chart(d)),
    }
    return {"view": view, "specs": specs}
