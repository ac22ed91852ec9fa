"""The query library itself: every header is valid and matches what DuckDB returns; params bind exactly;
the CLI lists, runs and refuses bad input with one clear line; every query runs as-is in a plain DuckDB
session (the stock-shell recipe); device presets and detection."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from _canon import MS, build_store

from traceql import derive, devices, queries
from traceql.errors import QueryError, StoreError

REQUIRED_QUERIES = {
    "op_hbm_bytes",
    "hbm_utilization",
    "hbm_timeline",
    "ub_l2_rates",
    "wait_attribution",
    "top_ops",
    "step_breakdown",
    "layout_transforms",
    "roofline",
}
_ARROW_TO_DUCK = {
    "int32": "INTEGER",
    "int64": "BIGINT",
    "double": "DOUBLE",
    "string": "VARCHAR",
    "large_string": "VARCHAR",
    "string_view": "VARCHAR",
    "bool": "BOOLEAN",
}


def _k(name: str, t0: int, t1: int, **kw: Any) -> dict[str, Any]:
    return dict(
        name=name,
        op_type=kw.pop("op_type", name),
        ts_ns=t0,
        dur_ns=t1 - t0,
        is_comm=False,
        task_type=kw.pop("task_type", "AI_CORE"),
        step=1,
        **kw,
    )


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two ranks with something for every query (values are not asserted here, only shapes and types)."""
    root = tmp_path_factory.mktemp("q") / "store"
    ranks = {}
    for rank in (0, 1):
        off = rank * MS
        ranks[rank] = {
            "kernels": [
                _k(
                    "trans_TransData_0",
                    off,
                    off + MS,
                    op_type="TransData",
                    input_shapes="8,3,4,4",
                    input_dtypes="FLOAT",
                    input_formats="NCHW",
                    output_shapes="8,1,4,4,16",
                    output_dtypes="FLOAT",
                    output_formats="NC1HWC0",
                    hbm_read_bytes=1000,
                    hbm_write_bytes=2000,
                    ub_read_bytes=10,
                    l2_hit_rate=0.5,
                    stream_id=1,
                    task_id=1,
                ),
                _k(
                    "MatMul",
                    off + MS,
                    off + 3 * MS,
                    op_type="MatMulV2",
                    input_shapes="64,128;128,256",
                    input_dtypes="FLOAT16",
                    output_shapes="64,256",
                    output_dtypes="FLOAT16",
                    stream_id=1,
                    task_id=2,
                ),
                {
                    "name": "hcom_allReduce__1",
                    "op_type": "hcom_allReduce_",
                    "ts_ns": off + 3 * MS,
                    "dur_ns": 2 * MS,
                    "is_comm": True,
                    "task_type": "HCCL",
                    "step": 1,
                },
            ],
            "comm_ops": [
                {
                    "name": "hcom_allReduce__1",
                    "op_type": "allreduce",
                    "group_name": "g",
                    "kind": "collective",
                    "ts_ns": off + 3 * MS,
                    "dur_ns": 2 * MS,
                    "transit_ns": MS,
                    "step": 1,
                    "source": "t",
                }
            ],
            "steps": [{"step": 1, "ts_ns": 0, "dur_ns": 7 * MS, "computing_ns": 3 * MS, "source": "t"}],
            "counters": [
                {
                    "track": "HBM",
                    "channel": "0",
                    "metric": "read_bw",
                    "unit": "bytes/s",
                    "ts_ns": t,
                    "value": 1e9,
                }
                for t in (0, 2 * MS, 4 * MS)
            ]
            # the AI Core clock (db AICORE_FREQ / trace_view 'AI Core Freq'): for queries/aicore_freq.sql
            + [
                {
                    "track": "AI Core Freq",
                    "channel": "",
                    "metric": "freq",
                    "unit": "MHz",
                    "ts_ns": 0,
                    "value": 1800.0,
                }
            ]
            # NETDEV_STATS and host usage (msprof db, parsers._db_system): link_congestion.sql, host_usage.sql
            + [
                {
                    "track": "NETDEV",
                    "channel": "",
                    "metric": "mac_rx_pfc_pkt",
                    "unit": "count",
                    "ts_ns": 4 * MS,
                    "value": 3.0,
                },
                {
                    "track": "Host CPU",
                    "channel": "0",
                    "metric": "usage",
                    "unit": "ratio",
                    "ts_ns": 0,
                    "value": 0.5,
                },
            ],
            # MEMCPY_INFO (msprof db): copy_traffic.sql
            "copies": [
                {"ts_ns": MS, "dur_ns": 1000, "bytes": 4096, "direction": "host to device", "source": "t"}
            ],
            "l2_cache": [{"stream_id": 1, "task_id": 2, "op_name": "MatMul", "hit_rate": 0.7}],
            # a FLOPs range as torch_npu's _flops_hook writes it (mstx domain mfu_flops): for queries/mfu.sql
            "host_ops": [{"name": "1000000-aten::mm", "cat": "mstx", "ts_ns": MS, "dur_ns": MS}],
            # a pipeline group as profiler_metadata.json names it: for queries/pipeline_stages.sql
            "run_meta": [
                {"key": "parallel_group_info.g_pp.group_name", "value": "pp"},
                {"key": "parallel_group_info.g_pp.global_ranks", "value": "[0, 1]"},
            ],
            # the profiler's own split (db OVERLAP_ANALYSIS): for queries/overlap_check.sql
            "overlap": [{"step": 1, "type": "Computing", "ts_ns": 0, "dur_ns": 3 * MS, "source": "t"}],
        }
    st = build_store(root, "small", ranks, device="Ascend910B")
    # its analysis tables built, as `traceql ingest` leaves a store: no test's stderr depends on being the first
    # to open it (the build notes itself there)
    assert derive.prepare(st, ["small"]) == []
    return root


