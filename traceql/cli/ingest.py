"""`traceql ingest`, `traceql runs`, `traceql rm`."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from ._options import MAX_SECONDS, ListFormat, StoreOpt, format_opt, in_range

# ingest's options, one alias each (as _options.StoreOpt), so ingest_cmd's signature is one line per option.
_PathArg = Annotated[
    str,  # a str, not a Path: a dump URL (s3://bucket/job42/) must keep its '//' (traceql.dump_fs)
    typer.Argument(
        help="Dump to ingest: a *_ascend_pt folder, a cluster folder of them, a PROF_* folder, or a trace .json/.json.gz/.csv/.db file; or the same on object storage (s3://bucket/prefix/, traceql[s3])."
    ),
]
_NameOpt = Annotated[Optional[str], typer.Option("--name", "-n", help="Run name (default: from the path).")]
_ReplaceOpt = Annotated[bool, typer.Option("--replace", help="Overwrite a run of the same name.")]
_WorkersOpt = Annotated[
    Optional[int],
    typer.Option(
        "--workers",
        "-j",
        help="Parallel parser processes (default: CPU count).",
        callback=in_range(1, 4096),
    ),
]
_QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
_CheckOpt = Annotated[
    bool, typer.Option("--check/--no-check", help="Run the data-fidelity checks after ingest.")
]
_PrepareOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--prepare/--no-prepare",
        help="Build the run's analysis tables now (default: for runs of 2+ ranks; else the first findings/report does, once).",
    ),
]
_FollowLinksOpt = Annotated[
    bool,
    typer.Option(
        "--follow-links",
        help="Read symbolic links that lead outside the dump (refused by default: a dump from elsewhere may link to your files).",
    ),
]
_ExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        help="Where ranks are parsed: local (process pool) or ray (a Ray cluster: traceql[ray] on every node; the derived tables are built by the same tasks).",
    ),
]
_RanksOpt = Annotated[
    str,
    typer.Option(
        "--ranks",
        help="all, or light (1,000+ ranks): every rank's steps/communication/counters, kernel detail only for the slowest, fastest and median rank of the job and of each communication group; light+3,17 adds ranks 3 and 17.",
    ),
]
_AddressOpt = Annotated[
    Optional[str],
    typer.Option(
        "--address",
        help="Ray cluster address (ray://head:10001, auto); default $RAY_ADDRESS, else a local Ray.",
    ),
]
_RayTimeoutOpt = Annotated[
    Optional[float],
    typer.Option(
        "--ray-timeout",
        help="Seconds to wait for a Ray cluster that does not answer (connecting, or no live node while "
        "ranks are pending) before giving up in one line; default 60 or $TRACEQL_RAY_TIMEOUT.",
        metavar="SECONDS",
        callback=in_range(0, MAX_SECONDS, lo_open=True),
    ),
]


def ingest_cmd(
    path: _PathArg,
    name: _NameOpt = None,
    store: StoreOpt = None,
    replace: _ReplaceOpt = False,
    workers: _WorkersOpt = None,
    quiet: _QuietOpt = False,
    check: _CheckOpt = True,
    prepare: _PrepareOpt = None,
    follow_links: _FollowLinksOpt = False,
    executor: _ExecutorOpt = "local",
    ranks: _RanksOpt = "all",
    address: _AddressOpt = None,
    ray_timeout: _RayTimeoutOpt = None,
) -> None:
    """Parse a profiler dump into the store (format detected automatically; ranks parsed in parallel), then
    analyse it with `traceql findings`.

    \b
    Examples:
      traceql ingest ./rank0_ascend_pt                        # one torch_npu rank folder
      traceql ingest ./cluster_dir --name resnet-8card        # a folder of rank folders = one run
      traceql ingest trace.json                               # Kineto / trace_view / msprof json, .csv, .db
      traceql ingest /mnt/lustre/job42 --executor ray         # many ranks on a Ray cluster (docs/cluster.md)

    The analysis tables (per-kernel HBM bytes, timelines, matched collectives) are built at the end of the ingest
    for a run of two or more ranks, and by the first analysis of a single trace; --prepare / --no-prepare decide
    it either way. They are built one session at a time within 512 MB of DuckDB memory (TRACEQL_INGEST_MEMORY
    changes it): ~5-8 CPU-s per GB of dump on the benchmark's 8-rank cluster (2.7 GB), ~7.3-10 on a
    kernel-dense one (3.2 GB, 1.5M kernels: ~15-22 CPU-s per million kernels), and the whole ingest of either
    within ~0.95 GB, measured 2026-12-07 on a shared 2-core VM whose speed moved ~40% between hours
    (benchmarks/README.md, benchmarks/budgets.py). Ray, s3:// dumps and stores: docs/cluster.md.
    """
    from ..ingest import ingest
    from . import _console
    from ._console import progress_enabled as progress_wanted

    progress = _console.make_byte_progress(quiet)
    shown = _IngestProgress(progress, path)
    ex = None
    if executor != "local" or address:
        from ..executors import get

        # --- hook: traceql.executors
        ex = get(executor, workers=workers, address=address, timeout_s=ray_timeout)
    with progress:
        info = ingest(
            path,
            store=store,
            name=name,
            replace=replace,
            workers=workers,
            on_units=shown.on_units,
            on_unit_done=shown.on_done,
            on_bytes=shown.on_bytes if progress_wanted(quiet) else None,
            follow_links=follow_links,
            executor=ex,
            ranks=ranks,
            on_detect=shown.on_detect if progress_wanted(quiet) else None,
        )
    if ex is not None:
        ex.close()
    from ..post_ingest import after_ingest, summary

    _console.line(summary(info))
    after_ingest(info, store, _console.report, check=check, prepare=prepare, workers=workers)


class _IngestProgress:
    """The ingest's callbacks onto one progress display: detecting formats, then parsing units."""

    def __init__(self, progress: Any, path: str) -> None:
        self.progress, self.path = progress, path
        self.detect: Any = None  # the 'detecting' task while a cluster's folders are sniffed
        self.task: Any = None
        self.n = self.done = 0

    def on_detect(self, done: int, total: int) -> None:
        # a cluster folder's rank dumps are sniffed one by one: seconds for a thousand, shown as they go
        if self.detect is None:
            self.detect = self.progress.add_task("detecting", total=None)
        self.progress.update(self.detect, description=f"detecting formats {done}/{total} folder(s)")

    def on_units(self, units: list[Any]) -> None:
        from . import _console

        if self.detect is not None:
            self.progress.remove_task(self.detect)
            self.detect = None
        kinds = sorted({u.parser for u in units})
        _console.info(f"detected {', '.join(kinds)}: {len(units)} unit(s) in {self.path}")
        self.n, self.done = len(units), 0
        self.task = self.progress.add_task(f"parsing 0/{len(units)} unit(s)", total=None)

    def on_done(self, unit: Any, result: dict[str, Any]) -> None:
        self.done += 1
        self.progress.update(self.task, description=f"parsing {self.done}/{self.n} unit(s)")

    def on_bytes(self, done: int, total: int) -> None:
        # input bytes read so far, from every worker (traceql.progress): moves inside one multi-GB file too
        self.progress.update(self.task, completed=done, total=total or None)


