"""What the checks read: one run's analysis session, the rules, the per-step denominators and the memory gate."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar, cast

from ..rows import (
    QUERY_ROWS,
    ActivationMemoryRow,
    AicoreFreqRow,
    BoundSharesRow,
    CaptureCoverageRow,
    CommTransportRow,
    CubeEfficiencyRow,
    DeviceIdleRow,
    DtypeTrafficRow,
    FusionChainsRow,
    HbmUtilizationRow,
    LayoutForcersRow,
    LayoutTransformsRow,
    OpBoundsRow,
    OpExecModesRow,
    OpHbmBytesRow,
    RankSummaryRow,
    RepeatedReadsRow,
    RolesRow,
    UbL2RatesRow,
    WaitAttributionRow,
)
from .gate import Gate, memory_gate

if TYPE_CHECKING:  # pragma: no cover
    from ..analysis import Analysis
    from .rules import Rule


Row = TypeVar("Row")
_T = TypeVar("_T")


class _Ranked(TypedDict):
    """The columns by_rank reads: every per-rank query row has them (structurally: a TypedDict with these two
    keys, typed so, is one of these)."""

    scope: str | None
    rank: int | None


Ranked = TypeVar("Ranked", bound=_Ranked)


@dataclass(frozen=True)
class Read(Generic[Row]):
    """A query a check reads, the TypedDict of its rows (traceql.rows, generated from the query's `-- column:`
    header) and the params it reads it with (from the rules): checks declare these, and the planner runs every
    declared read up front (`plan`). `ctx.read(r)` returns `list[<row>]`, so mypy checks every column a check
    reads against the SQL file's header."""

    query: str
    row: type[Row]
    params: Callable[[Context], dict[str, Any]] = field(default=lambda ctx: {})

    def __post_init__(self) -> None:
        # the row type is the query's own: a Read naming another query's rows would type-check wrong columns
        if QUERY_ROWS.get(self.query) is not self.row:
            raise TypeError(f"Read({self.query!r}): rows are {QUERY_ROWS.get(self.query)}, not {self.row}")

    def key(self, ctx: Context) -> tuple[str, str]:
        return (self.query, json.dumps(self.params(ctx), sort_keys=True, default=str))


def _rule_params(rule_id: str) -> Callable[[Context], dict[str, Any]]:
    return lambda ctx: dict(ctx.rules["rules"][rule_id].get("params", {}))


# The reads of the checks (each check's declaration lists the ones it uses; see traceql.findings.registry).
WAIT = Read("wait_attribution", WaitAttributionRow, lambda ctx: ctx.wait_params())
HBM = Read("hbm_utilization", HbmUtilizationRow, lambda ctx: ctx.hbm_params())
RANK_SUMMARY = Read("rank_summary", RankSummaryRow)
OP_BYTES = Read("op_hbm_bytes", OpHbmBytesRow, lambda ctx: {"top_n": ctx.n_ops})
FUSION = Read("fusion_chains", FusionChainsRow, _rule_params("operator_fusion"))
REPEATED_READS = Read("repeated_reads", RepeatedReadsRow, _rule_params("ub_reuse"))
# (the checks read only the overall row: top_n is the report's ub_l2 chart's, so a report runs the query once)
UB_L2 = Read("ub_l2_rates", UbL2RatesRow, lambda ctx: {"top_n": 20})
LAYOUTS = Read("layout_transforms", LayoutTransformsRow, lambda ctx: {"top_n": 1000})
LAYOUT_FORCERS = Read("layout_forcers", LayoutForcersRow, lambda ctx: {"top_n": 200})
DEVICE_IDLE = Read("device_idle", DeviceIdleRow, _rule_params("prefetch_overlap"))
DTYPE_TRAFFIC = Read("dtype_traffic", DtypeTrafficRow, _rule_params("mixed_precision"))
ACTIVATIONS = Read("activation_memory", ActivationMemoryRow)
CUBE = Read("cube_efficiency", CubeEfficiencyRow, lambda ctx: {"top_n": 1000})
TRANSPORT = Read("comm_transport", CommTransportRow, _rule_params("slow_link"))
EXEC_MODES = Read("op_exec_modes", OpExecModesRow, _rule_params("aicpu_ops"))
COVERAGE = Read("capture_coverage", CaptureCoverageRow)
AICORE_FREQ = Read("aicore_freq", AicoreFreqRow, _rule_params("aicore_freq"))
BOUNDS = Read("bound_shares", BoundSharesRow)
OP_BOUNDS = Read("op_bounds", OpBoundsRow, lambda ctx: {"top_n": 200})
ROLES = Read("roles", RolesRow)
# every finding's grade and per-step shares read these (make_finding, Context.share)
COMMON_READS = (WAIT, HBM)


