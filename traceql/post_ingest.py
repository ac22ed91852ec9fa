"""What happens after a dump is written into the store, decided once for every command that ingests
(`traceql ingest`, `traceql capture --ingest`): the summary line, the parser's warnings, the data-fidelity checks
and whether the derived analysis tables are built now.

It sits above ingest, checks and derive (it imports them; none imports it), so the CLI only prints what it is
told. Each message goes to `report(level, text)` as it happens, level "info" or "warn", so a long build is
announced before it runs and the messages keep their order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: how many of the parser's warnings are shown (the rest are in the run's metadata)
MAX_WARNINGS = 10

Report = Callable[[str, str], None]


def summary(info: dict[str, Any]) -> str:
    """The one line saying what was stored (the ingest's result dict)."""
    rows = ", ".join(f"{t} {n}" for t, n in sorted(info["rows"].items()) if n)
    return (
        f"stored run {info['run_id']!r}: {info['format']}, {info['ranks_count']} rank(s), "
        f"device {info.get('device') or 'unknown'}; rows: {rows}"
    )


def wants_prepare(info: dict[str, Any], prepare: bool | None) -> bool:
    """Build the derived tables now? As asked; by default for a run of two or more ranks: a cluster is ingested
    for its cross-rank analysis (building costs ~3 CPU-s per 1 GB rank), while a single trace is often stored
    just for SQL, so its first analysis builds them instead."""
    return prepare if prepare is not None else int(info.get("ranks_count") or 0) >= 2


def after_ingest(
    info: dict[str, Any],
    store: Any,
    report: Report,
    *,
    check: bool = True,
    prepare: bool | None = None,
    workers: int | None = None,
) -> None:
    """The post-ingest policy for the run `info` describes (the dict traceql.ingest.ingest returns): its
    warnings, then the checks (each failing check one warning naming `traceql check`), then the derived tables
    when wants_prepare says so (a failed build is a warning: the first analysis tries again)."""
    for w in info.get("warnings", [])[:MAX_WARNINGS]:
        report("warn", w)
    run_id = info["run_id"]
    if check:
        from .checks import run_checks

        for r in run_checks(store, run_id, analysis=False):
            if r.get("error"):
                report("warn", f"check {r['name']} could not run: {r['error']}")
            elif r["failures"]:
                report(
                    "warn",
                    f"check {r['name']}: {r['failures']} row(s) — {r['description']} (see `traceql check`)",
                )
    if wants_prepare(info, prepare):
        from . import derive
        from .stores import open_store

        st = open_store(store)

        def building(rid: str) -> None:
            report("info", f"building the analysis tables of run {rid!r}")

        if derive.prepare(st, [run_id], workers=workers, on_build=building):
            report(
                "warn",
                f"could not build the analysis tables of run {run_id!r}: the first analysis will try again",
            )
