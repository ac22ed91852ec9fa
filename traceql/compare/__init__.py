"""`traceql compare BASE CAND`: did the fix work? Step time and where it went, memory traffic with its evidence
grade, operators added/removed/changed, findings resolved/new/persisting, and a verdict only when the two
runs are comparable.

    from traceql.compare import compare
    c = compare(store, "before", "after")
    c.comparable, c.verdict["verdict"]        # True, "improvement"
    c.to_dict()                               # JSON format "traceql.compare/1" (README: Compare)

Modules: model.py (dataclasses, FORMAT_ID), gather.py (per-run numbers via queries/*.sql), verdict.py
(comparability, the noise-aware verdict, the gate), diff.py (deltas), render.py (text/markdown), charts.py.
"""

from __future__ import annotations

from typing import Any

from .model import FORMAT_ID, MODES, VERDICTS, Comparison

__all__ = ["compare", "Comparison", "FORMAT_ID", "MODES", "VERDICTS", "NotComparableError", "load_name_map"]

from ..errors import TraceQLError


class NotComparableError(TraceQLError):
    """The two runs differ too much for a verdict (the message says which way)."""


def load_name_map(path: Any) -> dict[str, str]:
    """A name map file for --mode cross: JSON or TOML {"map": {"<regex on the base kernel/op>": "<cand name>"}}
    (or the mapping at top level), e.g. CUDA kernel names -> Ascend op types."""
    import json
    import re
    from pathlib import Path

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise TraceQLError(f"{p}: cannot read the name map: {e.strerror}") from None
    try:
        if p.suffix.lower() == ".toml":
            import tomllib  # type: ignore[import-not-found,unused-ignore]

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (ValueError, ImportError) as e:
        raise TraceQLError(f"{p}: not a JSON/TOML name map: {e}") from None
    m = data.get("map", data) if isinstance(data, dict) else None
    if not isinstance(m, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in m.items()):
        raise TraceQLError(f'{p}: expected {{"map": {{"regex": "name", ...}}}} with string keys and values')
    for k in m:
        try:
            re.compile(k)
        except re.error as e:
            raise TraceQLError(f"{p}: bad regex {k!r}: {e}") from None
    return dict(m)


def compare(
    store: Any,
    base: str,
    cand: str,
    *,
    mode: str = "same",
    device: str | None = None,
    peaks: Any = None,
    with_findings: bool = True,
    min_effect: float = 0.01,
    gate: float | None = None,
    name_map: dict[str, str] | None = None,
    with_chains: bool = True,
) -> Comparison:
    """Compare run `cand` against run `base` (both in the store). Never raises for incomparable runs: the
    result says comparable=False and why (the CLI turns that into exit 1). with_findings / with_chains: the
    findings diff and the fused-group traffic (fusion_chains), the two costliest parts on big runs."""
    from ..analysis import Analysis
    from . import diff, verdict
    from .gather import gather

    if mode not in MODES:
        raise TraceQLError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    cross = mode == "cross"
    # one run after the other, each in its own analysis session (its query cache serves the comparison and its
    # findings): DuckDB already spreads each query over its threads, and gathering both runs at once measured
    # slower on 2 cores (8 x 1 GB: 45 s vs 38 s wall) at twice the peak memory (4.2 vs 2.3 GB)
    kw: dict[str, Any] = {"with_findings": with_findings, "cross": cross, "with_chains": with_chains}
    from ..findings.windows import session_has_steps

    with Analysis(store, base, device=device, peaks=peaks) as session:
        b = gather(session, **kw)
        steps = session_has_steps(session)
    with Analysis(store, cand, device=device, peaks=peaks) as session:
        c = gather(session, **kw)
        steps = steps or session_has_steps(session)
    diff.harmonize(b, c)
    refusals, differences, hidden = verdict.comparability(b, c, mode)
    hidden += b.notes + c.notes
    comparable = not refusals
    v = None
    if comparable:
        v = verdict.decide(verdict.per_step_times(b), verdict.per_step_times(c), min_effect=min_effect)
    return Comparison(
        base=b,
        cand=c,
        mode=mode,
        comparable=comparable,
        refusals=refusals,
        differences=differences,
        hidden=hidden,
        verdict=v,
        step=diff.step_split(b, c),
        ranks=diff.per_rank(b, c),
        traffic=diff.traffic(b, c, rename=name_map if cross else None),
        operators=diff.operators(b, c, cross=cross, rename=name_map),
        findings=diff.findings_diff(b, c),
        framework=diff.framework_diff(b, c),
        gate=verdict.gate(v, gate) if gate is not None else None,
        windows_only=not steps,
    )
