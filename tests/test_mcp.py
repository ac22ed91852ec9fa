"""`traceql mcp` through the official MCP SDK's own clients: a real stdio client starting `traceql mcp` as a
subprocess (one conversation, its answers checked by the tests below), and the SDK's in-memory transport for
the cap, the timeout and the legend.

Expected values: the kernel count comes from the sample's raw kernel_details.csv files (csv module); the
verdict fields are compared with the `traceql findings --format json` document the server consumes (the
server must pass them through, not judge again); the rest are invariants (caps, grades, refusals)."""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES

mcp = pytest.importorskip("mcp", reason="the MCP SDK is the mcp extra: pip install -e '.[mcp]'")

import anyio  # noqa: E402  # installed with mcp

NPU = SAMPLES / "torch_npu_2rank"
CAP = 8000
TOOLS = {"list_runs", "ingest", "verdict", "findings", "query", "sql", "compare", "explain"}


def _text(result: Any) -> str:
    assert len(result.content) == 1, result
    text: str = result.content[0].text
    return text


def _answer(result: Any, cap: int = CAP) -> dict[str, Any]:
    assert not result.is_error, _text(result)
    text = _text(result)
    assert len(text) <= cap, (len(text), text[:300])
    ans: dict[str, Any] = json.loads(text)
    assert ans["format"] == "traceql.mcp/1"
    return ans


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


async def _conversation(store: Path, outside: Path, errlog: Any) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    # `traceql mcp` as an agent host starts it: a subprocess speaking MCP on stdin/stdout; the environment is
    # passed whole so the subprocess imports the same traceql (PYTHONPATH of a worktree, the CI's venv)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "traceql", "mcp", "--store", str(store)], env=dict(os.environ)
    )
    out: dict[str, Any] = {}
    async with Client(params, read_timeout_seconds=240) as c:
        out["tools"] = (await c.list_tools()).tools
        out["resources"] = (await c.list_resources()).resources
        out["empty_runs"] = await c.call_tool("list_runs", {})
        out["ingest"] = await c.call_tool("ingest", {"path": str(NPU), "name": "npu"})
        out["runs"] = await c.call_tool("list_runs", {})
        out["verdict"] = await c.call_tool("verdict", {"run": "npu"})
        out["findings"] = await c.call_tool("findings", {"run": "npu", "limit": 3})
        out["sql"] = await c.call_tool(
            "sql",
            {
                "statement": "SELECT name, op_type, dur_ns, hbm_read_bytes FROM kernels",
                "run": "npu",
                "limit": 5,
            },
        )
        out["sql_write"] = await c.call_tool("sql", {"statement": "CREATE TABLE t AS SELECT 1"})
        out["sql_copy"] = await c.call_tool("sql", {"statement": f"COPY (SELECT 1) TO '{outside}'"})
        csv_file = NPU / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
        out["sql_file"] = await c.call_tool("sql", {"statement": f"SELECT * FROM read_csv('{csv_file}')"})
        out["sql_url"] = await c.call_tool(
            "sql", {"statement": "SELECT * FROM read_parquet('https://example.com/x.parquet')"}
        )
        out["query"] = await c.call_tool(
            "query", {"name": "op_hbm_bytes", "run": "npu", "params": {"top_n": 3}}
        )
        out["bad_run"] = await c.call_tool("verdict", {"run": "nope"})
        out["bad_path"] = await c.call_tool("ingest", {"path": str(store.parent / "no-such-dump")})
        out["schema"] = await c.read_resource("traceql://answer-schema")
    return out


