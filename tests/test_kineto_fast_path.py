"""The DuckDB Kineto reader (parsers/_kineto_duck.py) against the ijson reader: identical tables, or a fallback.

Every comparison runs both readers (TRACEQL_KINETO_READER=ijson / auto) on the same file and compares every
table, rows sorted. Hand-computed values are checked where the numbers matter (time conversion).
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import HTA, SAMPLES, real

from traceql.errors import BadTraceError
from traceql.parsers import _chrome_json as cj
from traceql.parsers import _kineto_duck as kd
from traceql.parsers.kineto import parse_kineto
from traceql.rank_writer import RankWriter

# HTA's NCCL trace writes "blocks per SM": 1.000000; DuckDB's JSON reader re-serialises it as 1.0 before traceql
# sees the text, so the fast reader's `extra` text differs from the ijson reader's verbatim one (same number).
# Known, not yet fixed: strict xfail, so the fix shows.
_KNOWN = {
    "nccl_data.json.gz": "DuckDB re-serialises 1.000000 as 1.0 in args text (extra); ijson keeps it verbatim"
}
REAL = (
    [
        pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=_KNOWN[p.name]))
        if p.name in _KNOWN
        else p
        for p in sorted(HTA.glob("**/*.json.gz"))
    ]
    if HTA.exists()
    else []
)
BASE = 1_790_857_026_000_000_000


def _parse(
    path: Path, reader: str, out_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    monkeypatch.setenv("TRACEQL_KINETO_READER", reader)
    w = RankWriter(out_dir, "r", 0)
    meta = parse_kineto(path, w)
    w.close()
    assert not list(out_dir.glob(".kineto-stage-*")), "staging dir left behind"
    tables = {t: sorted(pa.concat_tables([pq.read_table(out_dir / r) for r in rels]).to_pylist(), key=repr)
              for t, rels in w.files.items()}  # fmt: skip
    return meta, tables


def _both(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Parse with both readers, assert identical tables and metadata; return the DuckDB side's."""
    m_ij, t_ij = _parse(path, "ijson", tmp_path / "ijson", monkeypatch)
    m_dk, t_dk = _parse(path, "auto", tmp_path / "duck", monkeypatch)
    assert m_ij["reader"] == "ijson"
    assert set(t_dk) == set(t_ij)
    for table in t_ij:
        assert len(t_dk[table]) == len(t_ij[table]), table
        # the first differing row, not pytest's diff of the two lists: with CI set pytest does not truncate,
        # and difflib over the rows of a real trace (nccl_data, the known xfail) took 700 s of CI's time
        diff = next(((a, b) for a, b in zip(t_dk[table], t_ij[table], strict=True) if a != b), None)
        assert diff is None, (table, diff)
    assert {k: v for k, v in m_dk.items() if k != "reader"} == {
        k: v for k, v in m_ij.items() if k != "reader"
    }
    return m_dk, t_dk


@pytest.mark.parametrize("path", REAL or [pytest.param(None, marks=pytest.mark.skip("../shared absent"))],
                         ids=[(p.values[0] if hasattr(p, "values") else p).name for p in REAL] or None)  # fmt: skip