# ---- headers ---------------------------------------------------------------------------------------------
def test_the_required_queries_exist() -> None:
    names = {s.name for s in queries.list_queries()}
    assert names >= REQUIRED_QUERIES


@pytest.mark.parametrize("spec", queries.list_queries(), ids=lambda s: s.name)
def test_header_is_complete(spec: queries.QuerySpec) -> None:
    assert spec.name == spec.path.stem
    assert len(spec.description) > 20 and spec.description[0].isupper()
    assert spec.columns, "every query declares its columns"
    for p in spec.params:
        assert p.type in queries.TYPES and p.doc, p
        assert p.required or p.default is None or isinstance(p.default, (int, float, str, bool))
        assert f"${p.name}" in spec.sql, f"declared param {p.name} is never used"
    used = set(re.findall(r"\$([A-Za-z_]\w*)", spec.sql))
    assert used <= {p.name for p in spec.params}, f"undeclared params {used - {p.name for p in spec.params}}"
    for c in spec.columns:
        assert c.doc, f"column {c.name} has no doc"
    assert len({c.name for c in spec.columns}) == len(spec.columns)


@pytest.mark.parametrize("spec", queries.list_queries(), ids=lambda s: s.name)
def test_declared_columns_equal_what_duckdb_returns(spec: queries.QuerySpec, small_store: Path) -> None:
    params = {p.name: "MatMul" for p in spec.params if p.required}  # op_calls' op
    t = queries.run(spec.name, small_store, params=params, device="ascend910b")
    got = [(f.name, _ARROW_TO_DUCK.get(str(f.type), str(f.type))) for f in t.schema]
    assert got == [(c.name, c.type) for c in spec.columns]
    assert t.num_rows > 0, f"{spec.name} returned nothing on a store built to exercise it"


