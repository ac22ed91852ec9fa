"""findings/ reads query rows typed: through `ctx.read(Read)`, whose Read names the TypedDict of its query's rows
(traceql.rows, generated from the SQL headers), so mypy --strict checks every column a check reads.

Held here with `ast` over the source (no traceql output is involved):
- no `ctx.rows(...)` / `Context.rows`, and no `.to_pylist()` or `session.query(...)` outside context.py except the
  listed Arrow-column reads (they read one column of a per-window query without converting its rows);
- every `Read(...)` names its row type, and it is its query's (QUERY_ROWS, checked on the Read objects too);
- `dict[str, Any]` annotations in findings/ only where they are counted in DICT_ANY (output: evidence, template
  values, query params, grades, the verdict, the rules' data, the checks' own top_ops rows; context.py's raw
  cache under `read`). mypy rejects a TypedDict where `dict[str, Any]` is expected, so a query row cannot pass
  through one of these unnoticed. The counts may only shrink (kept exact, like test_function_length.py).

compare/ reads its queries through gather._read (typed the same way; held by the same ast check).

The last test runs mypy on a snippet against traceql/rows.py to show a misspelt column is a type error.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

FINDINGS = Path(__file__).resolve().parents[1] / "traceql" / "findings"
COMPARE = FINDINGS.parent / "compare"
ROWS_PY = FINDINGS.parent / "rows.py"

# Arrow reads that are not row reads: '<file>:<function>' -> why
ARROW_READS = {
    "phase_verdicts.py:per_window": "registers phases' Arrow table into its own SQL (rows typed: PhaseWindow)",
    "phase_verdicts.py:of": "one column (source) of phases, whose rows are one per window and rank",
    "windows.py:marker_windows": "one column (source) of phases, whose rows are one per window and rank",
}

# `dict[str, Any]` in annotations, per file under traceql/findings/ (output models, params, rules: see above)
DICT_ANY = {
    "base.py": 13,
    "bounds.py": 3,
    "checks/bandwidth.py": 5,
    "checks/communication.py": 14,
    "checks/compute.py": 1,
    "checks/memory.py": 7,
    "context.py": 17,
    "coverage.py": 6,
    "evaluate.py": 2,
    "gate.py": 3,
    "graph_capture.py": 6,
    "headline.py": 5,
    "model.py": 8,
    "phase_verdicts.py": 5,
    "roles.py": 2,
    "rules.py": 7,
    "system_evidence.py": 4,
    "text.py": 2,
    "verdict.py": 20,
    "windows.py": 2,
}


def _annotations(tree: ast.AST) -> Iterator[ast.expr]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if arg is not None and arg.annotation is not None:
                    yield arg.annotation
            if node.returns is not None:
                yield node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.annotation


def dict_any_counts(root: Path = FINDINGS) -> dict[str, int]:
    out: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        n = sum(ast.unparse(a).count("dict[str, Any]") for a in _annotations(tree))
        if n:
            out[path.relative_to(root).as_posix()] = n
    return out


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """(enclosing function name or '<module>', node) for every node."""

    def walk(node: ast.AST, fn: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            yield name, child
            yield from walk(child, name)

    yield from walk(tree, "<module>")


def _untyped_calls(tree: ast.AST, rel: str, allowed: dict[str, str]) -> Iterator[str]:
    for fn, node in _functions(tree):
        where = f"{rel}:{fn}"
        if isinstance(node, ast.FunctionDef) and node.name == "rows" and rel == "context.py":
            yield f"{where}: Context.rows (read rows with ctx.read(Read))"
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr, owner = node.func.attr, ast.unparse(node.func.value)
        if attr == "rows":
            yield f"{where}: .rows(...) (read rows with ctx.read(Read))"
        untyped = attr == "to_pylist" or (attr == "query" and "session" in owner)
        if untyped and rel != "context.py" and where not in allowed:
            yield f"{where}: .{attr}(...) outside context.py (read rows with ctx.read(Read))"


def _reads_without_rows(tree: ast.AST, rel: str) -> Iterator[str]:
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Read"):
            continue
        row = node.args[1] if len(node.args) > 1 else None
        if not (isinstance(row, ast.Name) and row.id.endswith("Row")):
            yield f"{rel}: {ast.unparse(node)} names no row type (traceql.rows.<Query>Row)"


def untyped_reads(root: Path = FINDINGS, allowed: dict[str, str] = ARROW_READS) -> list[str]:
    """'<file>:<function>: what' for every untyped query read under root."""
    out: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        out += _untyped_calls(tree, rel, allowed)
        out += _reads_without_rows(tree, rel)
    return out


def test_findings_reads_query_rows_typed() -> None:
    bad = untyped_reads()
    assert not bad, "untyped query reads in findings/:\n" + "\n".join(bad)


def test_compare_reads_query_rows_typed() -> None:
    """compare/ reads every query through gather._read, which types the rows as the query's TypedDict."""
    bad = untyped_reads(
        COMPARE, {"gather.py:_read": "the one typed read (checks the row type is the query's)"}
    )
    assert not bad, "untyped query reads in compare/:\n" + "\n".join(bad)


