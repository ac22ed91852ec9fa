"""What the checks read: one run's analysis session, the rules, the per-step denominators and the memory gate."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .gate import Gate, memory_gate

if TYPE_CHECKING:  # pragma: no cover
    from ..analysis import Analysis
    from .rules import Rule


@dataclass(frozen=True)
class Read:
    """A query a check reads, with the params it reads it with (from the rules): checks declare these, and
    the planner runs every declared read up front (`plan`)."""

    query: str
    params: Callable[[Context], dict[str, Any]] = field(default=lambda ctx: {})

    def key(self, ctx: Context) -> tuple[str, str]:
        return (self.query, json.dumps(self.params(ctx), sort_keys=True, default=str))


def _rule_params(rule_id: str) -> Callable[[Context], dict[str, Any]]:
    return lambda ctx: dict(ctx.rules["rules"][rule_id].get("params", {}))


# The reads of the checks (each check's declaration lists the ones it uses; see traceql.findings.registry).
WAIT = Read("wait_attribution", lambda ctx: ctx.wait_params())
HBM = Read("hbm_utilization", lambda ctx: ctx.hbm_params())
RANK_SUMMARY = Read("rank_summary")
OP_BYTES = Read("op_hbm_bytes", lambda ctx: {"top_n": ctx.n_ops})
FUSION = Read("fusion_chains", _rule_params("operator_fusion"))
REPEATED_READS = Read("repeated_reads", _rule_params("ub_reuse"))
UB_L2 = Read("ub_l2_rates", lambda ctx: {"top_n": 10})
LAYOUTS = Read("layout_transforms", lambda ctx: {"top_n": 1000})
LAYOUT_FORCERS = Read("layout_forcers", lambda ctx: {"top_n": 200})
DEVICE_IDLE = Read("device_idle", _rule_params("prefetch_overlap"))
DTYPE_TRAFFIC = Read("dtype_traffic", _rule_params("mixed_precision"))
ACTIVATIONS = Read("activation_memory")
CUBE = Read("cube_efficiency", lambda ctx: {"top_n": 1000})
TRANSPORT = Read("comm_transport", _rule_params("slow_link"))
EXEC_MODES = Read("op_exec_modes", _rule_params("aicpu_ops"))
COVERAGE = Read("capture_coverage")
AICORE_FREQ = Read("aicore_freq", _rule_params("aicore_freq"))
BOUNDS = Read("bound_shares")
OP_BOUNDS = Read("op_bounds", lambda ctx: {"top_n": 200})
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

    def rows(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        key = (name, json.dumps(params or {}, sort_keys=True, default=str))
        if key not in self._cache:
            self.late.append(f"{name} {key[1]}")
            self._cache[key], meta = self._run(name, params)
            self.meta = self.meta or meta
        return self._cache[key]

    def read(self, r: Read) -> list[dict[str, Any]]:
        return self.rows(r.query, r.params(self))

    def prefetch(self, reads: list[Read], workers: int) -> None:
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
    def wait_rows(self) -> list[dict[str, Any]]:
        return self.read(WAIT)

    def wait_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"sat_threshold": self.sat}
        if self.baseline_step_ns is not None:
            params["baseline_step_ns"] = self.baseline_step_ns
        return params

    def wait_run(self) -> dict[str, Any] | None:
        return next((r for r in self.wait_rows() if r["scope"] == "run"), None)

    def wait_by_rank(self) -> dict[int, dict[str, Any]]:
        return {r["rank"]: r for r in self.wait_rows() if r["scope"] == "rank"}

    @property
    def rank_steps(self) -> int:
        w = self.wait_run()
        return int(w["steps"]) if w and w.get("steps") else 0

    @property
    def mean_step_ns(self) -> float | None:
        w = self.wait_run()
        return float(w["mean_step_ns"]) if w and w.get("mean_step_ns") else None

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

    def hbm_ranks(self) -> dict[int, dict[str, Any]]:
        """hbm_utilization's rank rows (busy_utilization is null there unless measured, or sampled at a period
        that resolves the kernels: see the query's evidence column)."""
        rows = self.read(HBM)
        return {r["rank"]: r for r in rows if r["scope"] == "rank"}

    def hbm_run_row(self) -> dict[str, Any] | None:
        rows = self.read(HBM)
        return next((r for r in rows if r["scope"] == "run"), None)

    def bounds_run(self) -> dict[str, Any] | None:
        """bound_shares' run row: the compute time's split into memory-, compute- and latency-bound tasks."""
        return next((r for r in self.read(BOUNDS) if r["scope"] == "run"), None)

    def bounds_by_rank(self) -> dict[int, dict[str, Any]]:
        return {r["rank"]: r for r in self.read(BOUNDS) if r["scope"] == "rank"}

    def store_run_info(self) -> dict[str, Any]:
        return self.session.info

    def coverage(self) -> dict[str, Any]:
        """capture_coverage's row for this run ({} when the query has none)."""
        return next(iter(self.read(COVERAGE)), {})

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


def peak_override(peaks: Any) -> float | None:
    if isinstance(peaks, dict) and peaks.get("peak_hbm_bps") is not None:
        return float(peaks["peak_hbm_bps"])
    return None