def test_real_traces_identical(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    meta, _ = _both(real(path), tmp_path, monkeypatch)
    assert meta["reader"] == "duckdb"


@pytest.mark.parametrize("path", sorted((SAMPLES / "kineto_cpu").glob("*.json")), ids=lambda p: p.name)
def test_sample_traces_identical(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    meta, _ = _both(path, tmp_path, monkeypatch)
    assert meta["reader"] == "duckdb"


# ---- synthetic traces, written as raw text (number formatting under control) ----------------------------


def _ev(ph: str, ts: str, **kw: str) -> str:
    fields = [f'"ph": "{ph}"', f'"ts": {ts}'] + [f'"{k}": {v}' for k, v in kw.items()]
    return "{" + ", ".join(fields) + "}"


def _events(t: Any) -> list[str]:
    """A mix of every event kind kineto maps; t(i) gives the i-th timestamp's JSON text."""
    args_host = ('{"External id": 5, "Sequence number": 9, "Input Dims": [[64, 256], [], [1]], '
                 '"Input type": ["float", "Scalar"], "Concrete Inputs": ["", "1.0000000000000001e-05"], '
                 '"weird": [1, 2.5, {"x": -0.0}], "esc": "a\\"b\\n\\u00e9\\u001f/", "nul": null, "flag": true, '
                 '"small": 4.8e-05, "half": 0.5, "big": 123456789012345678, "obj": {"k": "v", "n": [1, 2]}}')  # fmt: skip
    args_kernel = ('{"External id": 5, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": 11, '
                   '"registers per thread": 32, "blocks per SM": 0.14277746793084217, "warps per SM": 4.0, '
                   '"grid": [4, 2, 1], "block": [128, 1, 1], "est. achieved occupancy %": 6}')  # fmt: skip
    return [
        _ev("M", t(0), name='"process_name"', pid="100", tid="0", args='{"name": "python"}'),
        _ev(
            "C",
            t(1),
            name='"GPU Memory"',
            pid='"gpu0"',
            args='{"Allocated (MB)": 12.5, "Reserved": 3, "note": "x"}',
        ),
        _ev("M", t(1), name='"process_name"', pid='"gpu0"', tid="0", args='{"name": "GPU 0 mem"}'),
        _ev(
            "X",
            t(2),
            cat='"user_annotation"',
            name='"ProfilerStep#3"',
            dur=t(40, dur=True),
            pid="100",
            tid="100",
            args='{"External id": 1}',
        ),
        _ev(
            "X",
            t(3),
            cat='"cpu_op"',
            name='"aten::mm"',
            dur=t(5, dur=True),
            pid="100",
            tid="100",
            args=args_host,
        ),
        _ev(
            "X",
            t(4),
            cat='"cuda_runtime"',
            name='"cudaLaunchKernel"',
            dur=t(1, dur=True),
            pid="100",
            tid="100",
            args='{"External id": 5, "cbid": 211, "correlation": 11}',
        ),
        _ev("s", t(4), id="11", cat='"ac2g"', name='"ac2g"', pid="100", tid="100"),
        _ev(
            "X",
            t(6),
            cat='"kernel"',
            name='"ampere_sgemm_128x64_nn"',
            dur=t(7, dur=True),
            pid="0",
            tid="7",
            args=args_kernel,
        ),
        _ev("f", t(6), id="11", cat='"ac2g"', name='"ac2g"', bp='"e"', pid="0", tid="7"),
        _ev("f", t(7), id="999", cat='"ac2g"', name='"ac2g"', pid="0", tid="7"),
        _ev(
            "X",
            t(8),
            cat='"gpu_memcpy"',
            name='"Memcpy HtoD (Pageable -> Device)"',
            dur=t(2, dur=True),
            pid="0",
            tid="7",
            args='{"device": 0, "stream": 7, "correlation": 12, "bytes": 4096, "memory bandwidth (GB/s)": 1.5}',
        ),
        _ev(
            "X",
            t(9),
            cat='"cuda_profiler_range"',
            name='"ampere_sgemm_128x64_nn"',
            dur=t(30, dur=True),
            pid="0",
            tid="0",
            # (every kind of value a range's args can hold: the DuckDB reader maps them column-wise, the ijson
            # reader event by event, and _both holds the two to the same rows)
            args='{"dram__bytes_read.sum": 1024, "dram__bytes_write.sum": 2048.0, '
            '"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 100, "label": "r1", '
            '"smsp__sass_thread_inst_executed_op_dadd_pred_on.sum": 0.1, '
            '"smsp__sass_thread_inst_executed_op_hfma_pred_on.sum": 3e2, "zero": -0, "neg": -1.25E-3, '
            '"device": 1, "correlation": 13, "stream": 9, "flag": false, "nul": null, "grid": [2, 3, 1], '
            '"esc": "a\\"b", "big": 123456789012345678901}',
        ),
        _ev(
            "i",
            t(10),
            s='"t"',
            name='"[memory]"',
            pid="100",
            tid="100",
            args='{"Total Reserved": 2097152, "Total Allocated": 512, "Bytes": -512, "Device Id": 0, "Device Type": 1, '
            '"Addr": 94000000000000}',
        ),
        _ev("i", t(11), s='"g"', name='"Record Window End"', pid='""', tid='""'),
        _ev(
            "X",
            t(12),
            cat='"Trace"',
            name='"PyTorch Profiler (0)"',
            pid='"Spans"',
            tid='"PyTorch Profiler"',
            dur=t(50, dur=True),
            args='{"Op count": 0}',
        ),
        _ev(
            "X",
            t(13),
            cat='"cpu_op"',
            name='"ProfilerStep#3"',
            dur=t(1, dur=True),
            pid="100",
            tid="101",
            args='{"correlation": null, "External id": 77}',
        ),
        _ev("X", t(14), name='"no cat, no pid"'),
        _ev("q", t(15)),
    ]


def _write(
    path: Path, events: list[str], *, base: int | None = None, gz: bool = False, trailer: str = ""
) -> Path:
    head = '{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "NVIDIA A100"}],\n'
    head += '  "distributedInfo": {"rank": 3},\n'
    if base is not None:
        head += f'  "baseTimeNanoseconds": {base},\n'
    text = head + '  "traceEvents": [\n  ' + ",\n  ".join(events) + "\n  ]" + trailer + "\n}\n"
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _rel(i: int, dur: bool = False) -> str:
    """µs with 3 decimals, relative to baseTimeNanoseconds, as modern Kineto writes them."""
    return f"{i}.{(i * 37) % 1000:03d}" if dur else f"5142431484{i:03d}.{(i * 137) % 1000:03d}"


def test_relative_decimal_ts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _write(tmp_path / "rel.json", _events(_rel), base=BASE)
    meta, t = _both(p, tmp_path, monkeypatch)
    assert meta["reader"] == "duckdb" and meta["time_unit"].startswith("us relative")
    mm = next(r for r in t["host_ops"] if r["name"] == "aten::mm")
    assert mm["ts_ns"] == BASE + 5142431484003_411  # 5142431484003.411 µs, by hand
    assert mm["dur_ns"] == 5_185  # 5.185 µs
    assert mm["extra"] == [("Concrete Inputs", '["","1.0000000000000001e-05"]'), ("weird", '[1,"2.5",{"x":"-0.0"}]'),
                           ("esc", 'a"b\n\u00e9\x1f/'), ("nul", None), ("flag", "true"), ("small", "0.000048"),
                           ("half", "0.5"), ("big", "123456789012345678"), ("obj", '{"k":"v","n":[1,2]}')]  # fmt: skip
    counters = sorted((r["track"], r["metric"], r["unit"], r["value"]) for r in t["counters"])
    assert counters == [("gpu0", "Allocated", "MB", 12.5), ("gpu0", "Reserved", "raw", 3.0)]  # C before its M
    rng = next(r for r in t["kernels"] if r["task_type"] == "cuda_profiler_range")
    # by hand from the event's args: FLOPs = add + mul + 2 x fma, fp64 then fp32 then fp16, summed in that order
    assert (rng["device_id"], rng["stream_id"], rng["connection_id"], rng["block_dim"]) == (1, None, 13, 6)
    assert (rng["hbm_read_bytes"], rng["hbm_write_bytes"]) == (1024, 2048)
    assert rng["flops"] == ((0.0 + 1 * 0.1) + 2 * 100) + 2 * 300.0
    assert [k for k, _ in rng["metrics"]] == [
        "dram__bytes_read.sum", "dram__bytes_write.sum", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum", "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",
        "zero", "neg", "device", "correlation", "stream", "big"]  # fmt: skip
    assert dict(rng["metrics"])["neg"] == -1.25e-3 and dict(rng["metrics"])["big"] == 123456789012345678901.0
    assert rng["extra"] == [
        ("label", "r1"),
        ("flag", "false"),
        ("nul", None),
        ("grid", "[2,3,1]"),
        ("esc", 'a"b'),
    ]


def test_integer_epoch_ts_gzip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def t(i: int, dur: bool = False) -> str:
        return str(i * 3) if dur else str(1_695_835_542_514_261 + i)

    p = _write(tmp_path / "int.json.gz", _events(t), gz=True)
    meta, tables = _both(p, tmp_path, monkeypatch)
    assert meta["reader"] == "duckdb" and meta["time_unit"] == "us (Unix epoch)"
    k = next(r for r in tables["kernels"] if r["task_type"] == "kernel")
    assert (k["ts_ns"], k["dur_ns"], k["block_dim"], k["stream_id"]) == (
        1_695_835_542_514_267_000,
        21_000,
        8,
        7,
    )
    assert len(tables["flows"]) == 2 and len(tables["memory"]) == 1 and meta["rank"] == 3


def test_ns_timestamps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def t(i: int, dur: bool = False) -> str:
        return str(i * 1000 + 7) if dur else str(1_731_234_567_890_123_456 + i)

    meta, tables = _both(_write(tmp_path / "ns.json", _events(t)), tmp_path, monkeypatch)
    assert meta["reader"] == "duckdb" and meta["time_unit"].startswith("ns")
    assert (
        next(r for r in tables["host_ops"] if r["name"] == "aten::mm")["ts_ns"] == 1_731_234_567_890_123_459
    )


def test_real_ts_beyond_2_43_falls_back_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def t(i: int, dur: bool = False) -> str:  # absolute epoch µs with decimals: not exact as a double
        return f"{i}.125" if dur else f"1731234567890{i:03d}.125"

    meta, tables = _both(_write(tmp_path / "abs.json", _events(t)), tmp_path, monkeypatch)
    assert meta["reader"].startswith("ijson (DuckDB reader gave up: a real ts/dur of 2**43")
    assert (
        next(r for r in tables["host_ops"] if r["name"] == "aten::mm")["ts_ns"] == 1_731_234_567_890_003_125
    )


def test_late_fallback_writes_rows_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real ts beyond 2**43 in the last segment: the DuckDB reader has written rows by then."""
    monkeypatch.setattr(kd, "SEGMENT", 2048)
    evs = _events(_rel) * 20
    evs.append(_ev("X", "9999999999999.5", cat='"cpu_op"', name='"late"', dur="1", pid="100", tid="100"))
    meta, tables = _both(_write(tmp_path / "late.json", evs, base=BASE), tmp_path, monkeypatch)
    assert meta["reader"].startswith("ijson (DuckDB reader gave up")
    assert sum(r["name"] == "aten::mm" for r in tables["host_ops"]) == 20


def test_a_failure_mid_file_closes_the_segment_opened_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mapping gives up on segment i while segment i+1's query, opened ahead, waits on a full queue: the
    read must stop that query too (its producer thread would otherwise wait forever) and fall back exactly."""
    import threading

    monkeypatch.setattr(kd, "SEGMENT", 1500)
    monkeypatch.setattr(kd, "BATCH_ROWS", 1)
    monkeypatch.setattr(kd, "PREFETCH", 1)
    evs = _events(_rel) * 10
    evs.insert(
        len(evs) // 2,
        _ev("X", "9999999999999.5", cat='"cpu_op"', name='"mid"', dur="1", pid="100", tid="100"),
    )
    before = set(threading.enumerate())
    meta, tables = _both(_write(tmp_path / "mid.json", evs, base=BASE), tmp_path, monkeypatch)
    assert meta["reader"].startswith("ijson (DuckDB reader gave up: a real ts/dur of 2**43")
    assert sum(r["name"] == "mid" for r in tables["host_ops"]) == 1
    assert not [t.name for t in set(threading.enumerate()) - before if t.name.startswith("traceql-")]


def test_many_segments_and_trailing_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kd, "SEGMENT", 1500)
    trailer = ',\n  "traceName": "a]b}, {c",\n  "more": [1, [2]], "deviceProperties2": {"x": [{"y": 1}]}'
    evs = _events(_rel) * 15
    meta, tables = _both(
        _write(tmp_path / "seg.json", evs, base=BASE, trailer=trailer), tmp_path, monkeypatch
    )
    assert meta["reader"] == "duckdb" and len(tables["kernels"]) == 45


def test_segment_files_are_bounded_and_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The feed writes the events array as segment files: at most Feed.OUTSTANDING exist at any time (a file is
    deleted once its query is closed), whatever the number of segments. Counted on disk at each announcement."""
    monkeypatch.setattr(kd, "SEGMENT", 1500)
    on_disk: list[int] = []
    announce = kd.Feed._announce

    def counting(self: kd.Feed, seg: tuple[str, int]) -> None:
        on_disk.append(len(list(Path(self.tmp).glob("events-*.json"))))
        announce(self, seg)

    monkeypatch.setattr(kd.Feed, "_announce", counting)
    meta, tables = _both(_write(tmp_path / "seg.json", _events(_rel) * 30, base=BASE), tmp_path, monkeypatch)
    assert meta["reader"] == "duckdb" and len(tables["kernels"]) == 90
    assert len(on_disk) >= 10, on_disk
    assert max(on_disk) <= kd.Feed.OUTSTANDING, on_disk


def test_a_full_temp_folder_falls_back_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The temp folder fills up after the feed's first writes (os.write raises ENOSPC, as on a full disk): the
    DuckDB reader gives up, saying why, and the ijson reader, which writes no segments, stores the same tables."""
    import errno
    import os

    monkeypatch.setattr(kd, "SEGMENT", 1500)
    writes = [0]

    class FullDisk:  # the feed's `os`, whose write() fails from the third call on
        def __getattr__(self, name: str) -> Any:
            return getattr(os, name)

        def write(self, fd: int, data: Any) -> int:
            writes[0] += 1
            if writes[0] > 2:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return os.write(fd, data)

    monkeypatch.setattr(kd, "os", FullDisk())
    meta, tables = _both(_write(tmp_path / "full.json", _events(_rel) * 15, base=BASE), tmp_path, monkeypatch)
    assert meta["reader"].startswith("ijson (DuckDB reader gave up: cannot write its temporary segments in ")
    assert os.strerror(errno.ENOSPC) in meta["reader"]
    assert writes[0] > 2 and len(tables["kernels"]) == 45


@pytest.mark.parametrize("bad", ['"cbid": 2x11', '"cbid": NaN', '"cbid": [1, -Infinity]'])
def test_malformed_json_reported_by_ijson(bad: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB accepts NaN/Infinity, ijson (and JSON) does not: the file must fail the same way."""
    evs = _events(_rel)
    evs[5] = evs[5].replace('"cbid": 211', bad)
    p = _write(tmp_path / "bad.json", evs, base=BASE)
    monkeypatch.setenv("TRACEQL_KINETO_READER", "auto")
    with pytest.raises(BadTraceError, match=r"malformed JSON before byte \d+"):
        parse_kineto(p, RankWriter(tmp_path / "o", "r", 0))


@pytest.mark.parametrize("segment", [None, 1500])  # 1500: ~30 segments, opened ahead of the one being read
@pytest.mark.parametrize("kind", ["plain", "gzip-stream", "gzip-json"])
def test_truncated(kind: str, segment: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    if segment:
        monkeypatch.setattr(kd, "SEGMENT", segment)
    before = set(threading.enumerate())
    full = _write(tmp_path / "full.json", _events(_rel) * 50, base=BASE).read_bytes()
    cut = full[: len(full) * 2 // 3]
    if kind == "plain":
        p, want = tmp_path / "t.json", rf"truncated JSON: the file ends at byte {len(cut)} "
        p.write_bytes(cut)
    elif kind == "gzip-stream":
        p, want = tmp_path / "t.json.gz", "truncated gzip: the compressed stream ends early"
        z = gzip.compress(full)
        p.write_bytes(z[: len(z) * 2 // 3])
    else:
        p, want = tmp_path / "t.json.gz", rf"truncated JSON: input ends at decompressed byte {len(cut)} "
        p.write_bytes(gzip.compress(cut))
    for reader in ("ijson", "auto"):
        monkeypatch.setenv("TRACEQL_KINETO_READER", reader)
        with pytest.raises(BadTraceError, match=want):
            parse_kineto(p, RankWriter(tmp_path / reader, "r", 0))
    # nothing left running: the feed, the stream opener and every DuckDB producer ended with the error
    assert not [t.name for t in set(threading.enumerate()) - before if t.name.startswith("traceql-")]


# ---- the text rules ----------------------------------------------------------------------------------


PY_TEXTS = [  # integers, reals, strings with and without escapes, and what only json.loads reads
    "0", "-0", "7", "-12", "123456789012345678901234567890", "1.5", "-1.50", "1e5", "-2.5E-3", "1E+2", "0.1",
    "12345678901234.5", '"a"', '""', '"caf\u00e9"', '"tab\\tin"', '"q\\"uote"', '"\\u00e9"', "true", "false",
    "null", "[1,2,3]", '{"a":1}', "[]",
]  # fmt: skip


@pytest.mark.parametrize("t", PY_TEXTS)
def test_py_equals_json_loads(t: str) -> None:
    """_kineto_duck.py reads an arg value's JSON text without a decoder where the text is a plain integer, real
    or escape-free string; the expected value is json.loads with the same float and constant hooks, by hand
    written texts (values, types and, for reals, the exact Decimal)."""
    import json

    from traceql.parsers import _kineto_duck as kd

    want = json.loads(t, parse_float=kd._real, parse_constant=kd._constant)
    got = kd.py(t)
    assert (type(got), got) == (type(want), want)


@pytest.mark.parametrize("t", ["-Infinity", "NaN", "Infinity", "1e400"])
def test_py_refuses_what_json_loads_refuses(t: str) -> None:
    from traceql.parsers import _kineto_duck as kd

    with pytest.raises(kd.GiveUp):
        kd.py(t)


@pytest.mark.parametrize("repeats", [1, 3])
def test_texts_match_cj_text(tmp_path: Path, repeats: int) -> None:
    """JSON text as DuckDB prints it -> cj.text of the value ijson gives for the same written JSON; each text
    once (texts() converts value by value) or three times (it converts each distinct text once)."""
    import duckdb

    written = ['"plain"', '"a\\"b"', '"\\u00e9\\t"', "12", "-3", "0.5", "68.0", "1e-05", "4.8e-05", "1.5e-07",
               "0.14277746793084217", "-0.0", "123456789.125", "true", "false", "null", "[1,2,3]", "[[64, 256], []]",
               '["float", "Scalar"]', '["", "1.0e-05"]', "[1, 2.5]", '{"a": {"b": [true, null]}}', "[]", "{}",
               '["x\\ny"]', "18446744073709551615", "-9223372036854775808", '"a:NaN"', '"1.5"', '"[0.5]"',
               "[0.1, 1e-07]", "1e-07", "12345678901234567"]  # fmt: skip
    # each text `repeats` times, interleaved: with repeats, texts() converts each distinct text once and spreads
    # the answer back
    written = [w for _ in range(repeats) for w in written]
    src = "[" + ",".join(f'{{"v": {w}}}' for w in written) + "]"
    (tmp_path / "v.json").write_text(src)
    sql = f"SELECT v::VARCHAR FROM read_json('{tmp_path / 'v.json'}', format='array', columns={{v: 'JSON'}})"
    duck = [r[0] for r in duckdb.connect().execute(sql).fetchall()]
    import ijson

    want = [cj.text(v["v"]) for v in ijson.items(src.encode(), "item", use_float=False)]
    assert kd.texts(pa.array(duck, pa.string())).to_pylist() == want


def test_duckdb_prints_plain_doubles_as_repr() -> None:
    """The PLAIN range rule: DuckDB's text of a double there is Python's repr (so no per-value work)."""
    import duckdb

    rng = random.Random(7)
    vals = [rng.random() * 10 ** rng.randint(-4, 15) for _ in range(20000)] + [
        round(rng.random() * 1e4, 3) for _ in range(5000)
    ]
    vals = [v for v in vals if kd.PLAIN[0] <= v < kd.PLAIN[1]]
    src = json.dumps([{"v": v} for v in vals])
    rows = (
        duckdb.connect().execute("SELECT unnest(json_extract(?::JSON, '$[*].v'))::VARCHAR", [src]).fetchall()
    )
    assert [r[0] for r in rows] == [repr(v) for v in vals]


def test_ns_rule_hand_values() -> None:
    j = pa.array(
        [
            "5142431484056.641",
            "5142431483969.080",
            "68.0",
            "0.001",
            "-1.5",
            "17",
            "null",
            None,
            '"12.5"',
            "-7",
        ]
    )
    assert kd.ns(j, 1000).to_pylist() == [
        5142431484056641,
        5142431483969080,
        68000,
        1,
        -1500,
        17000,
        None,
        None,
        12500,
        -7000,
    ]
    with pytest.raises(kd.GiveUp, match="more than 3 decimals"):
        kd.ns(pa.array(["0.0001"]), 1000)
    with pytest.raises(kd.GiveUp, match="2\\*\\*43"):
        kd.ns(pa.array(["8796093022208.5"]), 1000)


def test_ns_decimal_path_matches_decimal_arithmetic() -> None:
    """A batch of plain numbers below 2**43 (Kineto's relative µs with 3 decimals, whole-µs durations, as DuckDB
    prints their doubles: repr) takes the one decimal cast; expected: Decimal(text) * 1000 + offset, computed
    here. A real at 2**43 or past, a string or `null` leaves the batch to the per-form path (None here)."""
    from decimal import Decimal

    rng = random.Random(11)
    texts = [repr(float(f"{rng.randrange(-(2**42), 2**42)}.{rng.randrange(1000):03d}")) for _ in range(5000)]
    texts += [str(rng.randrange(10**9)) for _ in range(2000)] + ["0.001", "-0.5", "1e-3", "0.0"]
    j = pa.array(texts)
    assert kd._decimal_ns(j, 1000) is not None
    want = [int(Decimal(t) * 1000) + 7 for t in texts]
    assert kd.ns(j, 1000, 7).to_pylist() == want
    assert kd.ns(pa.array(["17", "-3"]), 1, 5).to_pylist() == [22, 2]  # ns traces: integers only
    for odd in (["8796093022208.5"], ["1.5", "null"], ['"2.5"'], ["0.0001"]):
        assert kd._decimal_ns(pa.array(odd), 1000) is None, odd
    assert kd._decimal_ns(pa.array(["1.5"]), 1) is None  # a fraction of a ns: the per-form path gives up


def test_array_bounds() -> None:
    head = b'{"traceName": "\\"traceEvents\\": [", "x": {"traceEvents": []}, "traceEvents": [{"a": 1}]}'
    start = kd.array_start(head)
    assert start is not None and head[start : start + 9] == b'[{"a": 1}'
    tail = b'{"a": [1]}, {"b": "]"}\n  ],\n  "traceName": "x]", "more": [1, [2]]\n}\n'
    end = kd.array_end(tail)
    assert end is not None and tail[: end + 1].endswith(b'"]"}\n  ]')
    assert kd.array_end(b'{"a": 1}') is None
