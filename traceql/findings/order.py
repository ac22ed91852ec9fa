"""The order findings are shown in: by impact (estimated saving per step, then severity), not by checklist step.

The checklist step stays on each finding as a label (where it sits in the article's checklist); a reader asks
"what should I fix first", which is the biggest saving. Checks that did not fire follow, in checklist order.
The order is stable (ties keep checklist order, then id), so JSON output does not reshuffle between runs."""

from __future__ import annotations

from collections.abc import Iterable

from .model import Finding, severity_rank

# saving units a finding may carry, as milliseconds per step (base.saving_of writes "ms/step")
_MS_PER_UNIT = {"ms/step": 1.0, "us/step": 1e-3, "s/step": 1e3}


def saving_ms(f: Finding) -> float | None:
    """The finding's estimated saving in ms per step, or None when it has none (diagnosis checks) or its unit
    is not a time per step (it then cannot be ranked against the others)."""
    v = f.saving.get("value")
    scale = _MS_PER_UNIT.get(str(f.saving.get("unit")))
    if v is None or scale is None:
        return None
    return float(v) * scale


def impact_key(f: Finding) -> tuple[int, float, int, int, str]:
    """Sort key: fired first; then the larger saving (none counts as 0); then the worse severity; then the
    checklist step and id (stable ties)."""
    s = saving_ms(f)
    return (
        0 if f.fired else 1,
        -(s or 0.0) if f.fired else 0.0,
        -severity_rank(f.severity),
        f.checklist_step,
        f.id,
    )


def by_impact(findings: Iterable[Finding]) -> list[Finding]:
    """The findings in display order (markdown, table, JSON and the report all use this one order)."""
    return sorted(findings, key=impact_key)
