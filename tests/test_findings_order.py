"""Findings are one order-independent plan: the shared facts (the memory gate) are computed before any check runs
and no check reads what another wrote, so permuting the rules' order, their checklist step numbers or the checks'
registration order must give identical findings (compared per rule id, less the checklist step itself) and an
identical verdict. Before the gate moved into the context, `bandwidth_bound.step = 99` with the gate closed made
the same dump say "not bandwidth-bound" and fire `operator_fusion` (issue 43).

Expected values: the findings of the unpermuted rules on the same session (the property is equality).
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import planted
import pytest
from conftest import LEVEL1, real

from traceql.analysis import Analysis
from traceql.findings import evaluate_session, load_rules
from traceql.findings import registry as reg

DEVICE = "ascend910b"


def _canon(rep: Any) -> dict[str, Any]:
    """The report with floats to 12 significant digits (tests/_golden.canon): DuckDB's parallel sums change the
    last bits between two runs of the same query (level1's cube_busy_share 0.1495241164776139 vs ...393), which
    is not an order dependence of the checks."""
    from _golden import canon

    d = canon(json.loads(rep.to_json()))
    by_id = {}
    for f in d["findings"]:
        f = dict(f)
        f.pop("checklist_step", None)
        by_id[f["id"]] = f
    return {"verdict": d["verdict"], "findings": by_id, "device": d.get("device")}


def _diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str) for d in _diff(a.get(k), b.get(k), f"{path}.{k}")]
    return [] if a == b else [f"{path}: {str(a)[:300]} != {str(b)[:300]}"]


def _permuted_rules(base: dict[str, Any], seed: int) -> dict[str, Any]:
    rnd = random.Random(seed)
    rules = copy.deepcopy(base)
    items = list(rules["rules"].items())
    rnd.shuffle(items)
    steps = [int(r["step"]) for _k, r in items]
    rnd.shuffle(steps)
    for (_k, r), s in zip(items, steps, strict=True):
        r["step"] = s
    rules["rules"] = dict(items)
    return rules


def _permuted_checks(checks: dict[str, reg.CheckDef], seed: int) -> dict[str, reg.CheckDef]:
    items = list(checks.items())
    random.Random(seed).shuffle(items)
    return dict(items)


def _assert_order_free(store: Path, run: str) -> None:
    base_rules = load_rules(None)
    saved = dict(reg.CHECKS)
    with Analysis(store, run, device=DEVICE) as session:
        want = _canon(evaluate_session(session, rules=base_rules, workers=1))
        rows = dict(session._cache)

    def fresh() -> Analysis:
        """A new session (its peak choice, its context and every fact the checks share start empty) whose
        query cache holds the first session's rows: a query's rows are a function of its cache key (query,
        run, rank, params), not of which check asked first, so only the checks' own work runs again; a
        permuted check that asks with other params misses the cache and runs its query."""
        s = Analysis(store, run, device=DEVICE)
        s._cache.update(rows)
        return s

    try:
        for seed in range(2):
            reg.CHECKS.clear()
            reg.CHECKS.update(_permuted_checks(saved, seed))
            with fresh() as session:
                got = _canon(evaluate_session(session, rules=_permuted_rules(base_rules, seed), workers=1))
            assert got == want, f"{run}: findings depend on the order (seed {seed}): {_diff(want, got)}"
        # the case of the issue: the bandwidth check last
        late = copy.deepcopy(base_rules)
        late["rules"]["bandwidth_bound"]["step"] = 99
        with fresh() as session:
            assert _canon(evaluate_session(session, rules=late, workers=1)) == want
    finally:
        reg.CHECKS.clear()
        reg.CHECKS.update(saved)


@pytest.mark.parametrize("case", planted.CASES)
def test_planted_findings_do_not_depend_on_order(planted_store: Path, case: str) -> None:
    _assert_order_free(planted_store, f"planted-{case}")  # the session's store (tests/conftest.py)


@pytest.mark.real
def test_real_dump_findings_do_not_depend_on_order(tmp_path: Path) -> None:
    from traceql.ingest import ingest

    ingest(real(LEVEL1), tmp_path / "s", name="level1", workers=1)
    _assert_order_free(tmp_path / "s", "level1")
