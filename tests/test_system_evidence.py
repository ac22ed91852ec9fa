"""The verdict cites the msprof system tables (issue 50): the links from NETDEV_STATS (PFC pause frames inside
communication) and the host from host_sys CPU usage. Expected values by hand from the planted rows."""

from __future__ import annotations

import json
from pathlib import Path

from traceql.findings import evaluate
from traceql.ingest import ingest
from traceql.synth.msprof_db_writer import T0, MsprofDb2026, write_msprof_db


def _verdict(db: MsprofDb2026, tmp_path: Path) -> dict[str, object]:
    path = write_msprof_db(db, tmp_path / "PROF_1" / "msprof_1.db")
    ingest(path, tmp_path / "s", name="r", workers=1)
    return dict(json.loads(evaluate(tmp_path / "s", "r").to_json())["verdict"])


def test_pfc_inside_communication_is_a_congested_link(tmp_path: Path) -> None:
    db = MsprofDb2026()
    db.comm_ops.append((T0 + 10_000_000, T0 + 30_000_000))  # one allreduce [10 ms, 30 ms)
    db.netdev += [  # PFC at 20 ms: inside it
        {
            "deviceId": 0,
            "timestampNs": T0 + 20_000_000,
            "macTxPfcPkt": 2,
            "macRxPfcPkt": 9,
            "macRxBandwidth": 3e9,
        },
    ]
    v = _verdict(db, tmp_path)
    assert v["links"] == {
        "congestion_seen": True,
        "ranks": [0],
        "checked_ranks": [0],
        "grade": "sampled",
        "detail": "NETDEV_STATS samples: PFC pause frames inside the rank's communication ops",
    }


def test_no_pfc_means_the_links_are_not_blamed(tmp_path: Path) -> None:
    db = MsprofDb2026()
    db.comm_ops.append((T0 + 10_000_000, T0 + 30_000_000))
    db.netdev += [{"deviceId": 0, "timestampNs": T0 + 20_000_000, "macTxPfcPkt": 0, "macRxPfcPkt": 0}]
    v = _verdict(db, tmp_path)
    assert v["links"]["congestion_seen"] is False and v["links"]["checked_ranks"] == [0]  # type: ignore[index]


def test_host_cpu_usage_in_the_verdict(tmp_path: Path) -> None:
    db = MsprofDb2026()
    # CPU 1 at 100% then 90% (mean 95%), CPU 0 at 10% then 30% (mean 20%); all CPUs: 57.5%
    db.cpu_usage += [(T0, 0, 10.0), (T0, 1, 100.0), (T0 + 1_000, 0, 30.0), (T0 + 1_000, 1, 90.0)]
    v = _verdict(db, tmp_path)
    h = v["host"]
    assert isinstance(h, dict)
    assert h["rank"] == 0 and str(h["busiest_cpu"]) == "1"
    assert abs(h["busiest_mean_usage"] - 0.95) < 1e-12 and abs(h["mean_usage"] - 0.575) < 1e-12


def test_no_system_tables_no_claim(tmp_path: Path) -> None:
    v = _verdict(MsprofDb2026(), tmp_path)
    assert v["links"] is None and v["host"] is None
