"""One analysis session: the store, run, ranks and device resolved once, one DuckDB connection, one query cache.

Every analysis command goes through it: findings, charts, the report, compare and export take an `Analysis`
(or open one), so a report runs each query once, and the run is chosen by one rule (`resolve_run`).

    with Analysis(".traceql", "resnet-8card", device="ascend910b") as a:
        a.query("hbm_utilization")          # Arrow table, cached by (query, params, rank)
        a.rows("rank_summary")              # the same as dicts

Opening a session prepares the run's derived tables when they are not stored yet (traceql.derive.prepare,
noted on stderr; `prepare=False` analyses from their SELECTs instead and writes nothing).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from . import query_cache
from .errors import StoreError
from .store import Store
from .stores import open_store

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    import pyarrow as pa

    from . import devices


def existing_store(store: Any) -> Store:
    """A Store from a Store, a path, a URL or None (the default store); refused when there is no store there."""
    st = open_store(store)
    if not st.exists():
        raise StoreError(f"no traceql store at {st.root} (run `traceql ingest PATH` first, or pass --store)")
    return st


def resolve_run(store: Store, run_id: str | None) -> str:
    """The one rule: the given run (it must exist), else the most recently ingested (Store.latest_run)."""
    if run_id:
        store.run(run_id)  # StoreError naming the known runs
        return run_id
    latest = store.latest_run()
    if latest is None:
        raise StoreError(f"no runs in store {store.root} (run `traceql ingest PATH` first, or pass --store)")
    return latest


def note_build(run_id: str) -> None:
    print(
        f"building the analysis tables of run {run_id!r} (once; later analyses reuse them)", file=sys.stderr
    )


# Queries whose rows for top_n = n are the first n rows for any larger top_n (they end in a total ORDER BY
# and LIMIT $top_n; tests/test_analysis_session.py checks the SQL): the session cuts a smaller top_n from a
# cached larger one instead of running the query again.
PREFIX_QUERIES = {"op_hbm_bytes": "top_n", "layout_transforms": "top_n"}

# queries the findings planner runs at once (findings.evaluate's default workers)
PLANNER_WORKERS = 4


def planner_threads() -> int:
    """DuckDB threads of a session whose queries the findings planner runs (findings, report): the cores
    shared among the planner's concurrent queries. A session running one query at a time (`traceql query`,
    export, a chart) keeps DuckDB's default of one thread per core. The queries are small per rank, and a
    parallel operator on them costs extra CPU for little wall time: on the 2-core benchmark machine, `findings
    --all` on cluster:8x290 took 9.4 CPU-s with 1 thread against 10.1 with DuckDB's default of one per core, in
    no more wall time (the planner keeps both cores busy)."""
    return max(1, (os.cpu_count() or 1) // PLANNER_WORKERS)


def _params_key(name: str, params: dict[str, Any] | None) -> str:
    """The cache key of a query's params: as bound (converted, defaults filled in), so a chart asking
    wait_attribution with {} and findings asking {"sat_threshold": 0.8}, the default, share one run (they bind
    the same values). The runner fills a peak only where none is given, so which peaks were given is part of
    the key: a peak given as None binds None, one left out binds the device's."""
    from . import devices, queries
    from .errors import QueryError

    try:
        bound: dict[str, Any] = queries.bind_params(queries.get(name), params)
    except QueryError:  # an unknown query or param: keyed as given, and queries.run raises the error
        bound = dict(params or {})
    given_peaks = sorted(k for k in params or {} if k in devices.PEAK_PARAMS)
    return json.dumps([bound, given_peaks], sort_keys=True, default=str)