@pytest.fixture(scope="module")
def talk(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("mcp")
    before = _snapshot(NPU)
    with open(tmp / "server.err", "w") as errlog:
        out = anyio.run(_conversation, tmp / "store", tmp / "outside.csv", errlog)
    out["dump_unchanged"] = before == _snapshot(NPU)
    out["outside_written"] = (tmp / "outside.csv").exists()
    out["stderr"] = (tmp / "server.err").read_text()
    out["store"] = tmp / "store"
    return out


def test_lists_the_tools_and_resources(talk: dict[str, Any]) -> None:
    tools = {t.name: t for t in talk["tools"]}
    assert set(tools) == TOOLS
    assert all(t.description for t in tools.values())
    # an agent host may run read-only tools without asking: only ingest writes (into the store)
    assert tools["sql"].annotations.read_only_hint is True
    assert tools["ingest"].annotations.read_only_hint is False
    uris = {str(r.uri) for r in talk["resources"]}
    assert {"traceql://schema", "traceql://queries", "traceql://answer-schema"} <= uris


def test_ingest_over_stdio_reads_the_dump_only(talk: dict[str, Any]) -> None:
    assert _answer(talk["empty_runs"])["total_runs"] == 0
    ing = _answer(talk["ingest"])
    assert ing["run"] == "npu" and ing["ranks"] == 2
    assert [r["run"] for r in _answer(talk["runs"])["runs"]] == ["npu"]
    assert talk["dump_unchanged"], "ingest wrote into the dump folder"


def test_verdict_is_the_findings_documents(talk: dict[str, Any]) -> None:
    from traceql import findings

    v = _answer(talk["verdict"])
    doc = findings.evaluate(talk["store"], "npu").to_dict()["verdict"]
    assert (v["bound"], v["confidence"], v["headline"]) == (doc["bound"], doc["confidence"], doc["headline"])
    assert v["evidence"]["grade"] == doc["hbm_evidence"]["grade"]
    nums = {n["name"]: n for n in v["numbers"]}
    # the exact value beside the readable one, and a grade on each number stated
    assert nums["hbm_utilization"]["value"] == doc["hbm_utilization"]
    assert nums["hbm_utilization"]["grade"] == doc["hbm_evidence"]["grade"]
    assert all(n["grade"] in ("measured", "pipe", "sampled", "modeled", "insufficient") for n in v["numbers"])
    for n in v["numbers"]:
        if n["unit"] == "%":
            assert float(n["shown"].rstrip("%")) == pytest.approx(n["value"] * 100, rel=5e-3)


def test_findings_ranked_by_saving_each_graded(talk: dict[str, Any]) -> None:
    f = _answer(talk["findings"])
    assert f["returned_findings"] == len(f["findings"]) == min(3, f["fired"])
    shares = [x["saving"]["share_of_step"] or 0.0 for x in f["findings"]]
    assert shares == sorted(shares, reverse=True)
    for x in f["findings"]:
        assert x["grade"] and x["saving"]["grade"] == x["grade"]
        assert x["query"].startswith("traceql query ")
    assert f["checks"] == f["fired"] + len(f["not_fired"])


def test_sql_capped_with_the_total(talk: dict[str, Any]) -> None:
    s = _answer(talk["sql"])
    # independent: the kernel rows of the sample's two kernel_details.csv files, counted with the csv module
    raw = 0
    for p in NPU.glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"):
        with open(p, newline="", encoding="utf-8") as fh:
            raw += sum(1 for _ in csv.DictReader(fh))
    assert raw == 120
    assert (s["total_rows"], s["returned_rows"], len(s["rows"])) == (raw, 5, 5)
    assert s["how_to_get_more"] and "limit" in s["how_to_get_more"]
    assert [c["name"] for c in s["columns"]] == ["name", "op_type", "dur_ns", "hbm_read_bytes"]
    assert s["truncated"] is False


def test_sandbox_holds_through_mcp(talk: dict[str, Any]) -> None:
    for key in ("sql_write", "sql_copy", "sql_file", "sql_url"):
        r = talk[key]
        assert r.is_error, (key, _text(r))
        assert "\n" not in _text(r) and "Traceback" not in _text(r)
    assert "refused" in _text(talk["sql_write"]) and "--write" not in _text(talk["sql_write"])
    assert "refused" in _text(talk["sql_copy"])
    assert not talk["outside_written"]
    assert "disabled" in _text(talk["sql_file"]) and "--allow-files" not in _text(talk["sql_file"])
    assert "disabled" in _text(talk["sql_url"]) or "Permission" in _text(talk["sql_url"])


def test_query_errors_and_sizes(talk: dict[str, Any]) -> None:
    q = _answer(talk["query"])
    assert q["query"] == "op_hbm_bytes" and q["total_rows"] <= 3
    assert "hbm_bytes_source" in q["grade_columns"]
    assert "no run 'nope'" in _text(talk["bad_run"]) and talk["bad_run"].is_error
    assert talk["bad_path"].is_error and "no-such-dump" in _text(talk["bad_path"])
    for key in ("bad_run", "bad_path"):
        assert "\n" not in _text(talk[key])
    assert "Traceback" not in talk["stderr"]


def test_every_answer_fits_its_schema(talk: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads(talk["schema"].contents[0].text)
    jsonschema.Draft202012Validator.check_schema(schema)
    for key in ("empty_runs", "ingest", "runs", "verdict", "findings", "sql", "query"):
        jsonschema.validate(_answer(talk[key]), schema)


# ---- in-memory transport ----------------------------------------------------------------------------------
def _memory(store: Path, calls: list[tuple[str, dict[str, Any]]], **kw: Any) -> list[Any]:
    from mcp import Client

    from traceql.mcp.server import build
    from traceql.mcp.tools import Tools

    async def go() -> list[Any]:
        async with Client(build(Tools(store=str(store), **kw))) as c:
            return [await c.call_tool(name, args) for name, args in calls]

    return anyio.run(go)


@pytest.fixture(scope="module")
def npu_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from traceql.ingest import ingest

    store = tmp_path_factory.mktemp("mem") / "store"
    ingest(NPU, store=store, name="npu")
    return store


def test_in_memory_cap_truncates_and_says_so(npu_store: Path) -> None:
    small = 3000  # room for the kernels table's column list, not for its 120 rows
    r, e, g = _memory(
        npu_store,
        [
            ("sql", {"statement": "SELECT * FROM kernels", "limit": 500}),
            ("explain", {}),
            ("findings", {"run": "npu", "limit": 100}),
        ],
        cap=small,
    )
    s = _answer(r, small)
    assert s["truncated"]["dropped_items"]["rows"] == 120 - len(s["rows"])
    assert s["total_rows"] == 120 and s["truncated"]["how_to_get_more"]
    assert len(_text(e)) <= small
    f = _answer(g, small)
    assert f["truncated"] and f["returned_findings"] == len(f["findings"]) < f["fired"] + 1


def test_in_memory_timeout_stops_a_query(npu_store: Path) -> None:
    import time

    t0 = time.monotonic()
    (r,) = _memory(
        npu_store, [("sql", {"statement": "SELECT count(*) FROM range(100000000000)"})], timeout_s=0.5
    )
    assert r.is_error and "limit" in _text(r)
    assert time.monotonic() - t0 < 30


def test_in_memory_explain_and_limits(npu_store: Path) -> None:
    from traceql import grades

    every, one, bad, lim = _memory(
        npu_store,
        [
            ("explain", {}),
            ("explain", {"term": "Insufficient"}),
            ("explain", {"term": "bogus"}),
            ("sql", {"statement": "SELECT 1", "limit": 0}),
        ],
    )
    terms = _answer(every)["terms"]
    assert set(grades.GRADES) <= set(terms)  # every grade traceql can give has a legend entry
    assert "Do NOT state a number" in _answer(one)["terms"]["insufficient"]
    assert bad.is_error and "known terms" in _text(bad)
    assert lim.is_error and "1..500" in _text(lim)


def test_cli_help_has_an_example(cli: Any) -> None:
    r = cli("mcp", "--help")
    assert r.code == 0 and "traceql mcp --store" in r.out
    r = cli("mcp", "--max-chars", "10")
    assert r.code == 2


def test_library_query_is_interrupted_at_its_limit(npu_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The query tool's limit stops the DuckDB statement itself (the cursor queries.run opens is interrupted),
    not only the wait: a library query stood in for by one that would run for minutes."""
    import time

    from traceql import queries
    from traceql.analysis import Analysis
    from traceql.errors import QueryError
    from traceql.mcp.sandboxed import run_library_query

    def slow(name: str, store: Any, *, con: Any, **kw: Any) -> Any:
        cur = con.cursor()
        return cur.sql("SELECT count(*) FROM range(100000000000) a, range(10) b").arrow()

    monkeypatch.setattr(queries, "run", slow)
    with Analysis(npu_store, "npu") as session:
        t0 = time.monotonic()
        with pytest.raises(QueryError, match="stopped after the 0.5 s limit"):
            run_library_query(session, "op_hbm_bytes", {}, 0.5)
        # interrupted, not abandoned: without interrupt() the join after the limit waits its full 10 s
        assert time.monotonic() - t0 < 5


def test_in_memory_compare_passes_the_comparisons_verdict(npu_store: Path) -> None:
    import jsonschema

    from traceql.compare import compare
    from traceql.mcp.schema import answer_schema

    (r,) = _memory(npu_store, [("compare", {"base": "npu", "cand": "npu"})])
    a = _answer(r)
    jsonschema.validate(a, answer_schema())
    doc = compare(npu_store, "npu", "npu").to_dict()
    # the comparison's own verdict, not a second judgement: a run against itself is neutral
    assert (a["verdict"], a["why"], a["comparable"]) == (
        doc["verdict"]["verdict"],
        doc["verdict"]["why"],
        True,
    )
    assert a["verdict"] == "neutral"
    assert all(n["grade"] for n in a["step"]) and all(p["grade"] for p in a["step_parts"])
    assert all(p["delta"] == 0 for p in a["step_parts"])


def test_verdict_then_findings_evaluate_the_run_once_until_it_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's usual first calls, verdict then findings, share one evaluation of the run; a replaced run
    (a new stored generation under the same name) is evaluated again. Counted by wrapping findings.evaluate."""
    from traceql import findings
    from traceql.ingest import ingest
    from traceql.mcp.tools import Tools

    store = tmp_path / "store"
    ingest(NPU, store=store, name="npu", workers=1)
    calls: list[str] = []
    real = findings.evaluate

    def counted(*a: Any, **k: Any) -> Any:
        calls.append(str(a[1] if len(a) > 1 else k.get("run_id")))
        return real(*a, **k)

    monkeypatch.setattr(findings, "evaluate", counted)
    tools = Tools(store=str(store))
    v = json.loads(tools.verdict("npu"))
    f = json.loads(tools.findings("npu", limit=100))
    assert calls == ["npu"]
    assert v["run"] == f["run"] == "npu"
    ingest(NPU, store=store, name="npu", replace=True, workers=1)
    json.loads(tools.verdict("npu"))
    assert calls == ["npu", "npu"]