def test_header_parser_rejects_bad_headers(tmp_path: Path) -> None:
    bad = {
        "wrong.sql": "-- name: other\n-- description: x\nSELECT 1;\n",
        "nodesc.sql": "-- name: nodesc\nSELECT 1;\n",
        "badparam.sql": "-- name: badparam\n-- description: x\n-- param: n FLOATY = 1 -- doc\nSELECT $n;\n",
        "unquoted.sql": "-- name: unquoted\n-- description: x\n-- param: s VARCHAR = abc -- doc\nSELECT $s;\n",
        "baddefault.sql": "-- name: baddefault\n-- description: x\n-- param: n INTEGER = abc -- doc\nSELECT $n;\n",
    }
    for fname, text in bad.items():
        p = tmp_path / fname
        p.write_text(text)
        with pytest.raises(QueryError):
            queries.parse_file(p)
    ok = tmp_path / "ok.sql"
    ok.write_text(
        "-- name: ok\n-- description: fine\n-- param: s VARCHAR = 'a''b' -- doc\n-- param: r INTEGER -- required\n"
        "-- column: x VARCHAR -- doc\nSELECT $s AS x;\n"
    )
    spec = queries.parse_file(ok)
    assert spec.params[0].default == "a'b" and spec.params[1].required


# ---- params ------------------------------------------------------------------------------------------------
def test_params_are_converted_by_declared_type() -> None:
    spec = queries.get("hbm_timeline")
    b = queries.bind_params(spec, {"bin_ns": "1000", "peak_hbm_bps": "1.5e12"})
    assert b == {"bin_ns": 1000, "max_bins": 200, "top_k": 3, "peak_hbm_bps": 1.5e12}
    assert queries.bind_params(spec, {"bin_ns": 7})["bin_ns"] == 7
    assert queries.bind_params(spec, {"peak_hbm_bps": "null"})["peak_hbm_bps"] is None
    with pytest.raises(QueryError, match="not a valid BIGINT"):
        queries.bind_params(spec, {"bin_ns": "1.5"})
    with pytest.raises(QueryError, match="not a valid BIGINT"):
        queries.bind_params(spec, {"bin_ns": True})
    assert queries.convert("yes", "BOOLEAN") is True and queries.convert("0", "BOOLEAN") is False
    with pytest.raises(QueryError):
        queries.convert(3, "VARCHAR")


def test_unknown_missing_extra_params_list_the_declared_ones(small_store: Path) -> None:
    with pytest.raises(QueryError, match=r"unknown query 'nope'; queries: .*op_hbm_bytes"):
        queries.run("nope", small_store)
    with pytest.raises(
        QueryError,
        match=r"op_calls: missing parameter 'op' \(declared: op VARCHAR \(required\), limit_n INTEGER = 1000",
    ):
        queries.run("op_calls", small_store)
    with pytest.raises(
        QueryError,
        match=r"top_ops: unknown parameter 'topn' \(declared: top_n INTEGER = 20, by VARCHAR = 'op_type'\)",
    ):
        queries.run("top_ops", small_store, params={"topn": 3})
    with pytest.raises(StoreError, match="no run 'ghost'"):
        queries.run("top_ops", small_store, run_id="ghost")


def test_run_reuses_a_connection_without_changing_it(small_store: Path) -> None:
    from traceql import engine

    con = engine.connect(small_store)
    t = queries.run("top_ops", con=con, rank=1)
    assert t.num_rows > 0
    # the caller's views still see every rank and no helper macro leaked into its session
    assert con.execute("SELECT count(DISTINCT rank) FROM kernels").fetchone()[0] == 2
    assert (
        con.execute(
            "SELECT count(*) FROM duckdb_functions() WHERE function_name = '_kernel_bytes'"
        ).fetchone()[0]
        == 0
    )


def test_result_metadata_says_which_peaks(small_store: Path) -> None:
    t = queries.run("op_hbm_bytes", small_store)
    meta = t.schema.metadata
    assert b"Ascend910B" in meta[b"traceql.peaks_note"] and b"ascend910b" in meta[b"traceql.peaks_note"]
    assert meta[b"traceql.run_id"] == b"small"


