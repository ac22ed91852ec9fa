"""`traceql ingest`, `traceql runs`, `traceql rm`."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from ._options import ListFormat, StoreOpt, format_opt


def ingest_cmd(
    path: Annotated[
        str,  # a str, not a Path: a dump URL (s3://bucket/job42/) must keep its '//' (traceql.dump_fs)
        typer.Argument(
            help="Dump to ingest: a *_ascend_pt folder, a cluster folder of them, a PROF_* folder, or a trace .json/.json.gz/.csv/.db file; or the same on object storage (s3://bucket/prefix/, traceql[s3])."
        ),
    ],
    name: Annotated[
        Optional[str], typer.Option("--name", "-n", help="Run name (default: from the path).")
    ] = None,
    store: StoreOpt = None,
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite a run of the same name.")] = False,
    workers: Annotated[
        Optional[int], typer.Option("--workers", "-j", help="Parallel parser processes (default: CPU count).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    check: Annotated[
        bool, typer.Option("--check/--no-check", help="Run the data-fidelity checks after ingest.")
    ] = True,
    prepare: Annotated[
        Optional[bool],
        typer.Option(
            "--prepare/--no-prepare",
            help="Build the run's analysis tables now (default: for runs of 2+ ranks; else the first findings/report does, once).",
        ),
    ] = None,
    follow_links: Annotated[
        bool,
        typer.Option(
            "--follow-links",
            help="Read symbolic links that lead outside the dump (refused by default: a dump from elsewhere may link to your files).",
        ),
    ] = False,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            help="Where ranks are parsed: local (process pool) or ray (a Ray cluster: traceql[ray] on every node; the derived tables are built by the same tasks).",
        ),
    ] = "local",
    ranks: Annotated[
        str,
        typer.Option(
            "--ranks",
            help="all, or light (1,000+ ranks): every rank's steps/communication/counters, kernel detail only for the slowest, fastest and median rank of the job and of each communication group; light+3,17 adds ranks 3 and 17.",
        ),
    ] = "all",
    address: Annotated[
        Optional[str],
        typer.Option(
            "--address",
            help="Ray cluster address (ray://head:10001, auto); default $RAY_ADDRESS, else a local Ray.",
        ),
    ] = None,
) -> None:
    """Parse a profiler dump into the store (format detected automatically; ranks parsed in parallel).

    The derived analysis tables (traceql.derive: per-kernel HBM bytes, the bandwidth and step timelines,
    collectives matched across ranks) are built at the end of the ingest when the run has two or more ranks: a
    cluster is ingested for its cross-rank analysis, and building them costs ~3 CPU-s per 1 GB rank (8 x 1 GB:
    the first `findings --all` 25 s otherwise, 9 s with them). A single trace is stored at full parse speed
    (often just for SQL); its first analysis builds them once. --prepare / --no-prepare decide it either way.

    --executor ray runs one Ray task per rank on the cluster (the dump and a local store on a file system every
    node mounts, or the store on s3://); a store on s3:// (--store s3://bucket/prefix, traceql[s3]) receives the
    run's files first and lists the run with one conditional put, so readers never see half a run.

    A dump on object storage (s3://...) is listed and sniffed from the driver; each rank's task copies its
    rank folder to a temp dir on its node, parses it there and deletes it; nothing is written to the dump.

    \b
    Examples:
      traceql ingest ./cluster_dir --name resnet-8card
      traceql ingest s3://prof/job42/ --store s3://prof/traceql --executor ray
      traceql ingest /mnt/lustre/job42 --ranks light --executor ray
      traceql ingest /mnt/lustre/job42 --name job42 --store s3://prof/traceql --executor ray --address ray://head:10001
    """
    from ..ingest import ingest
    from . import _console
    from ._console import progress_enabled as progress_wanted

    progress = _console.make_byte_progress(quiet)
    task: dict[str, Any] = {}

    def on_detect(done: int, total: int) -> None:
        # a cluster folder's rank dumps are sniffed one by one: seconds for a thousand, shown as they go
        if "detect" not in task:
            task["detect"] = progress.add_task("detecting", total=None)
        progress.update(task["detect"], description=f"detecting formats {done}/{total} folder(s)")

    def on_units(units: list[Any]) -> None:
        if "detect" in task:
            progress.remove_task(task.pop("detect"))
        kinds = sorted({u.parser for u in units})
        _console.info(f"detected {', '.join(kinds)}: {len(units)} unit(s) in {path}")
        task["n"], task["done"] = len(units), 0
        task["id"] = progress.add_task(f"parsing 0/{len(units)} unit(s)", total=None)

    def on_done(unit: Any, result: dict[str, Any]) -> None:
        task["done"] += 1
        progress.update(task["id"], description=f"parsing {task['done']}/{task['n']} unit(s)")

    def on_bytes(done: int, total: int) -> None:
        # input bytes read so far, from every worker (traceql.progress): moves inside one multi-GB file too
        progress.update(task["id"], completed=done, total=total or None)

    ex = None
    if executor != "local" or address:
        from ..executors import get

        ex = get(executor, workers=workers, address=address)  # --- hook: traceql.executors
    with progress:
        info = ingest(
            path,
            store=store,
            name=name,
            replace=replace,
            workers=workers,
            on_units=on_units,
            on_unit_done=on_done,
            on_bytes=on_bytes if progress_wanted(quiet) else None,
            follow_links=follow_links,
            executor=ex,
            ranks=ranks,
            on_detect=on_detect if progress_wanted(quiet) else None,
        )
    if ex is not None:
        ex.close()
    from ..post_ingest import after_ingest, summary

    _console.line(summary(info))
    after_ingest(info, store, _console.report, check=check, prepare=prepare, workers=workers)


def runs_cmd(
    store: StoreOpt = None,
    fmt: Annotated[ListFormat, format_opt("The listing as a table or JSON.")] = ListFormat.table,
) -> None:
    """List the runs in the store.

    Example:  traceql runs --format json
    """
    from ..stores import open_store
    from . import _console
    from ._output import write_json

    st = open_store(store)
    runs = st.runs() if st.exists() else {}
    if fmt == ListFormat.json:
        write_json({k: {kk: vv for kk, vv in v.items() if kk != "files"} for k, v in runs.items()})
        return
    rows = [
        (
            rid,
            info.get("format"),
            info.get("ranks_count"),
            info.get("device"),
            sum(info.get("rows", {}).values()),
            info.get("ingested_at"),
            info.get("source"),
        )
        for rid, info in sorted(runs.items())
    ]
    _console.print_table(["run", "format", "ranks", "device", "rows", "ingested", "source"], rows)


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
