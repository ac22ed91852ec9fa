"""The metric library: find queries/*.sql, parse their headers, bind exactly the declared params, run them.

A query file is plain DuckDB SQL with a comment header (design.md):

    -- name: op_hbm_bytes                         (must equal the file stem)
    -- description: one line
    -- param: top_n INTEGER = 10  -- doc          (no `= default`: the param is required)
    -- column: name VARCHAR       -- doc          (every output column, in order, with its DuckDB type)
    -- rank_filter: output                        (optional: --rank filters result rows, not the input)

Files starting with `_` are helpers (macros) loaded before every query. To scope a query to one run (and
rank) the runner shadows each canonical view with a TEMP view of the same name on its own cursor, so the SQL
names plain tables and still runs unchanged in the stock duckdb shell (where it sees every run).
Device peaks (`peak_hbm_bps`, ...) are ordinary params that the runner fills from traceql.devices.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import derived_tables, schema
from ._duck import reraise_interrupt, sql_str
from .errors import QueryError, StoreError
from .sqlfiles import TYPES, Column, Param, convert, helper_texts, library_dir, parse_header

__all__ = ["TYPES", "Column", "Param", "QuerySpec", "convert", "get", "list_queries", "run"]

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    import pyarrow as pa

    from . import devices


@dataclass(frozen=True)
class QuerySpec:
    name: str
    description: str
    params: list[Param]
    columns: list[Column]
    sql: str
    path: Path
    rank_filter: str = "input"  # "input": --rank scopes the data; "output": --rank filters result rows
    definitions: str = field(default="", repr=False)  # the header's free-text comment lines

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def signature(self) -> str:
        return ", ".join(p.signature() for p in self.params) or "(no params)"

    def catalog_entry(self, docs: bool = True) -> dict[str, Any]:
        """The query as the library listings show it (`traceql query --list --format json`, the MCP resource):
        name, description, params; with docs, each param's and column's doc, else the column names only."""
        params = []
        for p in self.params:
            entry: dict[str, Any] = {
                "name": p.name,
                "type": p.type,
                "default": None if p.required else p.default,
                "required": p.required,
            }
            if docs:
                entry["doc"] = p.doc
            params.append(entry)
        columns: list[Any] = (
            [{"name": c.name, "type": c.type, "doc": c.doc} for c in self.columns]
            if docs
            else [c.name for c in self.columns]
        )
        return {"name": self.name, "description": self.description, "params": params, "columns": columns}


# ---- locating and parsing ---------------------------------------------------------------------------------
def queries_dir() -> Path:
    """queries/ as packaged into the wheel (traceql/_queries), else the repo's queries/ (editable installs)."""
    return library_dir()


def parse_file(path: Path) -> QuerySpec:
    h = parse_header(path, frozenset({"rank_filter"}))
    if not h.description:
        raise QueryError(f"{path}: missing `-- description:` line")
    rank_filter = h.fields.get("rank_filter", "input")
    if rank_filter not in ("input", "output"):
        raise QueryError(f"{path}: rank_filter must be input or output")
    return QuerySpec(h.name, h.description, h.params, h.columns, h.text, path, rank_filter, h.definitions)


@lru_cache(maxsize=4)
def _files(qdir: str) -> dict[str, Path]:
    """Query files by name (files starting with `_` are helpers, not queries)."""
    return {p.stem: p for p in sorted(Path(qdir).glob("*.sql")) if not p.name.startswith("_")}


@lru_cache(maxsize=256)
def _parse_cached(path: str, mtime: float) -> QuerySpec:
    return parse_file(Path(path))


def _spec(path: Path) -> QuerySpec:
    return _parse_cached(str(path), path.stat().st_mtime)


def list_queries() -> list[QuerySpec]:
    """Every query (a file with a bad header raises, naming the file)."""
    return [_spec(p) for p in _files(str(queries_dir())).values()]


def get(name: str) -> QuerySpec:
    """One query by name; only its own file is parsed, so another file's bad header cannot break it."""
    paths = _files(str(queries_dir()))
    if name not in paths:
        from .suggest import did_you_mean

        raise QueryError(f"unknown query {name!r}{did_you_mean(name, paths)}; queries: {', '.join(paths)}")
    return _spec(paths[name])


def helper_sql() -> list[str]:
    """The helper files' text (macros every query may use)."""
    return helper_texts()