def runs_cmd(
    store: StoreOpt = None,
    fmt: Annotated[ListFormat, format_opt("The listing as a table or JSON.")] = ListFormat.table,
) -> None:
    """List the runs in the store.

    Example:  traceql runs --format json
    """
    from ..queries import run_devices
    from . import _console
    from ._common import open_store
    from ._output import write_json

    st = open_store(store)
    runs = st.runs() if st.exists() else {}
    # the device and peaks every analysis of the run uses, and where they came from (queries.resolve_peaks)
    resolved = run_devices(st, sorted(runs))
    if fmt == ListFormat.json:
        out = {k: {kk: vv for kk, vv in v.items() if kk != "files"} for k, v in runs.items()}
        for k, ch in resolved.items():
            out[k]["device_resolved"] = {
                "preset": ch.device.key if ch.device else None,
                "peaks": ch.peaks,
                "source": ch.note,
            }
        write_json(out)
        return
    rows = [
        (
            rid,
            info.get("format"),
            info.get("ranks_count"),
            info.get("device"),
            _preset_text(resolved.get(rid)),
            sum(info.get("rows", {}).values()),
            info.get("ingested_at"),
            info.get("source"),
        )
        for rid, info in sorted(runs.items())
    ]
    _console.print_table(
        ["run", "format", "ranks", "device", "peaks from", "rows", "ingested", "source"], rows
    )


def _preset_text(choice: Any) -> str:
    """'ascend910b (inferred ...)': the preset analyses use and how it was chosen, short."""
    if choice is None:
        return "unknown"
    key = choice.device.key if choice.device else "none"
    how = "--device" if "(--device)" in choice.note else "inferred" if "inferred" in choice.note else "dump"
    if choice.device is None:
        how = "no preset"
    return f"{key} ({how})"


def rm_cmd(
    run: Annotated[str, typer.Argument(help="Run name to delete.")],
    store: StoreOpt = None,
) -> None:
    """Delete a run from the store.

    Example:  traceql rm resnet-8card
    """
    from ..stores import open_store
    from . import _console

    if open_store(store).remove(run):
        _console.info(f"removed run {run!r}")
    else:
        _console.info(f"removed run {run!r} (its files are deleted once the queries reading them now end)")


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest_cmd)
    app.command("runs")(runs_cmd)
    app.command("rm")(rm_cmd)
