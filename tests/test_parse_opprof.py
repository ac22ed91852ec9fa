"""msprof op (OPPROF) collections (parsers.opprof) and the byte_model_vs_measured check.

Where expected numbers come from (never from traceql's output):
- "csv:" summed with Python's csv module and Decimal over the shared real collection, inside the test;
- "hand:" the synthetic collection's values worked out in the comment.
"""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from tests.conftest import SHARED, real
from traceql.synth.opprof_writer import OpprofLaunch, write_opprof

ARCHIVE = SHARED / "vllm-project__vllm-ascend/.tmp_remote_patch/msopprof_round4_archive"
LAUNCH = ARCHIVE / "OPPROF_20260823205030_ITCIXNPUAJBGUBTQ/moe_lora_prefill_scatter_a2a_fp16_int32_bool_34/1"


def _ingest(path: Path, store: Path, name: str) -> dict[str, Any]:
    from traceql.ingest import ingest

    return ingest(path, store, name=name, workers=1)


def _q(store: Path, sql: str) -> list[tuple[Any, ...]]:
    from traceql.engine import connect
    from traceql.store import Store

    return connect(Store(store)).execute(sql).fetchall()


def _csv_sum(path: Path, col: str) -> Decimal:
    with open(path, newline="") as fh:
        return sum((Decimal(r[col]) for r in csv.DictReader(fh) if r[col] not in ("", "NA")), Decimal(0))


def test_real_collection_measured_gm_bytes(store: Path, cli: Any) -> None:
    real(LAUNCH / "Memory_20260823205051111.csv")
    _ingest(ARCHIVE, store, "op")
    mem = LAUNCH / "Memory_20260823205051111.csv"
    # csv: per-block KB summed, x 1024 (KB / aiv_time(us) equals the GiB/s bandwidth columns of the same file)
    read = _csv_sum(mem, "read_main_memory_datas(KB)") * 1024
    write = _csv_sum(mem, "write_main_memory_datas(KB)") * 1024
    assert read == int(read) and write == int(write)  # whole bytes: KB are written in 1/8 steps
    got = _q(
        store,
        "SELECT name, task_type, block_dim, hbm_read_bytes, hbm_write_bytes, dur_ns, device_id FROM kernels",
    )
    with open(LAUNCH / "OpBasicInfo_20260823205051111.csv", newline="") as fh:
        basic = next(csv.DictReader(fh))
    dur = round(Decimal(basic["Task Duration(us)"]) * 1000)  # csv: 24.440489 us -> 24440 ns (nearest)
    assert got == [(basic["Op Name"], "AI_VECTOR_CORE", 40, int(read), int(write), dur, 0)]
    # graded measured: the operator's bytes come from the PMU source (grades: pmu -> measured)
    r = cli("query", "op_hbm_bytes", "--store", str(store), "--format", "json")
    assert r.code == 0, r
    (op,) = json.loads(r.out)
    assert (op["hbm_bytes_source"], op["hbm_bytes"], op["pmu_bytes"]) == (
        "pmu",
        int(read + write),
        int(read + write),
    )
    assert _q(store, "SELECT device FROM runs") == [("Ascend910B3",)]


def test_real_launch_folder_alone_ingests(store: Path) -> None:
    _ingest(real(LAUNCH), store, "one")
    assert _q(store, "SELECT count(*) FROM kernels") == [(1,)]


