"""Every output of a few small dumps, as JSON that can be committed and diffed in review (tests/golden/).

One store holds every dump as its own run (the bundled samples and a few planted dumps), built once per test
session (tests/conftest.py session_store). For each run: the rows of every metric query at its default params, every fidelity check's rows, the
findings JSON and the export's event counts per family; for a few pairs of runs, the compare JSON.

Normalised only what differs between two runs of the same code: the temporary folder (paths), the version
stamp (`generated_by`), and floats, written to 12 significant digits because DuckDB sums in parallel and the
order of a float sum's terms changes its last bits from one run to the next. A query's rows are compared as a
multiset when only their order differs (SQL leaves the order of rows that tie on the ORDER BY open).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "golden"

SAMPLES = ("kineto_cpu", "msprof", "torch_npu_2rank")
PLANTED = ("clean", "unfused_chain", "hbm_wait", "late_host")
DEVICE = "ascend910b"  # the preset the planted tests evaluate with; the samples take their own device
# (base, cand): a plain planted A/B, and the sample story against a planted dump (a refusal or a verdict)
PAIRS = (("planted-clean", "planted-unfused_chain"), ("planted-clean", "planted-late_host"))


def runs() -> dict[str, tuple[str, Any]]:
    """Every golden dump as tests/conftest.py's session_store builds it: run name -> (kind, case or folder)."""
    out: dict[str, tuple[str, Any]] = {f"sample-{name}": ("sample", name) for name in SAMPLES}
    out.update({f"planted-{case}": ("planted", case) for case in PLANTED})
    return out


def canon(v: Any) -> Any:
    """JSON-ready and stable: floats to 12 significant digits (nan/inf as strings, so they stay visible)."""
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return repr(v)
        return float(f"{v:.12g}")
    if isinstance(v, dict):
        return {str(k): canon(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [canon(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return str(v)


def _device(run: str) -> str | None:
    return DEVICE if run.startswith("planted-") else None


def _queries(store: Path, run: str) -> dict[str, Any]:
    from traceql import queries
    from traceql.analysis import Analysis

    out: dict[str, Any] = {}
    # one session for every query (queries.run opens a connection each: ~50 ms, half of a small query's cost);
    # no device, as `traceql query --run RUN` runs them
    with Analysis(store, run) as session:
        for spec in queries.list_queries():
            if any(p.required for p in spec.params):
                continue
            try:
                out[spec.name] = canon(session.query(spec.name).to_pylist())
            except Exception as e:  # noqa: BLE001 - the refusal is an output too
                out[spec.name] = f"error: {type(e).__name__}: {e}"
    return out


def _export_counts(store: Path, run: str, tmp: Path) -> dict[str, Any]:
    from traceql.export import export

    summary = export(store, run, tmp / f"{run}.json", fmt="chrome", device=_device(run))
    return {"counts": summary["counts"], "ranks": summary["ranks"], "applied": canon(summary["applied"])}


def snapshot_run(store: Path, run: str, tmp: Path) -> dict[str, Any]:
    """Every output of one run, keyed by output (one golden file each)."""
    from traceql import checks, findings

    f = findings.evaluate(store, run, device=_device(run)).to_dict()
    f.pop("generated_by", None)
    res = checks.run_checks(store, run)
    return {
        "findings": canon(f),
        "queries": _queries(store, run),
        "checks": canon([r if isinstance(r, dict) else getattr(r, "__dict__", str(r)) for r in res]),
        "export": _export_counts(store, run, tmp),
    }


def snapshot_pair(store: Path, base: str, cand: str) -> dict[str, Any]:
    from traceql.compare import compare

    d = compare(store, base, cand, device=DEVICE).to_dict()
    d.pop("generated_by", None)
    return canon(d)  # type: ignore[no-any-return]


def text(d: Any, tmp: Path) -> str:
    return json.dumps(d, indent=1, sort_keys=True, ensure_ascii=False).replace(str(tmp), "<TMP>") + "\n"


def differences(want: Any, got: Any, where: str = "", rows: bool = False) -> list[str]:
    """Where two snapshots differ. rows: `want` maps query -> rows, compared as a multiset when only their
    order differs."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for k in sorted(set(want) | set(got)):
            if k not in want or k not in got:
                out.append(f"{where}/{k}: only in {'the golden' if k in want else 'this run'}")
            elif rows and isinstance(want[k], list) and isinstance(got[k], list) and want[k] != got[k]:
                if sorted(map(json.dumps, want[k])) != sorted(map(json.dumps, got[k])):
                    out.append(f"{where}/{k}: the rows differ")
            else:
                out += differences(want[k], got[k], f"{where}/{k}")
        return out
    if want != got:
        return [f"{where}: golden {json.dumps(want)[:200]} != now {json.dumps(got)[:200]}"]
    return []
