"""CLI uniformity (issue 15, item 6; the re-run command builder of item 5): every --format and --fail-on is a
Click choice (exit 2 with Click's message on a bad value), machine formats carry dump text byte for byte (never
rich's emoji codes or markup), tables off a terminal keep every number whole, a zero-row result prints its header.

The hostile store: the bundled 2-rank torch_npu sample, copied into a folder named `d:fire:d [bold]` and with
rank 0's kernel `LayerNormV3_0` renamed `LayerNormV3:fire:[bold]_0` (in kernel_details.csv and trace_view.json
of the copy; the sample itself is only read). Expected values are the raw strings written into the copy, the
copy's own path, and numbers read with duckdb straight from the store's Parquet files — never traceql's output.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import ROOT, SAMPLES

KERNEL = "LayerNormV3:fire:[bold]_0"
FOLDER = "d:fire:d [bold]"
EMOJI = "\N{FIRE}"  # what rich's emoji codes turn `:fire:` into

# every command that has --format, with the arguments it needs besides it (checked against the app below)
# ("{store}" stands for the hostile store; schema reads no store)
FORMAT_COMMANDS: dict[str, list[str]] = {
    "runs": ["--store", "{store}"],
    "sql": ["SELECT 1", "--store", "{store}"],
    "query": ["--list"],
    "schema": [],
    "findings": ["--store", "{store}"],
    "check": ["--store", "{store}"],
    "export": ["-o", "-", "--store", "{store}"],
    "compare": ["h", "h", "--store", "{store}"],
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(store, dump) for the hostile copy of the sample, ingested as run `h`."""
    from traceql.ingest import ingest

    base = tmp_path_factory.mktemp("uniformity")
    dump = base / FOLDER / "torch_npu_2rank"
    shutil.copytree(SAMPLES / "torch_npu_2rank", dump)
    out = dump / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    for name in ("kernel_details.csv", "trace_view.json"):
        p = out / name
        text = p.read_text(encoding="utf-8")
        assert "LayerNormV3_0" in text
        p.write_text(text.replace("LayerNormV3_0", KERNEL), encoding="utf-8")
    store = base / "store"
    ingest(dump, store=store, name="h", workers=1)
    return store, dump


def _strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def _click_app() -> Any:
    import typer

    from traceql.cli import app

    return typer.main.get_command(app)


# ---- help and choices ---------------------------------------------------------------------------------------
def test_every_command_has_help_with_an_example(cli) -> None:  # type: ignore[no-untyped-def]
    for name in sorted(_click_app().commands):
        r = cli(name, "--help")
        assert r.code == 0, (name, r)
        assert "Example" in r.out, f"traceql {name} --help has no example"


def test_every_command_with_format_is_tested_below() -> None:
    """The bad-value test below covers every command that has --format (a new one must be listed)."""
    app = _click_app()
    with_format = {n for n, c in app.commands.items() if any("--format" in p.opts for p in c.params)}
    assert with_format == set(FORMAT_COMMANDS), (
        "a command gained or lost --format: list it in FORMAT_COMMANDS"
    )


def test_fail_on_choices_are_the_firing_severities() -> None:
    from traceql.cli._options import Severity
    from traceql.findings import SEVERITIES

    assert [s.value for s in Severity] == [s for s in SEVERITIES if s != "info"]


@pytest.mark.parametrize("command", sorted(FORMAT_COMMANDS))
def test_bad_format_exits_2_with_clicks_message(cli, hostile, command: str) -> None:  # type: ignore[no-untyped-def]
    store, _ = hostile
    args = [a.replace("{store}", str(store)) for a in FORMAT_COMMANDS[command]]
    r = cli(command, *args, "--format", "xml")
    assert r.code == 2, r
    assert "Invalid value for '--format'" in r.err and "'xml' is not one of" in r.err, r
    assert r.out == ""


def test_bad_fail_on_exits_2(cli, hostile) -> None:  # type: ignore[no-untyped-def]
    store, _ = hostile
    r = cli("findings", "--store", store, "--fail-on", "severe")
    assert r.code == 2, r
    assert "Invalid value for '--fail-on'" in r.err and "'severe' is not one of" in r.err, r


# ---- dump text byte for byte --------------------------------------------------------------------------------
def test_runs_json_and_table_carry_the_path_as_it_is(cli, hostile) -> None:  # type: ignore[no-untyped-def]
    store, dump = hostile
    r = cli("runs", "--store", store, "--format", "json")
    assert r.code == 0, r
    assert json.loads(r.out)["h"]["source"] == str(dump.resolve())
    r = cli("runs", "--store", store)
    assert r.code == 0, r
    assert str(dump.resolve()) in r.out and EMOJI not in r.out  # the table: one line, no emoji, no markup


