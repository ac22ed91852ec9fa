"""Values outside what profilers write (issue 22, "silent loss or garbage"): refused with the file and field
named, or stored as NULL with a warning and a `traceql check` row; never silently a number, never dropped.

Expected values are by hand (the inputs are written here) or from Decimal over the same text."""

from __future__ import annotations

import gzip
import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from tests._bounded import traceql
from traceql.errors import BadTraceError
from traceql.ingest import ingest
from traceql.parsers import _chrome_json as cj
from traceql.parsers import _numtext, _units

KINETO = (
    Path(__file__).resolve().parents[1] / "sample_traces" / "kineto_cpu" / "layernorm_matmul.pt.trace.json"
)
NOT_NUMBERS = [
    "1_000",
    "\u0661\u0662\u0663",
    "\uff11\uff12",
    "0x10",
    "NaN",
    "-nan",
    "Infinity",
    "inf",
    "1e400",
]


# ---- the converters ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", NOT_NUMBERS)
def test_number_text_no_profiler_writes_is_null_and_counted(text: str) -> None:
    _numtext.take("x")
    got = [
        _units.us_to_ns(text), _units.ms_to_ns(text), _units.to_float(text), _units.to_int(text),
        cj.us_to_ns(text), cj.num(text), cj.to_int(text), _units.scaled_int(text, 1024),
    ]  # fmt: skip
    assert got == [None] * 8, (text, got)
    (row,) = _numtext.take("unit.json")
    assert row[0] == "unit.json" and row[2] == 8 and row[4] == text.strip()[:40], row


@pytest.mark.parametrize("text", ["145.57", "-3", "1e-05", " 12\t", "1736408883704643.212", ".5", "7."])
def test_plain_ascii_numbers_still_convert_exactly(text: str) -> None:
    _numtext.take("x")
    d = Decimal(text.strip())  # the independent reading of the same text
    assert _units.us_to_ns(text) == int((d * 1000).to_integral_value())
    assert cj.us_to_ns(text) == int((d * 1000).to_integral_value())
    assert _units.to_float(text) == float(d) == cj.num(text)
    assert _numtext.take("x") == []


def test_json_numbers_past_int64_and_float_range_are_counted() -> None:
    _numtext.take("x")
    assert cj.us_to_ns(Decimal("1e400")) is None and cj.us_to_ns(2**62) is None and cj.to_int(2**64) is None
    assert cj.num(10**400) is None
    (row,) = _numtext.take("t.json")
    assert row[2] == 4, row


# ---- ids past int64: refused, not dropped --------------------------------------------------------------


def _kineto_with(tmp: Path, name: str, edit: object, gz: bool = False) -> Path:
    data = json.loads(KINETO.read_text())
    for e in data["traceEvents"]:
        edit(e)  # type: ignore[operator]
    p = tmp / name
    if gz:
        with gzip.open(p, "wt") as fh:
            json.dump(data, fh)
    else:
        p.write_text(json.dumps(data))
    return p


def _big_pid(e: dict[str, object]) -> None:
    if e.get("ph") == "X" and isinstance(e.get("pid"), int):
        e["pid"] = 2**63 + 5


@pytest.mark.parametrize("variant", ["plain", "gzip", "ijson"])
def test_kineto_pid_past_int64_is_refused_naming_file_and_field(tmp_path: Path, variant: str) -> None:
    def edit(e: dict[str, object]) -> None:
        _big_pid(e)
        if variant == "ijson" and e.get("ph") == "X" and isinstance(e.get("ts"), (int, float)):
            e["ts"] = e["ts"] + 0.00012345  # type: ignore[operator]  # >3 decimals: the ijson reader takes the file

    p = _kineto_with(
        tmp_path, f"k.pt.trace.json{'.gz' if variant == 'gzip' else ''}", edit, gz=variant == "gzip"
    )
    with pytest.raises(BadTraceError) as e:
        ingest(p, store=tmp_path / "store")
    assert str(p) in str(e.value) and "'pid'" in str(e.value) and str(2**63 + 5) in str(e.value), e.value
    assert not (tmp_path / "store" / "runs").exists() or not any((tmp_path / "store" / "runs").iterdir())


def test_kineto_pid_past_int64_cli_one_line(tmp_path: Path) -> None:
    p = _kineto_with(tmp_path, "k.pt.trace.json", _big_pid)
    r = traceql("ingest", p, "--store", tmp_path / "store", timeout=60)
    assert r.code == 1 and "Traceback" not in r.err, r
    assert [ln for ln in r.err_lines if ln.startswith("error:")] == [
        f"error: {p}: field 'pid' holds {2**63 + 5}, outside the signed 64-bit integer range profilers write; "
        "refused rather than dropping the events that carry it"
    ], r


