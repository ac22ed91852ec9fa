"""The options several commands share, defined once: flags, environment variables, help, and the choices of
every `--format` and `--fail-on` (enums, so Click refuses a bad value with exit 2 and its usual message:
`Invalid value for '--format' / '-f': 'xml' is not one of 'table', 'json'.`).

A command takes an option by annotating a parameter with the alias (`store: StoreOpt = None`); an option whose
help differs per command (`--format`, `--output`, `--baseline`) is made by a small function here, so its flags
stay the same everywhere."""

from __future__ import annotations

import math
from enum import Enum
from typing import Annotated, Any, Optional

import typer

# ---- choices ------------------------------------------------------------------------------------------------


class Choice(str, Enum):
    """A choice whose value is what the user types; str() gives that value (not `Class.member`)."""

    def __str__(self) -> str:
        return str(self.value)


class TableFormat(Choice):
    """sql, query: a result table."""

    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


class ListFormat(Choice):
    """runs, check: a listing."""

    table = "table"
    json = "json"


class DocFormat(Choice):
    """schema, findings: a listing or a document."""

    table = "table"
    json = "json"
    markdown = "markdown"


class CompareFormat(Choice):
    """compare: a table (the one word every command uses for its human output), JSON or markdown."""

    table = "table"
    json = "json"
    markdown = "markdown"


class ExportFormat(Choice):
    perfetto = "perfetto"
    chrome = "chrome"


class Severity(Choice):
    """`findings --fail-on`: the severities a finding can fire at (info never gates)."""

    low = "low"
    medium = "medium"
    high = "high"
    critical = "critical"


# ---- numbers ------------------------------------------------------------------------------------------------
# Click parses `1e308`, `inf` and `nan` as floats and checks no range: every numeric option goes through
# `in_range`, so a value no run could mean is a usage error (exit 2) naming the option, never an
# OverflowError deep in a thread join (issue 47).

MAX_SECONDS = 30 * 86400.0  # 30 days: longer than any query or cluster wait; threading's limit is ~292 years
MAX_RANK = 2**31 - 1  # the store's rank column is INTEGER
MAX_GBPS = 1e6  # 1 PB/s: beyond any device's memory bandwidth, so a typo in units is caught


def in_range(lo: float, hi: float, *, lo_open: bool = False) -> Any:
    """A Click callback: the value (or each value of a repeatable option) is finite and within [lo, hi]
    ((lo, hi] with lo_open); None passes (the option was not given)."""

    def check(value: Any) -> Any:
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if v is None:
                continue
            bad = not math.isfinite(v) or v > hi or (v <= lo if lo_open else v < lo)
            if bad:
                bound = f"> {lo:g}" if lo_open else f">= {lo:g}"
                raise typer.BadParameter(
                    f"{v!r} is out of range: expected a finite number {bound} and <= {hi:.10g}"
                )
        return value

    return check


def known_device(value: str | None) -> str | None:
    """A Click callback: --device names a preset (devices.preset's one-line error otherwise), checked while the
    options are parsed, before any work (the analysis tables' build used to come first)."""
    if value is not None:
        from ..devices import preset

        preset(value)
    return value


# ---- options ------------------------------------------------------------------------------------------------

StoreOpt = Annotated[
    Optional[str],  # a str, not a Path: a URL root (s3://bucket/prefix) must keep its '//' (traceql.store_fs)
    typer.Option(
        "--store",
        "-s",
        help="Store directory or URL (s3://bucket/prefix with traceql[s3]); default ./.traceql, or $TRACEQL_STORE.",
        envvar="TRACEQL_STORE",
    ),
]
RunOpt = Annotated[
    Optional[str], typer.Option("--run", "-r", help="Run name (default: the only/most recent run).")
]
RankOpt = Annotated[
    Optional[int], typer.Option("--rank", help="Only this rank.", callback=in_range(0, MAX_RANK))
]
RanksOpt = Annotated[
    Optional[list[int]],
    typer.Option("--rank", help="Only this rank (repeatable).", callback=in_range(0, MAX_RANK)),
]
DeviceOpt = Annotated[
    Optional[str],
    typer.Option(
        "--device",
        help="Device preset for the peaks (ascend910, ascend910b, a100-80gb, h100-sxm, h200...); "
        "default: detected from the dump.",
        callback=known_device,
    ),
]
PeakHbmOpt = Annotated[
    Optional[float],
    typer.Option(
        "--peak-hbm-gbps",
        help="Override the HBM peak, GB/s (1 GB = 1e9 bytes).",
        callback=in_range(0, MAX_GBPS, lo_open=True),
    ),
]


def format_opt(help: str) -> Any:
    """`--format/-f`; its choices come from the parameter's enum type (shown by --help)."""
    return typer.Option("--format", "-f", help=help)


def output_opt(help: str = "Write the result to FILE.") -> Any:
    """`--output/-o`: a directory, socket, block device or missing folder there is refused while the options
    are parsed, before any work (traceql.out_file.check: one line naming the path, exit 1)."""
    return typer.Option("--output", "-o", help=help, callback=_check_output)


def _check_output(value: Any) -> Any:
    if value is not None:
        from ..out_file import check

        check(value)
    return value


def baseline_opt(help: str = "Baseline run (e.g. 1 card) for the scaling efficiency.") -> Any:
    return typer.Option("--baseline", help=help)


def peaks(peak_hbm_gbps: float | None) -> dict[str, Any] | None:
    """--peak-hbm-gbps as the library's peaks override (bytes/s), or None."""
    return {"peak_hbm_bps": peak_hbm_gbps * 1e9} if peak_hbm_gbps is not None else None
