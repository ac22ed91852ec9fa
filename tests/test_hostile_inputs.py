"""Hostile dumps (issue 22): special files, decompression bombs, one huge string, ranks out of range, two
folders with one rank. Each is a real file made at test time (FIFOs with os.mkfifo, symlinks to /dev/zero,
gzip bombs compressed here), ingested by the CLI in a subprocess capped in time and address space. Every case
must end in exit 1 with one line naming the file, quickly, with no store written and nothing added to the dump.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from tests._bounded import traceql

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
RANK0 = SAMPLES / "torch_npu_2rank" / "rank0_ascend_pt"
KINETO = SAMPLES / "kineto_cpu" / "layernorm_matmul.pt.trace.json"


def tree(d: Path) -> dict[str, object]:
    """Every path under d: bytes of small regular files, mode/size/mtime of anything else (a FIFO would block)."""
    out: dict[str, object] = {}
    for root, dirs, files in os.walk(d):
        for n in dirs + files:
            p = Path(root) / n
            st = os.lstat(p)
            small = p.is_file() and not p.is_symlink() and st.st_size < 16 << 20
            out[str(p.relative_to(d))] = p.read_bytes() if small else (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def refused(
    dump: Path,
    tmp: Path,
    *expect: str,
    limit_s: float = 25,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> str:
    """Ingest `dump`; assert the one-line refusal naming `expect` texts; the store and the dump untouched."""
    store = tmp / "store"
    before = tree(dump) if dump.is_dir() else None
    r = traceql("ingest", dump, "--store", store, *args, timeout=limit_s + 30, env=env)
    assert r.code == 1, r
    errors = [
        ln for ln in r.err_lines if not ln.startswith("detected ")
    ]  # ingest says what it detected first
    assert len(errors) == 1 and errors[0].startswith("error: "), r
    assert "Traceback" not in r.err and "internal error" not in r.err and "Exception ignored" not in r.err, r
    for e in expect:
        assert e in r.err, (e, r)
    assert r.wall_s < limit_s, r
    assert not (store / "runs").exists() or not any((store / "runs").iterdir()), "a run was stored"
    if before is not None:
        assert tree(dump) == before, "the dump folder changed"
    return r.err


def rank_copy(tmp: Path, name: str = "rank0_ascend_pt") -> Path:
    d = tmp / name
    shutil.copytree(RANK0, d)
    return d


# ---- special files where a dump file is expected --------------------------------------------------------


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/urandom"])
def test_profiler_info_symlinked_to_an_endless_device_is_refused_at_once(tmp_path: Path, dev: str) -> None:
    d = rank_copy(tmp_path)
    info = d / "profiler_info_0.json"
    info.unlink()
    info.symlink_to(dev)
    # a link out of the dump is refused before anything is opened (issue 23's containment) ...
    refused(d, tmp_path, "profiler_info_0.json", "outside the dump", limit_s=15)
    # ... and when links are followed on purpose, the special file itself is refused, not read
    refused(
        d,
        tmp_path,
        "profiler_info_0.json",
        "character device",
        "regular",
        limit_s=15,
        args=("--follow-links",),
    )


@pytest.mark.parametrize(
    "rel",
    [
        "profiler_info_0.json",
        "ASCEND_PROFILER_OUTPUT/kernel_details.csv",
        "ASCEND_PROFILER_OUTPUT/trace_view.json",
    ],
)
def test_a_fifo_in_place_of_a_dump_file_does_not_hang(tmp_path: Path, rel: str) -> None:
    d = rank_copy(tmp_path)
    (d / rel).unlink()
    os.mkfifo(d / rel)
    refused(d, tmp_path, Path(rel).name, "FIFO", limit_s=15)


def test_a_fifo_or_device_given_as_the_dump_itself_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "trace.json"
    os.mkfifo(f)
    refused(f, tmp_path, "trace.json", "FIFO", limit_s=15)
    z = tmp_path / "z.pt.trace.json.gz"
    z.symlink_to("/dev/zero")
    refused(z, tmp_path, "z.pt.trace.json.gz", "character device", limit_s=15)


# ---- decompression bombs and huge strings ---------------------------------------------------------------


def _gzip_of(path: Path, head: bytes, filler: bytes, n_filler: int, tail: bytes) -> None:
    block = filler * ((1 << 20) // len(filler))
    with gzip.open(path, "wb", compresslevel=9) as gz:
        gz.write(head)
        for _ in range(n_filler):
            gz.write(block)
        gz.write(tail)


def test_gzip_inflating_to_gigabytes_of_whitespace_is_a_bomb(tmp_path: Path) -> None:
    p = tmp_path / "bomb.pt.trace.json.gz"
    # 1 GiB of tiny JSON values inside a Kineto object: ~1 MB compressed (a 1000x ratio; real traces are
    # 5-30x); quotes throughout, so it is the inflate limit that trips, not the string one
    _gzip_of(p, b'{"schemaVersion": 1, "traceEvents": [', b'"", ', 1024, b'""]}')
    assert p.stat().st_size < 2 << 20
    refused(
        p, tmp_path, "bomb.pt.trace.json.gz", "decompression bomb", "TRACEQL_MAX_INFLATE_RATIO", limit_s=20
    )


def test_one_200_mb_string_in_a_small_gzip_is_refused_in_seconds(tmp_path: Path) -> None:
    p = tmp_path / "str.pt.trace.json.gz"
    head = b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "'
    _gzip_of(p, head, b"A", 200, b'", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}')
    assert p.stat().st_size < 1 << 20
    err = refused(p, tmp_path, "str.pt.trace.json.gz", "TRACEQL_MAX", limit_s=20)
    assert "TRACEQL_MAX_STRING_BYTES" in err or "TRACEQL_MAX_INFLATE_RATIO" in err, err


def test_one_huge_string_in_a_plain_trace_is_refused_by_the_string_limit(tmp_path: Path) -> None:
    p = tmp_path / "big.pt.trace.json"
    ev = json.loads(KINETO.read_text())
    ev["traceEvents"][3].setdefault("args", {})["Call stack"] = "x" * (40 << 20)
    p.write_text(json.dumps(ev))
    refused(p, tmp_path, "big.pt.trace.json", "without a quote", "TRACEQL_MAX_STRING_BYTES", limit_s=30)
    # the limit is an option: raised above the string, the same file ingests
    r = traceql(
        "ingest",
        p,
        "--store",
        tmp_path / "store2",
        timeout=120,
        env={"TRACEQL_MAX_STRING_BYTES": str(64 << 20)},
    )
    assert r.code == 0, r


def test_a_huge_metadata_file_is_not_read_whole(tmp_path: Path) -> None:
    d = rank_copy(tmp_path)
    info = d / "profiler_info_0.json"
    with open(info, "wb") as fh:  # sparse: 100 GB on paper, nothing on disk
        fh.truncate(100 << 30)
    refused(d, tmp_path, "profiler_info_0.json", "TRACEQL_MAX_METADATA_BYTES", limit_s=15)


# ---- numbers out of range -------------------------------------------------------------------------------


@pytest.mark.parametrize("rank", [2**63, 2**64 + 5, 2**31])
def test_profiler_info_rank_id_out_of_range_names_the_file(tmp_path: Path, rank: int) -> None:
    d = rank_copy(tmp_path)
    info = d / "profiler_info_0.json"
    data = json.loads(info.read_text())
    data["rank_id"] = rank
    info.write_text(json.dumps(data))
    refused(d, tmp_path, "profiler_info_0.json", f"rank_id {rank} is not a rank", limit_s=15)


def test_kineto_distributed_rank_out_of_range_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "r.pt.trace.json"
    text = KINETO.read_text().replace(
        "{", '{"distributedInfo": {"backend": "nccl", "rank": 9223372036854775808}, ', 1
    )
    p.write_text(text)
    refused(
        p, tmp_path, "r.pt.trace.json", "distributedInfo.rank 9223372036854775808 is not a rank", limit_s=15
    )


def test_two_rank_folders_with_one_rank_id_are_not_merged(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    rank_copy(cluster, "a_ascend_pt")
    rank_copy(cluster, "b_ascend_pt")
    refused(cluster, tmp_path, "b_ascend_pt", "rank 0", "a_ascend_pt", limit_s=15)


# ---- wide CSV headers -----------------------------------------------------------------------------------

KD_HEAD = "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim"
KD_ROW = "1,4294967295,{t},2,Add_1,Add,dynamic,AI_VECTOR_CORE,1736408883704643.212\t,5.5,0,40"


def _wide_csv(d: Path, extra: int) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / "kernel_details.csv"
    with open(p, "w") as f:
        f.write(KD_HEAD + "".join(f",x{i}" for i in range(extra)) + "\n")
        for t in range(3):
            f.write(KD_ROW.format(t=t) + ",1" * extra + "\n")
    return p


def test_a_wide_csv_header_costs_linear_time_and_keeps_every_column(tmp_path: Path) -> None:
    # 4,000 extra columns: 124 s for 2,000 before the extra map became one lambda (superlinear), ~4 s now
    p = _wide_csv(tmp_path / "d", 4000)
    # 4 GiB of address space (the cap the issue measured its attacks under), not the harness's 3: at 3 GiB the
    # ingest-time checks of this 4,000-column table sometimes died in glibc ("cannot allocate memory for
    # thread-local data", a new DuckDB thread's TLS; 2 of 8 runs, none of 8 with --no-check, none of 12 at 4 GiB)
    r = traceql("ingest", p, "--store", tmp_path / "store", timeout=120, mem=4 << 30)
    assert r.code == 0, r
    assert r.wall_s < 30, r
    q = traceql(
        "sql",
        "SELECT cardinality(metrics) AS n, metrics['x3999'] AS last FROM kernels LIMIT 1",
        "--store",
        tmp_path / "store",
        "--format",
        "csv",
    )
    assert q.code == 0 and q.out.split() == ['"n","last"', "4000,1"], q


def test_a_header_wider_than_the_limit_is_refused_at_once(tmp_path: Path) -> None:
    p = _wide_csv(tmp_path / "d", 20000)
    refused(p, tmp_path, "kernel_details.csv", "20012 columns", "TRACEQL_MAX_CSV_COLUMNS", limit_s=10)


# ---- numbers no profiler writes: NULL, a warning, and the unparsed_numbers check -------------------------


def test_hex_underscores_nan_and_foreign_digits_are_null_warned_and_checked(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    rows = [
        ("10", "1_000", "0"),
        ("11", "0x10", "1.5"),
        ("12", "١٢", "NaN"),
        ("13", "1e400", "Infinity"),
        ("14", "5.5", "0"),
    ]
    (d / "kernel_details.csv").write_text(
        KD_HEAD
        + "\n"
        + "".join(
            f"1,4294967295,{t},2,Mm,MatMulV2,dynamic,AI_CORE,17364088837047{t}.000\t,{dur},{wait},24\n"
            for t, dur, wait in rows
        ),
        encoding="utf-8",
    )
    store = tmp_path / "store"
    r = traceql("ingest", d / "kernel_details.csv", "--store", store, timeout=120)
    assert r.code == 0, r
    assert (
        "column 'Duration(us)': 4 cell(s) not a number, stored as NULL (first at line 2: '1_000')" in r.err
    ), r
    assert "column 'Wait Time(us)': 2 cell(s) not a number" in r.err, r
    q = traceql(
        "sql",
        "SELECT task_id, dur_ns, wait_ns FROM kernels ORDER BY task_id",
        "--store",
        store,
        "--format",
        "csv",
    )
    # '1_000' is not 1000 us and '0x10' is not 16 us: NULL, like the other non-numbers
    assert q.out.split() == [
        '"task_id","dur_ns","wait_ns"',
        "10,,0",
        "11,,1500",
        "12,,",
        "13,,",
        "14,5500,0",
    ], q
    c = traceql("check", "--store", store, "--check", "unparsed_numbers", "--format", "json", "--strict")
    assert c.code == 1, c  # --strict: the check found rows
    (res,) = json.loads(c.out)["kernel_details"]
    got = [
        {k: r[k] for k in ("field", "cells", "first_line", "example")}
        for r in next(v for v in res.values() if isinstance(v, list))
    ]
    assert got == [
        {"field": "Duration(us)", "cells": 4, "first_line": 2, "example": "1_000"},
        {"field": "Wait Time(us)", "cells": 2, "first_line": 4, "example": "NaN"},
    ], res


# ---- SQLite bombs ----------------------------------------------------------------------------------------


def test_sqlite_generated_column_bomb_is_bounded(tmp_path: Path) -> None:
    """A 16 KB db whose STRING_IDS value is generated as 100 MB per row (30 rows): 6.6 GB and 78 s before
    SQLITE_LIMIT_LENGTH was set; now bounded well under the 3 GiB address-space cap."""
    import sqlite3

    db = tmp_path / "d" / "ascend_pytorch_profiler_0.db"
    db.parent.mkdir()
    con = sqlite3.connect(db)
    con.execute(
        "CREATE TABLE STRING_IDS (id INTEGER, n INTEGER, value TEXT GENERATED ALWAYS AS (printf('%.*c', 100000000, 'x')) VIRTUAL)"
    )
    con.executemany("INSERT INTO STRING_IDS (id, n) VALUES (?, ?)", [(i, i) for i in range(30)])
    con.execute(
        "CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER, "
        "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER)"
    )
    con.execute(
        "CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER, blockDim INTEGER, mixBlockDim INTEGER, "
        "taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, inputShapes INTEGER, "
        "outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER, attrInfo INTEGER)"
    )
    con.execute("INSERT INTO TASK VALUES (1, 2, 0, 1, 1, 1, 1, 0, 1, 1, 0)")
    con.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (1, 1, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)")
    con.commit()
    con.close()
    assert db.stat().st_size < 1 << 20
    r = traceql("ingest", db, "--store", tmp_path / "store", timeout=90)  # RLIMIT_AS 3 GiB: 6.6 GB would fail
    assert r.code in (0, 1) and "Traceback" not in r.err and "internal error" not in r.err, r
    q = traceql(
        "sql", "SELECT max(length(name)) AS n FROM kernels", "--store", tmp_path / "store", "--format", "csv"
    )
    assert r.code == 1 or q.out.split()[1:] in ([], ["0"]), (
        q
    )  # no 100 MB name was stored (NULL: see the report)
