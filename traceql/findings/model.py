"""The findings model: Finding, Report and the severities (JSON format: see traceql.findings)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import TraceQLError
from ..jsonsafe import json_safe

FORMAT_ID = "traceql.findings/2"


SEVERITIES = ("info", "low", "medium", "high", "critical")


def severity_rank(level: str) -> int:
    try:
        return SEVERITIES.index(level)
    except ValueError:
        raise TraceQLError(f"unknown severity {level!r}; expected one of {', '.join(SEVERITIES)}") from None


@dataclass
class Finding:
    id: str
    title: str
    severity: str  # info | low | medium | high | critical ("info" when not fired)
    optimisation: str  # the article's optimisation / checklist item it maps to (rules.toml)
    checklist_step: int
    fired: bool
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    top_ops: list[dict[str, Any]] = field(default_factory=list)
    saving: dict[str, Any] = field(default_factory=dict)  # {value, unit, method, share_of_step}
    query: str = ""  # the re-runnable `traceql query ...` command
    suggestion: str = ""
    # what the finding's numbers rest on (traceql.grades): {"grade": measured|sampled|modeled|insufficient, ...}
    grade: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "severity": self.severity,
            "optimisation": self.optimisation,
            "checklist_step": self.checklist_step,
            "fired": self.fired,
            "message": self.message,
            "evidence": json_safe(self.evidence),
            "top_ops": json_safe(self.top_ops),
            "saving": json_safe(self.saving),
            "query": self.query,
            "suggestion": self.suggestion,
            "grade": json_safe(self.grade),
        }


@dataclass
class Report:
    run_id: str
    verdict: dict[str, Any]
    findings: list[Finding]
    device: dict[str, Any] = field(default_factory=dict)
    rules_version: int = 1
    late_queries: list[str] = field(
        default_factory=list, repr=False
    )  # diagnostics: queries run outside the plan

    @property
    def fired(self) -> list[Finding]:
        return [f for f in self.findings if f.fired]

    def finding(self, id_: str) -> Finding:
        for f in self.findings:
            if f.id == id_:
                return f
        raise KeyError(id_)

    def worst(self) -> str | None:
        fired = self.fired
        return max((f.severity for f in fired), key=severity_rank) if fired else None

    def at_least(self, level: str) -> list[Finding]:
        """Fired findings at or above `level`."""
        n = severity_rank(level)
        return [f for f in self.fired if severity_rank(f.severity) >= n]

    def to_dict(self) -> dict[str, Any]:
        from ..version import __version__

        by_sev: dict[str, int] = {}
        for f in self.fired:
            by_sev[f.severity] = by_sev.get(f.severity, 0) + 1
        return {
            "format": FORMAT_ID,
            "run_id": self.run_id,
            "generated_by": f"traceql {__version__}",
            "rules_version": self.rules_version,
            "device": json_safe(self.device),
            "verdict": json_safe(self.verdict),
            "findings": [f.to_dict() for f in self.findings],
            "summary": {
                "checks": len(self.findings),
                "fired": len(self.fired),
                "worst": self.worst(),
                "by_severity": {k: by_sev[k] for k in SEVERITIES if k in by_sev},
            },
        }

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, allow_nan=False)

    def to_markdown(self, include_silent: bool = False) -> str:
        from .text import markdown

        return markdown(self, include_silent)