def test_every_read_names_its_querys_rows() -> None:
    from traceql import findings  # noqa: F401 - importing registers every check and its reads
    from traceql.findings.context import Read
    from traceql.findings.evaluate import plan
    from traceql.rows import QUERY_ROWS

    reads = plan()
    assert reads and all(isinstance(r, Read) for r in reads)
    assert {r.query: r.row for r in reads} == {r.query: QUERY_ROWS[r.query] for r in reads}
    with pytest.raises(TypeError, match="wait_attribution"):
        Read("wait_attribution", QUERY_ROWS["rank_summary"])


def test_dict_any_only_where_counted() -> None:
    got = dict_any_counts()
    new = {k: n for k, n in got.items() if n > DICT_ANY.get(k, 0)}
    assert not new, f"more dict[str, Any] annotations than listed (type query rows with traceql.rows): {new}"
    fewer = {k: (got.get(k, 0), n) for k, n in DICT_ANY.items() if got.get(k, 0) < n}
    assert not fewer, f"fewer dict[str, Any] annotations than listed (now, listed): lower DICT_ANY: {fewer}"


def test_phase_window_is_the_sqls_select_list() -> None:
    """PhaseWindow (a TypedDict over phase_verdicts' own SQL) names the SQL's output columns, in order."""
    from traceql.findings.phase_verdicts import SQL, PhaseWindow

    select = SQL[SQL.rindex("SELECT w.rank") + len("SELECT") : SQL.rindex("FROM w LEFT JOIN")]
    items, depth, cur = [], 0, ""
    for ch in select:  # split on the commas outside parentheses
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    names = [i.split()[-1].split(".")[-1] for i in items]
    assert names == list(PhaseWindow.__annotations__)


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    (tmp_path / "context.py").write_text("class Context:\n    def rows(self): ...\n", encoding="utf-8")
    (tmp_path / "m.py").write_text(
        "from typing import Any\n"
        "W = Read('wait_attribution')\n"
        "def f(ctx) -> dict[str, Any]:\n"
        "    a = ctx.rows('wait_attribution')\n"
        "    b = ctx.session.query('roles').to_pylist()\n"
        "    return {}\n",
        encoding="utf-8",
    )
    bad = untyped_reads(tmp_path)
    assert any("Context.rows" in b for b in bad)
    assert any("m.py:f: .rows(" in b for b in bad)
    assert any("m.py:f: .to_pylist(" in b for b in bad)
    assert any("m.py:f: .query(" in b for b in bad)
    assert any("names no row type" in b for b in bad)
    assert dict_any_counts(tmp_path) == {"m.py": 1}


def test_mypy_sees_a_misspelt_column(tmp_path: Path) -> None:
    """A column read that the SQL header does not declare is a mypy error (traceql/rows.py copied beside a
    snippet, so mypy checks two small files instead of the package)."""
    api = pytest.importorskip("mypy.api")
    (tmp_path / "rows.py").write_text(ROWS_PY.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "snippet.py").write_text(
        "from rows import WaitAttributionRow\n\n\n"
        "def steps(w: WaitAttributionRow) -> object:\n"
        "    return w['steps']\n\n\n"
        "def typo(w: WaitAttributionRow) -> object:\n"
        "    return w['stepz']\n",
        encoding="utf-8",
    )
    out, _err, rc = api.run(
        [
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / ".cache"),
            str(tmp_path / "snippet.py"),
        ]
    )
    assert rc == 1, out
    assert 'has no key "stepz"' in out and "snippet.py:9" in out, out
    assert "snippet.py:5" not in out, out
