"""Hypothesis property tests in-process: generated kernel_details.csv, trace_view.json and Kineto contents; plain decimals are stored exactly. Harness: tests/_fuzz_harness.py."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests._fuzz_harness import (  # noqa: F401 - pool and print_totals are fixtures
    DERANDOMIZE,
    EXAMPLES,
    TALLY,
    print_totals,
    write_csv,
)

# ---------------------------------------------------------------------------------------------------------
# Hypothesis: generated contents, in-process


KD_COLUMNS = [
    "Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State", "Accelerator Core",
    "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim", "Block Num", "Mix Block Dim", "HF32 Eligible",
    "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types", "Output Formats",
    "Context ID", "aicore_time(us)", "aic_total_cycles", "aic_mac_ratio", "aiv_time(us)", "aiv_vec_ratio",
    "aic_main_mem_read_bw(GB/s)", "aiv_main_mem_write_bw(GB/s)", "cube_utilization(%)",
]  # fmt: skip


def _exact_ns(cell: str) -> int | None:
    """µs text -> ns, exactly, for plain decimals with at most 3 decimals (what the generator marks valid);
    None for anything else (N/A, inf, 1e400, junk), whose stored value this test does not judge."""
    import re

    text = cell.strip(" \t")
    if not re.fullmatch(r"[0-9]{1,12}(\.[0-9]{1,3})?", text):  # ASCII only: `\d` would accept "１２"
        return None
    return int(Decimal(text) * 1000)


def _hypothesis_strategies() -> Any:
    from hypothesis import strategies as st

    valid_us = st.decimals(min_value=0, max_value=10**9, places=3, allow_nan=False, allow_infinity=False).map(
        lambda d: f"{d:f}"
    )
    junk = st.sampled_from(
        [
            "N/A",
            "",
            "NaN",
            "inf",
            "-1",
            "1e400",
            "abc",
            "１２",
            "1,5",
            "0x10",
            " ",
            "\t",
            "-0",
            "99999999999999999999999",
        ]
    )
    text = st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30
    )
    cell = st.one_of(valid_us, junk, text)
    return st, valid_us, junk, cell


def _ingest_inproc(path: Path, store: Path) -> tuple[bool, str]:
    from traceql.errors import TraceQLError
    from traceql.ingest import ingest

    try:
        ingest(path, store=store, name="h", workers=1)
        return True, ""
    except TraceQLError as e:
        return False, str(e)


def test_hypothesis_kernel_details(tmp_path_factory: pytest.TempPathFactory) -> None:
    from hypothesis import HealthCheck, given, settings

    st, valid_us, junk, cell = _hypothesis_strategies()
    counter = {"n": 0, "ok": 0}

    @st.composite
    def kernel_csv(draw: Any) -> tuple[list[str], list[list[str]]]:
        required = ["Name", "Start Time(us)", "Duration(us)"]
        cols = draw(st.lists(st.sampled_from(KD_COLUMNS), max_size=10, unique=True))
        # each required column is missing in ~1 of 10 examples
        cols = [c for c in required if draw(st.integers(0, 9)) > 0] + [c for c in cols if c not in required]
        if cols and draw(st.integers(0, 9)) == 0:
            cols.append(draw(st.sampled_from(cols)))  # a duplicated column name
        draw(st.randoms()).shuffle(cols)
        n = draw(st.integers(0, 12))
        rows = []
        for i in range(n):
            row = []
            for c in cols:
                if c == "Name":
                    row.append(f"op_{i}")
                elif c in ("Start Time(us)", "Duration(us)"):
                    row.append(
                        draw(st.one_of(valid_us, valid_us, junk))
                        + ("\t" if c.startswith("Start") and draw(st.booleans()) else "")
                    )
                else:
                    row.append(draw(cell))
            rows.append(row)
        return cols, rows

    @given(kernel_csv())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=DERANDOMIZE,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def prop(data: tuple[list[str], list[list[str]]]) -> None:
        cols, rows = data
        counter["n"] += 1
        d = tmp_path_factory.mktemp("kd")
        p = d / "kernel_details.csv"
        write_csv(p, [cols, *rows])
        ok, err = _ingest_inproc(p, d / "store")
        if not ok:
            assert str(p) in err or p.name in err, err
            return
        counter["ok"] += 1
        if len(set(cols)) != len(cols) or not {"Name", "Start Time(us)", "Duration(us)"} <= set(cols):
            return  # which duplicate wins is the parser's choice; without the columns there is nothing to compare
        from traceql import engine

        con = engine.connect(d / "store")
        got = {r[0]: r[1:] for r in con.execute("SELECT name, ts_ns, dur_ns FROM kernels").fetchall()}
        ci = {c: i for i, c in enumerate(cols)}
        for r in rows:
            name = r[ci["Name"]]
            ts, dur = _exact_ns(r[ci["Start Time(us)"]]), _exact_ns(r[ci["Duration(us)"]])
            if name in got and ts is not None and dur is not None:
                # a row whose times are plain decimals keeps them exactly (µs text -> int ns, no float)
                assert got[name] == (ts, dur), (name, r, got[name])
        con.close()

    prop()
    TALLY.inputs += counter["n"]
    TALLY.ingested += counter["ok"]
    TALLY.refused += counter["n"] - counter["ok"]


def test_hypothesis_trace_view_json(tmp_path_factory: pytest.TempPathFactory) -> None:
    from hypothesis import HealthCheck, given, settings

    st, valid_us, junk, cell = _hypothesis_strategies()
    counter = {"n": 0, "ok": 0}
    scalar = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True),
        st.text(max_size=20),
    )
    json_val = st.recursive(
        scalar,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=12,
    )
    ts = st.one_of(
        valid_us.map(lambda s: str(Decimal(s) + Decimal("1736408883000000"))),
        valid_us.map(float),
        junk,
        json_val,
    )
    event = st.fixed_dictionaries(
        {"ph": st.sampled_from(["X", "C", "M", "s", "f", "B", "E", "i", "", "x"])},
        optional={
            "name": st.one_of(
                st.sampled_from(
                    [
                        "process_name",
                        "thread_name",
                        "HBM 0/Read",
                        "ProfilerStep#1",
                        "aten::add",
                        "<img src=x onerror=alert(1)>",
                    ]
                ),
                st.text(max_size=10),
            ),
            "ts": ts,
            "dur": st.one_of(st.floats(allow_nan=True), st.integers(-5, 10**6), junk),
            "pid": st.one_of(st.integers(-1, 2**40), st.text(max_size=5)),
            "tid": st.one_of(st.integers(-1, 2**40), st.text(max_size=5)),
            "cat": st.sampled_from(["cpu_op", "async_npu", "HostToDevice", "python_function"]),
            "id": st.one_of(st.integers(), st.text(max_size=5)),
            "args": st.one_of(
                st.dictionaries(
                    st.sampled_from(
                        ["name", "Read(MB/s)", "Task Type", "connection_id", "size(Byte)", "MHz"]
                    ),
                    json_val,
                    max_size=4,
                ),
                json_val,
            ),
        },
    )

    @given(st.lists(event, max_size=25), st.booleans())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=DERANDOMIZE,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def prop(events: list[dict[str, Any]], as_object: bool) -> None:
        counter["n"] += 1
        d = tmp_path_factory.mktemp("tv")
        p = d / "trace_view.json"
        p.write_text(json.dumps({"traceEvents": events} if as_object else events, allow_nan=True))
        ok, err = _ingest_inproc(p, d / "store")
        if not ok:
            assert str(p) in err or p.name in err, err
        else:
            counter["ok"] += 1

    prop()
    TALLY.inputs += counter["n"]
    TALLY.ingested += counter["ok"]
    TALLY.refused += counter["n"] - counter["ok"]


def test_hypothesis_kineto_json(tmp_path_factory: pytest.TempPathFactory) -> None:
    """torch.profiler / Kineto traces: object root with traceEvents, numeric µs (or ns) ts, optional
    baseTimeNanoseconds, distributedInfo and deviceProperties of any shape, plain or gzip."""
    from hypothesis import HealthCheck, given, settings

    st, valid_us, junk, cell = _hypothesis_strategies()
    counter = {"n": 0, "ok": 0}
    scalar = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True),
        st.text(max_size=12),
    )
    anyjson = st.recursive(
        scalar,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=8,
    )
    num_ts = st.one_of(
        st.integers(0, 2**63 + 5),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(1_679_055_451_545_746, 1_679_055_463_390_908),
    )
    event = st.fixed_dictionaries(
        {"ph": st.sampled_from(["X", "i", "s", "f", "M", "C", "q"])},
        optional={
            "name": st.one_of(
                st.sampled_from(
                    [
                        "aten::mm",
                        "cudaLaunchKernel",
                        "void at::native::vectorized_elementwise_kernel<4>",
                        "Memcpy HtoD",
                        "</script>",
                    ]
                ),
                st.text(max_size=8),
            ),
            "cat": st.sampled_from(
                [
                    "kernel",
                    "gpu_memcpy",
                    "gpu_memset",
                    "cuda_runtime",
                    "cpu_op",
                    "python_function",
                    "ac2g",
                    "user_annotation",
                    "cuda_profiler_range",
                ]
            ),
            "ts": st.one_of(num_ts, junk, anyjson),
            "dur": st.one_of(st.integers(-10, 10**7), st.floats(allow_nan=True), junk),
            "pid": st.one_of(st.integers(-1, 2**40), st.text(max_size=4)),
            "tid": st.one_of(st.integers(-1, 2**40), st.text(max_size=4)),
            "id": st.one_of(st.integers(), st.text(max_size=4)),
            "args": st.one_of(
                st.dictionaries(
                    st.sampled_from(
                        [
                            "correlation",
                            "External id",
                            "grid",
                            "block",
                            "stream",
                            "device",
                            "registers per thread",
                            "Input Dims",
                            "bytes",
                        ]
                    ),
                    anyjson,
                    max_size=5,
                ),
                anyjson,
            ),
        },
    )
    root_extra = st.fixed_dictionaries(
        {},
        optional={
            "schemaVersion": anyjson,
            "baseTimeNanoseconds": st.one_of(st.integers(-5, 2**64), st.text(max_size=5), anyjson),
            "displayTimeUnit": st.sampled_from(["ms", "ns", "us", "weird"]),
            "distributedInfo": st.one_of(
                st.fixed_dictionaries({"rank": st.one_of(st.integers(-3, 2**40), st.text(max_size=3))}),
                anyjson,
            ),
            "deviceProperties": st.one_of(
                st.lists(
                    st.dictionaries(
                        st.sampled_from(["id", "name", "totalGlobalMem", "computeMajor"]), anyjson, max_size=4
                    ),
                    max_size=2,
                ),
                anyjson,
            ),
        },
    )

    @given(st.lists(event, max_size=25), root_extra, st.booleans())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=DERANDOMIZE,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def prop(events: list[dict[str, Any]], extra: dict[str, Any], gz: bool) -> None:
        counter["n"] += 1
        d = tmp_path_factory.mktemp("kineto")
        doc = json.dumps({"schemaVersion": 1, **extra, "traceEvents": events}, allow_nan=True).encode()
        p = d / ("worker0.pt.trace.json.gz" if gz else "worker0.pt.trace.json")
        p.write_bytes(gzip.compress(doc) if gz else doc)
        ok, err = _ingest_inproc(p, d / "store")
        if not ok:
            assert str(p) in err or p.name in err, err
        else:
            counter["ok"] += 1

    prop()
    TALLY.inputs += counter["n"]
    TALLY.ingested += counter["ok"]
    TALLY.refused += counter["n"] - counter["ok"]
