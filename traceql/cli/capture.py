"""`traceql capture`: run a built-in workload or the user's script under the profiler, write a dump, ingest it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ._options import MAX_SECONDS, StoreOpt, in_range

_HELP = """Run a workload under the right profiler (torch_npu on an Ascend NPU, torch.profiler on CUDA/CPU) with the
memory counters on, and write a dump traceql ingests (plus capture_meta.json beside it).

\b
Examples:
  traceql capture --workload layernorm-naive --ingest
  traceql capture --all --size full --ingest
  traceql capture -o ./dumps -- python train.py --steps 20
  traceql capture --list-workloads

A script is profiled unmodified: each optimizer.step() is a profiler step (--wait/--warmup/--active), or
--window SECONDS records its first seconds. Its output and exit code pass through.
Needs PyTorch: pip install 'traceql[capture]' (or 'traceql[npu]' on Ascend).
"""


def capture_cmd(
    script: Annotated[
        Optional[list[str]],
        typer.Argument(
            help="After --: the command to profile, e.g. python train.py --steps 20.", show_default=False
        ),
    ] = None,
    workload: Annotated[
        Optional[str], typer.Option("--workload", "-w", help="Built-in workload (see --list-workloads).")
    ] = None,
    all_workloads: Annotated[
        bool, typer.Option("--all", help="Capture every built-in workload, one dump each.")
    ] = False,
    list_workloads: Annotated[
        bool, typer.Option("--list-workloads", help="List the built-in workloads and exit.")
    ] = False,
    size: Annotated[
        str, typer.Option("--size", help="small (CPU, seconds) | full (the article's sizes, for a device).")
    ] = "small",
    out: Annotated[
        Optional[Path],
        typer.Option("--out", "-o", help="Parent folder of the dump (default ./traceql_dumps)."),
    ] = None,
    device: Annotated[
        str,
        typer.Option(
            "--device", help="auto | npu | cuda | cpu (auto: NPU if torch_npu sees one, else CUDA, else CPU)."
        ),
    ] = "auto",
    wait: Annotated[
        int, typer.Option("--wait", help="Schedule: steps skipped first.", callback=in_range(0, 1e6))
    ] = 1,
    warmup: Annotated[
        int,
        typer.Option(
            "--warmup", help="Schedule: warm-up steps (traced, discarded).", callback=in_range(0, 1e6)
        ),
    ] = 1,
    active: Annotated[
        int, typer.Option("--active", help="Schedule: steps recorded.", callback=in_range(1, 1e6))
    ] = 2,
    window: Annotated[
        Optional[float],
        typer.Option(
            "--window",
            help="Scripts: record the first SECONDS instead of stepping on optimizer.step().",
            callback=in_range(0, MAX_SECONDS, lo_open=True),
        ),
    ] = None,
    ingest: Annotated[
        bool, typer.Option("--ingest", help="Ingest the dump into --store right away.")
    ] = False,
    store: StoreOpt = None,
    name: Annotated[
        Optional[str],
        typer.Option("--name", "-n", help="Run name for --ingest (default: the workload or script name)."),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="With --ingest: overwrite a run of the same name.")
    ] = False,
    use_gzip: Annotated[
        bool, typer.Option("--gzip", help="torch.profiler: write the trace gzipped.")
    ] = False,
    cupti: Annotated[
        bool,
        typer.Option(
            "--cupti/--no-cupti",
            help="CUDA: try per-kernel DRAM counters (CUPTI range profiler) in a second pass.",
        ),
    ] = True,
    aic_metrics: Annotated[
        str,
        typer.Option(
            "--aic-metrics", help="NPU: memory | memory-access | memory-ub | l2cache | pipe | arithmetic."
        ),
    ] = "memory",
    npu_level: Annotated[
        int,
        typer.Option(
            "--npu-level",
            help="NPU: profiler_level 1 or 2 (Level0 collects no AI Core metrics).",
            callback=in_range(0, 2),
        ),
    ] = 1,
    export: Annotated[str, typer.Option("--export", help="NPU: text | db | both.")] = "text",
    l2_cache: Annotated[
        bool,
        typer.Option("--l2-cache/--no-l2-cache", help="NPU: collect l2_cache.csv (per-task L2 hit rates)."),
    ] = True,
) -> None:
    from .. import capture as cap
    from ..errors import TraceQLError
    from . import _console

    if list_workloads:
        rows = [(w["name"], w["role"], w["pair"], w["title"]) for w in cap.list_workloads()]
        _console.print_table(["workload", "role", "pair", "what it runs"], rows)
        return
    chosen = sum([bool(workload), all_workloads, bool(script)])
    if chosen != 1:
        _usage("give exactly one of --workload NAME, --all, or a script after -- (see --help)")
    _check_choice("--size", size, ("small", "full"))
    _check_choice("--device", device, ("auto", "cpu", "cuda", "npu"))
    _check_choice("--export", export, ("text", "db", "both"))
    from ..capture.npu_driver import AIC_METRICS

    _check_choice("--aic-metrics", aic_metrics, tuple(AIC_METRICS))
    if npu_level not in (1, 2):
        _usage("--npu-level must be 1 or 2 (Level0 collects no AI Core memory metrics)")
    schedule = cap.Schedule(wait=wait, warmup=warmup, active=active)
    npu = cap.NpuOptions(aic_metrics=aic_metrics, level=npu_level, export=export, l2_cache=l2_cache)
    if ingest:
        _check_run_name(name)

    if script:
        meta = cap.capture_script(
            script,
            out=out,
            device=device,
            schedule=schedule,
            npu=npu,
            window_s=window,
            use_gzip=use_gzip,
            name=name,
        )
        _report(meta)
        code = int(meta.get("exit_code") or 0)
        if meta.get("runner_error"):
            _console.warn(meta["runner_error"])
        if not meta.get("ingest_path"):
            if code:
                raise typer.Exit(code)
            steps = meta.get("steps_seen") or 0
            raise TraceQLError(
                f"no trace was written to {meta['dump']}: the script made {steps} optimizer step(s), the schedule needs "
                f"{schedule.total} (--wait {wait} --warmup {warmup} --active {active}); lower them, or use --window SECONDS"
            )
        if ingest:
            _ingest(meta, store, name or meta["run_name"], replace)
        if code:
            raise typer.Exit(code)
        return

    names = [str(w["name"]) for w in cap.list_workloads()] if all_workloads else [str(workload)]
    for wl in names:
        meta = cap.capture_workload(
            wl, size=size, out=out, device=device, schedule=schedule, npu=npu, cupti=cupti, use_gzip=use_gzip
        )
        _report(meta)
        if not meta.get("ingest_path"):
            raise TraceQLError(f"the profiler wrote no trace into {meta['dump']}")
        if ingest:
            _ingest(meta, store, name if (name and not all_workloads) else wl, replace)


def _check_choice(opt: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        _usage(f"{opt} must be one of {', '.join(choices)} (got {value!r})")


def _usage(msg: str) -> None:
    """A usage error: one line, exit code 2 (the CLI convention)."""
    from . import _console

    _console.error(msg)
    raise typer.Exit(2)


def _check_run_name(name: str | None) -> None:
    """Fail before a long capture when --ingest would reject the run name."""
    if name:
        from ..store import check_run_name

        check_run_name(name)


def _report(meta: dict[str, Any]) -> None:
    from . import _console

    dump = Path(meta["dump"])
    target = dump / meta["ingest_path"] if meta.get("ingest_path") else None
    cupti = meta.get("cupti_counters") or {}
    dev = meta["device"]
    _console.info(
        f"captured on {dev['kind']} ({dev['name']}) with {meta.get('profiler')}"
        + (f"; CUPTI counters: {'yes' if cupti.get('available') else 'no'}" if cupti.get("attempted") else "")
    )
    if cupti.get("attempted") and not cupti.get("available"):
        _console.info(f"  CUPTI counters unavailable: {cupti.get('reason')}")
    _console.line(f"dump: {dump}")
    if target:
        from ..commandline import command

        _console.line(f"ingest with: {command('ingest', target)}")


def _ingest(meta: dict[str, Any], store: str | Path | None, run: str, replace: bool) -> None:
    """Ingest the capture's dump, then the same post-ingest policy as `traceql ingest` (traceql.post_ingest)."""
    from ..ingest import ingest
    from ..post_ingest import after_ingest, summary
    from . import _console

    target = Path(meta["dump"]) / meta["ingest_path"]
    info = ingest(target, store=store, name=run, replace=replace, workers=1)
    _console.line(summary(info))
    after_ingest(info, store, _console.report, workers=1)


def register(app: typer.Typer) -> None:
    app.command("capture", help=_HELP, context_settings={"allow_interspersed_args": False})(capture_cmd)
