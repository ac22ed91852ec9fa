"""`traceql export`: a run's timeline with the findings, bandwidth counters and wait state on it, as a Perfetto
trace (.pftrace) or Chrome trace JSON (traceql.export)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ._options import DeviceOpt, ExportFormat, PeakHbmOpt, RanksOpt, RunOpt, StoreOpt, output_opt, peaks

_CHROME_SUFFIXES = (".json",)


# export's own options, one alias each (as _options.StoreOpt), so the signature is one line per option.
_OutputOpt = Annotated[
    Optional[Path],
    output_opt("File to write ('-' = stdout). Default: RUN.pftrace, or RUN.json with --format chrome."),
]
_FormatOpt = Annotated[
    Optional[ExportFormat],
    typer.Option(
        "--format",
        "-f",
        help="perfetto (protobuf .pftrace) or chrome (trace JSON); default from the --output suffix "
        "(.json = chrome), else perfetto.",
    ),
]
_StepsOpt = Annotated[
    Optional[str],
    typer.Option("--steps", help="Only events that start in these steps' windows: N or A-B."),
]
_ClockAlignOpt = Annotated[
    bool,
    typer.Option(
        "--clock-align/--no-clock-align",
        help="Move every rank onto the reference rank's clock where the estimated offset exceeds the collectives' own skew (default on).",
    ),
]
_FindingsOpt = Annotated[
    bool,
    typer.Option(
        "--findings/--no-findings",
        help="Add the findings track (runs the checklist: seconds on big runs).",
    ),
]


def export_cmd(
    run: RunOpt = None,
    store: StoreOpt = None,
    output: _OutputOpt = None,
    fmt: _FormatOpt = None,
    rank: RanksOpt = None,
    steps: _StepsOpt = None,
    clock_align: _ClockAlignOpt = True,
    with_findings: _FindingsOpt = True,
    device: DeviceOpt = None,
    peak_hbm_gbps: PeakHbmOpt = None,
) -> None:
    """Export a run's timeline for Perfetto UI, chrome://tracing or MindStudio Insight: device tasks, host ops,
    communication and flows (one process per rank, tracks named as the profiler names them), counter tracks
    (HBM bandwidth as % of peak from the sampled counters with their period, per-task PMU bytes and the modeled
    lower bound on their own tracks, UB bandwidth and L2 hit rate where measured), the wait-attribution state
    per rank, and a findings track: one slice per finding over its evidence windows, with message, saving and
    the query that reproduces it. The clock offsets estimated from collectives are printed on stderr.

    \b
    Examples:
      traceql export --run job -o job.pftrace
      traceql export --run job --format chrome -o job.json
      traceql export --run job --rank 3 --steps 10-12 -o slice.pftrace
      traceql query clock_offsets --run job          # the offsets alone
    """
    from .. import export
    from ._common import resolve_run

    if fmt is None:
        fmt = (
            ExportFormat.chrome
            if output is not None and output.suffix.lower() in _CHROME_SUFFIXES
            else ExportFormat.perfetto
        )
    step_range = export.parse_steps(steps)
    run_id = resolve_run(store, run)
    output, to_stdout = _target(output, fmt, run_id)
    summary = export.export(
        store,
        run_id,
        None if to_stdout else output,
        fmt=fmt.value,
        ranks=rank or None,
        steps=step_range,
        align=clock_align,
        device=device,
        peaks=peaks(peak_hbm_gbps),
        with_findings=with_findings,
    )
    _report(summary, clock_align, "stdout" if to_stdout else str(output), fmt, run_id, steps)


def _target(output: Path | None, fmt: ExportFormat, run_id: str) -> tuple[Path, bool]:
    """(file to write, whether it is stdout): RUN.<suffix> by default; refused before any work when it is a
    terminal for a binary trace, or a path that cannot be written (out_file.check)."""
    from ..errors import TraceQLError

    to_stdout = output is not None and str(output) == "-"
    if output is None:
        suffix = "json" if fmt == ExportFormat.chrome else "pftrace"
        output = Path(f"{run_id}.{suffix}")
    if to_stdout and fmt == ExportFormat.perfetto:
        import sys

        if sys.stdout.isatty():
            raise TraceQLError(
                "refusing to write a binary Perfetto trace to a terminal: pass -o FILE, or pipe it"
            )
    if not to_stdout:
        from ..out_file import check

        check(output)  # a directory, socket or missing folder at -o: one line naming it, before any work
    return output, to_stdout


def _report(
    summary: dict[str, Any], clock_align: bool, where: str, fmt: ExportFormat, run_id: str, steps: str | None
) -> None:
    """On stderr: the clock offsets, a warning when --no-clock-align left disagreeing clocks, what was written."""
    from .. import clock_align as calign
    from . import _console

    for line in calign.describe(summary["offsets"], summary["ranks"]):
        _console.info(f"clock {line}")
    if not clock_align and summary["offsets"] and any(o["applied"] for o in summary["offsets"]):
        _console.warn(
            "--no-clock-align: ranks whose clocks disagree beyond the collectives' skew are exported as recorded"
        )
    c = summary["counts"]
    what = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in c.items() if v)
    _console.info(
        f"wrote {where} ({fmt.value}, run {run_id}, ranks {', '.join(map(str, summary['ranks']))}"
        + (f", steps {steps}" if steps else "")
        + f"): {what}"
    )


def register(app: typer.Typer) -> None:
    app.command("export")(export_cmd)
