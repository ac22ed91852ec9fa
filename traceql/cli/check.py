"""`traceql check`: run the data-fidelity checks (queries/checks/*.sql, each must return zero rows) on demand."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ._options import ListFormat, RunOpt, StoreOpt, format_opt


def check_cmd(
    run: RunOpt = None,
    store: StoreOpt = None,
    fmt: Annotated[ListFormat, format_opt("The results as a table or JSON.")] = ListFormat.table,
    all_runs: Annotated[bool, typer.Option("--all", help="Check every run in the store.")] = False,
    only: Annotated[
        Optional[list[str]], typer.Option("--check", "-c", help="Run only this check (repeatable).")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when any check finds rows (for CI).")
    ] = False,
) -> None:
    """Run the data-fidelity checks (negative durations, kernels outside their step, counters outside the run
    window, implausible HBM bandwidth...) on a run. Each check is a SQL file that must return zero rows;
    re-run one with `traceql sql` to see every offending row.

    Example:  traceql check --run resnet-8card --format json
    """
    import json

    from .. import checks
    from ..errors import TraceQLError
    from ..stores import open_store
    from . import _console
    from ._common import resolve_run
    from ._output import write_json

    known = [c.name for c in checks.load_checks()]
    for name in only or []:
        if name not in known:
            raise TraceQLError(f"unknown check {name!r}; checks: {', '.join(known)}")
    st = open_store(store)
    run_ids = sorted(st.runs()) if all_runs else [resolve_run(store, run)]
    report = {rid: checks.run_checks(st, rid, names=only or None) for rid in run_ids}
    failed = sum(1 for res in report.values() for r in res if r["failures"] or r["error"])
    if fmt == ListFormat.json:
        write_json(report)
    else:
        rows = []
        for rid, res in report.items():
            for r in res:
                status = "ERROR" if r["error"] else ("ok" if not r["failures"] else f"{r['failures']} row(s)")
                rows.append((rid, r["name"], status, r["error"] or r["description"].split(": ")[0]))
        _console.print_table(["run", "check", "result", "what it looks for"], rows)
        for rid, res in report.items():
            for r in res:
                if r["failures"] and r["sample"]:
                    _console.info(
                        f"{rid} / {r['name']}: first rows: {json.dumps(r['sample'][:3], ensure_ascii=False)}"
                    )
    if strict and failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("check")(check_cmd)
