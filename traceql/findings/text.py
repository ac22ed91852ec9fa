"""Text of findings: the rules' message templates (str.format with named fields) and the markdown renderer."""

from __future__ import annotations

import json
import string
from typing import TYPE_CHECKING, Any

from ..errors import TraceQLError
from ..jsonsafe import json_safe
from ..numbers import human_number

if TYPE_CHECKING:  # pragma: no cover
    from .model import Report


class _Fmt(string.Formatter):
    def __init__(self, lenient: bool = False) -> None:
        self.lenient = lenient

    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        if isinstance(key, str) and key not in kwargs:
            if self.lenient:
                return _Missing()
            raise KeyError(key)
        return super().get_value(key, args, kwargs)


class _Missing:
    def __format__(self, spec: str) -> str:
        return "..."


def render(template: str, values: dict[str, Any], where: str = "template", lenient: bool = False) -> str:
    """str.format with named fields; a missing field or a None formatted as a number is a rules bug (lenient:
    a missing field renders as '...', for suggestions of checks that did not fire and lack the numbers)."""
    try:
        return _Fmt(lenient).vformat(template, (), values).strip()
    except (KeyError, ValueError, TypeError, IndexError) as e:
        raise TraceQLError(
            f"{where}: cannot render with the check's values ({type(e).__name__}: {e})"
        ) from None


def fmt_cell(v: Any) -> str:
    if isinstance(v, float):
        return human_number(v)  # no scientific notation for people; JSON keeps the exact value
    if isinstance(v, (list, dict)):
        return json.dumps(json_safe(v), ensure_ascii=False)
    return "" if v is None else str(v)


def saving_text(saving: dict[str, Any]) -> str:
    """A saving for people: fixed decimals and its unit, "" when the check has none."""
    v = saving.get("value")
    if v is None:
        return ""
    return f"{v:.2f} {saving.get('unit') or ''}".strip()


def markdown(rep: Report, include_silent: bool) -> str:
    v = rep.verdict
    from .headline import verdict_markdown
    from .legend import LEGEND_POINTER

    out = [f"# traceql findings: run `{rep.run_id}`", "", *verdict_markdown(v)]
    if rep.device.get("note"):
        out += [f"Peaks: {rep.device['note']}.", ""]
    out += [
        f"Ordered by estimated saving, then severity; step = the checklist step. {LEGEND_POINTER}",
        "",
        "| saving | severity | check | step | fired | finding |",
        "|---|---|---|---|---|---|",
    ]
    for f in rep.findings:
        if f.fired or include_silent:
            msg = f.message.replace("|", "\\|").replace("\n", " ")
            out.append(
                f"| {saving_text(f.saving)} | {f.severity} | {f.id} | {f.checklist_step} "
                f"| {'yes' if f.fired else 'no'} | {msg} |"
            )
    for f in rep.findings:
        if not (f.fired or include_silent):
            continue
        out += [
            "",
            f"## {f.checklist_step}. {f.title} ({f.severity}{'' if f.fired else ', did not fire'})",
            "",
            f.message,
            "",
            f"- optimisation: {f.optimisation}",
        ]
        if f.saving.get("value") is not None:
            out.append(f"- estimated saving: {saving_text(f.saving)} ({f.saving.get('method', '')})")
        if f.suggestion and f.fired:
            out.append(f"- suggestion: {f.suggestion}")
        out.append(f"- query: `{f.query}`")
        if f.top_ops:
            cols = list(f.top_ops[0].keys())
            out += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            for row in f.top_ops[:10]:
                out.append("| " + " | ".join(fmt_cell(row.get(c)).replace("|", "\\|") for c in cols) + " |")
    return "\n".join(out) + "\n"
