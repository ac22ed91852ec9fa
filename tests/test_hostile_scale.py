"""Large valid input (issue 22): reports and charts of many-rank runs (Altair's 5,000-row limit made a 26-rank
hbm_timeline an internal MaxRowsError and lost the whole report), and one failing chart never loses a report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._bounded import traceql
from traceql import charts
from traceql.rank_writer import RankWriter
from traceql.store import Store

T0 = 1_700_000_000_000_000_000


def many_rank_store(root: Path, n: int, kernels: int = 30) -> Path:
    """A run of n ranks written straight into a store (ingesting n folders would test the parsers, not this)."""
    s = Store(root)
    staging = s.new_staging()
    files: dict[str, list[str]] = {}
    rows: dict[str, int] = {}
    for r in range(n):
        w = RankWriter(staging, "big", r, tag=str(r))
        k = kernels
        w.write(
            "kernels",
            {
                "name": [f"op{i % 5}" for i in range(k)],
                "op_type": [f"T{i % 5}" for i in range(k)],
                "task_type": ["AI_CORE"] * k,
                "stream_id": [1] * k,
                "task_id": list(range(k)),
                "ts_ns": [T0 + i * 100_000 for i in range(k)],
                "dur_ns": [80_000] * k,
                "hbm_read_bytes": [10_000_000 + r] * k,
                "hbm_write_bytes": [5_000_000] * k,
            },
        )
        w.write("steps", {"step": [1, 2], "ts_ns": [T0, T0 + 1_500_000], "dur_ns": [1_500_000, 1_500_000]})
        w.close()
        for t, fl in w.files.items():
            files.setdefault(t, []).extend(fl)
        for t, c in w.rows.items():
            rows[t] = rows.get(t, 0) + c
    s.commit(
        staging,
        "big",
        {
            "source": "synthetic",
            "format": "canonical",
            "ranks": list(range(n)),
            "ranks_count": n,
            "rows": rows,
            "files": files,
        },
    )
    return root


def test_per_rank_sources_scale_their_rows_with_the_rank_count() -> None:
    src = charts.get("hbm_timeline").sources[0]
    assert src.params_for(1) == {"max_bins": 200}
    assert src.params_for(26) == {
        "max_bins": 200 if charts.ROW_BUDGET >= 26 * 200 else charts.ROW_BUDGET // 26
    }
    assert src.params_for(1000) == {"max_bins": 20}  # 20,000 // 1,000
    assert src.params_for(100_000) == {"max_bins": 10}  # the floor
    groups = charts.get("wait_steps").sources[0]
    assert groups.params_for(8) == {"max_groups": 60} and groups.params_for(1000) == {"max_groups": 20}


@pytest.fixture(scope="module")
def store40(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return many_rank_store(tmp_path_factory.mktemp("s40") / "store", 30, kernels=10)


def test_hbm_timeline_of_30_ranks_is_drawn_with_coarser_bins_and_says_so(
    store40: Path, tmp_path: Path
) -> None:
    out = tmp_path / "t.json"
    r = traceql("chart", "hbm_timeline", "--store", store40, "--device", "ascend910b", "-o", out, timeout=240)
    assert r.code == 0, r
    spec = json.loads(out.read_text())
    n_rows = sum(len(v) for v in spec.get("datasets", {}).values())
    assert 0 < n_rows <= charts.ROW_BUDGET + 30, (
        n_rows
    )  # 30 ranks x 200 bins (6,000 rows: over Altair's default 5,000)
    text = json.dumps(spec["title"])
    assert "30 ranks" not in text  # 30 x 200 = 6,000 rows is under the budget: the usual bins, nothing to say
    assert spec.get("title") and "MaxRowsError" not in out.read_text()


def test_report_of_30_ranks_is_written_and_a_failing_chart_is_a_placeholder(
    store40: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from traceql.report import render

    def broken(**_: object) -> None:
        raise RuntimeError("builder exploded")

    cdef = charts.CHARTS["top_ops"]
    monkeypatch.setitem(
        charts.CHARTS, "top_ops", charts.ChartDef(cdef.name, cdef.description, cdef.sources, broken)
    )
    out = render.write_report(tmp_path / "r.html", store40, "big", device="ascend910b")
    html = out.read_text()
    assert "This chart could not be drawn: RuntimeError: builder exploded" in html
    assert "MaxRowsError" not in html
    # every other chart was drawn
    for name in ("hbm_timeline", "wait_steps", "step_breakdown", "hbm_ranks"):
        assert f"chart-{name}-" in html, name
