"""msprof db tables documented since 2026-03 (parsers._db_system): MEMCPY_INFO -> copies, NETDEV_STATS and the
host usage tables -> counters, SAMPLE_PMU_SUMMARY -> pmu_summary.

Expected values are the synthetic db's own numbers, worked out by hand in the comments (the writer,
traceql.synth.msprof_db_writer, stores exactly what the test gives it; usage is percent in the db, a ratio in
traceql).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from traceql.synth.msprof_db_writer import T0, MsprofDb2026, write_msprof_db


def _ingest(path: Path, store: Path) -> dict[str, Any]:
    from traceql.ingest import ingest

    return ingest(path, store, name="r", workers=1)


def _q(store: Path, sql: str) -> list[tuple[Any, ...]]:
    from traceql.engine import connect
    from traceql.store import Store

    return connect(Store(store)).execute(sql).fetchall()


def _db(tmp_path: Path, enum_table: bool = True) -> Path:
    db = MsprofDb2026(enum_table=enum_table)
    db.memcpy(start_ns=T0 + 2_000, dur_ns=500, size=4096, operation=1, task_id=7)
    db.memcpy(start_ns=T0 + 5_000, dur_ns=250, size=1 << 20, operation=3, task_id=8)
    db.netdev += [
        {"deviceId": 0, "timestampNs": T0, "macTxPfcPkt": 0, "macRxPfcPkt": 12, "macRxBandwidth": 2.5e10},
        {
            "deviceId": 0,
            "timestampNs": T0 + 20_000_000,
            "macTxPfcPkt": 3,
            "macRxPfcPkt": 40,
            "macRxBandwidth": 1.0e10,
        },
    ]
    db.pmu_summary += [(0, "aic_mac_ratio", 0.25, 0, "AIC"), (0, "aiv_vec_ratio", 0.5, 1, "AIV")]
    db.cpu_usage += [(T0, 0, 37.5), (T0, 1, 100.0)]
    db.mem_usage += [(T0, 62.5)]
    db.disk_usage += [(T0, 1000.0, 2000.0, 12.5)]
    db.net_usage += [(T0, 50.0, 125_000_000.0)]
    return write_msprof_db(db, tmp_path / "PROF_1" / "msprof_20260301000000.db")


def test_memcpy_info_gives_copies_with_bytes_and_direction(tmp_path: Path, store: Path) -> None:
    _ingest(_db(tmp_path), store)
    assert _q(
        store,
        "SELECT device_id, stream_id, task_id, ts_ns, dur_ns, bytes, direction, source FROM copies ORDER BY ts_ns",
    ) == [
        (0, 5, 7, T0 + 2_000, 500, 4096, "host to device", "db:MEMCPY_INFO"),
        (0, 5, 8, T0 + 5_000, 250, 1_048_576, "device to device", "db:MEMCPY_INFO"),
    ]
    # the copies are no kernels: kernels holds the one AI_CORE task, as kernel_details.csv would
    assert _q(store, "SELECT count(*) FROM kernels") == [(1,)]


def test_memcpy_direction_without_the_enum_table(tmp_path: Path, store: Path) -> None:
    _ingest(_db(tmp_path, enum_table=False), store)  # documented ids: 1 host to device, 3 device to device
    assert _q(store, "SELECT direction FROM copies ORDER BY ts_ns") == [
        ("host to device",),
        ("device to device",),
    ]


def test_netdev_stats_counters(tmp_path: Path, store: Path) -> None:
    _ingest(_db(tmp_path), store)
    got = _q(store, "SELECT metric, unit, name, ts_ns, value FROM counters WHERE track = 'NETDEV' AND value IS NOT NULL "
                    "ORDER BY metric, ts_ns")  # fmt: skip
    assert got == [
        ("mac_rx_bandwidth", "bytes/s", "NETDEV/macRxBandwidth", T0, 2.5e10),
        ("mac_rx_bandwidth", "bytes/s", "NETDEV/macRxBandwidth", T0 + 20_000_000, 1.0e10),
        ("mac_rx_pfc_pkt", "count", "NETDEV/macRxPfcPkt", T0, 12.0),
        ("mac_rx_pfc_pkt", "count", "NETDEV/macRxPfcPkt", T0 + 20_000_000, 40.0),
        ("mac_tx_pfc_pkt", "count", "NETDEV/macTxPfcPkt", T0, 0.0),
        ("mac_tx_pfc_pkt", "count", "NETDEV/macTxPfcPkt", T0 + 20_000_000, 3.0),
    ]
    # no other track carries the table (the generic fallback would have used 'NETDEV_STATS')
    assert _q(store, "SELECT count(*) FROM counters WHERE track = 'NETDEV_STATS'") == [(0,)]


def test_host_usage_counters_are_ratios(tmp_path: Path, store: Path) -> None:
    _ingest(_db(tmp_path), store)
    got = _q(store, "SELECT track, channel, metric, unit, value FROM counters WHERE track LIKE 'Host %' "
                    "ORDER BY track, channel, metric")  # fmt: skip
    # hand: 37.5 % -> 0.375, 100 % -> 1.0, 62.5 % -> 0.625, 12.5 % -> 0.125, 50 % -> 0.5
    assert got == [
        ("Host CPU", "0", "usage", "ratio", 0.375),
        ("Host CPU", "1", "usage", "ratio", 1.0),
        ("Host Disk", "", "read_bw", "bytes/s", 1000.0),
        ("Host Disk", "", "usage", "ratio", 0.125),
        ("Host Disk", "", "write_bw", "bytes/s", 2000.0),
        ("Host Memory", "", "usage", "ratio", 0.625),
        ("Host Network", "", "throughput", "bytes/s", 125_000_000.0),
        ("Host Network", "", "usage", "ratio", 0.5),
    ]


def test_sample_pmu_summary(tmp_path: Path, store: Path) -> None:
    _ingest(_db(tmp_path), store)
    assert _q(
        store, "SELECT device_id, core_type, core_id, metric, value FROM pmu_summary ORDER BY core_id"
    ) == [
        (0, "AIC", 0, "aic_mac_ratio", 0.25),
        (0, "AIV", 1, "aiv_vec_ratio", 0.5),
    ]


def test_new_tables_in_traceql_schema(cli: Any) -> None:
    r = cli("schema")
    assert r.code == 0, r
    for table in ("copies", "pmu_summary"):
        assert table in r.out
    r = cli("schema", "counters")
    assert r.code == 0 and "NETDEV" in r.out and "Host CPU" in r.out, r


def test_torch_npu_text_export_says_what_it_leaves_unread(tmp_path: Path, store: Path) -> None:
    """torch_npu 2.10 Level2 listing (vipshop/cache-dit PR #1093): data_preprocess.csv and
    ascend_pytorch_profiler.db beside the text files; the text is read, the rest is named, not guessed at."""
    import json
    import sqlite3

    from traceql.synth import Scenario, write_torch_npu_dump

    sc = Scenario(n_ranks=1)
    r0 = sc.rank(0)
    r0.add_step(1, start_ns=0, dur_ns=1_000_000)
    r0.add_op("Add_1", "Add", start_ns=100_000, dur_ns=10_000)
    write_torch_npu_dump(sc, tmp_path / "d")
    out = tmp_path / "d" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    (out / "data_preprocess.csv").write_text("Timestamp(us),Duration(us)\n", encoding="utf-8")
    sqlite3.connect(out / "ascend_pytorch_profiler.db").execute(
        "CREATE TABLE META_DATA (name TEXT, value TEXT)"
    )
    info = _ingest(tmp_path / "d" / "rank0_ascend_pt", store)
    text = json.dumps(info, default=str)
    assert "data_preprocess.csv: not read" in text
    assert "ascend_pytorch_profiler.db beside the text export: not read" in text
    assert _q(store, "SELECT count(*) FROM kernels") == [(1,)]


def _run(store: Path, query: str) -> list[dict[str, Any]]:
    from traceql import queries

    return list(queries.run(query, store, run_id="r").to_pylist())


def test_copy_traffic_query(tmp_path: Path, store: Path) -> None:
    _ingest(_db(tmp_path), store)
    # hand: 1 MiB in 250 ns = 4.194304e15 B/s; 4096 B in 500 ns = 8.192e12 B/s
    assert _run(store, "copy_traffic") == [
        {"run_id": "r", "rank": 0, "direction": "device to device", "copies": 1, "bytes": 1_048_576, "dur_ns": 250,
         "bw_bps": 1_048_576 * 1e9 / 250},
        {"run_id": "r", "rank": 0, "direction": "host to device", "copies": 1, "bytes": 4096, "dur_ns": 500,
         "bw_bps": 4096 * 1e9 / 500},
    ]  # fmt: skip


def test_link_congestion_query(tmp_path: Path, store: Path) -> None:
    db = MsprofDb2026()
    # one allreduce [T0 + 10 ms, T0 + 30 ms); samples at T0 (PFC, outside), T0 + 20 ms (PFC, inside), T0 + 40 ms (none)
    db.comm_ops.append((T0 + 10_000_000, T0 + 30_000_000))
    db.netdev += [
        {"deviceId": 0, "timestampNs": T0, "macTxPfcPkt": 0, "macRxPfcPkt": 5, "macRxBandwidth": 1e9},
        {
            "deviceId": 0,
            "timestampNs": T0 + 20_000_000,
            "macTxPfcPkt": 2,
            "macRxPfcPkt": 9,
            "macRxBandwidth": 3e9,
        },
        {
            "deviceId": 0,
            "timestampNs": T0 + 40_000_000,
            "macTxPfcPkt": 0,
            "macRxPfcPkt": 0,
            "macRxBandwidth": 2e9,
        },
    ]
    _ingest(write_msprof_db(db, tmp_path / "PROF_1" / "msprof_1.db"), store)
    (row,) = _run(store, "link_congestion")
    assert row == {"run_id": "r", "rank": 0, "samples": 3, "comm_ns": 20_000_000, "pfc_tx_max": 2.0,
                   "pfc_rx_max": 9.0, "pfc_samples": 2, "pfc_samples_in_comm": 1, "rx_bw_max_bps": 3e9,
                   "tx_bw_max_bps": None, "congestion_seen": True}  # fmt: skip


def test_host_usage_query(tmp_path: Path, store: Path) -> None:
    db = MsprofDb2026()
    db.cpu_usage += [(T0, 0, 10.0), (T0, 1, 100.0), (T0 + 1_000, 0, 30.0), (T0 + 1_000, 1, 90.0)]
    db.mem_usage += [(T0, 40.0), (T0 + 1_000, 60.0)]
    _ingest(write_msprof_db(db, tmp_path / "PROF_1" / "msprof_1.db"), store)
    got = {r["resource"]: r for r in _run(store, "host_usage")}
    # hand: CPU mean (0.1 + 1 + 0.3 + 0.9) / 4 = 0.575, cpu 1 mean 0.95; memory mean 0.5, max 0.6
    cpu, mem = got["Host CPU"], got["Host Memory"]
    assert (cpu["samples"], cpu["max_usage"], cpu["busiest_channel"]) == (4, 1.0, "1")
    assert abs(cpu["mean_usage"] - 0.575) < 1e-12 and abs(cpu["busiest_mean"] - 0.95) < 1e-12
    assert (mem["samples"], mem["mean_usage"], mem["max_usage"]) == (2, 0.5, 0.6)