def test_sql_json_and_csv_are_exact(cli, hostile) -> None:  # type: ignore[no-untyped-def]
    store, dump = hostile
    r = cli("sql", "SELECT source FROM runs", "--store", store, "--format", "json")
    assert r.code == 0, r
    assert json.loads(r.out) == [{"source": str(dump.resolve())}]
    q = "SELECT DISTINCT name FROM kernels WHERE name LIKE '%fire%'"
    r = cli("sql", q, "--store", store, "--format", "csv")
    assert r.code == 0, r
    assert list(csv.reader(io.StringIO(r.out))) == [["name"], [KERNEL]]


def test_query_json_and_csv_are_exact(cli, hostile) -> None:  # type: ignore[no-untyped-def]
    store, _ = hostile
    r = cli("query", "roofline", "--store", store, "--format", "json")
    assert r.code == 0, r
    assert KERNEL in [row["name"] for row in json.loads(r.out)]
    r = cli("query", "roofline", "--store", store, "--format", "csv")
    assert r.code == 0, r
    assert KERNEL in [row["name"] for row in csv.DictReader(io.StringIO(r.out))]
    r = cli("query", "roofline", "--store", store)  # the table: the name as it is
    assert KERNEL in r.out and EMOJI not in r.out


def test_findings_export_compare_check_json_carry_the_name_as_it_is(cli, hostile) -> None:  # type: ignore[no-untyped-def]
    store, _ = hostile
    for args in (
        ["findings", "--format", "json"],
        ["export", "--format", "chrome", "-o", "-", "--no-findings"],
        ["compare", "h", "h", "--format", "json", "--no-fused-groups"],
    ):
        r = cli(*args, "--store", store)
        assert r.code == 0, (args, r)
        assert EMOJI not in r.out, args
        strings = list(_strings(json.loads(r.out)))
        assert any(KERNEL in s for s in strings), f"{args}: the kernel's name is not in the JSON as it is"
    r = cli("check", "--format", "json", "--store", store)
    assert r.code == 0, r
    assert set(json.loads(r.out)) == {"h"}


def test_compare_json_is_the_same_in_every_process(hostile) -> None:  # type: ignore[no-untyped-def]
    """A run against itself ties every delta: the JSON must not follow Python's per-process string hashing
    (set order) or DuckDB's group order. Two processes with different hash seeds, byte-identical output."""
    store, _ = hostile
    outs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        r = subprocess.run(
            [sys.executable, "-m", "traceql", "compare", "h", "h", "--format", "json", "--store", str(store)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1] == outs[2]


def test_schema_json_is_the_docs(cli) -> None:  # type: ignore[no-untyped-def]
    from traceql import schema

    r = cli("schema", "--format", "json")
    assert r.code == 0, r
    docs = json.loads(r.out)
    canonical = {n: schema.describe(n) for n in ["runs", *schema.TABLE_NAMES]}
    assert {n: d for n, d in docs.items() if n in canonical} == canonical
    # and the derived tables users query (queries/derived), each with its grain
    from traceql import derived_tables

    for t in derived_tables.tables():
        assert t.grain in docs[t.name], t.name
    r = cli("schema", "kernels", "--format", "json")
    assert [c["name"] for c in json.loads(r.out)] == [c.name for c in schema.columns("kernels")]


def test_ingest_summary_line_is_plain_text(cli, tmp_path: Path, hostile) -> None:  # type: ignore[no-untyped-def]
    _, dump = hostile
    r = cli("ingest", dump, "--store", tmp_path / "s2", "--name", "x", "-q", "--no-check", "--no-prepare")
    assert r.code == 0, r
    assert r.out.startswith("stored run 'x': torch_npu_text, 2 rank(s)") and EMOJI not in r.out + r.err
    assert str(dump) in r.err  # "detected ... in PATH", the folder name as it is


# ---- tables off a terminal ----------------------------------------------------------------------------------
def _run_pipe(*args: object) -> str:
    """`traceql ARGS` in a subprocess with stdout a pipe and COLUMNS=80 (a CI log, `| less`, `| grep`)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    p = subprocess.run(
        [sys.executable, "-m", "traceql", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


def _table_rows(text: str) -> list[list[str]]:
    """The body rows of a rich table (lines between the header rule and the bottom rule)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("┡")) + 1
    body = [ln for ln in lines[start:] if not ln.startswith("└")]
    for ln in body:
        assert ln.startswith("│") and ln.rstrip().endswith("│"), f"a continuation line: {ln!r}"
    return [[c.strip() for c in ln.strip()[1:-1].split("│")] for ln in body if ln.strip()]


