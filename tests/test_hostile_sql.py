"""`traceql sql` is a sandbox: no extension is installed or loaded, nothing outside the store is opened or
written, unknown statement types are refused, and a query is bounded in time and memory (issue 22).

Each run is a subprocess of the real CLI with HOME pointed at an empty folder, so an extension download
attempt would show up as HOME/.duckdb/ appearing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write_two_kernel_run

from tests._bounded import ROOT, traceql


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, Path]:
    store = tmp_path / "store"
    write_two_kernel_run(store)
    home = tmp_path / "home"
    home.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    return {"store": store, "home": home, "cwd": cwd, "tmp": tmp_path}


def sql(sb: dict[str, Path], *args: object, timeout: float = 60):  # type: ignore[no-untyped-def]
    return traceql(
        "sql", *args, "--store", sb["store"], timeout=timeout, env={"HOME": str(sb["home"])}, cwd=sb["cwd"]
    )


def untouched(sb: dict[str, Path]) -> None:
    assert list(sb["home"].iterdir()) == [], "DuckDB wrote under HOME (an extension install attempt?)"
    assert list(sb["cwd"].iterdir()) == [], "traceql sql wrote into the current directory"


@pytest.mark.parametrize(
    "q",
    [
        "SELECT * FROM 'https://example.com/x.parquet'",
        "SELECT * FROM read_csv('http://127.0.0.1:9/x.csv')",
        "SELECT * FROM 's3://bucket/x.parquet'",
        "SELECT * FROM sqlite_scan('/etc/x.db', 't')",
        "SELECT * FROM read_json('hf://datasets/x/y.json')",
        "SELECT * FROM read_csv('/etc/passwd', sep=':')",
        "SELECT * FROM read_text('{store}/manifest.json')",
        "SELECT * FROM glob('/etc/*')",
    ],
)
def test_sql_opens_no_url_extension_or_file_outside_the_store(sandbox, q: str) -> None:  # type: ignore[no-untyped-def]
    r = sql(sandbox, q.format(store=sandbox["store"]))
    assert r.code == 1, r
    assert len(r.err_lines) == 1 and "SQL error" in r.err, r
    assert "internal error" not in r.err and "Traceback" not in r.err, r
    untouched(sandbox)


def test_sql_still_reads_the_store_and_allow_files_admits_one_folder(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = sql(sandbox, "SELECT sum(dur_ns) AS s FROM kernels", "--format", "csv")
    assert r.code == 0 and r.out.split() == ['"s"', "30"], r
    extra = sandbox["tmp"] / "extra"
    extra.mkdir()
    (extra / "t.csv").write_text("x\n7\n")
    q = f"SELECT x FROM read_csv('{extra}/t.csv')"
    r = sql(sandbox, q, "--format", "csv")
    assert r.code == 1 and "--allow-files" in r.err, r
    r = sql(sandbox, q, "--format", "csv", "--allow-files", extra)
    assert r.code == 0 and r.out.split() == ['"x"', "7"], r
    # a sibling whose name starts with the admitted folder's is not admitted (prefix match ends at a slash)
    sib = sandbox["tmp"] / "extra2"
    sib.mkdir()
    (sib / "t.csv").write_text("x\n8\n")
    r = sql(sandbox, f"SELECT x FROM read_csv('{sib}/t.csv')", "--allow-files", extra)
    assert r.code == 1, r
    untouched(sandbox)


def test_write_with_copy_goes_only_where_allow_files_says(sandbox) -> None:  # type: ignore[no-untyped-def]
    out = sandbox["tmp"] / "out"
    out.mkdir()
    r = sql(sandbox, f"COPY kernels TO '{out}/k.csv'", "--write")
    assert r.code == 1 and not (out / "k.csv").exists(), r
    r = sql(
        sandbox,
        f"COPY (SELECT name FROM kernels ORDER BY 1) TO '{out}/k.csv' (HEADER)",
        "--write",
        "--allow-files",
        out,
    )
    assert r.code == 0 and (out / "k.csv").read_text().split() == ["name", "a", "b"], r
    untouched(sandbox)


@pytest.mark.parametrize(
    "q",
    [
        "UPDATE EXTENSIONS",
        "UPDATE EXTENSIONS (httpfs)",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "RESET lock_configuration",
    ],
)
def test_extension_and_setting_statements_are_refused_with_a_message(sandbox, q: str) -> None:  # type: ignore[no-untyped-def]
    r = sql(sandbox, q)
    assert r.code == 1 and "refused" in r.err and "internal error" not in r.err, r
    untouched(sandbox)


def test_update_extensions_with_write_is_a_clean_error_not_a_download(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = sql(sandbox, "UPDATE EXTENSIONS", "--write")
    assert r.code == 1 and "internal error" not in r.err and "Traceback" not in r.err, r
    untouched(sandbox)


def test_unbounded_recursive_cte_stops_at_the_timeout(sandbox) -> None:  # type: ignore[no-untyped-def]
    q = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"
    r = sql(sandbox, q, "--timeout", "1.5", timeout=30)
    assert r.code == 1 and "1.5 s limit" in r.err and "--timeout" in r.err, r
    assert r.wall_s < 15, r
    # the environment variable sets the default
    r = traceql(
        "sql",
        q,
        "--store",
        sandbox["store"],
        timeout=30,
        env={"HOME": str(sandbox["home"]), "TRACEQL_SQL_TIMEOUT": "1"},
        cwd=sandbox["cwd"],
    )
    assert r.code == 1 and "1 s limit" in r.err, r
    untouched(sandbox)


def test_memory_limit_bounds_a_query_and_nothing_spills_to_disk(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = sql(
        sandbox, "SELECT count(*) FROM (SELECT DISTINCT range FROM range(30000000))", "--memory-limit", "64MB"
    )
    assert r.code == 1 and "Out of Memory" in r.err and "--memory-limit" in r.err, r
    r = sql(sandbox, "SELECT 1", "--memory-limit", "lots")
    assert r.code == 1 and "--memory-limit" in r.err and "internal error" not in r.err, r
    untouched(sandbox)


def test_ctrl_c_stops_a_running_query_at_once(sandbox) -> None:  # type: ignore[no-untyped-def]
    q = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(sandbox["home"])}
    p = subprocess.Popen(
        [sys.executable, "-m", "traceql", "sql", q, "--store", str(sandbox["store"]), "--timeout", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=sandbox["cwd"],
    )
    try:
        time.sleep(4)  # imports and the views, then the query is running
        assert p.poll() is None, p.communicate()
        t = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        stopped_in = time.monotonic() - t
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130 and "interrupted" in err and "Traceback" not in err, (p.returncode, err)
    assert stopped_in < 5, stopped_in