def test_synthetic_launches(tmp_path: Path, store: Path) -> None:
    # hand: launch 0 reads 4 x 128 KB = 512 KiB = 524288 B and writes 4 x 64 KB = 262144 B;
    # launch 1 reads 2 x 0.125 KB = 256 B, writes 0
    root = write_opprof(tmp_path, "Add_1", [
        OpprofLaunch(duration_us="10.000400", read_kb=["128"] * 4, write_kb=["64"] * 4),
        OpprofLaunch(duration_us="1.5", read_kb=["0.125", "0.125"], write_kb=["0", "0"], stamp="20260823205052000"),
    ])  # fmt: skip
    _ingest(root, store, "syn")
    rows = _q(store, "SELECT extra['launch'], hbm_read_bytes, hbm_write_bytes, dur_ns, vec_ratio, mte2_ratio, "
                     "l2_hit_rate, ts_ns FROM kernels ORDER BY 1")  # fmt: skip
    # hand: hits 30 + 10 of 30+70 + 10+90 = 40 / 200 = 0.2; stamps 2026-08-23 20:50:51.111 / 52.000 UTC
    assert rows == [
        ("0", 524288, 262144, 10_000, 0.5, 0.4, 0.2, 1_787_518_251_111_000_000),
        ("1", 256, 0, 1_500, 0.5, 0.4, 0.2, 1_787_518_252_000_000_000),
    ]


def test_model_vs_measured_check(tmp_path: Path, store: Path) -> None:
    from traceql.checks import run_checks
    from traceql.synth import Scenario, write_torch_npu_dump

    sc = Scenario(n_ranks=1)
    r0 = sc.rank(0)
    r0.add_step(1, start_ns=0, dur_ns=1_000_000)
    for name in ("Add_1", "Mul_1"):
        r0.add_op(name, name.split("_")[0], start_ns=100_000 if name == "Add_1" else 300_000, dur_ns=10_000,
                  task_type="AI_VECTOR_CORE", input_shapes=("256,256", "256,256"), input_dtypes=("FLOAT", "FLOAT"),
                  output_shapes=("256,256",), output_dtypes=("FLOAT",))  # fmt: skip
    write_torch_npu_dump(sc, tmp_path / "npu")
    _ingest(tmp_path / "npu" / "rank0_ascend_pt", store, "model")
    # hand: the model is 3 tensors x 256 x 256 x 4 B = 786432 B per call.
    # Add_1 measured 4 x 256 KB = 1 MiB = 1048576 B: 0.75 of it, off by 25% -> reported.
    # Mul_1 measured 768 KB x 1.02 (a 2% re-read) = 802160.64 B -> 0.98, within 10% -> not reported.
    add = write_opprof(
        tmp_path / "a", "Add_1", [OpprofLaunch("10", read_kb=["192"] * 4, write_kb=["64"] * 4)]
    )
    mul = write_opprof(tmp_path / "b", "Mul_1", [OpprofLaunch("10", read_kb=["522.24"], write_kb=["261.12"])])
    _ingest(add, store, "add")
    _ingest(mul, store, "mul")
    (res,) = run_checks(store, "add", names=["byte_model_vs_measured"])
    assert res["error"] is None and res["failures"] == 1
    row = res["sample"][0]
    assert (row["name"], row["measured_bytes"], row["modeled_bytes"], row["model_run"]) == (
        "Add_1",
        1048576,
        786432,
        "model",
    )
    assert row["model_over_measured"] == 0.75
    (res,) = run_checks(store, "mul", names=["byte_model_vs_measured"])
    assert res["error"] is None and res["failures"] == 0


def test_not_an_opprof_folder_is_not_claimed(tmp_path: Path) -> None:
    from traceql.parsers.opprof import OpprofParser

    (tmp_path / "OPPROF_x").mkdir()
    assert OpprofParser().claim(tmp_path / "OPPROF_x") is None


def test_bad_duration_is_one_line_naming_the_file(tmp_path: Path, cli: Any) -> None:
    root = write_opprof(tmp_path, "Add_1", [OpprofLaunch("abc", read_kb=["1"], write_kb=["1"])])
    r = cli("ingest", str(root), "--store", str(tmp_path / "s"))
    assert (
        r.code == 1 and "OpBasicInfo_" in r.err and "Task Duration(us)" in r.err and "Traceback" not in r.err
    )
    assert not any(p.name.startswith(".") for p in root.rglob("*"))  # nothing written into the dump