def test_pipe_table_at_80_columns_keeps_every_number_whole(hostile) -> None:
    store, _ = hostile
    cols = "rank, name, op_type, ts_ns, dur_ns, stream_id, task_id"
    order = "ORDER BY rank, ts_ns, name"
    out = _run_pipe("sql", f"SELECT {cols} FROM kernels {order}", "--store", store)
    assert max(len(ln) for ln in out.splitlines()) > 80  # the table is wider than COLUMNS: nothing folded
    got = _table_rows(out)
    # independently: duckdb over the store's Parquet files
    files = [str(p) for p in sorted(store.glob("runs/*/kernels/*.parquet"))]
    con = duckdb.connect()
    want = con.execute(f"SELECT {cols} FROM read_parquet(?, union_by_name=true) {order}", [files]).fetchall()
    assert len(want) == 120
    assert got == [["" if v is None else str(v) for v in row] for row in want]
    assert all(re.fullmatch(r"\d{19}", r[3]) for r in got)  # every ts_ns whole on its line


def test_pipe_table_runs_keeps_the_row_count_whole(hostile) -> None:
    store, _ = hostile
    rows = _table_rows(_run_pipe("runs", "--store", store))
    assert [r[0] for r in rows] == ["h"]
    manifest = json.loads((store / "manifest.json").read_text(encoding="utf-8"))
    tables = manifest["runs"]["h"]["rows"]  # the parsed tables (derived ones are listed apart)
    con = duckdb.connect()
    n = 0
    for t in tables:
        files = [str(p) for p in sorted(store.glob(f"runs/*/{t}/*.parquet"))]
        if files:
            n += con.execute("SELECT count(*) FROM read_parquet(?, union_by_name=true)", [files]).fetchone()[
                0
            ]
    assert rows[0][5] == str(n)  # columns: run, format, ranks, device, peaks from, rows


# ---- zero rows ----------------------------------------------------------------------------------------------
def test_zero_row_results_print_their_header(cli, hostile, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store, _ = hostile
    files = [str(p) for p in sorted(store.glob("runs/*/kernels/*.parquet"))]
    parquet_cols = [
        d[0] for d in duckdb.connect().execute("SELECT * FROM read_parquet(?) LIMIT 0", [files]).description
    ]
    # wide (every kernels column: too many for one line per row) and narrow
    r = cli("sql", "SELECT * FROM kernels LIMIT 0", "--store", store)
    assert r.code == 0, r
    assert "(0 rows)" in r.out
    header = r.out.splitlines()[1]
    assert all(f" {c} " in header for c in parquet_cols), header
    r = cli("sql", "SELECT name, dur_ns FROM kernels WHERE false", "--store", store)
    assert re.search(r"name\s+┃\s+dur_ns", r.out) and "(0 rows)" in r.out, r
    r = cli("query", "roofline", "--rank", "99", "--store", store)
    assert r.code == 0, r
    assert re.search(r"run_id\s+┃\s+name\s+┃\s+op_type", r.out) and "(0 rows)" in r.out, r
    r = cli("runs", "--store", tmp_path / "empty")  # no store there: a typo, not an empty store (issue 46)
    assert r.code == 1 and "no traceql store at" in r.err and r.out == "", r
    assert not (tmp_path / "empty").exists()


# ---- re-run command lines -----------------------------------------------------------------------------------
def test_rerun_lines_paste_into_a_shell(tmp_path: Path) -> None:
    from traceql import charts
    from traceql.commandline import command

    odd = tmp_path / "my store's [x] $HOME"
    line = command(
        "query", "op_hbm_bytes", run="r", store=odd, rank=1, params={"top_n": 10}, extra=["-o", "a b"]
    )
    # expected by hand: the words in the documented order, each one shell word
    assert shlex.split(line) == [
        "traceql",
        "query",
        "op_hbm_bytes",
        "--run",
        "r",
        "--store",
        str(odd),
        "--rank",
        "1",
        "--param",
        "top_n=10",
        "-o",
        "a b",
    ]
    for cmd in charts.reproduce("hbm_timeline", "r", store=odd, device="ascend910b"):
        words = shlex.split(cmd)
        assert words[words.index("--store") + 1] == str(odd), cmd


def test_post_ingest_prepares_clusters_only_by_default() -> None:
    from traceql.post_ingest import wants_prepare

    assert not wants_prepare({"ranks_count": 1}, None)
    assert wants_prepare({"ranks_count": 2}, None)
    assert wants_prepare({"ranks_count": 1}, True) and not wants_prepare({"ranks_count": 8}, False)
