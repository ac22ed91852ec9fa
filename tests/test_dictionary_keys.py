"""MAP columns whose keys arrive dictionary-encoded (a CSV's metric names) are written to Parquet as they are.

What must hold: a reader gets the canonical schema (text keys) and the values written, whichever way the keys
came (dictionary-encoded, plain, both in one file, or rows spilled and sorted), and the key column really is
written from the dictionary (the Parquet encodings say so: the old path wrote the keys PLAIN). Expected values
are written by hand here or read from the CSV with Python's csv module, never taken from traceql's output.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from traceql import schema
from traceql.rank_writer import RankWriter


def _dict_keyed(rows: list[dict[str, float]]) -> pa.MapArray:
    """A map<dictionary<string>, double> column, as parsers._csv._build_maps makes it."""
    names = sorted({k for r in rows for k in r})
    keys = pa.DictionaryArray.from_arrays(
        pa.array([names.index(k) for r in rows for k in r], pa.int32()), pa.array(names, pa.string())
    )
    offsets = [0]
    for r in rows:
        offsets.append(offsets[-1] + len(r))
    items = pa.array([v for r in rows for v in r.values()], pa.float64())
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, items)


def _batch(names: list[str], ts: list[int], metrics: list[dict[str, float]], dictionary: bool) -> pa.Table:
    m = (
        _dict_keyed(metrics)
        if dictionary
        else pa.array([list(r.items()) for r in metrics], pa.map_(pa.string(), pa.float64()))
    )
    return pa.table({"name": names, "ts_ns": pa.array(ts, pa.int64()), "metrics": m})


def _key_encodings(path: Path, column: str) -> set[str]:
    md = pq.ParquetFile(path).metadata
    out: set[str] = set()
    for g in range(md.num_row_groups):
        for c in range(md.num_columns):
            col = md.row_group(g).column(c)
            if col.path_in_schema == f"{column}.key_value.key":
                out |= set(col.encodings)
    return out


def test_dictionary_keys_plain_keys_and_spilled_rows_read_back_canonical(tmp_path: Path) -> None:
    w = RankWriter(tmp_path, "r", 0)
    # file 1, in time order: dictionary keys, then plain keys (the file keeps its first batch's types)
    w.write("kernels", _batch(["a", "b"], [10, 20], [{"x": 1.0, "y": 2.0}, {"y": 3.0}], True), part="p")
    w.write("kernels", _batch(["c"], [30], [{"z": 4.5}], False), part="p")
    # file 2: in order, then out of order (its later rows are spilled, then the file is sorted at close)
    w.write("kernels", _batch(["d", "e"], [100, 200], [{"x": 5.0}, {}], True), part="q")
    w.write("kernels", _batch(["f", "g"], [150, 50], [{"y": 6.0, "x": 7.0}, {"z": 8.0}], True), part="q")
    w.close()
    canonical = schema.arrow_schema("kernels")
    got = {}
    for rel in w.files["kernels"]:
        t = pq.read_table(tmp_path / rel)
        assert t.schema.equals(canonical), rel
        got[rel] = [
            (r["name"], r["ts_ns"], r["metrics"]) for r in t.select(["name", "ts_ns", "metrics"]).to_pylist()
        ]
    assert got == {  # by hand, from the batches above; file 2 sorted by ts_ns
        "kernels/r0-0-p.parquet": [
            ("a", 10, [("x", 1.0), ("y", 2.0)]),
            ("b", 20, [("y", 3.0)]),
            ("c", 30, [("z", 4.5)]),
        ],
        "kernels/r0-0-q.parquet": [
            ("g", 50, [("z", 8.0)]),
            ("d", 100, [("x", 5.0)]),
            ("f", 150, [("y", 6.0), ("x", 7.0)]),
            ("e", 200, []),
        ],
    }
    # file 1 was written from the dictionary: its key column has a dictionary page
    assert "RLE_DICTIONARY" in _key_encodings(tmp_path / "kernels/r0-0-p.parquet", "metrics")


def _kernel_details(path: Path) -> None:
    """Two streams interleaved (stream 2's rows go back in time), PMU columns with an N/A cell."""
    rows = [
        ("1", "2", "MatMul_0", "AI_CORE", "1000.5\t", "10.25", "40", "0.5", "N/A"),
        ("2", "3", "Cast_1", "AI_VECTOR_CORE", "1002.0\t", "1.5", "8", "N/A", "0.25"),
        ("3", "2", "MatMul_2", "AI_CORE", "1001.0\t", "2", "40", "0.125", "N/A"),
        ("4", "3", "Cast_3", "AI_VECTOR_CORE", "1003.75\t", "3", "8", "N/A", "0.75"),
    ]
    header = (
        "Task ID,Stream ID,Name,Accelerator Core,Start Time(us),Duration(us),Block Dim,"
        "aic_mac_ratio,aiv_vec_ratio\n"
    )
    path.write_text(header + "".join(",".join(r) + "\n" for r in rows), encoding="utf-8")


def test_kernel_details_metrics_written_from_the_dictionary_equal_the_csv(tmp_path: Path) -> None:
    from traceql._duck import arrow_table
    from traceql.engine import connect
    from traceql.ingest import ingest
    from traceql.store import Store

    src = tmp_path / "kernel_details.csv"
    _kernel_details(src)
    store = tmp_path / "s"
    ingest(src, store, name="k", workers=1)
    got = {
        r["name"]: dict(r["metrics"])
        for r in arrow_table(connect(Store(store)).sql("SELECT name, metrics FROM kernels")).to_pylist()
    }
    # expected from the CSV with the csv module: each PMU cell that is a number, under its column name
    want: dict[str, dict[str, Any]] = {}
    with open(src, encoding="utf-8", newline="") as fh:
        for r in csv.DictReader(fh):
            want[r["Name"]] = {k: float(r[k]) for k in ("aic_mac_ratio", "aiv_vec_ratio") if r[k] != "N/A"}
    assert got == want
    files = sorted((store / "runs").glob("*/kernels/*.parquet"))
    assert files
    for f in files:
        assert pq.read_schema(f).equals(schema.arrow_schema("kernels"))
        assert "RLE_DICTIONARY" in _key_encodings(f, "metrics"), f.name
