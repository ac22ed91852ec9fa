"""`traceql findings`: the article's checklist over one run, each check with its numbers and saving (traceql.findings)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ._options import (
    DeviceOpt,
    DocFormat,
    PeakHbmOpt,
    RunOpt,
    Severity,
    StoreOpt,
    baseline_opt,
    format_opt,
    output_opt,
    peaks,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..findings.model import Report

FAIL_EXIT = 3  # --fail-on threshold reached (1 = error, 2 = usage error)

# findings' own options, one alias each (as _options.StoreOpt), so the signature is one line per option.
_FormatOpt = Annotated[
    DocFormat, format_opt("The findings as a table, JSON or markdown (json always lists every check).")
]
_FailOnOpt = Annotated[
    Optional[Severity],
    typer.Option(
        "--fail-on",
        help=f"Exit {FAIL_EXIT} when a finding at or above this severity fires, for CI gates.",
    ),
]
_AllOpt = Annotated[bool, typer.Option("--all", help="Also show the checks that did not fire, with why.")]
_OutputOpt = Annotated[Optional[Path], output_opt("Write the report to FILE instead of stdout.")]
_StepMarkerOpt = Annotated[
    str,
    typer.Option(
        "--step-marker",
        metavar="REGEX",
        help="Host ranges (NVTX / mstx / annotations) whose names match REGEX mark the steps for the "
        "per-phase verdicts, instead of the built-in markers (ProfilerStep, SGLang step[...], vLLM execute_*).",
    ),
]
_ExplainOpt = Annotated[
    bool,
    typer.Option(
        "--explain",
        help="Print what the output's words mean (verdict, grades, severity, step, saving) and exit.",
    ),
]


def findings_cmd(
    run: RunOpt = None,
    store: StoreOpt = None,
    device: DeviceOpt = None,
    peak_hbm_gbps: PeakHbmOpt = None,
    baseline: Annotated[Optional[str], baseline_opt()] = None,
    fmt: _FormatOpt = DocFormat.table,
    fail_on: _FailOnOpt = None,
    show_all: _AllOpt = False,
    output: _OutputOpt = None,
    step_marker: _StepMarkerOpt = "",
    explain: _ExplainOpt = False,
) -> None:
    """Walk the seed article's checklist over a run: is it bandwidth-bound, which operators move the HBM bytes,
    and which of the six optimisations (fusion, UB reuse, layout, prefetch, mixed precision, checkpointing)
    apply, each with evidence, an estimated saving and the `traceql query` that reproduces it; plus Ascend
    advisor parity checks (slow rank and why, slow link, packet sizes, AI CPU, dynamic shapes, free time).

    Exit codes: 0 ok, 1 error, 2 usage error, 3 a finding at or above --fail-on fired.

    \b
    Examples:
      traceql findings --run resnet-8card --device ascend910b
      traceql findings --all --format markdown -o findings.md
      traceql findings --format json --fail-on high      # CI gate
      traceql findings --run vllm-serve --step-marker '^my_step_[0-9]+$'
      traceql findings --explain                         # what the words mean
    """
    from .. import findings
    from ..errors import TraceQLError
    from ._common import resolve_run
    from ._output import write_text

    if explain:
        from ..findings.legend import legend_text

        write_text(legend_text(), output)
        return
    if output is not None and fmt == DocFormat.table:
        raise TraceQLError("--output needs --format json or markdown")
    run_id = resolve_run(store, run)
    if baseline is not None:
        resolve_run(store, baseline)
    rep = findings.evaluate(
        store, run_id, device=device, peaks=peaks(peak_hbm_gbps), baseline=baseline, step_marker=step_marker
    )
    _device_note(rep, run_id)
    if fmt == DocFormat.json:
        write_text(rep.to_json() + "\n", output)
    elif fmt == DocFormat.markdown:
        from . import _console

        write_text(_console.safe(rep.to_markdown(include_silent=show_all), newlines=True), output)
    else:
        _print_table(rep, show_all)
    if fail_on is not None:
        _fail_on(rep, fail_on)


def _device_note(rep: Report, run_id: str) -> None:
    """How the device and its peaks were chosen, on stderr: a warning when there is no HBM peak."""
    from . import _console

    note = rep.device.get("note") or ""
    if note:
        (_console.warn if rep.device.get("peaks", {}).get("peak_hbm_bps") is None else _console.info)(
            f"run {run_id}: {note}"
        )


def _print_table(rep: Report, show_all: bool) -> None:
    """The table format: the verdict, the fired findings (every check with --all), and a count line."""
    from ..findings.text import saving_text
    from . import _console

    _print_verdict(rep.verdict)
    rows = []
    for f in rep.findings:  # already in impact order (traceql.findings.order)
        if not (f.fired or show_all):
            continue
        rows.append(
            (
                saving_text(f.saving),
                f.severity if f.fired else "-",
                f.id,
                str(f.checklist_step),
                f.message,
            )
        )  # print_table escapes control characters and never reads markup
    if rows:
        _console.print_table(["saving", "severity", "check", "step", "finding"], rows)
    hidden = len(rep.findings) - len(rep.fired)
    _console.info(
        f"{len(rep.fired)} of {len(rep.findings)} checks fired"
        + (f"; {hidden} did not (--all shows why)" if hidden and not show_all else "")
        + "; --format markdown adds evidence, top operators and the query behind each finding; "
        "--explain says what the words mean"
    )


def _fail_on(rep: Report, fail_on: Severity) -> None:
    """--fail-on: exit FAIL_EXIT, naming them, when findings at or above the severity fired."""
    from . import _console

    hits = rep.at_least(fail_on.value)
    if hits:
        _console.info(
            f"--fail-on {fail_on.value}: {len(hits)} finding(s) at or above it: "
            + ", ".join(f"{f.id} ({f.severity})" for f in hits)
        )
        raise typer.Exit(FAIL_EXIT)


def _print_verdict(verdict: dict[str, Any]) -> None:
    """The short headline (bound first) in bold, then the caveats as a list (JSON keeps the full text)."""
    from ..findings.headline import headline_parts
    from . import _console

    parts = verdict if "short" in verdict else headline_parts(verdict)
    _console.line(parts["short"], style="bold")
    for c in parts["caveats"]:
        _console.line(f"  - {c}")


def register(app: typer.Typer) -> None:
    app.command("findings")(findings_cmd)
