"""benchmarks/budgets.py's table: each CPU figure over its own round's reference, scaled to another reference,
memory and ratios left unscaled, and the verdict on the worst round. Expected values worked by hand."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import budgets  # noqa: E402

MIB = 2**20


def _rows(text: str) -> dict[str, str]:
    return {line.split(" | ")[0].removeprefix("| "): line for line in text.splitlines()[2:]}


def test_each_round_is_read_against_its_own_reference() -> None:
    w = budgets.Work(Path("unused"))
    w.ref_cpu = 4.0  # round 1
    w.record("findings <= 4", 4, "CPU-s", 8.0, 8.0, 650 * MIB)
    w.record("ingest RSS <= 1 GB", 1024, "MB", 900.0, 60.0, 900 * MIB)
    w.record("kd <= 1.3x", 1.3, "x ref", 1.2, 4.8, 400 * MIB)
    w.ref_cpu = 5.0  # round 2: the machine a quarter slower
    w.record("findings <= 4", 4, "CPU-s", 10.0, 10.0, 660 * MIB)
    w.record("kd <= 1.3x", 1.3, "x ref", 1.4, 7.0, 410 * MIB)
    rows = _rows(budgets.table(w, 3.0))
    # 8.0 / 4.0 = 2.00 and 10.0 / 5.0 = 2.00 x ref; at a reference of 3.0: 8.0 x 3 / 4 = 6.0, 10.0 x 3 / 5 = 6.0
    assert (
        rows["findings <= 4"]
        == "| findings <= 4 | 8.0, 10.0 CPU-s | 2.00, 2.00 | 6.0, 6.0 CPU-s | 650-660 MB | no |"
    )
    # memory does not scale with the machine's speed; 900 MB <= 1024: met (x ref: 60 / 4 = 15.00)
    assert rows["ingest RSS <= 1 GB"] == "| ingest RSS <= 1 GB | 900 MB | 15.00 |  | 900-900 MB | yes |"
    # a ratio to the reference is already speed-free; the worse round (1.4 > 1.3) decides
    assert rows["kd <= 1.3x"] == "| kd <= 1.3x | 1.20, 1.40 x ref | 1.20, 1.40 |  | 400-410 MB | no |"


def test_without_scale_to_there_is_no_scaled_column() -> None:
    w = budgets.Work(Path("unused"))
    w.ref_cpu = 2.0
    w.record("report <= 8", 8, "CPU-s", 7.0, 7.0, 700 * MIB)
    text = budgets.table(w, None)
    assert text.splitlines()[1] == "|---|---|---|---|---|"
    assert _rows(text)["report <= 8"] == "| report <= 8 | 7.0 CPU-s | 3.50 | 700-700 MB | yes |"
