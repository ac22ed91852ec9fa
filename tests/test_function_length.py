"""No function in traceql/ is over 100 lines (from its `def` line to its last line, decorators excepted), so
every long piece of logic is a set of named steps. Measured with `ast` over the source.

ALLOWED would list a function allowed over the limit, with its length (it is empty: every function was split
into named steps, issue 43); a listed function that has come under the limit (or grown past its listed
length) fails the test, so the list stays exact."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "traceql"
LIMIT = 100

ALLOWED: dict[str, int] = {}  # exceptions, with their length: none


def lengths(root: Path = PKG) -> dict[str, int]:
    """'<path under traceql/>:<function>' -> lines, for every function and method over LIMIT lines."""
    out: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > LIMIT:
                    out[f"{path.relative_to(root).as_posix()}:{node.name}"] = n
    return out


def test_no_function_over_100_lines() -> None:
    long = lengths()
    new = {k: n for k, n in long.items() if k not in ALLOWED}
    assert not new, f"functions over {LIMIT} lines: split them into named steps: {new}"
    grown = {k: (n, ALLOWED[k]) for k, n in long.items() if k in ALLOWED and n > ALLOWED[k]}
    assert not grown, f"allowed long functions grew (now, listed): {grown}"
    done = sorted(set(ALLOWED) - set(long))
    assert not done, f"now under {LIMIT} lines: remove from the allow-list: {done}"


def test_the_measure_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "m.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n", encoding="utf-8")
    assert lengths(tmp_path) == {"m.py:long": LIMIT + 1}