def test_kineto_string_durations_no_profiler_writes_are_null_and_warned(tmp_path: Path) -> None:
    """`"dur": "1_000"` was 1000 µs; now NULL, warned about, and counted by the unparsed_numbers check."""
    n = [0]

    def edit(e: dict[str, object]) -> None:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and n[0] < 3:
            e["dur"] = ["1_000", "\u0661\u0662", "Infinity"][n[0]]
            n[0] += 1

    p = _kineto_with(tmp_path, "k.pt.trace.json", edit)
    info = ingest(p, store=tmp_path / "store")
    assert any("3 value(s) not a number, stored as NULL" in w for w in info["warnings"]), info["warnings"]
    from traceql.engine import connect

    con = connect(tmp_path / "store")
    assert con.execute("SELECT count(*) FROM host_ops WHERE dur_ns IS NULL").fetchall() == [(3,)]
    from traceql.checks import run_checks

    (chk,) = [r for r in run_checks(tmp_path / "store", info["run_id"]) if r["name"] == "unparsed_numbers"]
    assert chk["failures"] == 1, chk


# ---- CSV: an unclosed quote ----------------------------------------------------------------------------


KD = "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim"


@pytest.mark.parametrize("where", ["middle", "last"])
def test_unclosed_quote_in_a_csv_is_refused_naming_file_and_line(tmp_path: Path, where: str) -> None:
    rows = [
        f"1,4294967295,{t},2,Mm,MatMulV2,dynamic,AI_CORE,17364088837047{t}.000\t,5.0,0,24"
        for t in range(10, 15)
    ]
    rows[2 if where == "middle" else 4] = rows[2 if where == "middle" else 4].replace(",Mm,", ',"Mm,')
    p = tmp_path / "kernel_details.csv"
    p.write_text(KD + "\n" + "\n".join(rows) + "\n")
    line = 4 if where == "middle" else 6  # by hand: the header is line 1
    with pytest.raises(BadTraceError) as e:
        ingest(p, store=tmp_path / "store")
    assert str(p) in str(e.value) and f"opened on line {line} is never closed" in str(e.value), e.value


def test_quoted_fields_and_a_literal_quote_are_still_read(tmp_path: Path) -> None:
    rows = [
        '1,4294967295,10,2,"Mm, fused",MatMulV2,dynamic,AI_CORE,1736408883704710.000\t,5.0,0,24',
        '1,4294967295,11,2,Mm"x,MatMulV2,dynamic,AI_CORE,1736408883704711.000\t,5.0,0,24',
    ]
    p = tmp_path / "kernel_details.csv"
    p.write_text(KD + "\n" + "\n".join(rows) + "\n")
    ingest(p, store=tmp_path / "store")
    from traceql.engine import connect

    got = connect(tmp_path / "store").execute("SELECT name FROM kernels ORDER BY task_id").fetchall()
    assert got == [("Mm, fused",), ('Mm"x',)]


# ---- SQLite: a value past the length limit ---------------------------------------------------------------


def _db(path: Path, value_sql: str, stored: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    if stored is None:
        con.execute(
            f"CREATE TABLE STRING_IDS (id INTEGER, n INTEGER, value TEXT GENERATED ALWAYS AS ({value_sql}) VIRTUAL)"
        )
        con.executemany("INSERT INTO STRING_IDS (id, n) VALUES (?, ?)", [(i, i) for i in range(3)])
    else:
        con.execute("CREATE TABLE STRING_IDS (id INTEGER, value TEXT)")
        con.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", [(0, "MatMul"), (1, stored), (2, "x")])
    con.execute(
        "CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER, globalTaskId INTEGER, "
        "globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER, taskId INTEGER, modelId INTEGER)"
    )
    con.execute(
        "CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER, blockDim INTEGER, mixBlockDim INTEGER, "
        "taskType INTEGER, opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER, inputShapes INTEGER, "
        "outputFormats INTEGER, outputDataTypes INTEGER, outputShapes INTEGER, attrInfo INTEGER)"
    )
    con.execute(
        "INSERT INTO TASK VALUES (1736408883704643000, 1736408883704653000, 0, 1, 1, 1, 1, 0, 1, 1, 0)"
    )
    con.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (1, 1, 1, 0, 1, 2, 2, 2, 2, 2, 2, 2, 2)")
    con.commit()
    con.close()
    return path


def test_sqlite_value_past_the_limit_is_null_warned_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACEQL_MAX_STRING_BYTES", "1000")
    db = _db(tmp_path / "d" / "ascend_pytorch_profiler_0.db", "printf('%.*c', 5000, 'x')")
    info = ingest(db, store=tmp_path / "store", workers=1)
    assert any(
        "STRING_IDS.value: 3 value(s) could not be read, stored as NULL" in w for w in info["warnings"]
    ), info["warnings"]
    from traceql.checks import run_checks

    (chk,) = [r for r in run_checks(tmp_path / "store", info["run_id"]) if r["name"] == "unreadable_values"]
    assert chk["failures"] == 1, chk


def test_sqlite_stored_value_past_the_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACEQL_MAX_STRING_BYTES", "1000")
    db = _db(tmp_path / "d" / "ascend_pytorch_profiler_0.db", "", stored="y" * 5000)
    with pytest.raises(BadTraceError) as e:
        ingest(db, store=tmp_path / "store", workers=1)
    assert str(db) in str(e.value) and "longer than 1000 bytes" in str(e.value), e.value