class Analysis:
    """One run (and optionally a baseline run) under analysis; see the module doc."""

    def __init__(
        self,
        store: Any = None,
        run_id: str | None = None,
        *,
        device: str | None = None,
        peaks: Any = None,
        baseline: str | None = None,
        prepare: bool = True,
        threads: int | None = None,
    ) -> None:
        from . import derive, engine

        self.store = existing_store(store)
        self.run_id = resolve_run(self.store, run_id)
        self.baseline = resolve_run(self.store, baseline) if baseline else None
        self.device, self.peaks = device, peaks
        runs = [self.run_id] + ([self.baseline] if self.baseline else [])
        if prepare:
            derive.prepare(self.store, runs, on_build=note_build)
        self.info: dict[str, Any] = self.store.run(self.run_id)
        self.con: duckdb.DuckDBPyConnection = engine.connect(self.store, runs=runs, threads=threads)
        self._cache: dict[tuple[str, str, int | None, str], pa.Table] = {}
        # results kept between processes (traceql.query_cache), None where they are not kept (a session that
        # does not prepare writes nothing)
        self._kept = query_cache.folder(self.store) if prepare else None
        self._lock = threading.Lock()
        self._choices: dict[str, devices.PeakChoice] = {}
        self.queries_run = 0  # how many queries actually ran (the rest came from the cache)
        self.step_marker = (
            ""  # a regex over host range names that marks steps (queries/phases.sql), '' = built-in
        )

    # the run ---------------------------------------------------------------------------------------------------
    @property
    def ranks_count(self) -> int:
        try:
            return max(1, int(self.info.get("ranks_count", 1)))
        except (TypeError, ValueError):
            return 1

    @property
    def format(self) -> str:
        return str(self.info.get("format") or "")

    @property
    def device_kind(self) -> str:
        """ascend (torch_npu / msprof dumps), gpu (a Kineto trace or an Nsight Systems export with device
        kernels) or cpu (no device timeline): the advice and the capture settings differ."""
        if self.format.startswith(("kineto", "nsys")):
            return "gpu" if (self.info.get("rows") or {}).get("kernels") else "cpu"
        return "ascend"

    # queries ---------------------------------------------------------------------------------------------------
    def query(
        self,
        name: str,
        params: dict[str, Any] | None = None,
        *,
        rank: int | None = None,
        run_id: str | None = None,
    ) -> pa.Table:
        """Query `name` over the session's run (or the baseline, run_id=...), cached: the same query with the
        same params and rank runs once per session, and a result an earlier process kept in the store
        (traceql.query_cache) is read instead of run. Thread-safe (findings run several at once)."""
        from . import queries

        rid = run_id or self.run_id
        key = (name, rid, rank, _params_key(name, params))
        with self._lock:
            hit = self._cache.get(key) or self._prefix_hit(key)
        if hit is not None:
            return hit
        kept = self._kept_result(key)
        if kept is not None:
            with self._lock:
                return self._cache.setdefault(key, kept)
        t = queries.run(
            name,
            self.store,
            run_id=rid,
            rank=rank,
            params=params,
            con=self.con,
            device=self.device,
            peaks=self.peaks,
            # a rank-scoped query resolves its own (the inferred device may rest on that rank's kernels)
            choice=self.peak_choice(rid) if rank is None else None,
        )
        if self._kept is not None:
            query_cache.save(self._kept, self._kept_name(key), t)
        with self._lock:
            self.queries_run += 1
            return self._cache.setdefault(key, t)

    def _kept_result(self, key: tuple[str, str, int | None, str]) -> pa.Table | None:
        """The result an earlier process kept for `key` (traceql.query_cache), or None."""
        return query_cache.load(self._kept, self._kept_name(key)) if self._kept is not None else None

    def _kept_name(self, key: tuple[str, str, int | None, str]) -> str:
        """The name a result is kept under between processes: its session key with everything else the result
        is a function of (traceql.query_cache): the device and peaks asked for, and the run's manifest entry."""
        name, rid, rank, params = key
        info = self.info if rid == self.run_id else self.store.run(rid)
        parts = {"query": name, "run": rid, "rank": rank, "params": params}
        return query_cache.key({**parts, "device": self.device, "peaks": self.peaks, "run_info": info})

    def peak_choice(self, run_id: str | None = None) -> devices.PeakChoice:
        """The run's device and peaks (queries.resolve_peaks), resolved once per session and run: three small
        queries over runs and run_meta each time cost ~13 ms a query, ~0.4 CPU-s of a report."""
        from . import queries

        rid = run_id or self.run_id
        with self._lock:
            got = self._choices.get(rid)
        if got is None:
            cur = self.con.cursor()
            try:  # the connection sees the session's runs: run_id= reads that one (as a scoped cursor would)
                got = queries.resolve_peaks(cur, run_id=rid, device=self.device, peaks=self.peaks)
            finally:
                cur.close()
            with self._lock:
                got = self._choices.setdefault(rid, got)
        return got

    def _prefix_hit(self, key: tuple[str, str, int | None, str]) -> pa.Table | None:
        """A PREFIX_QUERIES query's rows for top_n = n, cut from a cached run of the same query with a larger
        top_n and otherwise the same params (the report's charts ask for the top 10 or 15 of what findings
        read as the top 50 or 1000). None when there is no such run. Called under the lock."""
        param = PREFIX_QUERIES.get(key[0])
        if param is None:
            return None
        want, peaks = json.loads(key[3])
        n = want.get(param)
        if not isinstance(n, int) or n < 0:
            return None
        for (name, rid, rank, pkey), t in self._cache.items():
            if (name, rid, rank) != key[:3]:
                continue
            have, have_peaks = json.loads(pkey)
            m = have.get(param)
            if not isinstance(m, int) or m < n or have_peaks != peaks:
                continue
            if {**have, param: n} != want:
                continue
            meta = dict(t.schema.metadata or {})
            if b"traceql.params" in meta:  # the params as queries.run would record them for top_n = n
                bound = json.loads(meta[b"traceql.params"])
                meta[b"traceql.params"] = json.dumps({**bound, param: n}, default=str).encode()
            cut = t.slice(0, n).replace_schema_metadata(meta)
            self._cache[key] = cut
            return cut
        return None

    def rows(self, name: str, params: dict[str, Any] | None = None, **kw: Any) -> list[dict[str, Any]]:
        return list(self.query(name, params, **kw).to_pylist())

    def mean_step_ns(self, run_id: str | None = None) -> float:
        """Mean step time (ns) of a run (default the session's) over its ranks and steps, measured like
        wait_attribution's mean_step_ns (the step windows): the `baseline_step_ns` that makes
        scaling_vs_baseline comparable."""
        from .errors import QueryError

        rid = run_id or self.run_id
        t = self.query("step_breakdown", run_id=rid)
        walls = [int(w) for w in t.column("window_ns").to_pylist() if w]
        if not walls:
            raise QueryError(f"baseline run {rid!r} has no steps or kernels to time")
        return sum(walls) / len(walls)

    def cursor(self, rank: int | None = None, run_id: str | None = None) -> duckdb.DuckDBPyConnection:
        """A cursor that sees one run (and rank) with the helper macros and derived tables defined, for SQL
        beyond the metric library (export's streams). Close it when done."""
        cur = self.con.cursor()
        try:
            self.scope(cur, rank=rank, run_id=run_id)
        except BaseException:
            cur.close()
            raise
        return cur

    def scope(
        self,
        cur: duckdb.DuckDBPyConnection,
        for_sql: str | None = None,
        rank: int | None = None,
        run_id: str | None = None,
    ) -> None:
        """queries.scope for a cursor of this session's connection: a session on one run needs no views
        filtered to it (engine.sole_run)."""
        from . import queries
        from .engine import sole_run

        rid = run_id or self.run_id
        queries.scope(cur, rid, rank, for_sql=for_sql, sole=sole_run(self.con) == rid)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Analysis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