# ---- every query runs as plain SQL in a DuckDB session (the stock duckdb shell recipe) -----------------------
@pytest.mark.parametrize("spec", queries.list_queries(), ids=lambda s: s.name)
def test_runs_as_plain_sql_like_the_duckdb_shell(spec: queries.QuerySpec, small_store: Path) -> None:
    import duckdb

    params = {p.name: "MatMul" for p in spec.params if p.required}
    script = queries.shell_script(spec.name, params, devices.preset("ascend910b").peaks())
    con = duckdb.connect()
    # what `.read views.sql` does in the shell, run from the store directory (paths are relative)
    import os

    cwd = os.getcwd()
    os.chdir(small_store)
    try:
        # `.read views.sql` in the store directory (its paths are relative), then the rest of the script
        for stmt in duckdb.extract_statements((small_store / "views.sql").read_text()):
            con.execute(stmt.query)
        assert script.splitlines()[0] == ".read views.sql"
        last = None
        for stmt in duckdb.extract_statements(script.split("\n", 1)[1]):
            last = con.execute(stmt.query)
        got = last.fetchall() if last is not None else []
    finally:
        os.chdir(cwd)
    lib = queries.run(spec.name, small_store, params=params, device="ascend910b")
    assert len(got) == lib.num_rows  # one run in the store: the unscoped shell sees the same rows


