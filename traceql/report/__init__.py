"""The self-contained HTML report: findings first, the charts that prove them, run metadata (traceql.report.render).

from traceql.report import render_report, write_report
write_report("resnet.html", store, "resnet-8card", device="ascend910b")
"""

from __future__ import annotations

from typing import Any

__all__ = ["render_report", "write_report"]


def render_report(store: Any = None, run_id: str | None = None, **kw: Any) -> str:
    from .render import render_report as _render

    return _render(store, run_id, **kw)


def write_report(path: Any, store: Any = None, run_id: str | None = None, **kw: Any) -> Any:
    from .render import write_report as _write

    return _write(path, store, run_id, **kw)
