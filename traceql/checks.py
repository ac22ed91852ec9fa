"""Data-fidelity checks: SQL files that must return zero rows, run after every ingest and by `traceql check`.

Each check is a plain DuckDB file in queries/checks/ with the same comment header as the metric queries
(`-- name:`, `-- description:`, `-- param:`, `-- column:`); every row it returns is a problem (a negative
duration, a kernel outside its step, a counter sample far outside the run's window, an HBM bandwidth no device
can reach...). This follows sqlmesh's audits: the check *is* the query, so a user can re-run it with
`traceql sql` to see every offending row, and adding a check means adding a file.

A failing check is a warning, never an ingest error: the data is stored as the dump wrote it, and the warning
says how many rows look wrong and shows a few.

Parameters: every check takes `$run_id`; other declared params get their header default unless this module
knows a better value (`hbm_limit_bps`: 10x the device's peak HBM bandwidth when traceql.devices knows the
device, else the header default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import QueryError
from .jsonsafe import json_safe
from .sqlfiles import library_dir, parse_header

SAMPLE_ROWS = 5
# Per ingest-time check connection (see run_checks). The checks run once the parse has let go of its memory,
# yet what DuckDB takes here stays with the process: at 256MB, duplicate_kernels over a 4 GB trace's 14M kernels
# set the ingest's peak (448 MB against ~340 MB while parsing); at 128MB it spills and takes 2.1 s, not 1.5.
CHECKS_MEMORY_LIMIT = "128MB"
# Bound used when the device is unknown: 10 TB/s is above every HBM device's peak as of 2026 (H200 4.8 TB/s,
# B200 8 TB/s, Ascend 910B ~1.6 TB/s), so only unit errors (x1000, x1e6) exceed it.
FALLBACK_HBM_LIMIT_BPS = 1e13
# "above 10x the device peak" (the unit-sanity rule)
PEAK_FACTOR = 10.0


@dataclass(frozen=True)
class Check:
    name: str
    description: str
    path: Path
    sql: str
    # param name -> (type, typed default or None)
    params: dict[str, tuple[str, Any]] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    # `-- needs: analysis`: the check reads the helper macros (queries/_helpers.sql: modeled bytes, counter
    # windows); too costly for the bounded checks every ingest runs, so only `traceql check` runs it
    needs_analysis: bool = False


def checks_dir() -> Path:
    """queries/checks in a source checkout, or traceql/_queries/checks in an installed wheel."""
    return library_dir("checks")


def parse_check(path: Path) -> Check:
    """Read one check file with the library's header parser (traceql.sqlfiles); the SQL is the whole file."""
    h = parse_header(path, frozenset({"needs"}))
    if not any(p.name == "run_id" for p in h.params):
        raise QueryError(f"{path}: a check must declare `-- param: run_id VARCHAR` and filter on it")
    return Check(
        h.name,
        h.description,
        path,
        h.text.strip().rstrip(";").strip(),
        {p.name: (p.type, None if p.required else p.default) for p in h.params},
        tuple(c.name for c in h.columns),
        needs_analysis=h.fields.get("needs", "") == "analysis",
    )


def load_checks() -> list[Check]:
    return [parse_check(p) for p in sorted(checks_dir().glob("*.sql")) if not p.name.startswith("_")]


def hbm_limit_bps(device: str | None) -> tuple[float, str]:
    """10x the device's peak HBM bandwidth if traceql.devices knows it, else the fallback; and where it came from."""
    peak = _device_peak_hbm_bps(device)
    if peak:
        return PEAK_FACTOR * peak, f"10 x {device} peak {peak / 1e12:.2f} TB/s"
    return FALLBACK_HBM_LIMIT_BPS, "fallback 10 TB/s (device peak unknown)"


def _device_peak(device: str | None, key: str) -> float | None:
    """A preset's peak `key` (peak_l2_bps, peak_ub_bps) for a detected device name, else None."""
    from . import devices

    preset = devices.detect(device) if device else None
    v = getattr(preset, key, None) if preset else None
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else None


def _device_peak_hbm_bps(device: str | None) -> float | None:
    """Peak HBM bytes/s of the preset matching the dump's device name (traceql.devices), or None."""
    if not device:
        return None
    from . import devices

    preset = devices.detect(device)
    peak = getattr(preset, "peak_hbm_bps", None)
    if isinstance(peak, (int, float)) and math.isfinite(peak) and peak > 0:
        return float(peak)
    return None


def _run_peaks(con: Any, run_id: str) -> tuple[dict[str, float | None], str]:
    """The run's peaks (queries.resolve_peaks) and the preset they came from, or ({}, '') when its tables cannot
    be read yet."""
    import duckdb

    from . import queries

    cur = con.cursor()
    try:
        choice = queries.resolve_peaks(cur, run_id=run_id)
        return dict(choice.peaks), choice.device.key if choice.device else ""
    except duckdb.Error:
        return {}, ""
    finally:
        cur.close()


def _load_helpers(con: Any, info: dict[str, Any]) -> str:
    """Define the metric library's helper macros and derived tables on the check connection (the run's stored
    current tables are read, the others computed from their SELECT); '' or why they could not load."""
    import duckdb

    from . import derived_tables, queries

    try:
        queries.define_library(con, derived_tables.current_tables(info))
    except duckdb.Error as e:
        return f"helper macros did not load: {str(e).strip().splitlines()[0]}"
    return ""


