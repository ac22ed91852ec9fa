"""A query's cursor scopes only the views its SQL reaches (traceql.queries.scope with for_sql,
traceql.derived_tables.tables_read): a view it left unscoped would show every run and rank. The independent
method: the same queries with every view scoped (tables_read patched to name every table), as before the
change; rank 0 of the 2-rank sample, so a view left unscoped would leak rank 1's rows into rank 0's answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from traceql import derived_tables, queries, schema
from traceql.analysis import Analysis


def _every_query(store: Path, rank: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Analysis(store, "demo", device="ascend910b") as session:
        for spec in queries.list_queries():
            if any(p.required for p in spec.params):
                continue
            rows = session.query(spec.name, rank=rank).to_pylist()
            out[spec.name] = sorted(map(repr, rows))
    return out


def test_scoping_what_a_query_reaches_equals_scoping_everything(
    sample_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 0 (the goldens hold every query of whole runs, rank None, to the same outputs)."""
    rank = 0
    got = _every_query(sample_store, rank)
    every = {"runs", *schema.TABLE_NAMES, *derived_tables.names()}
    with monkeypatch.context() as m:
        m.setattr(derived_tables, "tables_read", lambda stored, sql: set(every))
        want = _every_query(sample_store, rank)
    assert got.keys() == want.keys() and len(got) >= 30
    assert [k for k in got if got[k] != want[k]] == []
    assert any(got[k] for k in got)  # the sample answers most of them: not a comparison of empty results


def test_tables_read_follows_derived_tables_and_macros() -> None:
    """A query reading only a derived table still scopes the canonical tables that table's SELECT reads when it
    is not stored, and only that table when it is (then it is a view over its own Parquet)."""
    sql = "SELECT * FROM step_windows"
    raw = derived_tables.tables_read(set(), sql)
    assert "step_windows" in raw and "steps" in raw and "kernels" in raw
    stored = derived_tables.tables_read(set(derived_tables.names()), sql)
    assert "step_windows" in stored and stored < raw
