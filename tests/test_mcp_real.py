"""Every `traceql mcp` tool answer on real dumps (../shared/real_traces, skipped when absent) stays under the
8,000-character cap, parses as a traceql.mcp/1 answer, and grades every number it states (a dict with a
`shown` reading has a `grade`). Driven through the SDK's in-memory transport: the same server and answers as
over stdio, without a subprocess per dump.

Dumps: the msinsight torch_npu text Level0 and Level1 pair (Ascend 910B, 2 ranks), its db export, an HTA
Kineto trace (NVIDIA, alexnet) and a TraceLens Kineto trace (H100, Qwen 0.5B: 18k events, long kernel names).
Expected values are invariants (the cap, the grades), not numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DB_LEVEL1, HTA, LEVEL0, LEVEL1, SHARED, real

pytest.importorskip("mcp", reason="the MCP SDK is the mcp extra: pip install -e '.[mcp]'")

import anyio  # noqa: E402  # installed with mcp

pytestmark = pytest.mark.real

CAP = 8000
DUMPS = {
    "level1": LEVEL1,
    "level0": LEVEL0,
    "dblevel1": DB_LEVEL1,
    "alexnet": HTA / "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "qwen_h100": SHARED / "AMD-AGI__TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
}
GRADES = {"measured", "pipe", "sampled", "modeled", "insufficient", "unresolved"}


def _calls(run: str, path: Path, library: list[str]) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("ingest", {"path": str(path), "name": run}),
        ("verdict", {"run": run}),
        ("findings", {"run": run, "limit": 100}),
        ("sql", {"statement": "SELECT * FROM kernels", "run": run, "limit": 500}),
        ("sql", {"statement": "SELECT * FROM host_ops", "run": run, "limit": 500}),
    ]
    # every library query that needs no argument, at the largest row limit an agent may ask for
    return calls + [("query", {"name": n, "run": run, "limit": 500}) for n in library]


def _ungraded(v: Any, where: str = "") -> list[str]:
    """Paths of dicts that state a number for reading (`shown`) without a grade."""
    out: list[str] = []
    if isinstance(v, dict):
        if v.get("shown") is not None and v.get("grade") not in GRADES:
            out.append(where)
        for k, x in v.items():
            out += _ungraded(x, f"{where}.{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _ungraded(x, f"{where}[{i}]")
    return out


def test_every_answer_on_real_dumps_fits_the_cap(tmp_path: Path) -> None:
    from mcp import Client

    from traceql import queries
    from traceql.mcp.server import build
    from traceql.mcp.tools import Tools

    for p in DUMPS.values():
        real(p)
    library = [s.name for s in queries.list_queries() if not any(p.required for p in s.params)]
    calls: list[tuple[str, dict[str, Any]]] = [("list_runs", {}), ("explain", {})]
    for run, path in DUMPS.items():
        calls += _calls(run, path, library)
    calls += [
        ("compare", {"base": "level0", "cand": "level1"}),
        ("compare", {"base": "alexnet", "cand": "qwen_h100"}),
        ("list_runs", {}),
    ]

    async def go() -> list[tuple[str, dict[str, Any], Any]]:
        async with Client(build(Tools(store=str(tmp_path / "store"), cap=CAP))) as c:
            return [(name, args, await c.call_tool(name, args)) for name, args in calls]

    problems: list[str] = []
    truncated = 0
    for name, args, r in anyio.run(go):
        text = r.content[0].text
        label = f"{name}({args.get('run') or args.get('name') or args.get('base') or ''})"
        if r.is_error:
            problems.append(f"{label}: error {text}")
            continue
        if len(text) > CAP:
            problems.append(f"{label}: {len(text)} characters")
        ans = json.loads(text)
        assert ans["format"] == "traceql.mcp/1" and ans["tool"] == name
        truncated += bool(ans["truncated"])
        if name != "explain":  # the legend defines the word `shown`; it states no number
            problems += [f"{label}: ungraded number at {w}" for w in _ungraded(ans)]
    assert not problems, problems
    # the limits were exercised, not only met: wide tables at 500 rows must have been cut to the cap
    assert truncated >= len(DUMPS)