def run_checks(
    store: Any, run_id: str, con: Any = None, names: list[str] | None = None, analysis: bool = True
) -> list[dict[str, Any]]:
    """Run every fidelity check on one run (analysis=False: only those that read the canonical tables alone,
    as every ingest does).

    Returns one dict per check: name, description, failures (offending rows), sample (up to SAMPLE_ROWS
    of them, as dicts), and error (None, or why the check itself could not run: reported, never raised, so
    one broken check cannot hide the others).
    """
    from .stores import open_store

    st = open_store(store)
    info = st.run(run_id)  # StoreError naming the known runs if it is missing
    own = con is None
    spill_dir = None
    if own:
        con, spill_dir = _bounded_connection(st)
    bounds = _run_bounds(con, run_id, info)
    helpers_loaded: str | None = None  # None: not tried; "": loaded; else why not
    results: list[dict[str, Any]] = []
    try:
        for chk in load_checks():
            if names and chk.name not in names:
                continue
            if chk.needs_analysis and not analysis:
                continue
            if chk.needs_analysis and helpers_loaded is None:
                helpers_loaded = _load_helpers(con, info)
            values = _param_values(chk, run_id, bounds)
            row = _result_row(chk, bounds)
            if chk.needs_analysis and helpers_loaded:
                row["error"] = helpers_loaded
            else:
                _count_failures(con, chk, values, row)
            results.append(row)
    finally:
        if own:
            con.close()
        if spill_dir is not None:
            spill_dir.cleanup()
    return results


def _bounded_connection(st: Any) -> tuple[Any, Any]:
    """(connection, its spill folder): the checks run inside every ingest, so they are bounded like the parse
    (the duplicate check's GROUP BY over a 4 GB trace's 4.6M kernels took the ingest's peak RSS from 0.56 to
    0.78 GB); DuckDB spills beyond it."""
    from . import _owned, engine

    con = engine.connect(st)
    spill_dir = _owned.TempDir("checks")
    con.execute(f"SET memory_limit='{CHECKS_MEMORY_LIMIT}'")
    con.execute("SET temp_directory=$d", {"d": spill_dir.name})
    return con, spill_dir


@dataclass(frozen=True)
class _Bounds:
    """The run's peaks and the unit-sanity limit the checks' params are filled with, resolved once per run."""

    peaks: dict[str, float | None]
    peak: float | None  # peak HBM bytes/s, or None when unknown
    who: str  # whose peak it is, as the check rows say it
    limit: float  # hbm_limit_bps
    limit_source: str
    device: str | None  # the dump's device name


def _run_bounds(con: Any, run_id: str, info: dict[str, Any]) -> _Bounds:
    # the run's peaks resolved as every query resolves them (queries.resolve_peaks: the dump's names, then the
    # inferred family, then CANN's ini), so `check` and op_hbm_bytes judge a kernel against the same peak
    run_peaks, who = _run_peaks(con, run_id)
    peak = run_peaks.get("peak_hbm_bps")
    who = str(info.get("device") or who or "the run's")  # the dump's name where it has one, as before
    limit, limit_source = (
        (PEAK_FACTOR * peak, f"10 x {who} peak {peak / 1e12:.2f} TB/s")
        if peak
        else hbm_limit_bps(info.get("device"))
    )
    return _Bounds(run_peaks, peak, who, limit, limit_source, info.get("device"))


def _param_values(chk: Check, run_id: str, b: _Bounds) -> dict[str, Any]:
    """The check's declared params: the run, the bounds this module knows, else the header's default."""
    values: dict[str, Any] = {}
    for p, (_type, default) in chk.params.items():
        if p == "run_id":
            values[p] = run_id
        elif p == "hbm_limit_bps":
            values[p] = b.limit
        elif p == "peak_hbm_bps" and b.peak:
            values[p] = b.peak
        elif p in (
            "peak_l2_bps",
            "peak_ub_bps",
        ):  # the preset's, or null (the check skips that level)
            values[p] = b.peaks.get(p) or _device_peak(b.device, p)
        elif default is not None:
            values[p] = default
        else:
            raise QueryError(f"{chk.path}: param {p!r} has no default and traceql.checks cannot fill it")
    return values


def _result_row(chk: Check, b: _Bounds) -> dict[str, Any]:
    """A check's result before it runs: no failures, and the bound it judges against where it has one."""
    row: dict[str, Any] = {
        "name": chk.name,
        "description": chk.description,
        "failures": 0,
        "sample": [],
        "error": None,
    }
    if "hbm_limit_bps" in chk.params:
        row["bound"] = b.limit_source
    if "peak_hbm_bps" in chk.params:
        row["bound"] = (
            f"{b.who} peak {b.peak / 1e12:.2f} TB/s"
            if b.peak
            else f"{FALLBACK_HBM_LIMIT_BPS / 1e12:.0f} TB/s (device peak unknown)"
        )
    return row


def _count_failures(con: Any, chk: Check, values: dict[str, Any], row: dict[str, Any]) -> None:
    """Run the check into `row`: its failure count and a sample of them, or the error that stopped it."""
    import duckdb

    try:
        n = con.execute(f"SELECT count(*) FROM ({chk.sql})", values).fetchone()[0]
        row["failures"] = int(n)
        if n:
            cur = con.execute(f"SELECT * FROM ({chk.sql}) LIMIT {SAMPLE_ROWS}", values)
            cols = [d[0] for d in cur.description]
            row["sample"] = [{c: json_safe(v) for c, v in zip(cols, r, strict=True)} for r in cur.fetchall()]
    except duckdb.Error as e:
        row["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"
