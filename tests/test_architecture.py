"""The package's import graph stays one-way (docs/architecture.md): computed from the source with `ast`, every
import counted (module level and inside functions; `if TYPE_CHECKING:` imports are not imports at run time and
are left out, as mypy resolves them without running anything).

- no circle in the graph, except a parser module and its own helper (parsers/_x imported back by parsers/x);
- no module imports another module's private (_underscore) names, by `from m import _x` or `m._x`;
- the layers: definitions and the store never import the engine or the analysis layer; the engine never
  imports the analysis layer; nothing below the CLI imports the CLI.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "traceql"

# module -> the layer it belongs to (first matching prefix); a module may import its own layer and lower ones
LAYERS: list[tuple[str, int]] = [
    ("traceql.__main__", 7),  # entry points: the package facade (traceql.connect, traceql.ingest) and -m
    ("traceql.cli", 6),
    ("traceql.report", 5),
    ("traceql.compare", 5),
    ("traceql.export", 5),
    ("traceql.charts", 5),
    ("traceql.capture", 5),
    ("traceql.mcp", 5),  # the MCP server's tools: consumers of findings, compare, the library and the sandbox
    ("traceql.findings", 5),
    ("traceql.analysis", 4),
    ("traceql.post_ingest", 4),
    ("traceql.checks", 4),
    ("traceql.observed_ceiling", 4),
    ("traceql.clock_align", 4),
    ("traceql.derive", 3),
    ("traceql.distributed", 3),
    # ingest hands a run to the distributed map/reduce, whose tasks build the derived tables where the dump is
    ("traceql.ingest", 3),
    ("traceql.queries", 3),
    ("traceql.query_cache", 3),  # query results kept in the store between processes (read by analysis)
    ("traceql.sql_sandbox", 3),
    ("traceql.engine", 2),
    ("traceql.rank_parse", 2),
    ("traceql.parsers", 2),
    ("traceql.dump_fs", 2),  # a dump at a URL: detection runs the parsers' claims on a sniff mirror
    ("traceql.synth", 2),
    ("traceql.stores", 1),  # open_store: above store and store_fs, picks one by the root
    ("traceql.store", 1),
    ("traceql.store_fs", 1),
    ("traceql.rank_writer", 1),
    ("traceql.executors", 1),
    ("traceql.tiers", 1),
    ("traceql.commandline", 1),
    ("traceql.views", 1),
    ("traceql._owned", 1),
    ("traceql._procs", 1),
    ("traceql.fs_errors", 1),
    ("traceql.progress", 1),
    (
        "traceql",
        0,
    ),  # definitions: schema, sqlfiles, derived_tables, devices, grades, errors, version, _duck...
]


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                for n in ast.walk(sub):
                    if hasattr(n, "lineno"):
                        lines.add(n.lineno)
    return lines


@functools.cache  # the four tests read one graph (parsing every module takes seconds); none mutates it
def _graph() -> tuple[dict[str, set[str]], list[str]]:
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    private: list[str] = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_lines(tree)
        is_pkg = path.name == "__init__.py"
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not target.startswith("traceql"):
                    continue
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    if sub in mods:
                        edges[name].add(sub)
                        aliases[a.asname or a.name] = sub
                    else:
                        edges[name].add(target)
                        if a.name.startswith("_") and not a.name.startswith("__"):
                            private.append(f"{name}: from {target} import {a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("traceql"):
                        edges[name].add(a.name)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                private.append(f"{name}: {aliases[node.value.id]}.{node.attr}")
    return edges, private


def _layer(mod: str) -> int:
    if mod == "traceql":
        return 7  # the package facade: traceql.connect / traceql.ingest
    return next(level for prefix, level in LAYERS if mod == prefix or mod.startswith(prefix + "."))


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def _parser_and_own_helper(comp: list[str]) -> bool:
    """A parser and its private helper module(s) importing each other (parsers/x <-> parsers/_x)."""
    return all(m.startswith("traceql.parsers.") for m in comp) and len(comp) == 2


def test_no_import_circles() -> None:
    edges, _ = _graph()
    bad = [c for c in _cycles(edges) if not _parser_and_own_helper(c)]
    assert not bad, bad


def test_no_module_imports_another_modules_private_names() -> None:
    _, private = _graph()
    assert not private, private


def test_imports_go_down_the_layers_only() -> None:
    edges, _ = _graph()
    up = [
        f"{a} (layer {_layer(a)}) imports {b} (layer {_layer(b)})"
        for a, targets in edges.items()
        for b in targets
        if b in edges and _layer(b) > _layer(a)
    ]
    assert not up, up


def test_the_graph_is_really_read() -> None:
    """The checks above would pass on an empty graph: make sure it holds the edges everybody knows of."""
    edges, _ = _graph()
    assert "traceql.engine" in edges["traceql.queries"]
    assert "traceql.stores" in edges["traceql.engine"]
    assert "traceql.store_fs" not in edges["traceql.store"]  # open_store (traceql.stores) picks the class
    assert "traceql.analysis" in edges["traceql.findings.evaluate"]
    assert sum(len(t) for t in edges.values()) > 200