# ---- CLI -----------------------------------------------------------------------------------------------------
def test_cli_help_has_an_example(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("query", "--help")
    assert r.code == 0 and "traceql query op_hbm_bytes --param top_n=10" in r.out


def test_cli_list(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("query", "--list", "--format", "csv")
    assert r.code == 0
    for name in REQUIRED_QUERIES:
        assert name in r.out
    assert "top_n INTEGER = 10" in r.out
    r = cli("query", "--list", "--format", "json")
    assert r.code == 0 and '"columns"' in r.out


def test_cli_happy_path(cli, small_store: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("query", "op_hbm_bytes", "--store", small_store, "--param", "top_n=1", "--format", "csv")
    assert r.code == 0, r
    lines = r.out.strip().splitlines()
    assert lines[0].startswith('"run_id","name","op_type"') and len(lines) == 2
    assert "preset ascend910b" in r.err  # which peaks were used goes to stderr
    r = cli(
        "query",
        "wait_attribution",
        "--store",
        small_store,
        "--run",
        "small",
        "--rank",
        "1",
        "--format",
        "json",
    )
    assert r.code == 0 and '"verdict"' in r.out and '"rank": 0' not in r.out
    r = cli("query", "hbm_utilization", "--store", small_store, "--peak-hbm-gbps", "1000", "--format", "csv")
    assert r.code == 0 and "1000000000000" in r.out.replace(".0", "").replace("e+12", "000000000000")


def test_cli_baseline_fills_scaling(cli, small_store: Path) -> None:  # type: ignore[no-untyped-def]
    r = cli("query", "wait_attribution", "--store", small_store, "--baseline", "small", "--format", "json")
    assert r.code == 0, r
    import json

    run_row = json.loads(r.out)[0]
    assert run_row["scope"] == "run" and run_row["scaling_vs_baseline"] == pytest.approx(1.0)
    r = cli("query", "top_ops", "--store", small_store, "--baseline", "small")
    assert r.code == 1 and "baseline_step_ns" in r.err


@pytest.mark.parametrize(
    "args,message",
    [
        (["query", "nope"], "unknown query 'nope'; queries:"),
        (["query", "op_calls"], "op_calls: missing parameter 'op' (declared: op VARCHAR (required)"),
        (
            ["query", "top_ops", "--param", "x=1"],
            "top_ops: unknown parameter 'x' (declared: top_n INTEGER = 20",
        ),
        (["query", "top_ops", "--param", "top_n"], "--param 'top_n': expected NAME=VALUE"),
        (["query", "top_ops", "--param", "top_n=abc"], "'abc' is not a valid INTEGER"),
        (["query", "top_ops", "--param", "by=size"], "param by must be op_type or name"),
        (["query", "top_ops", "--run", "ghost"], "no run 'ghost'"),
        (["query", "hbm_utilization", "--device", "tpu9"], "unknown device 'tpu9'; presets:"),
    ],
)
def test_cli_bad_input_is_one_line_exit_1(cli, small_store: Path, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    r = cli(*args, "--store", small_store)
    assert r.code == 1, r
    assert message in r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


def test_cli_show_sql(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("query", "op_hbm_bytes", "--show-sql", "--device", "h200", "--param", "top_n=3")
    assert r.code == 0
    assert (
        r.out.startswith(".read views.sql")
        and "EXECUTE op_hbm_bytes(top_n := 3, peak_hbm_bps := 4800000000000.0);" in r.out
    )


# ---- devices -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,key",
    [
        ("Ascend910B", "ascend910b"),
        ("Ascend910B3", "ascend910b3"),
        ("Ascend910B4", "ascend910b4"),
        ("Ascend910A", "ascend910"),
        ("Ascend910ProB", "ascend910"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200"),
        ("Tesla V100-SXM2-16GB", None),
        ("Ascend910_9391", "ascend910c"),
        ("AMD Instinct MI250X/MI250", None),
        ("", None),
    ],
)
def test_device_detection(name: str, key: str | None) -> None:
    d = devices.detect(name)
    assert (d.key if d else None) == key


def test_device_presets_and_overrides() -> None:
    keys = {d.key for d in devices.PRESETS}
    assert {"ascend910", "ascend910b", "a100-40gb", "a100-80gb", "h100-sxm", "h200"} <= keys
    art = devices.preset("ascend910")  # the article's table
    assert (art.peak_hbm_bps, art.peak_l2_bps, art.peak_ub_bps) == (1.23e12, 1.2e12, 16e12)
    assert art.ub_bytes == 2 * 2**20 and art.l2_bytes == 8 * 2**20 and art.hbm_bytes == 64 * 2**30
    assert (
        devices.preset("h200").peak_hbm_bps == 4.8e12 and devices.preset("A100-40GB").peak_hbm_bps == 1555e9
    )
    assert all(d.source for d in devices.PRESETS)
    c = devices.resolve(detected=["Ascend910B"], overrides={"peak_hbm_bps": 1.8e12})
    assert c.device is not None and c.device.key == "ascend910b" and c.peaks["peak_hbm_bps"] == 1.8e12
    c = devices.resolve(detected=["mystery chip"])
    assert c.device is None and c.peaks["peak_hbm_bps"] is None and "HBM peak unknown" in c.note
    with pytest.raises(QueryError, match="unknown device"):
        devices.preset("tpu9")


def test_device_inferred_from_vector_core_tasks_when_the_dump_names_none(tmp_path: Path) -> None:
    import json

    root = tmp_path / "store"
    st = build_store(root, "vec", {0: {"kernels": [_k("Add", 0, MS, task_type="AI_VECTOR_CORE")]}})
    build_store(root, "cube", {0: {"kernels": [_k("Add", 0, MS)]}}, store=st)
    t = queries.run("op_hbm_bytes", root, run_id="vec")
    assert "inferred" in t.schema.metadata[b"traceql.peaks_note"].decode()
    assert (
        json.loads(t.schema.metadata[b"traceql.peaks"])["peak_hbm_bps"]
        == devices.preset("ascend910b").peak_hbm_bps
    )
    t = queries.run("op_hbm_bytes", root, run_id="cube")  # AI_CORE only: could be any Ascend chip -> unknown
    assert json.loads(t.schema.metadata[b"traceql.peaks"])["peak_hbm_bps"] is None


def _across_two_windows(root: Path, **kernel: Any) -> None:
    """A store with step windows [10, 20) and [20, 30) ms and four kernels 1 ms long (`kernel`: their other
    columns): A (step 1, at 11 ms) in window 1; B (step 1, at 22 ms: launched in step 1, run in step 2) and C (no
    step, at 25 ms) in window 2; D (step 2, at 5 ms) before every window, in none."""
    kernels = [
        {"name": n, "step": s, "ts_ns": ts, "dur_ns": MS, **kernel}
        for n, s, ts in (("A", 1, 11 * MS), ("B", 1, 22 * MS), ("C", None, 25 * MS), ("D", 2, 5 * MS))
    ]
    steps = [{"step": s, "ts_ns": s * 10 * MS, "dur_ns": 10 * MS, "source": "step_trace"} for s in (1, 2)]
    build_store(root, "w", {0: {"kernels": kernels, "steps": steps}}, device="Ascend910B")


def test_hbm_utilization_puts_each_kernel_in_the_window_its_start_is_in(tmp_path: Path) -> None:
    """A kernel is in the window its start lies in, whatever step the profiler gave it (_across_two_windows).
    Each moves a 1024 x 1024 float16 tensor in and one out, 4 MiB modeled (by hand: 1,048,576 x 2 bytes x 2)."""
    t = "1024,1024", "float16"
    _across_two_windows(
        tmp_path / "s", op_type="Tanh", task_type="AI_VECTOR_CORE", input_shapes=t[0], input_dtypes=t[1],
        output_shapes=t[0], output_dtypes=t[1],
    )  # fmt: skip
    rows = queries.run(
        "hbm_utilization", tmp_path / "s", run_id="w", params={"peak_hbm_bps": 1.6e12}
    ).to_pylist()
    by_step = {r["step"]: r["modeled_bytes"] for r in rows if r["scope"] == "step"}
    assert by_step == {1: 4 * 1024 * 1024, 2: 2 * 4 * 1024 * 1024}


def test_profilerstep_windows_count_the_kernels_that_start_in_them(tmp_path: Path) -> None:
    """phases: a ProfilerStep window counts the kernels whose start is in it, whatever step the profiler gave them
    (_across_two_windows, by hand): A in #1; B and C in #2; D in none."""
    _across_two_windows(tmp_path / "s", task_type="AI_CORE")
    rows = queries.run("phases", tmp_path / "s", run_id="w").to_pylist()
    got = {r["marker"]: (r["kernels"], r["kernel_ns"]) for r in rows}
    assert got == {"ProfilerStep#1": (1, MS), "ProfilerStep#2": (2, 2 * MS)}


def test_peer_wait_counts_the_part_of_a_saturated_kernel_inside_it(tmp_path: Path) -> None:
    """Rank 0 enters an allreduce at 2 ms; rank 1, the last member, at 4 ms, after a kernel from 1 to 3.5 ms at
    1.5 TB/s (3.75e9 PMU bytes in 2.5 ms: over 0.8 x the 910B's 1.6 TB/s). Of rank 0's 2 ms of peer wait, rank 1
    spent 2 to 3.5 ms in saturated compute (the kernel reaches into the wait from before it): 0.75, by hand."""
    ranks: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for rank, enter in ((0, 2 * MS), (1, 4 * MS)):
        ar = {"name": "hcom_allReduce__1", "op_type": "allreduce", "group_name": "g", "kind": "collective",
              "ts_ns": enter, "dur_ns": 6 * MS - enter, "step": 1, "source": "t"}  # fmt: skip
        kernels = [_k("hcom_allReduce__1", enter, 6 * MS, op_type="hcom_allReduce_", task_type="HCCL")]
        kernels[0]["is_comm"] = True
        if rank == 1:
            kernels.append(
                _k(
                    "Add",
                    MS,
                    3 * MS + MS // 2,
                    op_type="Add",
                    hbm_read_bytes=3_750_000_000,
                    hbm_write_bytes=0,
                )
            )
        ranks[rank] = {
            "kernels": kernels,
            "comm_ops": [ar],
            "steps": [{"step": 1, "ts_ns": 0, "dur_ns": 10 * MS, "source": "t"}],
        }
    build_store(tmp_path / "s", "w", ranks, device="Ascend910B")
    rows = queries.run("comm_skew", tmp_path / "s", run_id="w").to_pylist()
    r0 = next(r for r in rows if r["rank"] == 0)
    assert (r0["last_rank"], r0["peer_wait_ns"]) == (1, 2 * MS)
    assert r0["last_rank_hbm_saturated_frac"] == pytest.approx(0.75)


def test_device_idle_reads_a_host_pieces_idle_time_from_its_own_window(tmp_path: Path) -> None:
    """Step windows [0, 10) and [10, 20) ms, kernels at 0-2, 5-10, 10-12 and 15-20 ms: a Free gap of 3 ms in each
    window. aclrtSynchronize runs 11-14 ms: its piece starts inside a kernel, after step 1's gap, and 2 ms of
    step 2's gap (12-14 ms) fall in it, by hand. Step 1 has no host piece and no host-attributed idle time."""
    kernels = [_k(f"K{i}", a * MS, b * MS) for i, (a, b) in enumerate(((0, 2), (5, 10), (10, 12), (15, 20)))]
    for k, step in zip(kernels, (1, 1, 2, 2), strict=True):
        k["step"] = step
    steps = [{"step": s, "ts_ns": (s - 1) * 10 * MS, "dur_ns": 10 * MS, "source": "t"} for s in (1, 2)]
    host = [{"name": "aclrtSynchronize", "ts_ns": 11 * MS, "dur_ns": 3 * MS, "pid": 1, "tid": 1}]
    build_store(tmp_path / "s", "w", {0: {"kernels": kernels, "steps": steps, "host_ops": host}})
    rows = queries.run("device_idle", tmp_path / "s", run_id="w").to_pylist()
    by_step = {r["step"]: r for r in rows if r["scope"] == "step"}
    assert (by_step[1]["free_ns"], by_step[2]["free_ns"]) == (3 * MS, 3 * MS)
    assert (by_step[2]["idle_sync_ns"], by_step[2]["free_sync_ns"]) == (2 * MS, 2 * MS)
    assert (by_step[1]["idle_sync_ns"], by_step[1]["free_sync_ns"]) == (0, 0)


def test_a_free_gap_cut_by_a_counter_sample_is_one_gap(tmp_path: Path) -> None:
    """device_idle on a step window [0, 10) ms with kernels at 0-2, 6-7 and 8-10 ms: Free gaps 2-6 and 7-8 ms.
    The rank's bandwidth is sampled (HBM read_bw samples at 0, 4, 8 and 10 ms, no PMU bytes), so its timeline is
    cut at 4 ms too: the first gap is two touching free segments. By hand: 2 gaps, the largest 4 ms, 5 ms free."""
    kernels = [_k("Add", a * MS, b * MS, task_type="AI_VECTOR_CORE") for a, b in ((0, 2), (6, 7), (8, 10))]
    counters = [
        {
            "track": "HBM",
            "channel": "0",
            "metric": "read_bw",
            "unit": "bytes/s",
            "ts_ns": t * MS,
            "value": 1e9,
        }
        for t in (0, 4, 8, 10)
    ]
    steps = [{"step": 1, "ts_ns": 0, "dur_ns": 10 * MS, "source": "step_trace"}]
    build_store(
        tmp_path / "s",
        "w",
        {0: {"kernels": kernels, "counters": counters, "steps": steps}},
        device="Ascend910B",
    )
    rows = queries.run("device_idle", tmp_path / "s", run_id="w").to_pylist()
    step = next(r for r in rows if r["scope"] == "step")
    assert (step["free_gaps"], step["largest_free_gap_ns"], step["free_ns"]) == (2, 4 * MS, 5 * MS)


def test_repeated_reads_bursts_end_at_a_gap_and_at_every_stream_and_step(tmp_path: Path) -> None:
    """repeated_reads on one rank, every kernel a Mul 10 us long reading one 1024 x 1024 float16 tensor T
    (2,097,152 bytes) or an 8-element one, writing 8 elements (so no read is its predecessor's output).
    Stream 1 step 1: T, T, T (a burst of 3); stream 1 step 2: T, T (2: under min_reads 3); stream 2 step 1:
    T, T (2); stream 3 step 1: T, T, T, five small reads, T, T, T (two bursts of 3: the gap of 6 kernels is over
    max_distance 4). By hand: 3 bursts, 9 reads, 6 extra reads, 6 x 2,097,152 = 12,582,912 extra bytes. Bursts
    running on across a stream or step edge would make stream 1's 5 reads one burst."""
    big, small = "1024,1024", "8"
    plan = [
        (1, 1, [big] * 3),
        (1, 2, [big] * 2),
        (2, 1, [big] * 2),
        (3, 1, [big] * 3 + [small] * 5 + [big] * 3),
    ]
    kernels = []
    for stream, step, reads in plan:
        for shape in reads:
            # the streams' kernels interleave in time (the i-th of each stream at i x 100 us), as on a device
            i = sum(1 for k in kernels if k["stream_id"] == stream)
            t = i * 100_000 + stream * 20_000
            k = _k("Mul", t, t + 10_000, stream_id=stream, task_type="AI_VECTOR_CORE", input_shapes=shape,
                   input_dtypes="float16", output_shapes=small, output_dtypes="float16")  # fmt: skip
            kernels.append({**k, "step": step})
    steps = [{"step": s, "ts_ns": 0, "dur_ns": 2 * MS, "source": "step_trace"} for s in (1, 2)]
    build_store(tmp_path / "s", "w", {0: {"kernels": kernels, "steps": steps}}, device="Ascend910B")
    run = next(
        r
        for r in queries.run("repeated_reads", tmp_path / "s", run_id="w").to_pylist()
        if r["scope"] == "run"
    )
    assert (run["bursts"], run["reads"], run["extra_reads"], run["extra_bytes"]) == (3, 9, 6, 12_582_912)


def test_fusion_chains_end_at_every_stream_edge(tmp_path: Path) -> None:
    """fusion_chains on one rank, two streams, every kernel 10 us long, 10 us apart. Stream 1: Conv2D writing a
    16x16 float16 tensor y (512 bytes), then Add reading y and a 16x1 tensor. Stream 2: MatMul writing an
    8-element tensor nothing reads, then the same Conv2D -> Add. So the links (each Add reading the Conv2D's y)
    sit at positions 2 on stream 1 and 3 on stream 2: consecutive numbers on different streams. By hand: two
    chains 'Conv2D -> Add', 4 kernels; each link saves y written + y read = 1,024 bytes, 2,048 in all. A chain
    running on across the stream edge would be one 'Conv2D -> Add -> Add'."""
    us = 1_000
    y = {"output_shapes": "16,16", "output_dtypes": "float16"}
    add = {
        "input_shapes": "16,16;16,1",
        "input_dtypes": "float16",
        "output_shapes": "16,16",
        "output_dtypes": "float16",
    }
    kernels = [
        _k("Conv2D", 0, 10 * us, stream_id=1, input_shapes="16,16", input_dtypes="float16", **y),
        _k("Add", 20 * us, 30 * us, stream_id=1, task_type="AI_VECTOR_CORE", **add),
        _k(
            "MatMul",
            0,
            10 * us,
            stream_id=2,
            input_shapes="8",
            input_dtypes="float16",
            output_shapes="8",
            output_dtypes="float16",
        ),
        _k("Conv2D", 20 * us, 30 * us, stream_id=2, input_shapes="16,16", input_dtypes="float16", **y),
        _k("Add", 40 * us, 50 * us, stream_id=2, task_type="AI_VECTOR_CORE", **add),
    ]
    steps = [{"step": 1, "ts_ns": 0, "dur_ns": MS, "source": "step_trace"}]
    build_store(tmp_path / "s", "f", {0: {"kernels": kernels, "steps": steps}}, device="Ascend910B")
    rows = queries.run("fusion_chains", tmp_path / "s", run_id="f").to_pylist()
    run = next(r for r in rows if r["scope"] == "run")
    patterns = [(r["pattern"], r["occurrences"], r["calls"]) for r in rows if r["scope"] == "pattern"]
    assert patterns == [("Conv2D -> Add", 2, 4)]
    assert (run["occurrences"], run["calls"], run["saved_bytes"]) == (2, 4, 2048)
