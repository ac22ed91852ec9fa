"""Charts: builders draw only what the queries return, every chart is fed by declared queries, data stays small
on long runs (binning in SQL: step_windows, step_groups), offline export (vl-convert PNG/SVG, HTML, JSON),
and the `traceql chart` CLI (help, list, happy path per format, unknown chart, missing run/store).

Expected numbers are computed by hand from the rows each test builds (comments say how)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from _canon import MS, build_store

from traceql import charts, devices, queries
from traceql.errors import TraceQLError


def _with_peaks(t: pa.Table, peak_hbm_bps: float | None, peak_flops: float | None = None) -> pa.Table:
    meta = {b"traceql.peaks": json.dumps({"peak_hbm_bps": peak_hbm_bps, "peak_flops": peak_flops}).encode()}
    return t.replace_schema_metadata(meta)


def _datasets(spec: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return spec.get("datasets", {})


def _all_values(spec: Any) -> list[Any]:
    """Every inline `values` list in a spec (alt.Data(values=...)), wherever it sits."""
    out: list[Any] = []
    if isinstance(spec, dict):
        if isinstance(spec.get("values"), list):
            out.extend(spec["values"])
        for v in spec.values():
            out.extend(_all_values(v))
    elif isinstance(spec, list):
        for v in spec:
            out.extend(_all_values(v))
    return out


def _marks(spec: Any) -> list[str]:
    out: list[str] = []
    if isinstance(spec, dict):
        m = spec.get("mark")
        if m is not None:
            out.append(m if isinstance(m, str) else m["type"])
        for v in spec.values():
            out.extend(_marks(v))
    elif isinstance(spec, list):
        for v in spec:
            out.extend(_marks(v))
    return out


# ---- registry -----------------------------------------------------------------------------------------------
def test_every_chart_is_fed_by_declared_queries() -> None:
    assert {
        "hbm_timeline",
        "op_hbm_bytes",
        "roofline",
        "wait_attribution",
        "wait_steps",
        "ub_l2",
        "layout_transforms",
        "step_breakdown",
    } <= set(charts.CHARTS)
    for c in charts.list_charts():
        assert c.description and c.sources
        for s in c.sources:
            spec = queries.get(s.query)
            queries.bind_params(
                spec, s.params, fill=dict.fromkeys(devices.PEAK_PARAMS, 1.0)
            )  # raises if undeclared


def test_unknown_chart_lists_the_charts() -> None:
    with pytest.raises(TraceQLError, match=r"unknown chart 'nope'; charts: hbm_timeline, "):
        charts.get("nope")


def test_charts_never_lift_altairs_row_limit() -> None:
    # never lifted; raised in one place only, to the bound every chart's data is aggregated under (ROW_BUDGET)
    text = Path(charts.__file__).read_text(encoding="utf-8")
    assert "disable_max_rows" not in text
    assert text.count("max_rows") == text.count("max_rows=2 * ROW_BUDGET") == 1


# ---- pure builders over hand-made query results ----------------------------------------------------------------
def _timeline(ranks: int = 2, bins: int = 4) -> pa.Table:
    rows = []
    for r in range(ranks):
        for b in range(bins):
            rows.append(
                {
                    "run_id": "x",
                    "rank": r,
                    "bin": b,
                    "bin_start_ns": 1000 + b * 500_000,
                    "bin_end_ns": 1000 + (b + 1) * 500_000,
                    "t_ms": b * 0.5,
                    "read_bytes": 100,
                    "write_bytes": 50,
                    "hbm_bytes": 150,
                    "bw_bps": 1.2e12 + b,
                    "utilization": 0.75,
                    "kernel_ns": 1,
                    "top_op": "Tanh",
                    "top_op_share": 1.0,
                    "top_ops": "Tanh 100%",
                    "hbm_bytes_source": "pmu",
                }
            )
    return _with_peaks(pa.Table.from_pylist(rows), 1.6e12)


def test_hbm_timeline_draws_the_query_rows_and_the_article_lines() -> None:
    steps = pa.Table.from_pylist(
        [
            {
                "run_id": "x",
                "rank": r,
                "step": s,
                "step_index": s - 1,
                "start_ms": (s - 1) * 1.0,
                "end_ms": s * 1.0,
                "dur_ms": 1.0,
                "window_source": "steps",
            }
            for r in (0, 1)
            for s in (1, 2)
        ]
    )
    spec = charts.to_spec(charts.hbm_timeline_chart(_timeline(), steps))
    data = _datasets(spec)
    bins = next(v for v in data.values() if v and "bw_bps" in v[0])
    # the chart carries the query's numbers unchanged (only the columns it draws)
    assert len(bins) == 8 and {b["bw_bps"] for b in bins} == {1.2e12, 1.2e12 + 1, 1.2e12 + 2, 1.2e12 + 3}
    assert set(bins[0]) == {
        "rank",
        "t_ms",
        "bw_bps",
        "utilization",
        "read_bytes",
        "write_bytes",
        "top_ops",
        "hbm_bytes_source",
    }
    # peak 1.6e12 B/s = 1600 GB/s; 80% -> 1280; 70% -> 1120 (by hand)
    lines = sorted({v["gbps"] for v in _all_values(spec) if "gbps" in v})  # repeated in each rank panel
    assert lines == pytest.approx([1120.0, 1280.0, 1600.0])
    # bin width 500_000 ns = 0.5 ms goes into the bar end
    assert "datum.t_ms + 0.5" in json.dumps(spec)
    assert len(spec["vconcat"]) == 2  # one panel per rank


def test_hbm_timeline_without_peak_or_kernels() -> None:
    spec = charts.to_spec(charts.hbm_timeline_chart(_with_peaks(_timeline(), None)))
    assert not [v for v in _all_values(spec) if "gbps" in v], "no peak, no lines"
    assert "HBM peak unknown" in json.dumps(spec)
    empty = charts.to_spec(charts.hbm_timeline_chart(_timeline().slice(0, 0)))
    assert _marks(empty) == ["text"] and "No device kernels" in json.dumps(empty)


def test_hbm_timeline_many_ranks_is_one_heatmap() -> None:
    spec = charts.to_spec(charts.hbm_timeline_chart(_timeline(ranks=charts.MAX_RANK_PANELS + 1)))
    assert "vconcat" not in spec and _marks(spec) == ["rect"]


def test_wait_attribution_chart_stacks_the_seven_parts_of_rank_rows() -> None:
    parts = [c for c, _, _ in charts.WAIT_PARTS]
    rows = [
        {"run_id": "x", "scope": "run", "rank": None, "steps": 2, "wall_ns": 20, **dict.fromkeys(parts, 1)}
    ]
    rows += [
        {
            "run_id": "x",
            "scope": "rank",
            "rank": r,
            "steps": 1,
            "wall_ns": 10,
            "verdict": "memory-bound",
            **{c: i + r for i, c in enumerate(parts)},
        }
        for r in (0, 1)
    ]
    rows += [
        {"run_id": "x", "scope": "step", "rank": 0, "steps": 1, "wall_ns": 10, **dict.fromkeys(parts, 5)}
    ]
    spec = charts.to_spec(charts.wait_attribution_chart(pa.Table.from_pylist(rows)))
    (data,) = _datasets(spec).values()
    assert [d["rank"] for d in data] == [0, 1], "only the rank rows are drawn"
    labels = [lab for _, lab, _ in charts.WAIT_PARTS]
    assert data[1][labels[2]] == 3  # rank 1, third part: i + r = 2 + 1
    assert spec["transform"][0]["fold"] == labels


def test_op_hbm_bytes_chart_splits_read_write_and_marks_the_source() -> None:
    t = pa.Table.from_pylist(
        [
            {
                "run_id": "x",
                "name": "<b>Tanh</b>",
                "op_type": "Tanh",
                "calls": 2,
                "dur_ns": 10,
                "hbm_read_bytes": 3_000_000_000,
                "hbm_write_bytes": 1_000_000_000,
                "hbm_bytes": 4_000_000_000,
                "share": 0.5,
                "bw_utilization": 0.9,
                "hbm_bytes_source": "sampled",
                "measured_over_modeled": 1.5,
            }
        ]
    )
    spec = charts.to_spec(charts.op_hbm_bytes_chart(t))
    (data,) = _datasets(spec).values()
    assert data[0]["name"] == "<b>Tanh</b>" and data[0]["hbm_read_bytes"] == 3_000_000_000
    text = json.dumps(spec)
    assert '"fold": ["hbm_read_bytes", "hbm_write_bytes"]' in text and "hbm_bytes_source" in text


def test_roofline_roof_from_the_peaks() -> None:
    t = pa.Table.from_pylist(
        [
            {
                "run_id": "x",
                "name": "mm",
                "op_type": "MatMulV2",
                "calls": 1,
                "dur_ns": 1000,
                "flops": 1e9,
                "flops_source": "modeled",
                "hbm_bytes": 10**7,
                "hbm_bytes_source": "pmu",
                "arithmetic_intensity": 100.0,
                "achieved_bw_bps": 1e13,
                "achieved_flops_per_s": 1e15,
                "bw_utilization": 0.5,
                "flops_utilization": 0.5,
                "ridge_point": 200.0,
                "bound": "memory",
            },
            {
                "run_id": "x",
                "name": "conv",
                "op_type": "Conv2D",
                "calls": 1,
                "dur_ns": 1000,
                "flops": None,
                "flops_source": None,
                "hbm_bytes": 10,
                "hbm_bytes_source": "pmu",
                "arithmetic_intensity": None,
                "achieved_bw_bps": 1.0,
                "achieved_flops_per_s": None,
                "bw_utilization": 0.1,
                "flops_utilization": None,
                "ridge_point": 200.0,
                "bound": None,
            },
        ]
    )
    spec = charts.to_spec(charts.roofline_chart(_with_peaks(t, 1e12, 2e14)))
    roof = [v for v in _all_values(spec) if "ai" in v]
    # ridge = 2e14 / 1e12 = 200 FLOP/byte; roof starts at min(100/2, 200/10) = 20 -> 20 x 1e12 / 1e12 = 20 TFLOP/s;
    # flat at 2e14 = 200 TFLOP/s from the ridge to max(100 x 2, 200 x 10) = 2000
    assert roof == [{"ai": 20.0, "tf": 20.0}, {"ai": 200.0, "tf": 200.0}, {"ai": 2000.0, "tf": 200.0}]
    (data,) = _datasets(spec).values()
    assert [d["name"] for d in data] == ["mm"], (
        "operators without FLOPs are left out (and counted in the subtitle)"
    )
    assert "1 without FLOPs" in json.dumps(spec)
    # no FLOPs at all: achieved bandwidth against the HBM peak instead
    only_conv = charts.to_spec(charts.roofline_chart(_with_peaks(t.slice(1, 1), 1e12, 2e14)))
    assert "no FLOPs known" in json.dumps(only_conv) and "bar" in _marks(only_conv)


def test_ub_l2_chart_says_why_it_is_empty() -> None:
    t = pa.Table.from_pylist(
        [
            {
                "run_id": "x",
                "scope": "overall",
                "name": None,
                "op_type": None,
                "calls": 1,
                "dur_ns": 1,
                "ub_bytes": None,
                "ub_bw_bps": None,
                "ub_utilization": None,
                "l2_hit_rate": None,
                "l2_weight": None,
                "l2_source": None,
                "reason": "no UB bandwidth metrics in the dump",
            }
        ],
        schema=pa.schema(
            [
                ("run_id", pa.string()),
                ("scope", pa.string()),
                ("name", pa.string()),
                ("op_type", pa.string()),
                ("calls", pa.int64()),
                ("dur_ns", pa.int64()),
                ("ub_bytes", pa.int64()),
                ("ub_bw_bps", pa.float64()),
                ("ub_utilization", pa.float64()),
                ("l2_hit_rate", pa.float64()),
                ("l2_weight", pa.string()),
                ("l2_source", pa.string()),
                ("reason", pa.string()),
            ]
        ),
    )
    spec = charts.to_spec(charts.ub_l2_chart(t))
    assert _marks(spec) == ["text"] and "no UB bandwidth metrics in the dump" in json.dumps(spec)


# ---- queries written for the charts, over a store built by hand ------------------------------------------------
def _steps_store(root: Path, n_steps: int = 7) -> Path:
    """One rank, n 10 ms steps starting at 0; in each, one compute kernel from 2 to 6 ms (no HBM bytes).
    By hand, per step: compute 4 ms (not saturated: no bytes), preparing 2 ms, tail 4 ms, no idle, no comm."""
    kernels = [
        {
            "name": "Tanh",
            "op_type": "Tanh",
            "ts_ns": (s - 1) * 10 * MS + 2 * MS,
            "dur_ns": 4 * MS,
            "step": s,
            "task_type": "AI_VECTOR_CORE",
            "is_comm": False,
        }
        for s in range(1, n_steps + 1)
    ]
    steps = [
        {"step": s, "ts_ns": (s - 1) * 10 * MS, "dur_ns": 10 * MS, "source": "t"}
        for s in range(1, n_steps + 1)
    ]
    build_store(root, "steps", {0: {"kernels": kernels, "steps": steps}}, device="Ascend910B")
    return root


def test_step_windows_line_up_with_hbm_timeline(tmp_path: Path) -> None:
    store = _steps_store(tmp_path / "s", 3)
    t = queries.run("step_windows", store).to_pylist()
    # origin = first kernel start = 2 ms: windows [0,10), [10,20), [20,30) ms -> -2..8, 8..18, 18..28
    assert [(r["step"], r["step_index"], r["start_ms"], r["end_ms"]) for r in t] == [
        (1, 0, -2.0, 8.0),
        (2, 1, 8.0, 18.0),
        (3, 2, 18.0, 28.0),
    ]
    tl = queries.run("hbm_timeline", store).to_pylist()
    assert tl[0]["t_ms"] == 0.0 and tl[0]["bin_start_ns"] == 2 * MS  # the same origin
    assert queries.run("step_windows", store, params={"max_steps": 2}).num_rows == 0  # too many to shade


def test_step_groups_merge_consecutive_steps(tmp_path: Path) -> None:
    store = _steps_store(tmp_path / "s", 7)
    rows = queries.run("step_groups", store, params={"max_groups": 3}).to_pylist()
    groups = [r for r in rows if r["scope"] == "group"]
    # 7 steps, at most 3 groups: ceil(7 / 3) = 3 steps per group -> 1-3, 4-6, 7
    assert [(r["label"], r["steps"]) for r in groups] == [("1-3", 3), ("4-6", 3), ("7", 1)]
    g0 = groups[0]
    assert g0["window_ns"] == 30 * MS and g0["compute_other_ns"] == 12 * MS and g0["computing_ns"] == 12 * MS
    assert g0["preparing_ns"] == 6 * MS and g0["tail_ns"] == 12 * MS and g0["host_ns"] == 18 * MS
    assert g0["idle_ns"] == 0 and g0["compute_hbm_saturated_ns"] == 0 and g0["comm_not_overlapped_ns"] == 0
    (rank,) = [r for r in rows if r["scope"] == "rank"]
    assert rank["steps"] == 7 and rank["window_ns"] == 70 * MS and rank["label"] == "all"


def test_step_groups_agree_with_wait_attribution_and_step_breakdown() -> None:
    """The rank rows must equal wait_attribution's (the query findings cite) and the sums of step_breakdown's,
    on the article sample (2 ranks, collectives, HBM counters)."""
    import traceql

    sample = Path(__file__).resolve().parents[1] / "sample_traces" / "torch_npu_2rank"
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        traceql.ingest(sample, store=d, name="demo")
        groups = queries.run("step_groups", d, device="ascend910b").to_pylist()
        wait = queries.run("wait_attribution", d, device="ascend910b").to_pylist()
        sb = queries.run("step_breakdown", d).to_pylist()
    parts = [c for c, _, _ in charts.WAIT_PARTS]
    for w in (r for r in wait if r["scope"] == "rank"):
        g = next(r for r in groups if r["scope"] == "rank" and r["rank"] == w["rank"])
        assert {p: g[p] for p in parts} == pytest.approx(
            {p: w[p] for p in parts}, abs=1
        )  # rounding of shares
        assert g["window_ns"] == w["wall_ns"] and g["steps"] == w["steps"]
        mine = [r for r in sb if r["rank"] == w["rank"]]
        for ours, theirs in (
            ("computing_ns", "computing_ns"),
            ("comm_not_overlapped_ns", "comm_not_overlapped_ns"),
            ("overlapped_ns", "overlapped_ns"),
            ("idle_ns", "free_ns"),
            ("preparing_ns", "preparing_ns"),
            ("tail_ns", "tail_ns"),
        ):
            assert g[ours] == sum(r[theirs] for r in mine), ours
        assert g["profiler_computing_ns"] == sum(r["profiler_computing_ns"] for r in mine)


def test_long_runs_give_small_charts(tmp_path: Path) -> None:
    store = _steps_store(tmp_path / "s", 300)
    spec = charts.to_spec(charts.make("wait_steps", store, device="ascend910b"))
    (data,) = _datasets(spec).values()
    assert len(data) <= 60  # step_groups' default max_groups: 300 steps -> 60 groups of 5
    assert {d["steps"] for d in data} == {5}
    tl = charts.to_spec(charts.make("hbm_timeline", store, device="ascend910b"))
    assert sum(len(v) for v in _datasets(tl).values()) <= 200 + 100  # 200 bins; 300 steps > 100: no shading


# ---- every chart on a real-format sample, and export ------------------------------------------------------------
@pytest.fixture(scope="module")
def demo_store(sample_store: Path) -> Path:
    return sample_store  # the session's shared ingest of the sample (conftest)


@pytest.mark.parametrize("name", list(charts.CHARTS))
def test_every_chart_draws_the_sample(name: str, demo_store: Path) -> None:
    # validated against the Vega-Lite schema here, once per chart (outputs skip it: to_spec)
    spec = charts.to_spec(charts.make(name, demo_store, run_id="demo", device="ascend910b"), validate=True)
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    json.dumps(spec, allow_nan=False)
    # the sample has no layout conversions and no L2 rates, and the 910B preset no UB peak
    if name not in ("layout_transforms", "ub_l2"):
        assert _marks(spec) != ["text"], f"{name} has data on the article sample"


def test_ub_chart_with_a_ub_peak(demo_store: Path) -> None:
    """With the article's Ascend 910 figures (UB 16 TB/s) the sample's UB bytes give bars; L2 still says why not."""
    spec = charts.to_spec(charts.make("ub_l2", demo_store, run_id="demo", device="ascend910"))
    assert sorted(_marks(spec)) == ["bar", "rule", "text"]
    assert "No L2 numbers: no L2 hit rates in the dump" in json.dumps(spec)


def test_export_formats_offline(demo_store: Path, tmp_path: Path) -> None:
    chart = charts.make("wait_attribution", demo_store, run_id="demo", device="ascend910b")
    png = charts.save(chart, tmp_path / "w.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    svg = charts.save(chart, tmp_path / "w.svg").read_text()
    assert svg.startswith("<svg") and "role-mark" in svg and "compute, HBM-saturated" in svg
    spec = json.loads(charts.save(chart, tmp_path / "w.json").read_text())
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/") and spec["datasets"]
    html = charts.save(chart, tmp_path / "w.html").read_text()
    assert "vegaEmbed" in html and 'data-chart="chart"' in html and "cdn.jsdelivr" not in html
    with pytest.raises(TraceQLError, match=r"unknown chart format '.gif'"):
        charts.save(chart, tmp_path / "w.gif")


def test_reproduce_commands_name_the_queries() -> None:
    cmds = charts.reproduce("hbm_timeline", "r1", device="ascend910b")
    assert cmds == [
        "traceql query hbm_timeline --run r1 --device ascend910b",
        "traceql query step_windows --run r1 --device ascend910b",
    ]
    assert charts.reproduce("op_hbm_bytes", "r1")[0].endswith("--param top_n=10")


# ---- CLI ----------------------------------------------------------------------------------------------------------
def test_cli_chart_help_and_list(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("chart", "--help")
    assert r.code == 0 and "traceql chart hbm_timeline --run resnet-8card -o hbm.png" in r.out
    r = cli("chart", "--list")
    assert r.code == 0
    for name in charts.CHARTS:
        assert name in r.out
    assert "queries: hbm_timeline, step_windows" in r.out


@pytest.mark.parametrize("suffix", [".png", ".svg", ".json", ".html"])
def test_cli_chart_happy_path(cli, demo_store: Path, tmp_path: Path, suffix: str) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / f"c{suffix}"
    r = cli(
        "chart",
        "op_hbm_bytes",
        "--run",
        "demo",
        "--store",
        str(demo_store),
        "--device",
        "ascend910b",
        "-o",
        str(out),
    )
    assert r.code == 0, r
    assert out.stat().st_size > 500 and f"wrote {out}" in r.err


def test_cli_chart_rank_scope(cli, demo_store: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "t.json"
    r = cli(
        "chart",
        "hbm_timeline",
        "--rank",
        "1",
        "--store",
        str(demo_store),
        "--device",
        "ascend910b",
        "-o",
        str(out),
    )
    assert r.code == 0, r
    rows = [row for v in json.loads(out.read_text())["datasets"].values() for row in v if "bw_bps" in row]
    assert rows and {row["rank"] for row in rows} == {1}


def test_cli_chart_errors(cli, demo_store: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("chart", "nope", "--store", str(demo_store))
    assert (
        r.code == 1
        and r.err.strip().startswith("error: unknown chart 'nope'")
        and len(r.err.strip().splitlines()) == 1
    )
    r = cli(
        "chart", "hbm_timeline", "--run", "ghost", "--store", str(demo_store), "-o", str(tmp_path / "x.png")
    )
    assert r.code == 1 and "no run 'ghost'" in r.err and len(r.err.strip().splitlines()) == 1
    r = cli("chart", "hbm_timeline", "--store", str(tmp_path / "absent"), "-o", str(tmp_path / "x.png"))
    assert r.code == 1 and "no traceql store at" in r.err and len(r.err.strip().splitlines()) == 1
    r = cli("chart", "hbm_timeline", "--store", str(demo_store), "-o", str(tmp_path / "x.bmp"))
    assert r.code == 1 and "unknown chart format '.bmp'" in r.err
    assert not (tmp_path / "x.png").exists()