class Context:
    """One run under evaluation: its analysis session (queries, cached), the rules, the per-step denominators
    and the memory gate."""

    def __init__(self, session: Analysis, rules: dict[str, Any], baseline_step_ns: float | None) -> None:
        self.session = session
        self.run_id = session.run_id
        self.device, self.peaks, self.baseline = session.device, session.peaks, session.baseline
        self.baseline_step_ns = baseline_step_ns
        self.rules = rules
        self._cache: dict[tuple[str, str], list[dict[str, Any]]] = {}
        # queries the checks ran that no check declared (kept empty by a test)
        self.late: list[str] = []
        self._once: dict[str, object] = {}
        self.meta: dict[bytes, bytes] = {}
        bb = rules["rules"]["bandwidth_bound"]
        self.sat: float = float(bb["saturated"])
        self.not_bound: float = float(bb["not_bound"])
        # the facts every check may read, computed once by settle() before any check runs (no check writes them)
        self._gate: Gate | None = None
        self.device_kind = session.device_kind  # ascend | gpu | cpu: whose advice applies
        r = rules["rules"]
        self.n_ops: int = max(
            int(r["top_hbm_ops"].get("params", {}).get("top_n", 10)), int(r["ub_reuse"]["op_rows"])
        )

    def once(self, key: str, compute: Callable[[], _T]) -> _T:
        """compute() the first time `key` is asked for, its result after that (a fact two steps both read,
        such as the graph-capture signature, costs one query)."""
        if key not in self._once:
            self._once[key] = compute()
        return cast(_T, self._once[key])

    # shared facts -------------------------------------------------------------------------------------------
    def settle(self) -> None:
        """Compute the facts the checks share (the memory gate) from the prefetched reads. Called once, after
        the planner's prefetch and before the first check: a check only reads them."""
        self._gate = memory_gate(self)

    @property
    def gate(self) -> Gate:
        if self._gate is None:
            self.settle()
        assert self._gate is not None
        return self._gate

    @property
    def gate_open(self) -> bool | None:
        return self.gate.open

    @property
    def gate_values(self) -> dict[str, Any]:
        return self.gate.values

    # queries ------------------------------------------------------------------------------------------------
    def _run(
        self, name: str, params: dict[str, Any] | None
    ) -> tuple[list[dict[str, Any]], dict[bytes, bytes]]:
        t = self.session.query(name, params)
        meta = dict(t.schema.metadata or {})
        if "scope" in t.column_names:
            import pyarrow.compute as pc

            # no check reads per-step rows (one per rank and step: 100k+ on big runs); skip converting them
            t = t.filter(pc.fill_null(pc.not_equal(t["scope"], "step"), True))
        return t.to_pylist(), meta

    def _rows(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        key = (name, json.dumps(params or {}, sort_keys=True, default=str))
        if key not in self._cache:
            self.late.append(f"{name} {key[1]}")
            self._cache[key], meta = self._run(name, params)
            self.meta = self.meta or meta
        return self._cache[key]

    def read(self, r: Read[Row]) -> list[Row]:
        """The rows of a declared read, typed as its query's rows (the one way checks read a query)."""
        # the cast is checked where it matters: Read ties the row type to the query (__post_init__) and
        # tests/test_rows_current.py ties traceql.rows to the SQL headers
        return cast("list[Row]", self._rows(r.query, r.params(self)))

    def prefetch(self, reads: list[Read[Any]], workers: int) -> None:
        """Run the declared reads on `workers` threads (DuckDB releases the GIL; each query gets its own
        cursor), so a report costs about its slowest queries instead of their sum."""
        from concurrent.futures import ThreadPoolExecutor

        todo: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        for r in reads:
            k = r.key(self)
            if k not in self._cache:
                todo.setdefault(k, (r.query, r.params(self)))
        jobs = sorted(todo.items())  # sorted: the metadata kept below does not depend on the checks' order
        if workers <= 1:
            results = [self._run(n, p) for _k, (n, p) in jobs]
        else:
            ex = ThreadPoolExecutor(max_workers=workers)
            try:
                results = list(ex.map(lambda kv: self._run(*kv[1]), jobs))
            except BaseException:
                # Ctrl-C lands here, on the main thread: drop the queued reads instead of running them all
                # before the interrupt can end the command; wait for the running ones, whose cursors the
                # session closes next (closing a busy one fails)
                ex.shutdown(wait=True, cancel_futures=True)
                raise
            ex.shutdown()
        for (k, _np), (rows, meta) in zip(jobs, results, strict=True):
            self._cache[k] = rows
            self.meta = self.meta or meta

    def command(self, name: str, params: dict[str, Any] | None = None) -> str:
        """The `traceql query` command that reproduces rows(name, params) (built by traceql.commandline)."""
        from .. import queries
        from ..commandline import command

        spec = queries.get(name)
        hbm = peak_override(self.peaks)
        shown = {}
        for k, v in (params or {}).items():
            p = spec.param(k)
            if p is not None and not p.required and p.default == v:
                continue
            shown[k] = v
        return command(
            "query",
            name,
            run=self.run_id,
            store=self.session.store,
            device=self.device,
            peak_hbm_gbps=hbm / 1e9 if hbm is not None else None,
            baseline=self.baseline if spec.param("baseline_step_ns") is not None else None,
            params=shown,
        )

    def hbm_params(self) -> dict[str, Any]:
        return {"sat_threshold": self.sat, "low_threshold": self.not_bound}

    # common numbers -----------------------------------------------------------------------------------------
    def wait_rows(self) -> list[WaitAttributionRow]:
        return self.read(WAIT)

    def wait_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"sat_threshold": self.sat}
        if self.baseline_step_ns is not None:
            params["baseline_step_ns"] = self.baseline_step_ns
        return params

    def wait_run(self) -> WaitAttributionRow | None:
        return run_row(self.wait_rows())

    def wait_by_rank(self) -> dict[int, WaitAttributionRow]:
        return by_rank(self.wait_rows())

    @property
    def rank_steps(self) -> int:
        w = self.wait_run()
        steps = w["steps"] if w else None
        return int(steps) if steps else 0

    @property
    def mean_step_ns(self) -> float | None:
        w = self.wait_run()
        mean = w["mean_step_ns"] if w else None
        return float(mean) if mean else None

    def per_step(self, total_ns: float | None) -> float | None:
        """A total over every rank and step -> ns per step of one rank."""
        if total_ns is None:
            return None
        return total_ns / self.rank_steps if self.rank_steps else None

    def share(self, per_step_ns: float | None) -> float | None:
        if per_step_ns is None or not self.mean_step_ns:
            return None
        return per_step_ns / self.mean_step_ns

    def compute_ns(self) -> float:
        return float(sum(r["compute_ns"] or 0 for r in self.read(RANK_SUMMARY)))

    def hbm_ranks(self) -> dict[int, HbmUtilizationRow]:
        """hbm_utilization's rank rows (busy_utilization is null there unless measured, or sampled at a period
        that resolves the kernels: see the query's evidence column)."""
        return by_rank(self.read(HBM))

    def busy_utilization(self, rank: int) -> float | None:
        """A rank's HBM busy utilisation (hbm_utilization), None without a row or a resolved number."""
        row = self.hbm_ranks().get(rank)
        return row["busy_utilization"] if row else None

    def hbm_run_row(self) -> HbmUtilizationRow | None:
        return run_row(self.read(HBM))

    def bounds_run(self) -> BoundSharesRow | None:
        """bound_shares' run row: the compute time's split into memory-, compute- and latency-bound tasks."""
        return run_row(self.read(BOUNDS))

    def bounds_by_rank(self) -> dict[int, BoundSharesRow]:
        return by_rank(self.read(BOUNDS))

    def store_run_info(self) -> dict[str, Any]:
        return self.session.info

    def coverage(self) -> CaptureCoverageRow:
        """capture_coverage's first row for this run (its run row; every column null when the query has none)."""
        return next(iter(self.read(COVERAGE)), None) or empty_row(CaptureCoverageRow)

    def grade_for(self, rule: Rule, top_ops: list[dict[str, Any]] | None) -> dict[str, Any]:
        """The evidence grade of a check's numbers, from what its rule says they rest on (rules.toml rests_on)."""
        from .. import grades

        rests_on = str(rule.get("rests_on", "time"))
        if rests_on == "hbm":
            return grades.hbm_grade(self.hbm_run_row(), self.device_kind)
        if rests_on == "hbm_ops":
            sources = [r.get("hbm_bytes_source") for r in (top_ops or []) if "hbm_bytes_source" in r]
            if not sources:
                return grades.hbm_grade(self.hbm_run_row(), self.device_kind)
            g = grades.weakest(sources)
            return {
                "grade": g,
                "detail": "bytes per operator from "
                + ", ".join(sorted({str(x) for x in sources}))
                + (" (modeled: a lower bound)" if g == "modeled" else ""),
            }
        if rests_on == "pmu":
            pmu_sources = {r.get("hbm_bytes_source") for r in (top_ops or [])}
            if "pmu" in pmu_sources or "mixed" in pmu_sources:
                return {"grade": "measured", "detail": "re-read ratios from per-task PMU bytes only"}
            return {
                "grade": "insufficient",
                "detail": "re-reads need per-task PMU bytes",
                "capture": grades.CAPTURE_ADVICE["gpu" if self.device_kind == "gpu" else "ascend"],
            }
        return grades.timing_grade()

    def peak(self, key: str = "peak_hbm_bps") -> float | None:
        peaks = json.loads(self.meta.get(b"traceql.peaks", b"{}") or b"{}")
        v = peaks.get(key)
        return float(v) if v is not None else None


def run_row(rows: list[Ranked]) -> Ranked | None:
    """A query's run row (scope 'run'), None when it has none."""
    return next((r for r in rows if r["scope"] == "run"), None)


def empty_row(row: type[Row]) -> Row:
    """A row of `row`'s query with every column null: what a check reads where the query has no such row
    (as `{}.get(column)` did, but with the columns' names and types checked)."""
    return cast("Row", dict.fromkeys(row.__annotations__))


def by_rank(rows: list[Ranked]) -> dict[int, Ranked]:
    """A query's rank rows (scope 'rank') by rank."""
    # a rank row always names its rank (the queries group by it); the test only narrows the type
    return {r["rank"]: r for r in rows if r["scope"] == "rank" and r["rank"] is not None}


def peak_override(peaks: Any) -> float | None:
    if isinstance(peaks, dict) and peaks.get("peak_hbm_bps") is not None:
        return float(peaks["peak_hbm_bps"])
    return None
