"""The device itself: the AI Core below its rated clock (frequency throttling, msprof-analyze's advisor check).
The logic is queries/aicore_freq.sql; this only words it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import decide, make_finding, saving_of, template_values, to_ms
from ..context import AICORE_FREQ
from ..model import Finding
from ..registry import check

if TYPE_CHECKING:  # pragma: no cover
    from ..context import Context
    from ..rules import Rule


@check("aicore_freq", AICORE_FREQ)
def check_aicore_freq(ctx: Context, rule: Rule) -> Finding:
    rows = [r for r in ctx.read(AICORE_FREQ) if r["scope"] == "rank"]
    if not rows:
        return make_finding(ctx, rule, fired=False, variant="no_data", values=template_values(rule, ctx))
    if all(r["rated_mhz"] is None for r in rows):
        lo = min((m for r in rows if (m := r["min_mhz"]) is not None), default=None)
        return make_finding(
            ctx, rule, fired=False, variant="unrated", values=template_values(rule, ctx, min_mhz=lo)
        )
    hot = [r for r in rows if r["throttled"]]
    worst = max(rows, key=lambda r: r["decrease_ratio"] or 0)
    lost_ns = sum((r["dur_ns"] or 0) * max(r["decrease_ratio"] or 0, 0) for r in hot)
    per_step = ctx.per_step(lost_ns)
    share = ctx.share(per_step)
    vals = template_values(
        rule,
        ctx,
        n=len(hot),
        ranks=len(rows),
        rank=worst["rank"],
        avg_mhz=worst["avg_mhz"],
        rated_mhz=worst["rated_mhz"],
        ratio=worst["decrease_ratio"] or 0,
        min_mhz=worst["min_mhz"],
        source=worst["rated_source"],
        ms=to_ms(per_step) or 0.0,
    )
    ev = {
        "ranks": [
            {
                "rank": r["rank"],
                "avg_mhz": r["avg_mhz"],
                "min_mhz": r["min_mhz"],
                "rated_mhz": r["rated_mhz"],
                "rated_source": r["rated_source"],
                "decrease_ratio": r["decrease_ratio"],
                "throttled": r["throttled"],
            }
            for r in rows
        ]
    }
    saving = saving_of(to_ms(per_step), str(rule["saving_method"]), share)
    return decide(ctx, rule, unless=[(not hot, "ok")], share=share, values=vals, evidence=ev, saving=saving)
