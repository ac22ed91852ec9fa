"""`traceql capture`: run a built-in workload or the user's script under the profiler, write a dump, ingest it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ._options import MAX_SECONDS, StoreOpt, in_range

if TYPE_CHECKING:  # pragma: no cover
    from ..capture import Schedule

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


# The options, one alias each (as _options.StoreOpt), so capture_cmd's signature is one line per option.
_ScriptArg = Annotated[
    Optional[list[str]],
    typer.Argument(
        help="After --: the command to profile, e.g. python train.py --steps 20.", show_default=False
    ),
]
_WorkloadOpt = Annotated[
    Optional[str], typer.Option("--workload", "-w", help="Built-in workload (see --list-workloads).")
]
_AllOpt = Annotated[bool, typer.Option("--all", help="Capture every built-in workload, one dump each.")]
_ListOpt = Annotated[bool, typer.Option("--list-workloads", help="List the built-in workloads and exit.")]
_SizeOpt = Annotated[
    str, typer.Option("--size", help="small (CPU, seconds) | full (the article's sizes, for a device).")
]
_OutOpt = Annotated[
    Optional[Path],
    typer.Option("--out", "-o", help="Parent folder of the dump (default ./traceql_dumps)."),
]
_DeviceOpt = Annotated[
    str,
    typer.Option(
        "--device", help="auto | npu | cuda | cpu (auto: NPU if torch_npu sees one, else CUDA, else CPU)."
    ),
]
_WaitOpt = Annotated[
    int, typer.Option("--wait", help="Schedule: steps skipped first.", callback=in_range(0, 1e6))
]
_WarmupOpt = Annotated[
    int,
    typer.Option("--warmup", help="Schedule: warm-up steps (traced, discarded).", callback=in_range(0, 1e6)),
]
_ActiveOpt = Annotated[
    int, typer.Option("--active", help="Schedule: steps recorded.", callback=in_range(1, 1e6))
]
_WindowOpt = Annotated[
    Optional[float],
    typer.Option(
        "--window",
        help="Scripts: record the first SECONDS instead of stepping on optimizer.step().",
        callback=in_range(0, MAX_SECONDS, lo_open=True),
    ),
]
_IngestOpt = Annotated[bool, typer.Option("--ingest", help="Ingest the dump into --store right away.")]
_NameOpt = Annotated[
    Optional[str],
    typer.Option("--name", "-n", help="Run name for --ingest (default: the workload or script name)."),
]
_ReplaceOpt = Annotated[
    bool, typer.Option("--replace", help="With --ingest: overwrite a run of the same name.")
]
_GzipOpt = Annotated[bool, typer.Option("--gzip", help="torch.profiler: write the trace gzipped.")]
_CuptiOpt = Annotated[
    bool,
    typer.Option(
        "--cupti/--no-cupti",
        help="CUDA: try per-kernel DRAM counters (CUPTI range profiler) in a second pass.",
    ),
]
_AicMetricsOpt = Annotated[
    str,
    typer.Option(
        "--aic-metrics", help="NPU: memory | memory-access | memory-ub | l2cache | pipe | arithmetic."
    ),
]
_NpuLevelOpt = Annotated[
    int,
    typer.Option(
        "--npu-level",
        help="NPU: profiler_level 1 or 2 (Level0 collects no AI Core metrics).",
        callback=in_range(0, 2),
    ),
]
_ExportOpt = Annotated[str, typer.Option("--export", help="NPU: text | db | both.")]
_L2CacheOpt = Annotated[
    bool,
    typer.Option("--l2-cache/--no-l2-cache", help="NPU: collect l2_cache.csv (per-task L2 hit rates)."),
]


def capture_cmd(
    script: _ScriptArg = None,
    workload: _WorkloadOpt = None,
    all_workloads: _AllOpt = False,
    list_workloads: _ListOpt = False,
    size: _SizeOpt = "small",
    out: _OutOpt = None,
    device: _DeviceOpt = "auto",
    wait: _WaitOpt = 1,
    warmup: _WarmupOpt = 1,
    active: _ActiveOpt = 2,
    window: _WindowOpt = None,
    ingest: _IngestOpt = False,
    store: StoreOpt = None,
    name: _NameOpt = None,
    replace: _ReplaceOpt = False,
    use_gzip: _GzipOpt = False,
    cupti: _CuptiOpt = True,
    aic_metrics: _AicMetricsOpt = "memory",
    npu_level: _NpuLevelOpt = 1,
    export: _ExportOpt = "text",
    l2_cache: _L2CacheOpt = True,
) -> None:
    from .. import capture as cap
    from ..errors import TraceQLError

    if list_workloads:
        _list_workloads()
        return
    _check_options(workload, all_workloads, script, size, device, export, aic_metrics, npu_level)
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
        _finish_script(meta, schedule, store, ingest, name, replace)
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


def _list_workloads() -> None:
    from .. import capture as cap
    from . import _console

    rows = [(w["name"], w["role"], w["pair"], w["title"]) for w in cap.list_workloads()]
    _console.print_table(["workload", "role", "pair", "what it runs"], rows)


def _check_options(
    workload: str | None,
    all_workloads: bool,
    script: list[str] | None,
    size: str,
    device: str,
    export: str,
    aic_metrics: str,
    npu_level: int,
) -> None:
    """The usage errors (exit 2) a capture is refused with before anything runs, in the order they are told."""
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


def _finish_script(
    meta: dict[str, Any], schedule: Schedule, store: str | None, ingest: bool, name: str | None, replace: bool
) -> None:
    """After a script's capture: report it, ingest it when asked, and pass the script's exit code through."""
    from ..errors import TraceQLError
    from . import _console

    _report(meta)
    code = int(meta.get("exit_code") or 0)
    if meta.get("runner_error"):
        _console.warn(meta["runner_error"])
    if not meta.get("ingest_path"):
        if code:
            raise typer.Exit(code)
        steps = meta.get("steps_seen") or 0
        sched = f"--wait {schedule.wait} --warmup {schedule.warmup} --active {schedule.active}"
        raise TraceQLError(
            f"no trace was written to {meta['dump']}: the script made {steps} optimizer step(s), the schedule needs "
            f"{schedule.total} ({sched}); lower them, or use --window SECONDS"
        )
    if ingest:
        _ingest(meta, store, name or meta["run_name"], replace)
    if code:
        raise typer.Exit(code)


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
