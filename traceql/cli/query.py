"""`traceql query`: run a documented metric query (queries/*.sql) over one run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ._common import resolve_run
from ._options import (
    DeviceOpt,
    PeakHbmOpt,
    RankOpt,
    RunOpt,
    StoreOpt,
    TableFormat,
    baseline_opt,
    format_opt,
    output_opt,
    peaks,
)


def _parse_params(items: list[str]) -> dict[str, str]:
    from ..errors import QueryError

    out: dict[str, str] = {}
    for it in items:
        if "=" not in it:
            raise QueryError(f"--param {it!r}: expected NAME=VALUE")
        k, v = it.split("=", 1)
        k = k.strip()
        if k in out:
            raise QueryError(f"--param {k} given twice")
        out[k] = v
    return out


def _list(fmt: str, output: Path | None) -> None:
    import pyarrow as pa

    from .. import queries
    from ._output import emit

    specs = queries.list_queries()
    if fmt == "json":
        from ._output import write_json

        data = [s.catalog_entry() for s in specs]
        write_json(data, output)
        return
    table = pa.table(
        {
            "name": [s.name for s in specs],
            "description": [s.description for s in specs],
            "params": [s.signature() for s in specs],
        }
    )
    emit(table, fmt, output)


def query_cmd(
    name: Annotated[Optional[str], typer.Argument(help="Query to run (see --list).")] = None,
    list_: Annotated[
        bool, typer.Option("--list", "-l", help="List every query with its description and params.")
    ] = False,
    param: Annotated[
        Optional[list[str]], typer.Option("--param", "-p", help="Query parameter NAME=VALUE (repeatable).")
    ] = None,
    store: StoreOpt = None,
    run: RunOpt = None,
    rank: RankOpt = None,
    device: DeviceOpt = None,
    peak_hbm_gbps: PeakHbmOpt = None,
    baseline: Annotated[
        Optional[str], baseline_opt("Baseline run (e.g. 1 card) for wait_attribution's scaling_vs_baseline.")
    ] = None,
    fmt: Annotated[
        TableFormat,
        format_opt(
            "The result as a table (*_ns columns shown in ms as *_ms), CSV, JSON or Parquet (exact values, ns; "
            "parquet needs --output)."
        ),
    ] = TableFormat.table,
    output: Annotated[Optional[Path], output_opt()] = None,
    show_sql: Annotated[
        bool, typer.Option("--show-sql", help="Print a script for the stock duckdb shell instead of running.")
    ] = False,
) -> None:
    """Run a metric query (HBM bytes per operator, HBM utilisation, wait attribution...) over a run.

    \b
    Examples:
      traceql query --list
      traceql query op_hbm_bytes --param top_n=10
      traceql query wait_attribution --run resnet-8card --baseline resnet-1card
      traceql query hbm_utilization --device ascend910b --format csv
    """
    from .. import queries
    from ..errors import QueryError
    from . import _console
    from ._output import emit

    if list_ or name is None:
        _list(fmt.value, output)
        return
    spec = queries.get(name)
    params: dict[str, Any] = _parse_params(param or [])
    overrides = peaks(peak_hbm_gbps)
    if show_sql:
        from .. import devices

        choice = devices.resolve(device=device, overrides=overrides) if (device or overrides) else None
        import sys

        sys.stdout.write(queries.shell_script(name, params, choice.peaks if choice else None))
        return
    from ..analysis import Analysis

    session = Analysis(store, resolve_run(store, run), device=device, peaks=overrides)
    run_id = session.run_id
    if baseline is not None:
        if spec.param("baseline_step_ns") is None:
            raise QueryError(
                f"--baseline applies to queries with a baseline_step_ns param (wait_attribution), not {name}"
            )
        if "baseline_step_ns" in params:
            raise QueryError("give either --baseline RUN or --param baseline_step_ns=NS, not both")
        resolve_run(store, baseline)
        with Analysis(store, baseline) as base:
            params["baseline_step_ns"] = base.mean_step_ns()
    with session:
        table = session.query(name, params, rank=rank)
    meta = table.schema.metadata or {}
    if any(p.name.startswith("peak_") for p in spec.params):
        import json

        note = meta.get(b"traceql.peaks_note", b"").decode()
        used = json.loads(meta.get(b"traceql.peaks", b"{}"))
        if used.get("peak_hbm_bps") is None:
            _console.warn(f"run {run_id}: {note}; HBM utilisation columns are null")
        elif note:
            _console.info(f"run {run_id}: {note}")
    if fmt == TableFormat.table:
        table = ns_as_ms(table)  # for people; csv, json and parquet keep the exact ns
    emit(table, fmt.value, output)


def ns_as_ms(table: Any) -> Any:
    """The table with every numeric duration `*_ns` column as `*_ms` (divided by 1e6): what a person reads in a
    table. Timestamps (ts_ns, start_ns, end_ns...) stay in ns: as ms with 6 digits they would lose their place."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols, names = [], []
    for name in table.column_names:
        col = table.column(name)
        stamp = name.startswith(("ts", "start", "end", "first", "last")) or "_ts_" in name
        numeric = pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
        if name.endswith("_ns") and numeric and not stamp:
            col = pc.divide(pc.cast(col, pa.float64()), 1e6)
            name = name[: -len("_ns")] + "_ms"
        cols.append(col)
        names.append(name)
    return pa.Table.from_arrays(cols, names=names)


def register(app: typer.Typer) -> None:
    app.command("query")(query_cmd)
