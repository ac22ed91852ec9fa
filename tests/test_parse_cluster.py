"""msprof-analyze cluster_analysis_output (parsers/cluster.py) over the real MindStudio Insight sample.

Expected numbers are read off the files by hand (quoted in the comments) or counted with the csv/json modules
inside the test, never copied from the parser's output.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LEVEL1, MSI, real

CAO = MSI / "server/src/test/test_data/cluster_analysis_output"
GROUPS_NEW = MSI / "server/src/test/test_data/communication_group/communication_group.json"

pytestmark = pytest.mark.real


def _q(store: Path, sql: str) -> list[dict[str, Any]]:
    from traceql._duck import arrow_table
    from traceql.engine import connect
    from traceql.store import Store

    return arrow_table(connect(Store(store)).sql(sql)).to_pylist()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    from traceql.ingest import ingest

    store = tmp_path_factory.mktemp("cao") / "store"
    info = ingest(real(CAO), store, name="cao", workers=1)
    return store, info


def test_claim() -> None:
    from traceql.parsers import detect
    from traceql.parsers.cluster import ClusterParser

    (u,) = ClusterParser().claim(real(CAO)) or []
    assert (u.parser, u.rank) == ("msprof_analyze_cluster", -1)
    assert ClusterParser().claim(real(LEVEL1)) is None
    assert ClusterParser().claim(CAO / "cluster_step_trace_time.csv") is None
    assert [(x.parser, x.rank) for x in detect(CAO)] == [("msprof_analyze_cluster", -1)]


def test_steps_per_rank_and_stage_rows(cluster: tuple[Path, dict[str, Any]]) -> None:
    store, info = cluster
    with open(CAO / "cluster_step_trace_time.csv", encoding="utf-8", newline="") as fh:
        src = list(csv.DictReader(fh))
    rank_rows = [r for r in src if r["Type"] == "rank"]  # counted with the csv module: 16 ranks, 2 stages
    assert len(rank_rows) == 16 and len(src) == 18
    rows = _q(store, "SELECT * FROM steps ORDER BY rank, source")
    assert [r["rank"] for r in rows if r["source"] == "cluster_step_trace_time"] == list(range(16))
    r3 = [r for r in rows if r["rank"] == 3][0]
    # 2,rank,3,75771.91392578113,155507.34703515624,7308.4060234375065,162815.75305859375,66259.0638554688,
    # 297538.25,0.0,155507.34703515624
    assert r3["step"] == 2 and r3["computing_ns"] == 75771914 and r3["free_ns"] == 66259064
    assert r3["stage_ns"] == 297538250 and r3["preparing_ns"] is None  # cluster file has no Preparing column
    assert r3["dur_ns"] == 75771914 + 155507347 + 66259064
    stages = [r for r in rows if r["rank"] == -1]
    assert [s["source"] for s in stages] == [
        "cluster_step_trace_time:stage (0, 1, 2, 3, 4, 5, 6, 7)",
        "cluster_step_trace_time:stage (8, 9, 10, 11, 12, 13, 14, 15)",
    ]
    assert stages[1]["bubble_ns"] == 195498280 and all(s["dur_ns"] is None for s in stages)
    assert info["meta"]["-1"]["ranks"] == list(range(16))


def test_communication_rank_from_inner_keys(cluster: tuple[Path, dict[str, Any]]) -> None:
    store, _ = cluster
    data = json.loads((CAO / "cluster_communication.json").read_text())
    n_ops = sum(
        len(ranks)
        for steps in data.values()
        for ops in steps.values()
        for k, ranks in ops.items()
        if k != "Total Op Info"
    )  # counted here: 3 ops x 2 ranks
    assert n_ops == 6
    ops = _q(store, "SELECT * FROM comm_ops ORDER BY rank, ts_ns")
    assert len(ops) == n_ops and {o["source"] for o in ops} == {"cluster_communication"}
    send1 = [o for o in ops if o["rank"] == 1 and o["name"] == "hcom_send__822_0"][0]
    # "1": {"Start Timestamp(us)": 1695115378810055.5, "Elapse Time(ms)": 0.89658, "Wait Time(ms)": 2e-05 ...
    #       "RDMA": {"Transit Size(MB)": 20.97152 ...}}
    assert (send1["ts_ns"], send1["dur_ns"], send1["wait_ns"]) == (1695115378810055500, 896580, 20)
    assert (send1["kind"], send1["op_type"], send1["bytes"]) == ("p2p", "send", 20 * 2**20)
    b0 = [o for o in ops if o["rank"] == 1 and o["name"] == "hcom_broadcast__483_0"][0]
    assert b0["kind"] == "collective" and b0["group_name"] == "9350434047717501483"
    assert b0["bytes"] == 40  # HCCS 4e-05 MB (SDMA repeats it) = 40 B
    total = _q(
        store,
        "SELECT rank, bytes, packet_sizes FROM comm_bandwidth WHERE name = 'Total Op Info' ORDER BY rank",
    )
    assert [(t["rank"], t["bytes"], dict(t["packet_sizes"])) for t in total] == [
        (0, 20971520, {"20971520": 1.0}),
        (1, 20971520, {"20971520": 1.0}),
    ]


def test_matrix_and_groups_are_cluster_level(cluster: tuple[Path, dict[str, Any]]) -> None:
    store, _ = cluster
    data = json.loads((CAO / "cluster_communication_matrix.json").read_text())
    links = sum(
        len(v) for steps in data.values() for ops in steps.values() for v in ops.values()
    )  # counted: 10
    rows = _q(store, "SELECT * FROM comm_matrix")
    assert len(rows) == links == 10 and {r["rank"] for r in rows} == {-1}
    (r,) = [x for x in rows if x["name"] == "hcom_send__822_0" and x["dst_rank"] == 8]
    # "0-8": {"Transport Type": "RDMA", "Transit Time(ms)": 0.86381540625, "Transit Size(MB)": 20.97152,
    #         "Bandwidth(GB/s)": 24.2778}
    assert (r["src_rank"], r["transport"], r["bytes"], r["transit_ns"]) == (0, "RDMA", 20971520, 863815)
    assert r["bandwidth_bps"] == 24.2778e9 and r["op_name"] == "hcom_send__822_0" and r["step"] == 2
    meta = {
        m["key"]: json.loads(m["value"]) for m in _q(store, "SELECT key, value FROM run_meta WHERE rank = -1")
    }
    assert meta["communication_group.p2p"] == [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]
    assert len(meta["communication_group.collective"]) == 27


def _cluster_copy(tmp_path: Path, **replace: str) -> Path:
    """A cluster_analysis_output folder of symlinks to the real files, with some files replaced."""
    d = tmp_path / "cluster_analysis_output"
    d.mkdir()
    for f in real(CAO).iterdir():
        if f.name not in replace:
            os.symlink(f, d / f.name)
    for name, text in replace.items():
        (d / name).write_text(text, encoding="utf-8")
    return d


def test_new_communication_group_layout_names_groups(tmp_path: Path) -> None:
    from traceql.ingest import ingest

    d = _cluster_copy(tmp_path, **{"communication_group.json": real(GROUPS_NEW).read_text()})
    store = tmp_path / "s"
    ingest(d, store, name="g", workers=1, follow_links=True)  # a folder of links to the real files
    meta = {m["key"]: m["value"] for m in _q(store, "SELECT key, value FROM run_meta")}
    # {"type": "collective", "rank_set": [6, 7], "group_name": "5693980869084648454", ..., "pg_name": "tp"}
    assert meta["communication_group.group.5693980869084648454.pg_name"] == "tp"
    assert json.loads(meta["communication_group.group.5693980869084648454.rank_set"]) == [6, 7]
    groups = json.loads(GROUPS_NEW.read_text())["comm_group_parallel_info"]
    # one key set per group, keyed by group_name (by position when it is empty, like the p2p entry)
    assert sum(k.endswith(".pg_name") for k in meta) == len(
        {g["group_name"] or f"#{i}" for i, g in enumerate(groups)}
    )


def test_alongside_rank_dumps_writes_only_cluster_level_rows(tmp_path: Path) -> None:
    from traceql.parsers.base import Unit
    from traceql.parsers.cluster import ClusterParser
    from traceql.rank_writer import RankWriter

    w = RankWriter(tmp_path, "r", -1, tag="9")
    meta = ClusterParser().parse(
        Unit("msprof_analyze_cluster", str(real(CAO)), -1, (("alongside", "rank_dumps"),)), w
    )
    w.close()
    assert w.rows == {"steps": 2, "run_meta": 2}  # the 2 stage rows and the 2 group lists
    assert meta["ranks"] == []


def test_cluster_folder_with_rank_dumps_and_cluster_output(tmp_path: Path) -> None:
    """A parent folder holding rank dumps and cluster_analysis_output ingests as one run."""
    from traceql.ingest import ingest

    parent = tmp_path / "job"
    parent.mkdir()
    for r in (0, 1):
        os.symlink(real(LEVEL1) / f"rank{r}_ascend_pt", parent / f"rank{r}_ascend_pt")
    os.symlink(real(CAO), parent / "cluster_analysis_output")
    store = tmp_path / "s"
    info = ingest(parent, store, name="job", workers=1, follow_links=True)  # links to the real rank dumps
    assert set(info["format"].split("+")) == {"msprof_analyze_cluster", "torch_npu_text"}
    kernels = _q(store, "SELECT rank, count(*) AS n FROM kernels GROUP BY rank ORDER BY rank")
    assert [k["rank"] for k in kernels] == [0, 1]
    sources = {r["source"] for r in _q(store, "SELECT DISTINCT source FROM steps")}
    # alongside rank dumps the cluster parser adds only cluster-level rows (stage rows), not a second copy of
    # each rank's step_trace_time (base.detect sets the unit option alongside=rank_dumps)
    assert "step_trace_time" in sources
    assert "cluster_step_trace_time" not in sources
    assert any(s.startswith("cluster_step_trace_time:stage") for s in sources), sources


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("cluster_communication.json", "{oops", "invalid JSON"),
        ("cluster_communication.json", '{"p2p": {"step1": {"op@g": {"x": {}}}}}', "expected a rank id"),
        ("cluster_step_trace_time.csv", "Step,Type,Index,Computing\n1,rank,abc,5\n", "expected a rank id"),
        ("cluster_step_trace_time.csv", "Step,Index,Computing\n1,0,5\n", "'Type'"),
        ("communication_group.json", "[]", "rank lists"),
    ],
)
def test_broken_cluster_files_are_named(
    tmp_path: Path, cli, store: Path, name: str, text: str, message: str
) -> None:  # type: ignore[no-untyped-def]
    d = _cluster_copy(tmp_path, **{name: text})
    r = cli("ingest", d, "--store", store, "--follow-links")
    assert r.code == 1, r
    assert name in r.err and message in r.err, r
