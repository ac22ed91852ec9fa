#!/usr/bin/env python3
"""Snapshot every analysis output, so a refactor can prove it changed none of them.

    python tools/analysis_snapshot.py write /tmp/before          # on the old code
    python tools/analysis_snapshot.py write /tmp/after           # on the new code
    python tools/analysis_snapshot.py diff /tmp/before /tmp/after

For each dump (the sample traces, the planted-bottleneck dumps of tests/planted.py and every real dump under
../shared/real_traces when present) it ingests into a fresh store and writes one JSON file holding: the rows of
every metric query at its default params, every check's rows, the findings JSON (less the version stamp) and the
Vega-Lite spec of every chart. `diff` lists each file and key that differs; exit 1 when any does.

Floats are written with repr (exact), so "identical" means bit-identical.
"""

from __future__ import annotations

import json
import math
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "real_traces"


def _dumps(tmp: Path) -> list[tuple[str, Path]]:
    out = [(f"sample-{p.name}", p) for p in sorted((ROOT / "sample_traces").iterdir()) if p.is_dir()]
    sys.path.insert(0, str(ROOT / "tests"))
    import planted

    for case in planted.CASES:
        out.append((f"planted-{case}", planted.write(case, tmp / "planted")))
    if SHARED.is_dir():
        import importlib.machinery
        import importlib.util

        sweep = ROOT.parent / "shared" / "tools" / "real-dump-sweep"
        loader = importlib.machinery.SourceFileLoader("sweep", str(sweep))
        spec = importlib.util.spec_from_loader("sweep", loader)
        assert spec is not None
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        for name, path in mod.dumps():
            out.append(("real-" + name.replace("/", "__"), path))
    return out


def _canon(v: Any) -> Any:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    if isinstance(v, dict):
        return {str(k): _canon(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_canon(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return str(v)


def _snapshot_run(store: Path, run_id: str) -> dict[str, Any]:
    from traceql import charts, checks, findings, queries

    out: dict[str, Any] = {"queries": {}, "checks": {}, "charts": {}}
    try:  # the derived tables stored first, as every analysis command has them (older traceql: on first query)
        from traceql.analysis import Analysis

        Analysis(store, run_id).close()
    except ImportError:
        pass
    for spec in queries.list_queries():
        if any(p.required for p in spec.params):
            continue
        try:
            t = queries.run(spec.name, store, run_id=run_id)
            out["queries"][spec.name] = _canon(t.to_pylist())
        except Exception as e:  # noqa: BLE001 - the error text is part of the snapshot
            out["queries"][spec.name] = f"error: {type(e).__name__}: {e}"
    try:
        res = checks.run_checks(store, run_id)
        out["checks"] = _canon([r if isinstance(r, dict) else getattr(r, "__dict__", str(r)) for r in res])
    except Exception as e:  # noqa: BLE001
        out["checks"] = f"error: {type(e).__name__}: {e}"
    try:
        d = findings.evaluate(store, run_id).to_dict()
        d.pop("generated_by", None)
        out["findings"] = _canon(d)
    except Exception as e:  # noqa: BLE001
        out["findings"] = f"error: {type(e).__name__}: {e}"
    for c in charts.list_charts():
        try:
            out["charts"][c.name] = _canon(charts.to_spec(charts.make(c.name, store, run_id=run_id)))
        except Exception as e:  # noqa: BLE001
            out["charts"][c.name] = f"error: {type(e).__name__}: {e}"
    return out


def write(dest: Path) -> int:
    import traceql

    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="snap-") as td:
        tmp = Path(td)
        for name, path in _dumps(tmp):
            store = tmp / "stores" / name
            try:
                traceql.ingest(path, store=store, name="r")
                snap = _snapshot_run(store, "r")
            except Exception as e:  # noqa: BLE001
                snap = {"ingest": f"error: {type(e).__name__}: {e}"}
            text = json.dumps(snap, indent=1, sort_keys=True).replace(str(tmp), "<TMP>")
            (dest / f"{name}.json").write_text(text, encoding="utf-8")
            print(f"{name}: written", flush=True)
    return 0


def _diff(a: Any, b: Any, where: str, out: list[str]) -> None:
    # a query's rows: SQL leaves the order of rows that tie on the ORDER BY keys open, so rows are compared as
    # a multiset when the order is all that differs
    rows = "/queries/" in where and where.count("/") == 2 and isinstance(a, list) and isinstance(b, list)
    if rows and a != b and sorted(map(json.dumps, a)) == sorted(map(json.dumps, b)):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}/{k}: only in {'after' if k not in a else 'before'}")
            else:
                _diff(a[k], b[k], f"{where}/{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{where}[{i}]", out)
    elif a != b:
        out.append(f"{where}: {json.dumps(a)[:160]} != {json.dumps(b)[:160]}")


def _load(path: Path) -> Any:
    # snapshots written before the temp dir was replaced by <TMP> at write time
    return json.loads(re.sub(r"/tmp/snap-[A-Za-z0-9_]+", "<TMP>", path.read_text(encoding="utf-8")))


def diff(before: Path, after: Path) -> int:
    problems: list[str] = []
    names = sorted({p.name for p in before.glob("*.json")} | {p.name for p in after.glob("*.json")})
    for n in names:
        a, b = before / n, after / n
        if not a.exists() or not b.exists():
            problems.append(f"{n}: only in {'after' if not a.exists() else 'before'}")
            continue
        _diff(_load(a), _load(b), n, problems)
    for p in problems:
        print(p)
    print(f"{len(names)} snapshots compared, {len(problems)} differences")
    return 1 if problems else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "write":
        return write(Path(argv[1]))
    if len(argv) == 3 and argv[0] == "diff":
        return diff(Path(argv[1]), Path(argv[2]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
