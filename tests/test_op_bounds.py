"""What bounds each operator from per-task pipe utilisation (op_bounds, bound_shares, the verdict's compute split).

Expected values are computed here from the raw kernel_details.csv columns with the csv module and Decimal
(the rule of queries/_bounds.sql written again, independently: a memory pipe MTE2/MTE3 >= 0.8 -> memory; cube
or vector >= 0.8 -> compute; else latency), or by construction (traceql.synth.PIPE_BOUND_OPS names carry the
class), never from traceql's own output.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from conftest import DB_LEVEL1, LEVEL1, real

from traceql import queries
from traceql.analysis import Analysis
from traceql.findings import evaluate
from traceql.ingest import ingest
from traceql.synth import PIPE_BOUND_OPS, article_scenario, pipe_bounds_scenario, write_torch_npu_dump

DEVICE = "ascend910b"


def _f(row: dict[str, str], col: str) -> Decimal:
    v = (row.get(col) or "").strip()
    return Decimal(v) if v and v != "N/A" else Decimal(0)


def _raw_class(row: dict[str, str]) -> tuple[Decimal, Decimal]:
    mem = max(_f(row, "aic_mte2_ratio"), _f(row, "aiv_mte2_ratio"), _f(row, "aiv_mte3_ratio"))
    comp = max(_f(row, "aic_mac_ratio"), _f(row, "aiv_vec_ratio"))
    return mem, comp


def _rows(csv_path: Path) -> list[dict[str, str]]:
    with open(csv_path, newline="") as fh:
        return list(csv.DictReader(fh))


def _op_bounds(store: Path, run: str, **params: Any) -> list[dict[str, Any]]:
    with Analysis(store, run, device=DEVICE) as s:
        return s.query("op_bounds", {"top_n": 1000, **params}).to_pylist()


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pipes")
    write_torch_npu_dump(pipe_bounds_scenario(), root / "dump", aic_metrics="PipeUtilization")
    ingest(root / "dump", root / "store", name="pipes", workers=1)
    return root / "dump", root / "store"


def test_planted_operators_get_their_class_and_cause(planted: tuple[Path, Path]) -> None:
    _dump, store = planted
    got = {r["name"]: r for r in _op_bounds(store, "pipes")}
    assert set(got) == {op[0] for op in PIPE_BOUND_OPS}
    for name, *_ in PIPE_BOUND_OPS:
        row = got[name]
        want_bound = name.split("_")[0]  # by construction: the class is the name's first word
        assert row["bound"] == want_bound, (name, row)
        assert row["grade"] == "pipe"
        if want_bound == "latency":
            assert row["cause"] == {"scalar": "scalar", "few": "few_blocks", "short": "short_task",
                                    "overlap": "poor_overlap"}[name.split("_")[1]], row  # fmt: skip
        else:
            assert row["cause"] is None


def test_planted_shares_equal_the_csv(planted: tuple[Path, Path]) -> None:
    dump, store = planted
    rows = _rows(next(dump.rglob("kernel_details.csv")))
    total = Decimal(0)
    by_class: dict[str, Decimal] = defaultdict(Decimal)
    for r in rows:
        mem, comp = _raw_class(r)
        dur = Decimal(r["Duration(us)"])
        cls = "compute" if comp >= Decimal("0.8") and comp >= mem else "memory" if mem >= Decimal("0.8") else (
            "compute" if comp >= Decimal("0.8") else "latency")  # fmt: skip
        by_class[cls] += dur
        total += dur
    with Analysis(store, "pipes", device=DEVICE) as s:
        run = next(r for r in s.query("bound_shares").to_pylist() if r["scope"] == "run")
    for cls in ("memory", "compute", "latency"):
        assert run[f"{cls}_share"] == pytest.approx(float(by_class[cls] / total), abs=1e-9)
    assert run["grade"] == "pipe" and run["pipe_share"] == pytest.approx(1.0)


def test_verdict_from_pipes_alone(planted: tuple[Path, Path]) -> None:
    """No HBM bytes (PipeUtilization; 20 ms counters cannot resolve the tasks): the verdict still answers from
    the pipes, names the shares and says what it rests on."""
    _dump, store = planted
    rep = evaluate(store, "pipes", device=DEVICE)
    v = json.loads(rep.to_json())["verdict"]
    split = v["compute_bounds"]
    assert split is not None and split["grade"] == "pipe"
    # by construction per step: memory 3 x (400 + 100) us, compute 3 x 600, latency 3 x (200+150+6+300)
    mem, comp, lat = 1500, 1800, 1968
    assert split["memory_share"] == pytest.approx(mem / (mem + comp + lat))
    assert split["latency_share"] == pytest.approx(lat / (mem + comp + lat))
    # latency holds the most time (by hand: 1968 of 5268 us), so the step's compute verdict is latency-bound
    assert v["bound"] == "latency" and v["confidence"] == "judged"
    assert "pipe utilisation" in v["headline"]


def test_article_story_from_pipes_alone(tmp_path: Path) -> None:
    """The article's 0.58 story on a PipeUtilization dump (no per-task bytes, 20 ms HBM samples): rank 1's
    unfused elementwise chain keeps MTE2 busy 95% of its time; rank 0 waits for it. comm_waits_on_memory must
    say so on pipe evidence."""
    sc = article_scenario(n_ranks=2, steps=3, slow_ranks=(1,), hbm_period_ns=20_000_000)
    write_torch_npu_dump(sc, tmp_path / "dump", aic_metrics="PipeUtilization")
    ingest(tmp_path / "dump", tmp_path / "s", name="art", workers=1)
    rep = json.loads(evaluate(tmp_path / "s", "art", device=DEVICE).to_json())
    f = next(x for x in rep["findings"] if x["id"] == "comm_waits_on_memory")
    assert f["fired"], f["message"]
    assert f["evidence"]["outcome"] == "fired_pipe" and f["grade"]["grade"] == "pipe"
    assert f["evidence"]["late_rank"] == 1 and f["evidence"]["waiting_rank"] == 0


@pytest.mark.real
def test_real_level1_unambiguous_operators_match_the_raw_ratios(tmp_path: Path) -> None:
    """Every operator whose tasks are unambiguous in the raw columns (one class >= 0.85, the other < 0.5) gets
    that class from op_bounds, per rank."""
    dump = real(LEVEL1)
    ingest(dump, tmp_path / "s", name="l1", workers=1)
    got = {(r["rank"], r["name"]): r for r in _op_bounds(tmp_path / "s", "l1", per_rank=True)}
    checked = 0
    for rank in (0, 1):
        rows = _rows(dump / f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
        classes: dict[str, set[str]] = defaultdict(set)
        for r in rows:
            if r["Accelerator Core"] not in ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV"):
                continue
            mem, comp = _raw_class(r)
            if mem >= Decimal("0.85") and comp < Decimal("0.5"):
                classes[r["Name"]].add("memory")
            elif comp >= Decimal("0.85") and mem < Decimal("0.5"):
                classes[r["Name"]].add("compute")
            else:
                classes[r["Name"]].add("ambiguous")
        for name, cls in classes.items():
            if len(cls) == 1 and "ambiguous" not in cls:
                assert got[(rank, name)]["bound"] == next(iter(cls)), (rank, name, got[(rank, name)])
                assert got[(rank, name)]["grade"] == "pipe"
                checked += 1
    assert (
        checked >= 4
    )  # the real dump has such operators on both ranks (ForeachAddList, ForeachMulScalar...)


def test_op_bounds_is_documented() -> None:
    spec = queries.get("op_bounds")
    assert {c.name for c in spec.columns} >= {"bound", "cause", "grade", "memory_share", "latency_share"}


def test_memory_candidates_ranked_by_pipe_time_without_bytes(planted: tuple[Path, Path]) -> None:
    """No measured bytes: top_hbm_ops ranks the operators by memory-bound time from the pipes. By construction
    per step: memory_Add 3 x 400 us = 1.2 ms, memory_store_ZerosLike 3 x 100 us = 0.3 ms, nothing else."""
    _dump, store = planted
    rep = json.loads(evaluate(store, "pipes", device=DEVICE).to_json())
    f = next(x for x in rep["findings"] if x["id"] == "top_hbm_ops")
    assert f["evidence"]["outcome"] == "fired_pipe" and f["grade"]["grade"] == "pipe"
    assert [t["name"] for t in f["top_ops"]] == ["memory_Add", "memory_store_ZerosLike"]
    assert [t["memory_ms_per_step"] for t in f["top_ops"]] == pytest.approx([1.2, 0.3])


def test_no_bytes_no_pipes_still_cannot_tell(tmp_path: Path) -> None:
    """The same planted operators written with an aic-metrics group that has neither bytes nor pipes
    (ArithmeticUtilization): no compute split, no pipe verdict, top_hbm_ops not ranked by pipes."""
    write_torch_npu_dump(pipe_bounds_scenario(), tmp_path / "d", aic_metrics="ArithmeticUtilization")
    ingest(tmp_path / "d", tmp_path / "s", name="nop", workers=1)
    rep = json.loads(evaluate(tmp_path / "s", "nop", device=DEVICE).to_json())
    assert rep["verdict"]["compute_bounds"] is None
    assert "pipe utilisation" not in rep["verdict"]["headline"]
    f = next(x for x in rep["findings"] if x["id"] == "top_hbm_ops")
    assert f["evidence"]["outcome"] != "fired_pipe"


@pytest.mark.real
def test_real_db_export_shares_equal_sqlite(tmp_path: Path) -> None:
    """The db export of the same job: TASK_PMU_INFO's ratios (name ids through STRING_IDS) and TASK's times,
    read with sqlite3 and classified here by the rule, give bound_shares' memory / compute / latency shares per
    rank (tasks without any pipe ratio count as unknown)."""
    import sqlite3

    dump = real(DB_LEVEL1)
    ingest(dump, tmp_path / "s", name="db", workers=1)
    with Analysis(tmp_path / "s", "db", device=DEVICE) as s:
        got = {r["rank"]: r for r in s.query("bound_shares").to_pylist() if r["scope"] == "rank"}
    for rank in (0, 1):
        db = dump / f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db"
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        names = dict(con.execute("SELECT id, value FROM STRING_IDS"))
        pmu: dict[int, dict[str, Decimal]] = defaultdict(dict)
        for tid, nid, value in con.execute("SELECT globalTaskId, name, value FROM TASK_PMU_INFO"):
            pmu[tid][names[nid]] = Decimal(str(value))
        durs = dict(
            con.execute(
                "SELECT c.globalTaskId, t.endNs - t.startNs FROM COMPUTE_TASK_INFO c "
                "JOIN TASK t ON t.globalTaskId = c.globalTaskId"
            )
        )
        by: dict[str, Decimal] = defaultdict(Decimal)
        for tid, dur in durs.items():
            p = pmu.get(tid, {})
            keys = ("aic_mte2_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio", "aic_mac_ratio", "aiv_vec_ratio")
            if not any(k in p for k in keys):
                by["unknown"] += dur
                continue
            mem = max(p.get(k, Decimal(0)) for k in keys[:3])
            comp = max(p.get(k, Decimal(0)) for k in keys[3:])
            line = Decimal("0.8")
            cls = (
                "compute" if comp >= line and comp >= mem
                else "memory" if mem >= line
                else "latency"
            )  # fmt: skip
            by[cls] += Decimal(dur)
        total = sum(by.values())
        for cls in ("memory", "compute", "latency", "unknown"):
            assert got[rank][f"{cls}_share"] == pytest.approx(float(by[cls] / total), abs=1e-9), (rank, cls)


def test_late_rank_not_memory_bound_by_pipes(tmp_path: Path) -> None:
    """The same story with the slow rank's elementwise chain latency-bound (MTE2 0.3, MTE3 0.2, vector 0.3):
    the wait is real, but the pipes do not blame memory (not_memory_pipe, not fired)."""
    sc = article_scenario(n_ranks=2, steps=3, slow_ranks=(1,), hbm_period_ns=20_000_000)
    for rt in sc.ranks:
        for op in rt.ops:
            if op.pipe.get("mte2", 0) >= 0.8:
                op.pipe.update(mte2=0.3, mte3=0.2, vec=0.3)
    write_torch_npu_dump(sc, tmp_path / "dump", aic_metrics="PipeUtilization")
    ingest(tmp_path / "dump", tmp_path / "s", name="art", workers=1)
    rep = json.loads(evaluate(tmp_path / "s", "art", device=DEVICE).to_json())
    f = next(x for x in rep["findings"] if x["id"] == "comm_waits_on_memory")
    assert not f["fired"] and f["evidence"]["outcome"] == "not_memory_pipe", f["message"]
    assert f["grade"]["grade"] == "pipe"
