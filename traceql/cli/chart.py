"""`traceql chart` (one chart as PNG/SVG/HTML/Vega-Lite JSON) and `traceql report` (one self-contained HTML file)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._options import DeviceOpt, PeakHbmOpt, RankOpt, RunOpt, StoreOpt, baseline_opt, output_opt, peaks


def chart_cmd(
    name: Annotated[Optional[str], typer.Argument(help="Chart to draw (see --list).")] = None,
    list_: Annotated[
        bool, typer.Option("--list", "-l", help="List the charts and the queries behind each.")
    ] = False,
    run: RunOpt = None,
    rank: RankOpt = None,
    store: StoreOpt = None,
    device: DeviceOpt = None,
    peak_hbm_gbps: PeakHbmOpt = None,
    output: Annotated[
        Optional[Path],
        output_opt(
            "File to write; the format comes from the suffix: .png .svg (rendered offline) .html "
            "(self-contained) .json (Vega-Lite spec). Default NAME.png."
        ),
    ] = None,
) -> None:
    """Draw one chart of a run from the metric queries (nothing is computed in the chart itself).

    \b
    Examples:
      traceql chart --list
      traceql chart hbm_timeline --run resnet-8card -o hbm.png
      traceql chart wait_attribution --device ascend910b -o wait.svg
      traceql chart roofline --rank 0 -o roofline.html
      traceql chart op_hbm_bytes -o ops.json        # the Vega-Lite spec
    """
    from .. import charts
    from . import _console
    from ._common import resolve_run

    if list_ or name is None:
        for c in charts.list_charts():
            _console.line(f"{c.name:<18} {c.description}  [queries: {', '.join(c.queries)}]")
        return
    charts.get(name)  # unknown chart: one line before touching the store
    out = output or Path(f"{name}.png")
    if out.suffix.lower() not in charts.FORMATS:
        from ..errors import TraceQLError

        raise TraceQLError(
            f"{out}: unknown chart format {out.suffix or '(none)'!r}; use one of {', '.join(charts.FORMATS)}"
        )
    run_id = resolve_run(store, run)
    chart = charts.make(name, store, run_id=run_id, rank=rank, device=device, peaks=peaks(peak_hbm_gbps))
    charts.save(chart, out, store=store)
    _console.info(f"wrote {out} (chart {name}, run {run_id})")


def report_cmd(
    run: RunOpt = None,
    store: StoreOpt = None,
    device: DeviceOpt = None,
    peak_hbm_gbps: PeakHbmOpt = None,
    baseline: Annotated[Optional[str], baseline_opt()] = None,
    output: Annotated[Optional[Path], output_opt("HTML file to write (default RUN.html).")] = None,
) -> None:
    """Write one self-contained HTML report: the verdict (what saturates first, with the number), the findings
    with the charts that prove them, per-rank detail, operators, run metadata and the commands that reproduce
    every number. It opens offline: the chart libraries and data are inlined, nothing is fetched.

    \b
    Examples:
      traceql report --run resnet-8card -o resnet.html
      traceql report --device ascend910b --baseline resnet-1card -o scaling.html
    """
    from ..report import write_report
    from . import _console
    from ._common import resolve_run

    run_id = resolve_run(store, run)
    if baseline is not None:
        resolve_run(store, baseline)
    out = output or Path(f"{run_id}.html")
    if out.suffix.lower() not in (".html", ".htm"):
        from ..errors import TraceQLError

        raise TraceQLError(f"{out}: the report is an HTML file; give a path ending in .html")
    write_report(out, store, run_id, device=device, peaks=peaks(peak_hbm_gbps), baseline=baseline)
    _console.info(
        f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, run {run_id}); it opens offline in any browser"
    )


def register(app: typer.Typer) -> None:
    app.command("chart")(chart_cmd)
    app.command("report")(report_cmd)