def bind_params(
    spec: QuerySpec, given: dict[str, Any] | None, fill: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Exactly the declared params: given (converted) > fill (runner-provided, e.g. peaks) > header default."""
    given = dict(given or {})
    declared = ", ".join(p.signature() for p in spec.params) or "none"
    extra = sorted(set(given) - {p.name for p in spec.params})
    if extra:
        raise QueryError(
            f"{spec.name}: unknown parameter {', '.join(map(repr, extra))} (declared: {declared})"
        )
    out: dict[str, Any] = {}
    for p in spec.params:
        if p.name in given:
            try:
                out[p.name] = convert(given[p.name], p.type)
            except QueryError as e:
                raise QueryError(f"{spec.name}: parameter {p.name}: {e} (declared: {declared})") from None
        elif fill and p.name in fill and fill[p.name] is not None:
            out[p.name] = convert(fill[p.name], p.type)
        elif p.required:
            raise QueryError(f"{spec.name}: missing parameter {p.name!r} (declared: {declared})")
        else:
            out[p.name] = p.default
    return out


# ---- running ------------------------------------------------------------------------------------------------
def _duck_error(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def define_library(
    cur: duckdb.DuckDBPyConnection,
    stored: set[str] | None = None,
    temp: bool = True,
    for_sql: str | None = None,
) -> None:
    """Create the helper macros and every derived table on `cur`: the ones in `stored` are already views over
    their stored Parquet (traceql.engine created them), every other one a view over its SELECT
    (traceql.derived_tables.statements: the one switch)."""
    for q in derived_tables.statements(stored or set(), temp=temp, for_sql=for_sql):
        cur.execute(q)


def _stored_tables(cur: duckdb.DuckDBPyConnection) -> set[str]:
    """The derived tables stored and current for every run the (scoped) runs view shows."""
    rows = cur.execute("SELECT derived_tables FROM runs").fetchall()
    if not rows:
        return set()
    sets = [set(filter(None, str(r[0] or "").split(","))) for r in rows]
    return set.intersection(*sets)


def _scope_views(
    cur: duckdb.DuckDBPyConnection, run_id: str, rank: int | None, only: set[str] | None = None
) -> None:
    row = cur.execute("SELECT current_database()").fetchall()[0]
    db = row[0] if row else "memory"
    base = '"' + str(db).replace('"', '""') + '".main'
    have = {r[0] for r in cur.execute("SELECT view_name FROM duckdb_views() WHERE NOT temporary").fetchall()}
    for table in [*schema.TABLE_NAMES, *(t for t in derived_tables.names() if t in have), "runs"]:
        if only is not None and table not in only:
            continue
        cond = f"run_id = {sql_str(run_id)}"
        if rank is not None and table != "runs":
            cond += f" AND rank = {int(rank)}"
        cur.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT * FROM {base}.{table} WHERE {cond}")


# what the runner reads on the scoped cursor besides the query (runs: the stored derived tables; resolve_peaks:
# runs, run_meta and kernels, through detected_device_names and the platform ini)
_RUNNER_READS = frozenset({"runs", "run_meta", "kernels"})


def scope(
    cur: duckdb.DuckDBPyConnection,
    run_id: str,
    rank: int | None = None,
    for_sql: str | None = None,
    sole: bool = False,
) -> None:
    """Make `cur` see one run (and rank): every view shadowed by a filtered TEMP view, then the helper macros
    and the derived tables defined (stored ones read, the others from their SELECT). for_sql: only what that
    SQL reaches is defined and scoped (each TEMP view costs ~0.5 ms to bind, ~30 of them per query).
    sole: the connection's views show run_id alone (engine.sole_run): nothing to filter unless a rank is
    asked for (on a small run the filtered views were ~30% of a query's CPU)."""
    if sole and rank is None:
        define_library(cur, _stored_tables(cur), for_sql=for_sql)
        return
    if for_sql is None:
        _scope_views(cur, run_id, rank)
        define_library(cur, _stored_tables(cur))
        return
    _scope_views(cur, run_id, rank, only={"runs"})  # _stored_tables reads the scoped runs view
    stored = _stored_tables(cur)
    reads = derived_tables.tables_read(stored, for_sql) | _RUNNER_READS
    _scope_views(cur, run_id, rank, only=reads - {"runs"})
    define_library(cur, stored, for_sql=for_sql)


def _pick_run(cur: duckdb.DuckDBPyConnection, run_id: str | None) -> str:
    # the rule of Store.latest_run: the most recently ingested, ties to the larger name
    rows = cur.execute("SELECT run_id FROM runs ORDER BY ingested_at DESC, run_id DESC").fetchall()
    runs = [r[0] for r in rows]
    if run_id is None:
        if not runs:
            raise StoreError("no runs in the store (run `traceql ingest PATH` first, or pass --store)")
        return str(runs[0])
    if run_id not in runs:
        from .suggest import did_you_mean

        raise StoreError(
            f"no run {run_id!r} in the store{did_you_mean(run_id, runs)} (runs: {', '.join(runs) or 'none'})"
        )
    return run_id


def _with_platform_peaks(
    cur: duckdb.DuckDBPyConnection,
    choice: devices.PeakChoice,
    overrides: dict[str, Any],
    run_id: str | None = None,
) -> devices.PeakChoice:
    """The choice with the peaks a run's platform_config ini gives (devices.platform_peaks), labelled; explicit
    overrides still win. Unchanged when the run carries no ini."""
    from . import devices

    where = "run_id = $r AND " if run_id is not None else ""
    rows = cur.execute(
        f"SELECT key, any_value(value) FROM run_meta WHERE {where}key LIKE 'platform_config.%' GROUP BY 1",
        {"r": run_id} if run_id is not None else {},
    )
    got = devices.platform_peaks({str(k): str(v) for k, v in rows.fetchall()})
    if got is None:
        return choice
    ini, note = got
    merged = dict(choice.peaks)
    for k, v in ini.items():
        if v is not None and overrides.get(k) is None:
            merged[k] = v
    return devices.PeakChoice(choice.device, merged, f"{choice.note}; {note}")


def detected_device_names(cur: duckdb.DuckDBPyConnection, run_id: str | None = None) -> list[str]:
    """Device names the (scoped) run carries: runs.device, then run_meta values that name a device, then (last
    resort, labelled as such) the Ascend 910B family when the kernels ran on separate vector cores: only the
    A2/A3 chips (910B, 910_93) have AI_VECTOR_CORE / MIX tasks and aiv_ PMU columns (formats.md section 2.2).
    run_id: read that run only (on a connection whose views are not scoped to it)."""
    from . import devices

    where = "run_id = $r AND " if run_id is not None else ""
    p = {"r": run_id} if run_id is not None else {}
    names = [
        r[0] for r in cur.execute(f"SELECT device FROM runs WHERE {where}device IS NOT NULL", p).fetchall()
    ]
    names += [
        r[0]
        for r in cur.execute(
            f"SELECT DISTINCT value FROM run_meta WHERE {where}(key ILIKE '%device%' OR key ILIKE '%npu%' OR key ILIKE '%name%'"
            " OR key ILIKE '%gpu%') AND regexp_matches(lower(value), "
            "'^(ascend|nvidia|amd|instinct)|a100|h100|h200|h20|b200|l40s|mi[0-9]{3}') AND length(value) < 64"
            " ORDER BY 1 LIMIT 8",
            p,
        ).fetchall()
    ]
    if not any(devices.detect(n) for n in names):
        # a GPU whose deviceProperties carry no name (ROCm writes ""), known by its SM count and memory
        props = cur.execute(
            f"SELECT key, value FROM run_meta WHERE {where}key LIKE 'deviceProperties.%'", p
        ).fetchall()
        got = devices.from_properties({str(k): str(v) for k, v in props})
        if got:
            names.append(got[1])
    if not names:
        vector = cur.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM kernels WHERE {where}(task_type IN ('AI_VECTOR_CORE', 'MIX_AIV', 'MIX_AIC')"
            " OR aiv_time_ns IS NOT NULL) LIMIT 1)",
            p,
        ).fetchall()[0]  # fetchall: a fetchone leaves DuckDB 2's streaming result open on the cursor
        if vector and vector[0]:
            names.append(
                "Ascend910B (inferred: the dump names no device, but its AI_VECTOR_CORE tasks exist only on 910B-class chips)"
            )
    return names


def run_devices(store: Any, run_ids: list[str]) -> dict[str, devices.PeakChoice]:
    """Each run's resolved device (resolve_peaks), for listings: `traceql runs` shows what every analysis of the
    run will use and where it came from. A run whose tables cannot be read is left out."""
    import duckdb

    from . import engine
    from .stores import open_store

    st = open_store(store)
    if not run_ids:
        return {}
    out: dict[str, devices.PeakChoice] = {}
    con = engine.connect(st, runs=run_ids)
    try:
        for rid in run_ids:
            cur = con.cursor()
            try:
                out[rid] = resolve_peaks(cur, run_id=rid)
            except duckdb.Error:
                pass
            finally:
                cur.close()
    finally:
        con.close()
    return out


def resolve_peaks(
    cur: duckdb.DuckDBPyConnection,
    *,
    run_id: str | None = None,
    device: str | None = None,
    peaks: Any = None,
) -> devices.PeakChoice:
    """The run's device and peaks, resolved one way for every consumer (queries, findings, checks, report,
    compare): an explicit preset or Device, else the names the dump carries (then the inferred family), then
    CANN's platform_config ini where the dump has one, then per-peak overrides."""
    from . import devices

    if isinstance(peaks, devices.Device):
        return devices.PeakChoice(peaks, peaks.peaks(), f"device preset {peaks.key}")
    choice = devices.resolve(
        device=device, detected=detected_device_names(cur, run_id), overrides=dict(peaks or {})
    )
    if not device:  # a dump carrying CANN's platform_config ini: its peaks win over the preset's
        choice = _with_platform_peaks(cur, choice, dict(peaks or {}), run_id)
    return choice


def run(
    name: str,
    store: Any = None,
    *,
    run_id: str | None = None,
    rank: int | None = None,
    params: dict[str, Any] | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
    device: str | None = None,
    peaks: Any = None,
    choice: devices.PeakChoice | None = None,
) -> pa.Table:
    """Run query `name` over one run (default: the most recently ingested) and return an Arrow table.

    params: values as strings (CLI) or Python values, converted by the declared types. device: a preset name
    (traceql.devices) overriding detection. peaks: a devices.Device, or a mapping of peak params
    ({"peak_hbm_bps": 1.6e12}) overriding single peaks. choice: the run's resolve_peaks(device, peaks),
    already resolved (an analysis session resolves it once, not once per query). The result's schema metadata
    carries the run, the peaks used and how they were chosen (b"traceql.peaks", b"traceql.peaks_note").
    """
    import duckdb

    from . import devices
    from ._duck import query_table

    spec = get(name)
    bind_params(
        spec, params, fill={p.name: 0 for p in spec.params if p.name in devices.PEAK_PARAMS}
    )  # fail fast
    own = con is None
    if own:
        from . import engine
        from .stores import open_store

        st = open_store(store)
        # views over this run's files only (a store of many runs opens as fast as a store of one); an unknown
        # run is reported by _pick_run below, with the known ones
        runs = st.runs() if st.exists() else {}
        want = run_id if run_id in runs else st.latest_run() if run_id is None and runs else None
        con = engine.connect(st, runs=[want] if want else None)
    assert con is not None
    cur = con.cursor()
    try:
        rid = _pick_run(cur, run_id)
        from .engine import sole_run

        scope(
            cur,
            rid,
            rank if spec.rank_filter == "input" else None,
            for_sql=spec.sql,
            sole=sole_run(con) == rid,
        )
        if choice is None:
            choice = resolve_peaks(cur, device=device, peaks=peaks)
        bound = bind_params(spec, params, fill=choice.peaks)
        try:
            table = query_table(cur, spec.sql, bound)
        except (duckdb.Error, RuntimeError) as e:
            reraise_interrupt(e)  # Ctrl-C is not a failed query: exit 130, whoever catches errors above
            if not isinstance(e, duckdb.Error):
                raise
            raise QueryError(f"{name}: {_duck_error(e)}") from e
    finally:
        cur.close()
        if own:
            con.close()
    if rank is not None and spec.rank_filter == "output" and "rank" in table.column_names:
        import pyarrow.compute as pc

        table = table.filter(pc.equal(table["rank"], rank))
    meta = {
        b"traceql.query": name.encode(),
        b"traceql.run_id": rid.encode(),
        b"traceql.peaks": json.dumps({k: bound.get(k, v) for k, v in choice.peaks.items()}).encode(),
        b"traceql.peaks_note": choice.note.encode(),
        # the preset the peaks came from (what findings and compare call the run's device), '' when none
        b"traceql.device": (choice.device.key if choice.device else "").encode(),
        b"traceql.params": json.dumps(bound, default=str).encode(),
    }
    return table.replace_schema_metadata(meta)


def shell_script(
    name: str, params: dict[str, Any] | None = None, peaks: dict[str, float | None] | None = None
) -> str:
    """A script for the stock duckdb shell (run it in the store directory): views, helpers, the query, its params.

    Unset params get their header defaults, peaks from `peaks`; the query sees every run in the store.
    """
    spec = get(name)
    bound = bind_params(spec, params, fill=peaks)
    lines = [".read views.sql"]
    lines += [q.strip().rstrip(";") + ";" for q in derived_tables.statements(set(), shell=True)]
    body = spec.sql.strip().rstrip(";")
    if not spec.params:
        lines.append(body + ";")
        return "\n".join(lines) + "\n"
    lines.append(f"PREPARE {name} AS\n{body};")
    args = ", ".join(f"{k} := {_literal(v, spec.param(k).type)}" for k, v in bound.items())  # type: ignore[union-attr]
    lines.append(f"EXECUTE {name}({args});")
    return "\n".join(lines) + "\n"


def _literal(v: Any, type_: str) -> str:
    if v is None:
        return f"NULL::{type_}"
    if type_ == "VARCHAR":
        return sql_str(str(v))
    if type_ == "BOOLEAN":
        return "true" if v else "false"
    return repr(v) if type_ == "DOUBLE" else str(int(v))
