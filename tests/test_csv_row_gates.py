"""The CSV select's row gates (traceql.parsers._csv._RowGates) change no value and no unparsed-cell count.

A gated select answers its per-cell checks at once for rows whose cells are all plain; these tests read the
same files with the gates off (the per-cell select every row went through before) and require identical
Arrow tables and identical unparsed-cell reports. The expected values are therefore the ungated select's,
itself checked against hand-written values in test_hostile_values.py and test_parse_torch_npu.py; the
gate-coverage test checks by hand which rows the gates let through, so the comparison is not vacuous.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceql.parsers import _csv, _numtext
from traceql.parsers.torch_npu import _kernel_exprs, _KernelCsv

HEADER = [
    "Step Id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State", "Accelerator Core",
    "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim", "HF32 Eligible", "Input Shapes",
    "Context ID", "aicore_time(us)", "aic_mac_ratio", "aic_mte2_ratio", "aiv_time(us)", "aiv_vec_ratio",
]  # fmt: skip
TEXT = {"Name", "Type", "OP State", "Accelerator Core", "HF32 Eligible", "Input Shapes", "Context ID"}

# cells a profiler writes, and cells it does not: each must read the same through either path
PLAIN_NUMBERS = [
    "0",
    "12",
    "1.5",
    "1736408883001109.000\t",
    " 7 ",
    "N/A",
    "NA",
    "",
    "-3",
    "+.5",
    "1e-05",
    "7.",
]
ODD_NUMBERS = [
    "1_000", "0x10", "0X1A", "nan", "-inf", "Infinity", "1e400", "1|2", "\u0661\u0662", "12.3.4", "1e", "+", "-",
    "none", " N/A\t", "1" * 25, "_1", "1_", " 0x0", "1e+100", "1e100", "\x1f1", "1\x1f2", "1,5", '"3"', "\t", "n/a",
]  # fmt: skip
PLAIN_TEXT = ["MatMul_1", "hcom_allReduce__1", "AI_CORE", "HCCL", "N/A", "", "a b", "x|y", "NO"]
ODD_TEXT = [" lead", "trail ", '"q"', "\tTab", "tab\t", "a\x1f b", "a \x1fb", '"15,4096;4096"', " ", '"']
# shapes cells (Input Shapes): quoted as profilers write them, and the quoted forms whose trim strips more than
# quotes or whose N/A hides behind them
PLAIN_SHAPES = ['"15,4096;4096"', '"1"', "FLOAT16;FLOAT16", "N/A", "", '"N/A"', 'N"/A', '""', '"', '"a""b"']
ODD_SHAPES = ['" 1,2"', '"1,2 "', '"\t"', '" "', '"N/A" ', ' "N/A"', '"1\x1f 2"', '"1 \x1f2"']


def _write(path: Path, rows: list[list[str]]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        w.writerow(HEADER)
        w.writerows(rows)
    return path


def _row(rng: random.Random, odd: float) -> list[str]:
    out = []
    for col in HEADER:
        plain, strange = (PLAIN_TEXT, ODD_TEXT) if col in TEXT else (PLAIN_NUMBERS, ODD_NUMBERS)
        if col == "Input Shapes":
            plain, strange = PLAIN_SHAPES, ODD_SHAPES + ODD_TEXT
        out.append(rng.choice(strange if rng.random() < odd else plain))
    return out


def _read(path: Path, gated: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[pa.Table, list[object]]:
    monkeypatch.setattr(_csv, "ROW_GATES", gated)
    _numtext.take("")
    f = _KernelCsv(path)
    table = pa.Table.from_batches(list(f.select(_kernel_exprs(f))))
    return table, sorted(_numtext.take(""), key=repr)


def _same_both_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> pa.Table:
    gated, gated_cells = _read(path, True, monkeypatch)
    checked, checked_cells = _read(path, False, monkeypatch)
    assert gated.schema == checked.schema
    for name in checked.schema.names:
        assert gated.column(name).to_pylist() == checked.column(name).to_pylist(), name
    assert gated_cells == checked_cells
    return gated


@pytest.mark.parametrize("odd", [0.0, 0.02, 0.3])
def test_gated_select_reads_every_cell_as_the_per_cell_select(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, odd: float
) -> None:
    rng = random.Random(int(odd * 100))
    path = _write(tmp_path / "kernel_details.csv", [_row(rng, odd) for _ in range(3000)])
    table = _same_both_ways(path, monkeypatch)
    assert table.num_rows == 3000


def test_the_gates_pass_plain_rows_and_stop_each_kind_of_odd_cell(tmp_path: Path) -> None:
    """Which rows the gates let through, by hand: row 0 is all plain; each later row has one odd cell."""
    plain = _PLAIN_ROW
    cases = [("Duration(us)", "1_000"), ("Start Time(us)", "1e400"), ("Task ID", "1|2"), ("aic_mac_ratio", "nan"),
             ("Name", " MatMul"), ("Type", 'MatMul"'), ("Name", "a\x1f b"),
             ("Input Shapes", '" 15,4096"'), ("Input Shapes", '"15\t"'), ("Input Shapes", '"15,4096\x1f "'),
             ("Input Shapes", '""N/A""'), ("Input Shapes", "N/A")]  # fmt: skip
    rows = [plain] + [[v if h == col else p for h, p in zip(HEADER, plain, strict=True)] for col, v in cases]
    path = _write(tmp_path / "kernel_details.csv", rows)
    f = _KernelCsv(path)
    gates = _csv._RowGates("__g")
    numeric = [c for c in HEADER if c not in TEXT]
    gates.cover(_csv.q(c) for c in numeric)
    gates.rewrite(" ".join(f"tq_edge({_csv.q(c)})" for c in ("Name", "Type")), set(HEADER))
    gates.rewrite(f"tq_shape_ok({_csv.q('Input Shapes')})", set(HEADER))
    got = f.con.execute(
        f"SELECT {gates.g_num}, {gates.g_txt}, {gates.g_shp} FROM {gates.source(f.from_clause())}"
    ).fetchall()
    assert got == [(True, True, True), (False, True, True), (False, True, True), (False, True, True),
                   (False, True, True), (True, False, True), (True, False, True), (True, False, True),
                   (True, True, False), (True, True, False), (True, True, False), (True, True, True),
                   (True, True, True)]  # fmt: skip


@pytest.mark.parametrize("text", ODD_NUMBERS)
@pytest.mark.parametrize("column", ["Task ID", "aic_mac_ratio"])
def test_one_odd_cell_alone_in_a_file_is_reported_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, column: str, text: str
) -> None:
    """The file-level flag decides whether unparsed cells are counted at all: with one odd cell among plain
    rows, the gated select must raise it exactly when the per-cell select does."""
    odd = [text if h == column else p for h, p in zip(HEADER, _PLAIN_ROW, strict=True)]
    path = _write(tmp_path / "kernel_details.csv", [_PLAIN_ROW, odd, _PLAIN_ROW])
    _same_both_ways(path, monkeypatch)


_CELL_CHARS = '0123456789.eE+-_xXN/A |\t"\x1f,na'
_PLAIN_ROW = ["1", "4294967295", "11000", "2", "MatMul_1", "MatMul", "dynamic", "AI_CORE", "1736408883001109.000\t",
              "78.872", "0.0", "16", "NO", '"15,4096"', "N/A", "78.872", "0.5", "N/A", "", "0.4"]  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(st.integers(0, len(HEADER) - 1), st.text(_CELL_CHARS, max_size=8)), min_size=1, max_size=60
    )
)
def test_any_cell_in_a_plain_row_reads_the_same_gated_or_not(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, cells: list[tuple[int, str]]
) -> None:
    """Each example: rows that are plain but for one arbitrary cell (so the gates decide every row)."""
    rows = []
    for col, text in cells:
        row = list(_PLAIN_ROW)
        row[col] = text
        rows.append(row)
    path = _write(tmp_path_factory.mktemp("gates") / "kernel_details.csv", rows)
    _same_both_ways(path, monkeypatch)


@pytest.mark.parametrize(("cell", "pipe"), [("7", False), ("1|2", True)])
def test_the_separator_count_is_left_out_only_for_a_file_without_a_pipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cell: str, pipe: bool
) -> None:
    """The numeric gate joins cells with `|`; its separator count (a cell holding `|` reads as two fields) is
    needed only where some cell holds one, which check_quotes' pass over the file tells. By hand: a file
    without `|` gets the gate without the count, the file with `1|2` keeps it and reads as the per-cell select
    (the cell unparsed and reported)."""
    odd = [cell if h == "Task ID" else p for h, p in zip(HEADER, _PLAIN_ROW, strict=True)]
    path = _write(tmp_path / "kernel_details.csv", [_PLAIN_ROW, odd])
    assert _csv.check_quotes(path) is pipe
    f = _KernelCsv(path)
    gates = _csv._RowGates("__g", f._holds_pipe)
    gates.cover([_csv.q("Task ID")])
    assert ("replace(" in gates.source(f.from_clause())) is pipe
    table = _same_both_ways(path, monkeypatch)
    assert table.column("task_id").to_pylist() == [11000, 7 if cell == "7" else None]


def _ns_by_decimal(text: str) -> int | None:
    """The independent reading of a µs cell: Decimal, rounded half away from zero to 6 places (DuckDB's
    DECIMAL(.., 6) reading of the text), then to whole ns; None past int64."""
    from decimal import ROUND_HALF_UP, Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 80  # exact for every cell here
        us = Decimal(text.strip()).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP)
        ns = int((us * 1000).to_integral_value(rounding=ROUND_HALF_UP))
    return ns if -(2**63) <= ns < 2**63 else None


def test_time_cells_convert_to_exact_ns_on_both_the_int64_and_the_128_bit_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dec_ns takes DECIMAL(18,6) for short cells (<= 9 characters, no exponent) and DECIMAL(26,6) for the rest:
    every cell must read as Decimal reads it, whichever path it takes, gated or not. Cells of 30-32 integer
    digits used to overflow DuckDB's 38-digit multiply and fail the whole file; they are NULL now."""
    rng = random.Random(7)
    cells = ["0.0004995", "0.0005", "-0.0005", "999999999", "-99999999", "99999.9999", "0.0000005", "9e9", "1e15",
             "1736408883704643.212\t", "9223372036854775.807", "9223372036854775.808", "1" * 31, "1" * 32 + ".5"]  # fmt: skip
    for _ in range(600):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 17)))
        frac = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 9)))
        cells.append(rng.choice(["", "-", "+"]) + digits + ("." + frac if frac or rng.random() < 0.2 else ""))
    rows = []
    for c in cells:
        row = list(_PLAIN_ROW)
        row[HEADER.index("Duration(us)")] = c
        row[HEADER.index("Start Time(us)")] = c
        rows.append(row)
    path = _write(tmp_path / "kernel_details.csv", rows)
    table = _same_both_ways(path, monkeypatch)
    expected = [_ns_by_decimal(c) for c in cells]
    assert table.column("dur_ns").to_pylist() == expected
    assert table.column("ts_ns").to_pylist() == expected
    short = [c for c in cells if len(c) <= 9 and "e" not in c]
    assert len(short) > 100  # both paths are exercised
