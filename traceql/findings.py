"""Findings: the seed article's checklist and six optimisations, detected and quantified from one run.

    from traceql.findings import evaluate
    report = evaluate(store, "resnet-8card", device="ascend910b")
    report.verdict["headline"]           # "memory-bound: rank 1 computes at 81% of peak HBM bandwidth while ..."
    [f.id for f in report.findings if f.fired]
    print(report.to_json())

Every check reads the metric library (queries/*.sql through traceql.queries.run) and turns the numbers into a
`Finding`. Thresholds, message templates, suggestions and the article's optimisation each check maps to live in
traceql/rules.toml (data, like msprof-analyze's advisor YAML); this module only computes the numbers the
templates need. A check that does not fire says why (its message), so `--all` reads as the whole checklist.

Checklist order (checklist_step): 1 bandwidth_bound, 2 comm_waits_on_memory, 3 top_hbm_ops, 4 operator_fusion,
5 ub_reuse, 6 memory_layout, 7 prefetch_overlap, 8 mixed_precision, 9 gradient_checkpointing,
10 matmul_tiling, 11 Ascend-advisor parity: slow_rank, slow_link, comm_alignment, small_packets, aicpu_ops,
dynamic_shape, free_time. Checks whose rule says `gated = true` (memory work: fusion, UB reuse, mixed precision,
checkpointing) do not fire when the run is not bandwidth-bound (every rank's busy HBM utilisation below the
article's 70% line): the article's checklist step 1, "if not, look at compute or communication".

JSON format (`Report.to_json()`, `traceql findings --format json`), format id "traceql.findings/2". Keys are
stable; new keys may be added, none renamed or removed without a new format id (/2: evidence grades,
capture coverage and confidence were added, and scaling_efficiency is null without a baseline run):

    {
      "format": "traceql.findings/2",
      "run_id": "level1",
      "generated_by": "traceql 0.1.0",
      "rules_version": 1,
      "device": {"preset": "ascend910b", "peaks": {"peak_hbm_bps": 1.6e12, ...}, "note": "device preset ..."},
      "verdict": {
        "bound": "communication",            # memory | communication | compute | host/idle | null (no device time)
        "confidence": "cannot tell",          # judged | cannot tell (the evidence or the capture cannot decide)
        "headline": "2 of 8 ranks captured ...: ... the job's bound cannot be judged from these ranks alone ...",
        "hbm_utilization": null,             # busiest rank's HBM utilisation while computing, 0..1: measured, or
                                             # sampled at a period that resolves the kernels; else null
        "hbm_utilization_rank": 0,
        "hbm_evidence": {"grade": "sampled", "detail": "HBM counters sampled every 20 ms; ...", "period_ns": 20000000},
        "hbm_mean_utilization": 0.0276,      # sampled counters: time-weighted mean over the step, 0..1
        "hbm_max_sample": 0.0859,            # sampled counters: the highest sample, 0..1
        "hbm_busy_utilization_bound": 0.57,  # sampled counters: the most utilisation while computing can be
        "scaling_efficiency": null,          # baseline step / this step; only with --baseline
        "scaling_method": "compute_fraction",  # or "baseline:<run>"
        "compute_fraction": 0.06,            # compute time / step time (not a scaling efficiency)
        "capture": {"ranks_captured": 2, "job_ranks": 8, "job_ranks_source": "communication_matrix",
                    "missing_ranks": "2,3,4,5,6,7", "complete": false, "kernel_coverage": 1.0},
        "device_kind": "ascend",             # ascend | gpu | cpu (no device timeline): whose advice applies
        "shares": {"memory": 0.0, "communication": 0.64, "compute": 0.06, "idle_host": 0.30},
        "mean_step_ms": 154.9, "ranks": 2, "steps": 2
      },
      "findings": [                          # every check, in checklist order (fired or not)
        {
          "id": "memory_layout", "title": "...", "severity": "medium",   # info | low | medium | high | critical
          "optimisation": "memory layout", "checklist_step": 6, "fired": true,
          "message": "Layout conversions take 16% of compute time ...",
          "evidence": {"outcome": "fired", "conversion_share_of_compute": 0.16, ...},  # base units (ns, bytes, 0..1)
          "top_ops": [{"op_type": "TransData", "src_format": "NCHW", ...}],
          "saving": {"value": 1.42, "unit": "ms/step", "method": "...", "share_of_step": 0.009},
          "query": "traceql query layout_transforms --run level1 --device ascend910b",
          "suggestion": "...",
          "grade": {"grade": "measured", "detail": "profiler timestamps"}   # what the numbers rest on
        }
      ],
      "summary": {"checks": 17, "fired": 5, "worst": "medium", "by_severity": {"medium": 2, "low": 3}}
    }

Evidence grades (traceql.grades): measured (per-task PMU bytes; profiler timestamps for times), sampled (device
counters at a period: the grade carries period_ns), modeled (tensor sizes: a lower bound, never tested against
the 70% / 80% lines), insufficient (the dump cannot resolve it: the grade names the capture settings that
would, under "capture"). A number that cannot be true (a share above 100% of a peak, a step or compute time)
is a data problem, not a finding: the check does not fire, its outcome is "implausible" and
evidence.implausible lists the fields (plausibility gate in _make); a top_ops row with such a number keeps
the row, nulls the number and says why under "implausible".

evidence.outcome names the message the check chose (fired, below, gated, not_bound, no_data, ...: the keys of its
[rules.<id>.messages] table). Severity of a non-firing finding is "info". saving.value is null when a check cannot quantify a saving
(diagnosis checks, packet alignment); saving values are per step of one rank ("ms/step") unless the unit says
otherwise. evidence keys ending in _ns are nanoseconds, _bytes bytes, _bps bytes/s; shares and utilisations are 0..1.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import QueryError, TraceQLError

FORMAT_ID = "traceql.findings/2"
SEVERITIES = ("info", "low", "medium", "high", "critical")
RULES_PATH = Path(__file__).with_name("rules.toml")


def severity_rank(level: str) -> int:
    try:
        return SEVERITIES.index(level)
    except ValueError:
        raise TraceQLError(f"unknown severity {level!r}; expected one of {', '.join(SEVERITIES)}") from None


# ---- model -------------------------------------------------------------------------------------------------
@dataclass
class Finding:
    id: str
    title: str
    severity: str  # info | low | medium | high | critical ("info" when not fired)
    optimisation: str  # the article's optimisation / checklist item it maps to (rules.toml)
    checklist_step: int
    fired: bool
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    top_ops: list[dict[str, Any]] = field(default_factory=list)
    saving: dict[str, Any] = field(default_factory=dict)  # {value, unit, method, share_of_step}
    query: str = ""  # the re-runnable `traceql query ...` command
    suggestion: str = ""
    # what the finding's numbers rest on (traceql.grades): {"grade": measured|sampled|modeled|insufficient, ...}
    grade: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "severity": self.severity,
            "optimisation": self.optimisation,
            "checklist_step": self.checklist_step,
            "fired": self.fired,
            "message": self.message,
            "evidence": _clean(self.evidence),
            "top_ops": _clean(self.top_ops),
            "saving": _clean(self.saving),
            "query": self.query,
            "suggestion": self.suggestion,
            "grade": _clean(self.grade),
        }


@dataclass
class Report:
    run_id: str
    verdict: dict[str, Any]
    findings: list[Finding]
    device: dict[str, Any] = field(default_factory=dict)
    rules_version: int = 1
    late_queries: list[str] = field(
        default_factory=list, repr=False
    )  # diagnostics: queries run outside the plan

    @property
    def fired(self) -> list[Finding]:
        return [f for f in self.findings if f.fired]

    def finding(self, id_: str) -> Finding:
        for f in self.findings:
            if f.id == id_:
                return f
        raise KeyError(id_)

    def worst(self) -> str | None:
        fired = self.fired
        return max((f.severity for f in fired), key=severity_rank) if fired else None

    def at_least(self, level: str) -> list[Finding]:
        """Fired findings at or above `level`."""
        n = severity_rank(level)
        return [f for f in self.fired if severity_rank(f.severity) >= n]

    def to_dict(self) -> dict[str, Any]:
        from . import __version__

        by_sev: dict[str, int] = {}
        for f in self.fired:
            by_sev[f.severity] = by_sev.get(f.severity, 0) + 1
        return {
            "format": FORMAT_ID,
            "run_id": self.run_id,
            "generated_by": f"traceql {__version__}",
            "rules_version": self.rules_version,
            "device": _clean(self.device),
            "verdict": _clean(self.verdict),
            "findings": [f.to_dict() for f in self.findings],
            "summary": {
                "checks": len(self.findings),
                "fired": len(self.fired),
                "worst": self.worst(),
                "by_severity": {k: by_sev[k] for k in SEVERITIES if k in by_sev},
            },
        }

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, allow_nan=False)

    def to_markdown(self, include_silent: bool = False) -> str:
        return _markdown(self, include_silent)


def _clean(v: Any) -> Any:
    """JSON-safe copy: NaN/inf -> None, tuples -> lists, numpy-ish scalars -> Python."""
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, float):
        return None if math.isnan(v) or math.isinf(v) else v
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if hasattr(v, "item"):
        return _clean(v.item())
    return str(v)


# ---- rules --------------------------------------------------------------------------------------------------
class Rule:
    """One [rules.<id>] table of rules.toml."""

    def __init__(self, rid: str, data: dict[str, Any], common: dict[str, Any]) -> None:
        self.id = rid
        self.data = data
        self.common = common
        for key in ("step", "title", "optimisation", "query", "suggestion", "messages"):
            if key not in data:
                raise TraceQLError(f"rules.toml: rule {rid} lacks {key!r}")

    def __getitem__(self, key: str) -> Any:
        if key not in self.data:
            raise TraceQLError(f"rules.toml: rule {self.id} lacks {key!r}")
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.data.get("params", {}))

    def message(self, variant: str, values: dict[str, Any]) -> str:
        msgs = self.data["messages"]
        if variant not in msgs:
            raise TraceQLError(f"rules.toml: rule {self.id} has no message {variant!r}")
        return render(msgs[variant], values, f"rules.{self.id}.messages.{variant}")

    def severity(self, share: float | None) -> str:
        """Fixed `severity`, or the ladder (rule's own or the common one) applied to the saving share."""
        sev = self.data.get("severity", "ladder")
        if sev != "ladder":
            severity_rank(sev)
            return str(sev)
        ladder = self.data.get("ladder", self.common["severity"]["ladder"])
        if share is None:
            return str(self.common["severity"].get("unknown", "low"))
        for threshold, level in ladder:
            if share >= threshold:
                return str(level)
        return str(ladder[-1][1])


class _Fmt(string.Formatter):
    def __init__(self, lenient: bool = False) -> None:
        self.lenient = lenient

    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        if isinstance(key, str) and key not in kwargs:
            if self.lenient:
                return _Missing()
            raise KeyError(key)
        return super().get_value(key, args, kwargs)


class _Missing:
    def __format__(self, spec: str) -> str:
        return "..."


def render(template: str, values: dict[str, Any], where: str = "template", lenient: bool = False) -> str:
    """str.format with named fields; a missing field or a None formatted as a number is a rules bug (lenient:
    a missing field renders as '...', for suggestions of checks that did not fire and lack the numbers)."""
    try:
        return _Fmt(lenient).vformat(template, (), values).strip()
    except (KeyError, ValueError, TypeError, IndexError) as e:
        raise TraceQLError(
            f"{where}: cannot render with the check's values ({type(e).__name__}: {e})"
        ) from None


@lru_cache(maxsize=8)
def _load_rules_cached(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    try:
        import tomllib  # Python >= 3.11
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef, import-not-found, unused-ignore]
        except ModuleNotFoundError:
            raise TraceQLError(
                "traceql findings needs Python >= 3.11 or the tomli package (pip install tomli)"
            ) from None
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise TraceQLError(f"{path}: cannot read the findings rules ({e})") from None


def load_rules(path: str | Path | None = None) -> dict[str, Any]:
    """The rules file as a dict (default traceql/rules.toml), validated against the checks this module has."""
    p = Path(path or RULES_PATH)
    try:
        st = p.stat()
    except OSError as e:
        raise TraceQLError(f"{p}: cannot read the findings rules ({e})") from None
    data = _load_rules_cached(str(p), st.st_mtime_ns, st.st_size)
    rules = data.get("rules", {})
    missing = [c for c in CHECKS if c not in rules]
    unknown = [r for r in rules if r not in CHECKS]
    if missing or unknown:
        raise TraceQLError(
            f"rules file {path or RULES_PATH}: rules without a check {unknown}, checks without a rule {missing}"
        )
    for rid, r in rules.items():
        Rule(rid, r, data)
    return data


# ---- evaluation context -------------------------------------------------------------------------------------
class _Ctx:
    """One run: a DuckDB connection, cached query results, the per-step denominators and the memory gate."""

    def __init__(
        self,
        con: Any,
        store: Any,
        run_id: str,
        device: str | None,
        peaks: Any,
        baseline: str | None,
        baseline_step_ns: float | None,
        rules: dict[str, Any],
    ) -> None:
        self.con, self.store, self.run_id = con, store, run_id
        self.device, self.peaks, self.baseline, self.baseline_step_ns = (
            device,
            peaks,
            baseline,
            baseline_step_ns,
        )
        self.rules = rules
        self._cache: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.late: list[
            str
        ] = []  # queries the checks ran that prefetch() did not plan (kept empty by a test)
        self.meta: dict[bytes, bytes] = {}
        bb = rules["rules"]["bandwidth_bound"]
        self.sat: float = float(bb["saturated"])
        self.not_bound: float = float(bb["not_bound"])
        self.gate_open: bool | None = None  # set by the bandwidth check
        self.gate_values: dict[str, Any] = {}
        self.device_kind = _device_kind(store, run_id)  # ascend | gpu | cpu: whose advice applies

    # queries ------------------------------------------------------------------------------------------------
    def _run(
        self, name: str, params: dict[str, Any] | None
    ) -> tuple[list[dict[str, Any]], dict[bytes, bytes]]:
        from . import queries

        t = queries.run(
            name,
            self.store,
            run_id=self.run_id,
            params=params,
            con=self.con,
            device=self.device,
            peaks=self.peaks,
        )
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

    def plan(self) -> list[tuple[str, dict[str, Any]]]:
        """Every (query, params) the checks read, so prefetch() can run them concurrently up front."""
        r = self.rules["rules"]
        n_ops = max(int(r["top_hbm_ops"].get("params", {}).get("top_n", 10)), int(r["ub_reuse"]["op_rows"]))
        return [
            ("wait_attribution", self.wait_params()),
            ("hbm_utilization", {"sat_threshold": self.sat, "low_threshold": self.not_bound}),
            ("rank_summary", {}),
            ("op_hbm_bytes", {"top_n": n_ops}),
            ("fusion_chains", dict(r["operator_fusion"].get("params", {}))),
            ("repeated_reads", dict(r["ub_reuse"].get("params", {}))),
            ("ub_l2_rates", {"top_n": 10}),
            ("layout_transforms", {"top_n": 1000}),
            ("layout_forcers", {"top_n": 200}),
            ("device_idle", dict(r["prefetch_overlap"].get("params", {}))),
            ("dtype_traffic", dict(r["mixed_precision"].get("params", {}))),
            ("activation_memory", {}),
            ("cube_efficiency", {"top_n": 1000}),
            ("comm_transport", dict(r["slow_link"].get("params", {}))),
            ("op_exec_modes", dict(r["aicpu_ops"].get("params", {}))),
            ("capture_coverage", {}),
        ]

    def prefetch(self, workers: int) -> None:
        """Run the planned queries on `workers` threads (DuckDB releases the GIL; each query gets its own
        cursor), so a report costs about its slowest queries instead of their sum."""
        from concurrent.futures import ThreadPoolExecutor

        todo = [
            (n, p)
            for n, p in self.plan()
            if (n, json.dumps(p, sort_keys=True, default=str)) not in self._cache
        ]
        if workers <= 1:
            results = [self._run(n, p) for n, p in todo]
        else:
            with ThreadPoolExecutor(max_workers=workers) as ex:
                results = list(ex.map(lambda np: self._run(*np), todo))
        for (n, p), (rows, meta) in zip(todo, results, strict=True):
            self._cache[(n, json.dumps(p, sort_keys=True, default=str))] = rows
            self.meta = self.meta or meta

    def command(self, name: str, params: dict[str, Any] | None = None) -> str:
        """The `traceql query` command that reproduces rows(name, params)."""
        from . import queries
        from .store import Store, default_store

        spec = queries.get(name)
        parts = ["traceql", "query", name, "--run", self.run_id]
        root = (
            self.store.root
            if isinstance(self.store, Store)
            else (Store(self.store).root if self.store else None)
        )
        if root is not None and Path(root).resolve() != Path(default_store()).resolve():
            parts += ["--store", str(root)]
        if self.device:
            parts += ["--device", self.device]
        hbm = _peak_override(self.peaks)
        if hbm is not None:
            parts += ["--peak-hbm-gbps", f"{hbm / 1e9:g}"]
        if self.baseline and spec.param("baseline_step_ns") is not None:
            parts += ["--baseline", self.baseline]
        for k, v in (params or {}).items():
            p = spec.param(k)
            if p is not None and not p.required and p.default == v:
                continue
            parts += ["--param", f"{k}={v}"]
        return " ".join(shlex.quote(p) for p in parts)

    # common numbers -----------------------------------------------------------------------------------------
    def wait_rows(self) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"sat_threshold": self.sat}
        if self.baseline_step_ns is not None:
            params["baseline_step_ns"] = self.baseline_step_ns
        return self.rows("wait_attribution", params)

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
        return float(sum(r["compute_ns"] or 0 for r in self.rows("rank_summary")))

    def hbm_ranks(self) -> dict[int, dict[str, Any]]:
        """hbm_utilization's rank rows (busy_utilization is null there unless measured, or sampled at a period
        that resolves the kernels: see the query's evidence column)."""
        rows = self.rows("hbm_utilization", {"sat_threshold": self.sat, "low_threshold": self.not_bound})
        return {r["rank"]: r for r in rows if r["scope"] == "rank"}

    def hbm_run_row(self) -> dict[str, Any] | None:
        rows = self.rows("hbm_utilization", {"sat_threshold": self.sat, "low_threshold": self.not_bound})
        return next((r for r in rows if r["scope"] == "run"), None)

    def store_run_info(self) -> dict[str, Any]:
        from .store import Store

        return (self.store if isinstance(self.store, Store) else Store(self.store)).run(self.run_id)

    def coverage(self) -> dict[str, Any]:
        """capture_coverage's row for this run ({} when the query has none)."""
        return next(iter(self.rows("capture_coverage")), {})

    def grade_for(self, rule: Rule, top_ops: list[dict[str, Any]] | None) -> dict[str, Any]:
        """The evidence grade of a check's numbers, from what its rule says they rest on (rules.toml rests_on)."""
        from . import grades

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
            sources = {r.get("hbm_bytes_source") for r in (top_ops or [])}
            if "pmu" in sources or "mixed" in sources:
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


def _device_kind(store: Any, run_id: str) -> str:
    """ascend (torch_npu / msprof dumps), gpu (a Kineto trace with device kernels) or cpu (no device
    timeline): the advice and the capture settings differ."""
    from .store import Store

    try:
        info = (store if isinstance(store, Store) else Store(store)).run(run_id)
    except Exception:  # a bad store is reported elsewhere; advice defaults to Ascend
        return "ascend"
    fmt = str(info.get("format") or "")
    if fmt.startswith("kineto"):
        rows = info.get("rows") or {}
        return "gpu" if rows.get("kernels") else "cpu"
    return "ascend"


def _peak_override(peaks: Any) -> float | None:
    if isinstance(peaks, dict) and peaks.get("peak_hbm_bps") is not None:
        return float(peaks["peak_hbm_bps"])
    return None


# ---- small helpers -------------------------------------------------------------------------------------------
def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


def _gb(b: float | None) -> float | None:
    return None if b is None else b / 1e9


def _size(b: float | None) -> str:
    """Bytes as text with a unit that keeps 2-3 significant digits (decimal units, as the profilers write them)."""
    if b is None:
        return "unknown"
    for unit, f in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(b) >= f:
            return f"{b / f:.3g} {unit}"
    return f"{b:.0f} B"


def _pct(x: float | None) -> str:
    return "unknown" if x is None else f"{100 * x:.0f}%"


def _saving(
    value_ms: float | None, method: str, share: float | None, unit: str = "ms/step"
) -> dict[str, Any]:
    return {
        "value": None if value_ms is None else round(value_ms, 6),
        "unit": unit if value_ms is not None else None,
        "method": method,
        "share_of_step": None if share is None else round(share, 6),
    }


def _values(rule: Rule, ctx: _Ctx, **kw: Any) -> dict[str, Any]:
    """Template namespace: the rule's own numbers, the gate's, then the check's values."""
    v: dict[str, Any] = {
        k: x for k, x in rule.data.items() if isinstance(x, (int, float, str)) and k not in ("title",)
    }
    v.update({"sat": ctx.sat, "not_bound_line": ctx.not_bound})
    v.update(ctx.gate_values)
    v.update(kw)
    return v


# Names of the numbers that are shares of a whole (of a peak, a step, compute time): above 1 no dump can carry
# them, so they mark the data (or the model behind them) as implausible instead of reaching a finding.
_SHARE_KEY = re.compile(r"(utili[sz]ation|share|_frac|fraction|^util$|^late_util$)", re.I)
_NOT_SHARE = re.compile(r"(_rank|_id|_ns|_bytes|_count|_ms|_gbps|_bps)$")


def _implausible(values: dict[str, Any], prefix: str = "") -> list[dict[str, Any]]:
    """Share-like numbers above 1 (+ rounding) among `values`: [{"field", "observed"}]."""
    out = []
    for k, v in values.items():
        if (
            isinstance(v, (int, float))
            and not isinstance(v, bool)
            and _SHARE_KEY.search(k)
            and not _NOT_SHARE.search(k)
            and math.isfinite(v)
            and v > 1.0 + 1e-9
        ):
            out.append({"field": prefix + k, "observed": v})
    return out


def _gate_top_ops(top_ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of a top list whose share-like numbers exceed 1 keep their other numbers; those become null with a
    note (the row is a data or model problem for `traceql check`, not a measurement)."""
    out = []
    for row in top_ops:
        bad = _implausible(row)
        if bad:
            row = {
                **row,
                **{b["field"]: None for b in bad},
                "implausible": "; ".join(
                    f"{b['field']} {b['observed']:.3g}x the whole (above the device peak "
                    "or the step): a data or model problem, see `traceql check`"
                    for b in bad
                ),
            }
        out.append(row)
    return out


def _make(
    ctx: _Ctx,
    rule: Rule,
    *,
    fired: bool,
    variant: str,
    values: dict[str, Any],
    evidence: dict[str, Any] | None = None,
    top_ops: list[dict[str, Any]] | None = None,
    saving: dict[str, Any] | None = None,
    query_params: dict[str, Any] | None = None,
    share: float | None = None,
    query: str | None = None,
    grade: dict[str, Any] | None = None,
) -> Finding:
    """One Finding, through the plausibility gate: a share above 100% (of a peak, a step, compute) in the
    values its message would cite or in its evidence means the data or the model is wrong, so the finding
    does not fire and says that instead."""
    top_ops = _gate_top_ops(list(top_ops or []))
    bad = _implausible(values) + _implausible(evidence or {}, "evidence.")
    if bad:
        evidence = {
            k: (None if any(b["field"] in (k, "evidence." + k) for b in bad) else v)
            for k, v in (evidence or {}).items()
        }
        evidence["implausible"] = bad
        what = ", ".join(f"{b['field'].removeprefix('evidence.')} = {b['observed']:.3g}x" for b in bad)
        msg = render(
            str(ctx.rules["plausibility"]["message"]),
            {"what": what, "check": rule.id},
            "plausibility.message",
        )
        return Finding(
            id=rule.id,
            title=str(rule["title"]),
            severity="info",
            optimisation=str(rule["optimisation"]),
            checklist_step=int(rule["step"]),
            fired=False,
            message=msg,
            evidence={"outcome": "implausible", **evidence},
            top_ops=top_ops,
            saving=_saving(None, "not estimated: implausible input", None),
            query=ctx.command(
                query or str(rule["query"]), query_params if query_params is not None else rule.params
            ),
            suggestion=str(ctx.rules["plausibility"]["suggestion"]),
            grade={"grade": "insufficient", "detail": "implausible values: " + what},
        )
    sev = rule.severity(share) if fired else "info"
    suggestion = rule.get(f"suggestion_{ctx.device_kind}") or rule["suggestion"]
    return Finding(
        id=rule.id,
        title=str(rule["title"]),
        severity=sev,
        optimisation=str(rule["optimisation"]),
        checklist_step=int(rule["step"]),
        fired=fired,
        message=rule.message(variant, values),
        evidence={"outcome": variant, **(evidence or {})},
        top_ops=list(top_ops or []),
        saving=saving or _saving(None, str(rule.get("saving_method", "no estimate")), None),
        query=ctx.command(
            query or str(rule["query"]), query_params if query_params is not None else rule.params
        ),
        suggestion=render(str(suggestion), values, f"rules.{rule.id}.suggestion", lenient=not fired),
        grade=grade if grade is not None else ctx.grade_for(rule, top_ops),
    )


def _gated(ctx: _Ctx, rule: Rule) -> bool:
    """True when this memory-work rule must stay silent (the run is not bandwidth-bound)."""
    return bool(rule.get("gated", False)) and ctx.gate_open is False


# ---- checks ----------------------------------------------------------------------------------------------------
def check_bandwidth_bound(ctx: _Ctx, rule: Rule) -> Finding:
    """The article's checklist step 1 on the strongest evidence the dump has (traceql.grades): measured busy
    utilisation against the 80% / 70% lines; sampled counters against them only as far as the sampling period
    resolves (the whole-step mean can prove saturation, its upper bound while computing can rule it out, and in
    between the answer is 'cannot tell'); a modeled lower bound never."""
    from . import grades

    ranks = ctx.hbm_ranks()
    utils = {
        r: row["busy_utilization"] for r, row in ranks.items() if row.get("busy_utilization") is not None
    }
    peak = ctx.peak()
    w = ctx.wait_run()
    bound = str((w or {}).get("verdict") or "unknown").removesuffix("-bound")
    bound_share = _bound_share(w)
    qp = {"sat_threshold": rule["saturated"], "low_threshold": rule["not_bound"]}
    ev: dict[str, Any] = {
        "peak_hbm_bps": peak,
        "busy_utilization_by_rank": {str(k): v for k, v in sorted(utils.items())},
        "bound": bound,
    }
    capture = grades.CAPTURE_ADVICE["gpu" if ctx.device_kind == "gpu" else "ascend"]
    base = {
        "bound": bound,
        "bound_share": bound_share if bound_share is not None else 0.0,
        "capture": capture,
    }
    ctx.gate_open = None
    ctx.gate_values = {"gate_util": 0.0, "gate_line": ctx.not_bound, "bound": bound}
    if peak is None:
        note = ctx.meta.get(b"traceql.peaks_note", b"").decode()
        return _make(
            ctx,
            rule,
            fired=False,
            variant="no_peak",
            values=_values(rule, ctx, note=note, **base),
            evidence=ev,
            query_params=qp,
        )
    if utils:  # measured, or sampled with a period that resolves the kernels
        top_rank = max(utils, key=lambda r: utils[r])
        util = float(utils[top_rank])
        row = ranks[top_rank]
        sat_ranks = sorted(r for r, u in utils.items() if u >= rule["saturated"])
        ev.update(
            max_utilization=util,
            max_rank=top_rank,
            saturated_ranks=sat_ranks,
            frac_busy_saturated=row.get("frac_busy_saturated"),
            busy_bw_bps=row.get("busy_bw_bps"),
            hbm_bytes_source=row.get("hbm_bytes_source"),
        )
        ctx.gate_open = util >= rule["not_bound"]
        ctx.gate_values = {"gate_util": util, "gate_line": float(rule["not_bound"]), "bound": bound}
        vals = _values(
            rule,
            ctx,
            util=util,
            rank=top_rank,
            ranks=", ".join(map(str, sat_ranks)) or str(top_rank),
            frac_saturated=row.get("frac_busy_saturated") or 0.0,
            busy_gbps=(row.get("busy_bw_bps") or 0) / 1e9,
            source=row.get("hbm_bytes_source") or "unknown",
            **base,
        )
        grade = grades.hbm_grade(row, ctx.device_kind)
        if util >= rule["saturated"]:
            return _make(
                ctx,
                rule,
                fired=True,
                variant="fired",
                values=vals,
                evidence=ev,
                query_params=qp,
                saving=_saving(None, str(rule["saving_method"]), None),
                grade=grade,
            )
        variant = "borderline" if util >= rule["not_bound"] else "not_bound"
        return _make(
            ctx, rule, fired=False, variant=variant, values=vals, evidence=ev, query_params=qp, grade=grade
        )
    sampled = {
        r: row
        for r, row in ranks.items()
        if row.get("evidence") == "sampled" and row.get("utilization") is not None
    }
    if sampled:
        # the rank whose compute could be the busiest: highest upper bound (then highest mean)
        top_rank = max(
            sampled, key=lambda r: (sampled[r].get("busy_utilization_max") or 0.0, sampled[r]["utilization"])
        )
        row = sampled[top_rank]
        mean, umax = float(row["utilization"]), row.get("busy_utilization_max")
        period_ms = (row.get("sample_period_ns") or 0) / 1e6
        ev.update(
            sampled_mean_utilization=mean,
            busy_utilization_bound=min(umax, 1.0) if umax is not None else None,
            max_sample_utilization=row.get("max_utilization"),
            sample_period_ns=row.get("sample_period_ns"),
            max_rank=top_rank,
            resolved_share=row.get("resolved_share"),
        )
        vals = _values(
            rule,
            ctx,
            rank=top_rank,
            mean_util=mean,
            max_sample=row.get("max_utilization") or 0.0,
            period_ms=period_ms,
            util_max=min(umax or 0.0, 1.0),
            util_max_text="100%" if umax is None or umax >= 1 else f"{umax:.0%}",
            **base,
        )
        grade = grades.hbm_grade(row, ctx.device_kind)
        if any(float(r["utilization"]) >= rule["saturated"] for r in sampled.values()):
            ctx.gate_open = True
            return _make(
                ctx,
                rule,
                fired=True,
                variant="fired_sampled",
                values=vals,
                evidence=ev,
                query_params=qp,
                saving=_saving(None, str(rule["saving_method"]), None),
                grade=grade,
            )
        if all(
            r.get("busy_utilization_max") is not None and r["busy_utilization_max"] < rule["not_bound"]
            for r in sampled.values()
        ):
            ctx.gate_open = False
            ctx.gate_values = {
                "gate_util": min(umax or 0.0, 1.0),
                "gate_line": float(rule["not_bound"]),
                "bound": bound,
            }
            return _make(
                ctx,
                rule,
                fired=False,
                variant="not_bound_sampled",
                values=vals,
                evidence=ev,
                query_params=qp,
                grade=grade,
            )
        grade = {**grade, "grade": "insufficient", "capture": capture}
        return _make(
            ctx,
            rule,
            fired=False,
            variant="unresolved",
            values=vals,
            evidence=ev,
            query_params=qp,
            grade=grade,
        )
    lower = [
        row.get("modeled_utilization_lower") for row in ranks.values() if row.get("modeled_utilization_lower")
    ]
    if lower:
        ev.update(modeled_lower_bound_utilization=max(lower))
        vals = _values(rule, ctx, lower=max(lower), **base)
        return _make(
            ctx,
            rule,
            fired=False,
            variant="lower_bound",
            values=vals,
            evidence=ev,
            query_params=qp,
            grade={"grade": "insufficient", "detail": "tensor sizes only: a lower bound", "capture": capture},
        )
    return _make(
        ctx,
        rule,
        fired=False,
        variant="no_data",
        values=_values(rule, ctx, **base),
        evidence=ev,
        query_params=qp,
        grade={"grade": "insufficient", "detail": "no HBM bytes", "capture": capture},
    )


def _bound_share(w: dict[str, Any] | None) -> float | None:
    if not w or not w.get("verdict"):
        return None
    key = {
        "memory-bound": "memory_share",
        "communication-bound": "communication_share",
        "compute-bound": "compute_share",
        "host/idle-bound": "idle_host_share",
    }.get(w["verdict"])
    return w.get(key) if key else None


def _skew(ctx: _Ctx) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
    rs = {r["rank"]: r for r in ctx.rows("rank_summary")}
    return rs, ctx.wait_by_rank()


def _per_step_rank(row: dict[str, Any], key: str) -> float:
    steps = row.get("steps") or 1
    return float(row.get(key) or 0) / steps


def lateness_split(ctx: _Ctx, slow: int, fast: int) -> dict[str, float]:
    """Per step, what rank `slow` does more than rank `fast`: HBM-saturated compute, other compute and host/idle
    time, all from wait_attribution's rank rows (one definition of the split, read by comm_waits_on_memory and
    slow_rank alike)."""
    wr = ctx.wait_by_rank()
    ws, wf = wr.get(slow, {}), wr.get(fast, {})

    def host(w: dict[str, Any]) -> float:
        return _per_step_rank(w, "idle_ns") + _per_step_rank(w, "host_ns")

    return {
        "saturated_ns": _per_step_rank(ws, "compute_hbm_saturated_ns")
        - _per_step_rank(wf, "compute_hbm_saturated_ns"),
        "other_compute_ns": _per_step_rank(ws, "compute_other_ns") - _per_step_rank(wf, "compute_other_ns"),
        "host_idle_ns": host(ws) - host(wf),
    }


def check_comm_waits_on_memory(ctx: _Ctx, rule: Rule) -> Finding:
    """Ranks waiting in collectives for a late peer that is in HBM-saturated compute. Every number is
    wait_attribution's: the wait is the waiting rank's exposed peer wait (comm_wait_peer_hbm +
    comm_wait_peer_other), its overlap with the late peer's saturated compute is wait_attribution's split of it,
    and the cause test is the late rank's extra saturated compute per step (lateness_split, as slow_rank)."""
    from . import grades

    rs, wr = _skew(ctx)
    qp = ctx.wait_params()
    if len(rs) < 2 or not any(r["collectives"] for r in rs.values()):
        return _make(
            ctx,
            rule,
            fired=False,
            variant="single",
            values=_values(rule, ctx, ranks=len(rs)),
            query_params=qp,
            evidence={"ranks": len(rs)},
        )

    # the rank that waits most for peers, and the rank that arrives last most
    def peer_wait(r: int) -> float:
        return _per_step_rank(wr.get(r, {}), "comm_wait_peer_hbm_ns") + _per_step_rank(
            wr.get(r, {}), "comm_wait_peer_other_ns"
        )

    waiter = max(rs, key=peer_wait)
    late = max(rs, key=lambda r: _per_step_rank(rs[r], "lateness_ns"))
    wait = peer_wait(waiter)
    w_wait = wr.get(waiter, {})
    step_ns = (w_wait.get("wall_ns") or 0) / (w_wait.get("steps") or 1)
    wait_share = wait / step_ns if step_ns else 0.0
    d_sat = lateness_split(ctx, late, waiter)["saturated_ns"]
    peer_hbm = _per_step_rank(w_wait, "comm_wait_peer_hbm_ns")
    overlap = peer_hbm / wait if wait > 0 else 0.0
    covered = min(max(d_sat / wait, 0.0), 1.0) if wait > 0 else 0.0
    transit = _per_step_rank(w_wait, "comm_transit_ns")
    hbm = ctx.hbm_ranks()
    late_util = (hbm.get(late) or {}).get("busy_utilization")
    scaling, method = _scaling(ctx)
    hbm_g = grades.hbm_grade(hbm.get(late), ctx.device_kind)
    ev = {
        "waiting_rank": waiter,
        "late_rank": late,
        "peer_wait_ns_per_step": wait,
        "wait_share": wait_share,
        "late_extra_saturated_ns_per_step": d_sat,
        "wait_on_saturated_peer_ns_per_step": peer_hbm,
        "wait_on_saturated_peer_share": overlap,
        "wait_covered_by_extra_saturated_share": covered,
        "late_rank_hbm_utilization": late_util,
        "waiting_rank_transit_ns_per_step": transit,
        "scaling_efficiency": scaling if method != "compute_fraction" else None,
        "compute_fraction": (ctx.wait_run() or {}).get("compute_fraction"),
        "related_queries": [
            ctx.command("comm_skew", {"sat_threshold": ctx.sat, "top_n": 50}),
            ctx.command("rank_summary"),
        ],
    }
    vals = _values(
        rule,
        ctx,
        waiting=waiter,
        late=late,
        wait_ms=_ms(wait),
        wait_share=wait_share,
        d_sat_ms=_ms(d_sat),
        covered=covered,
        overlap=overlap,
        late_util=_pct(late_util),
        transit_ms=_ms(transit),
        scaling_text=_scaling_text(scaling, method).capitalize(),
        hbm_text=hbm_g["detail"],
    )
    if wait_share < rule["min_wait_share"] or waiter == late:
        return _make(ctx, rule, fired=False, variant="small_wait", values=vals, evidence=ev, query_params=qp)
    if hbm_g["grade"] not in ("measured", "sampled") or late_util is None:
        return _make(
            ctx,
            rule,
            fired=False,
            variant="ungraded",
            values=vals,
            evidence=ev,
            query_params=qp,
            grade={**hbm_g, "grade": "insufficient"},
        )
    if covered < rule["min_explained"]:
        return _make(
            ctx,
            rule,
            fired=False,
            variant="not_memory",
            values=vals,
            evidence=ev,
            query_params=qp,
            grade=hbm_g,
        )
    saving_ns = min(wait, max(d_sat, 0.0))
    share = ctx.share(saving_ns)
    return _make(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        evidence=ev,
        query_params=qp,
        share=share,
        saving=_saving(_ms(saving_ns), str(rule["saving_method"]), share),
        grade=hbm_g,
        top_ops=[
            {
                "rank": r,
                "lateness_ms_per_step": _ms(_per_step_rank(rs[r], "lateness_ns")),
                "peer_wait_ms_per_step": _ms(peer_wait(r)),
                "hbm_saturated_compute_ms_per_step": _ms(
                    _per_step_rank(wr.get(r, {}), "compute_hbm_saturated_ns")
                ),
                "hbm_utilization": (hbm.get(r) or {}).get("busy_utilization"),
            }
            for r in sorted(rs)
        ],
    )


def _num(x: Any) -> str:
    return "unknown" if x is None else f"{x:.2f}"


def _scaling_text(scaling: float | None, method: str) -> str:
    """'scaling efficiency 0.58 vs baseline run X' only with a baseline; otherwise the compute fraction, named
    as such (without a baseline there is no scaling efficiency)."""
    if method.startswith("baseline:"):
        return f"scaling efficiency {_num(scaling)} vs baseline run {method.removeprefix('baseline:')}"
    return f"compute fraction {_num(scaling)}"


def _scaling(ctx: _Ctx) -> tuple[float | None, str]:
    w = ctx.wait_run() or {}
    if w.get("scaling_vs_baseline") is not None:
        return float(w["scaling_vs_baseline"]), f"baseline:{ctx.baseline}"
    return (
        float(w["compute_fraction"]) if w.get("compute_fraction") is not None else None
    ), "compute_fraction"


def _op_bytes_rows(ctx: _Ctx) -> list[dict[str, Any]]:
    """op_hbm_bytes once for the whole report: its top rows serve the top-10 and the re-read checks."""
    n = max(
        int(ctx.rules["rules"]["top_hbm_ops"].get("params", {}).get("top_n", 10)),
        int(ctx.rules["rules"]["ub_reuse"]["op_rows"]),
    )
    return ctx.rows("op_hbm_bytes", {"top_n": n})


def check_top_hbm_ops(ctx: _Ctx, rule: Rule) -> Finding:
    rows = _op_bytes_rows(ctx)[: int(rule.params.get("top_n", 10))]
    rows = [r for r in rows if r.get("hbm_bytes")]
    if not rows:
        return _make(ctx, rule, fired=False, variant="no_data", values=_values(rule, ctx))
    total = (
        rows[0]["hbm_bytes"] / rows[0]["share"] if rows[0].get("share") else sum(r["hbm_bytes"] for r in rows)
    )
    top_share = sum(r["share"] or 0 for r in rows)
    sources = sorted({r["hbm_bytes_source"] for r in rows if r.get("hbm_bytes_source")})
    top = [
        {
            "name": r["name"],
            "op_type": r["op_type"],
            "calls": r["calls"],
            "hbm_gb": r["hbm_gb"],
            "share": r["share"],
            "dur_ms": _ms(r["dur_ns"]),
            "bw_utilization": r["bw_utilization"],
            "hbm_bytes_source": r["hbm_bytes_source"],
            "measured_over_modeled": r["measured_over_modeled"],
        }
        for r in rows
    ]
    first = rows[0]
    vals = _values(
        rule,
        ctx,
        n=len(rows),
        top_share=top_share,
        total_gb=total / 1e9,
        op1=first["op_type"] or first["name"],
        op1_gb=first["hbm_gb"],
        op1_share=first["share"] or 0.0,
        sources=", ".join(sources) or "unknown",
    )
    return _make(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        top_ops=top,
        evidence={"total_hbm_bytes": total, "top_share": top_share, "sources": sources},
    )


def check_operator_fusion(ctx: _Ctx, rule: Rule) -> Finding:
    rows = ctx.rows("fusion_chains", rule.params)
    run = next((r for r in rows if r["scope"] == "run"), None)
    pats = [r for r in rows if r["scope"] == "pattern"]
    if not run or not run["occurrences"]:
        return _make(
            ctx, rule, fired=False, variant="none", values=_values(rule, ctx), evidence={"chains": 0}
        )
    saved_ns = ctx.per_step(run["saved_ns"])
    share = ctx.share(saved_ns)
    top = pats[0]
    ev = {
        "chains": run["occurrences"],
        "patterns": len(pats),
        "saved_bytes": run["saved_bytes"],
        "saved_ns": run["saved_ns"],
        "saved_ns_per_step": saved_ns,
        "chain_hbm_bytes": run["chain_hbm_bytes"],
        "saved_fraction": run["saved_fraction"],
        "hbm_bytes_source": run["hbm_bytes_source"],
    }
    tops = [
        {
            "pattern": p["pattern"],
            "occurrences": p["occurrences"],
            "ranks": p["ranks"],
            "saved_gb": _gb(p["saved_bytes"]),
            "saved_fraction": p["saved_fraction"],
            "saved_ms": _ms(p["saved_ns"]),
            "example_names": p["example_names"],
            "example_shape": p["example_shape"],
        }
        for p in pats[:10]
    ]
    vals = _values(
        rule,
        ctx,
        chains=run["occurrences"],
        patterns=len(pats),
        pattern=top["pattern"],
        occurrences=top["occurrences"],
        saved=_size(top["saved_bytes"]),
        saved_fraction=top["saved_fraction"] or 0.0,
        total_saved=_size(run["saved_bytes"]),
        saving_ms=_ms(saved_ns) or 0.0,
        saving_share=share or 0.0,
    )
    saving = _saving(_ms(saved_ns), str(rule["saving_method"]), share)
    if _gated(ctx, rule):
        return _make(
            ctx, rule, fired=False, variant="gated", values=vals, evidence=ev, top_ops=tops, saving=saving
        )
    if share is None or share < rule["min_saving_share"]:
        return _make(
            ctx, rule, fired=False, variant="below", values=vals, evidence=ev, top_ops=tops, saving=saving
        )
    return _make(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
        share=share,
    )


def check_ub_reuse(ctx: _Ctx, rule: Rule) -> Finding:
    ops = _op_bytes_rows(ctx)
    qp = {"top_n": int(rule["op_rows"])}
    ratio_min = float(rule["reread_ratio"])
    rereads = []
    for r in ops:
        ratio = r.get("measured_over_modeled")
        if (
            ratio is None
            or ratio < ratio_min
            or not r.get("hbm_bytes")
            or (r.get("share") or 0) < rule["min_op_share"]
        ):
            continue
        extra_frac = 1 - 1 / ratio
        rereads.append(
            {
                "name": r["name"],
                "op_type": r["op_type"],
                "measured_over_modeled": ratio,
                "extra_bytes": r["hbm_bytes"] * extra_frac,
                "extra_ns": (r["dur_ns"] or 0) * extra_frac,
                "hbm_gb": r["hbm_gb"],
                "share": r["share"],
            }
        )
    rr = ctx.rows("repeated_reads", rule.params)
    rr_run = next((r for r in rr if r["scope"] == "run"), {})
    rr_top = [r for r in rr if r["scope"] == "tensor"][:5]
    ub = next((r for r in ctx.rows("ub_l2_rates", {"top_n": 10}) if r["scope"] == "overall"), {})
    ub_util = ub.get("ub_utilization")
    total_ns = sum(x["extra_ns"] for x in rereads) + float(rr_run.get("extra_ns") or 0)
    per_step = ctx.per_step(total_ns)
    share = ctx.share(per_step)
    ev = {
        "reread_ops": len(rereads),
        "reread_extra_bytes": sum(x["extra_bytes"] for x in rereads),
        "repeated_read_bursts": rr_run.get("bursts", 0),
        "repeated_read_extra_bytes": rr_run.get("extra_bytes", 0),
        "ub_utilization": ub_util,
        "ub_reason": ub.get("reason"),
        "saved_ns_per_step": per_step,
        "related_queries": [ctx.command("repeated_reads", rule.params), ctx.command("ub_l2_rates")],
    }
    tops = [
        {"kind": "re-read", **x, "extra_gb": _gb(x["extra_bytes"]), "extra_ms": _ms(x["extra_ns"])}
        for x in rereads[:5]
    ]
    tops += [
        {
            "kind": "repeated read",
            "tensor_shape": r["tensor_shape"],
            "tensor_dtype": r["tensor_dtype"],
            "readers": r["readers"],
            "extra_reads": r["extra_reads"],
            "extra_gb": _gb(r["extra_bytes"]),
            "extra_ms": _ms(r["extra_ns"]),
        }
        for r in rr_top
    ]
    first = tops[0] if tops else {}
    what = (
        f"{first.get('op_type')} moves {first.get('measured_over_modeled', 0):.1f}x its tensors' bytes"
        if first.get("kind") == "re-read"
        else f"a {first.get('tensor_dtype')} [{first.get('tensor_shape')}] tensor is read by {first.get('readers')}"
        if first
        else "nothing"
    )
    ub_text = f"UB utilisation {_pct(ub_util)}" if ub_util is not None else "no UB metrics in the dump"
    vals = _values(
        rule,
        ctx,
        ops=len(rereads),
        bursts=rr_run.get("bursts", 0),
        what=what,
        ub_text=ub_text,
        saving_ms=_ms(per_step) or 0.0,
        saving_share=share or 0.0,
        extra=_size(ev["reread_extra_bytes"] + float(rr_run.get("extra_bytes") or 0)),
    )
    saving = _saving(_ms(per_step), str(rule["saving_method"]), share)
    low_ub = ub_util is not None and ub_util < rule["ub_low"]
    if _gated(ctx, rule):
        return _make(
            ctx,
            rule,
            fired=False,
            variant="gated",
            values=vals,
            evidence=ev,
            top_ops=tops,
            saving=saving,
            query_params=qp,
        )
    if share is not None and share >= rule["min_saving_share"]:
        return _make(
            ctx,
            rule,
            fired=True,
            variant="fired",
            values=vals,
            evidence=ev,
            top_ops=tops,
            saving=saving,
            share=share,
            query_params=qp,
        )
    if low_ub and ctx.gate_open:
        return _make(
            ctx,
            rule,
            fired=True,
            variant="low_ub",
            values=vals,
            evidence=ev,
            top_ops=tops,
            saving=saving,
            share=share,
            query_params=qp,
        )
    return _make(
        ctx,
        rule,
        fired=False,
        variant="below",
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
        query_params=qp,
    )


def check_memory_layout(ctx: _Ctx, rule: Rule) -> Finding:
    lt = ctx.rows("layout_transforms", {"top_n": 1000})
    conv_ns = sum(r["dur_ns"] or 0 for r in lt)
    conv_bytes = sum(r["hbm_bytes"] or 0 for r in lt)
    compute = ctx.compute_ns()
    conv_share = conv_ns / compute if compute else 0.0
    ub = next((r for r in ctx.rows("ub_l2_rates", {"top_n": 10}) if r["scope"] == "overall"), {})
    l2 = ub.get("l2_hit_rate")
    forcers = _forcers(ctx.rows("layout_forcers", {"top_n": 200}))
    per_step = ctx.per_step(conv_ns)
    share_step = ctx.share(per_step)
    tops = [
        {
            "op_type": r["op_type"],
            "src_format": r["src_format"],
            "dst_format": r["dst_format"],
            "calls": r["calls"],
            "dur_ms": _ms(r["dur_ns"]),
            "share_of_compute": r["share_of_compute"],
            "hbm_gb": _gb(r["hbm_bytes"]),
            "example_input_shape": r["example_input_shape"],
        }
        for r in lt[:8]
    ]
    ev = {
        "conversions": sum(r["calls"] for r in lt),
        "conversion_ns": conv_ns,
        "conversion_bytes": conv_bytes,
        "conversion_share_of_compute": conv_share,
        "l2_hit_rate": l2,
        "forced_by": forcers[:5],
        "related_queries": [ctx.command("layout_forcers"), ctx.command("ub_l2_rates")],
    }
    if lt:
        t = lt[0]
        biggest = f"{t['op_type']} {_conv_text(t['src_format'], t['dst_format'])} ({t['calls']} calls, {_pct(t['share_of_compute'])} of compute)"
    else:
        biggest = "none"
    forced = "; ".join(f["text"] for f in forcers[:3]) or "no neighbour reads or writes them"
    l2_text = (
        "No L2 hit rates in the dump"
        if l2 is None
        else f"L2 hit rate {_pct(l2)} < {_pct(rule['l2_low'])}: an unfriendly (non-contiguous) access pattern"
        if l2 < rule["l2_low"]
        else f"L2 hit rate {_pct(l2)} (>= {_pct(rule['l2_low'])})"
    )
    vals = _values(
        rule,
        ctx,
        conv_share=conv_share,
        conv_ms=_ms(per_step) or 0.0,
        conv_size=_size(ctx.per_step(conv_bytes)),
        biggest=biggest,
        forced=forced,
        l2_text=l2_text,
        calls=ev["conversions"],
        saving_share=share_step or 0.0,
    )
    saving = _saving(_ms(per_step), str(rule["saving_method"]), share_step)
    fired = conv_share >= rule["min_compute_share"] or (l2 is not None and l2 < rule["l2_low"])
    if not fired:
        return _make(
            ctx,
            rule,
            fired=False,
            variant="below" if lt else "none",
            values=vals,
            evidence=ev,
            top_ops=tops,
            saving=saving,
        )
    return _make(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
        share=conv_share,
    )


def _forcers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """layout_forcers rows grouped by who forces the conversion, with a sentence each."""
    agg: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["role"], r["forced_by"] or "?", r["src_format"] or "?", r["dst_format"] or "?")
        a = agg.setdefault(
            key,
            {
                "role": r["role"],
                "forced_by": r["forced_by"],
                "src_format": r["src_format"],
                "dst_format": r["dst_format"],
                "calls": 0,
                "dur_ns": 0,
            },
        )
        a["calls"] += r["calls"]
        a["dur_ns"] += r["dur_ns"] or 0
    out = sorted(agg.values(), key=lambda a: -a["dur_ns"])
    for a in out:
        conv = _conv_text(a["src_format"], a["dst_format"])
        if a["forced_by"] and any(a["forced_by"].lower().startswith(t) for t in ("transdata", "transpose")):
            a["text"] = f"{conv} converted straight back by the next conversion, a round trip ({a['calls']}x)"
        elif a["role"] == "weight":
            a["text"] = (
                f"weights kept in {a['src_format']} are converted {conv} around {a['forced_by'] or 'the cube ops'} every step ({a['calls']}x)"
            )
        elif a["role"] == "feeds_next":
            a["text"] = (
                f"{a['forced_by']} needs {a['dst_format'] or 'another layout'} ({conv}, {a['calls']}x)"
            )
        elif a["role"] == "drains_prev":
            a["text"] = (
                f"{a['forced_by']} writes {a['src_format'] or 'a layout'} that the next op cannot use ({conv}, {a['calls']}x)"
            )
        else:
            a["text"] = f"{conv} with no neighbour reading or writing it ({a['calls']}x)"
        a["dur_ms"] = _ms(a.pop("dur_ns"))
    return out


def _conv_text(src: str | None, dst: str | None) -> str:
    return f"{src}->{dst}" if src and dst else "(formats not recorded)"


def check_prefetch_overlap(ctx: _Ctx, rule: Rule) -> Finding:
    rows = ctx.rows("device_idle", rule.params)
    run = next((r for r in rows if r["scope"] == "run"), None)
    if not run or not run["window_ns"]:
        return _make(ctx, rule, fired=False, variant="no_data", values=_values(rule, ctx))
    exposed = (run["idle_loading_ns"] or 0) + (run["idle_host_copy_ns"] or 0) + (run["copy_exposed_ns"] or 0)
    per_step = ctx.per_step(exposed)
    share = ctx.share(per_step)
    ev = {
        "idle_loading_ns": run["idle_loading_ns"],
        "idle_host_copy_ns": run["idle_host_copy_ns"],
        "copy_exposed_ns": run["copy_exposed_ns"],
        "device_copy_ns": run["device_copy_ns"],
        "loading_ns": run["loading_ns"],
        "preparing_ns": run["preparing_ns"],
        "free_ns": run["free_ns"],
        "exposed_ns_per_step": per_step,
        "exposed_share": share,
    }
    tops = [
        {
            "rank": r["rank"],
            "preparing_ms": _ms(r["preparing_ns"] / max(r["steps"], 1)),
            "idle_loading_ms": _ms(r["idle_loading_ns"] / max(r["steps"], 1)),
            "idle_host_copy_ms": _ms(r["idle_host_copy_ns"] / max(r["steps"], 1)),
            "copy_exposed_ms": _ms(r["copy_exposed_ns"] / max(r["steps"], 1)),
        }
        for r in rows
        if r["scope"] == "rank"
    ]
    vals = _values(
        rule,
        ctx,
        exposed_ms=_ms(per_step) or 0.0,
        exposed_share=share or 0.0,
        loading_ms=_ms(ctx.per_step(run["idle_loading_ns"])) or 0.0,
        copy_ms=_ms(ctx.per_step((run["idle_host_copy_ns"] or 0) + (run["copy_exposed_ns"] or 0))) or 0.0,
        preparing_ms=_ms(ctx.per_step(run["preparing_ns"])) or 0.0,
        loading_total_ms=_ms(ctx.per_step(run["loading_ns"])) or 0.0,
    )
    saving = _saving(_ms(per_step), str(rule["saving_method"]), share)
    if share is None or share < rule["min_share"]:
        return _make(
            ctx, rule, fired=False, variant="below", values=vals, evidence=ev, top_ops=tops, saving=saving
        )
    return _make(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
        share=share,
    )


def check_mixed_precision(ctx: _Ctx, rule: Rule) -> Finding:
    rows = ctx.rows("dtype_traffic", rule.params)
    run = next((r for r in rows if r["scope"] == "run"), None)
    ops = [r for r in rows if r["scope"] == "op" and (r.get("fp32_fraction") or 0) > 0]
    if not run or not run.get("tensor_bytes"):
        return _make(ctx, rule, fired=False, variant="no_data", values=_values(rule, ctx))
    fp32 = run.get("fp32_fraction") or 0.0
    per_step = ctx.per_step(run["saved_ns"])
    share = ctx.share(per_step)
    ev = {
        "fp32_fraction": fp32,
        "fp32_tensor_bytes": run["fp32_tensor_bytes"],
        "tensor_bytes": run["tensor_bytes"],
        "saved_bytes": run["saved_bytes"],
        "saved_ns": run["saved_ns"],
        "saved_ns_per_step": per_step,
    }
    tops = [
        {
            "name": r["name"],
            "op_type": r["op_type"],
            "fp32_fraction": r["fp32_fraction"],
            "hbm_gb": _gb(r["hbm_bytes"]),
            "hbm_share": r["hbm_share"],
            "bw_utilization": r["bw_utilization"],
            "keep_fp32": r["keep_fp32"],
            "saved_gb": _gb(r["saved_bytes"]),
            "saved_ms": _ms(r["saved_ns"]),
        }
        for r in ops[:10]
    ]
    vals = _values(
        rule,
        ctx,
        fp32=fp32,
        saved=_size(ctx.per_step(run["saved_bytes"])),
        saving_ms=_ms(per_step) or 0.0,
        saving_share=share or 0.0,
        top=", ".join(t["op_type"] for t in tops[:3]) or "none",
    )
    saving = _saving(_ms(per_step), str(rule["saving_method"]), share)
    if fp32 < rule["min_fp32_share"]:
        return _make(
            ctx, rule, fired=False, variant="low_fp32", values=vals, evidence=ev, top_ops=tops, saving=saving
        )
    if _gated(ctx, rule):
        return _make(
            ctx, rule, fired=False, variant="gated", values=vals, evidence=ev, top_ops=tops, saving=saving
        )
    if share is None or share < rule["min_saving_share"]:
        return _make(
            ctx, rule, fired=False, variant="below", values=vals, evidence=ev, top_ops=tops, saving=saving
        )
    return _make(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
        share=share,
    )


def check_gradient_checkpointing(ctx: _Ctx, rule: Rule) -> Finding:
    mem = ctx.rows("activation_memory")
    run = next((r for r in mem if r["scope"] == "run"), {})
    act = run.get("activation_bytes")
    hbm = ctx.hbm_ranks()
    utils = {r: x["busy_utilization"] for r, x in hbm.items() if x.get("busy_utilization") is not None}
    util = max(utils.values()) if utils else None
    busy_bw = max((x.get("busy_bw_bps") or 0 for x in hbm.values()), default=0) or None
    cube = ctx.rows("cube_efficiency", {"top_n": 1000})
    compute = ctx.compute_ns()
    cube_busy_ns = sum(
        (r["dur_ns"] or 0) * (r["mac_ratio"] if r.get("mac_ratio") is not None else 1.0) for r in cube
    )
    cube_busy = cube_busy_ns / compute if compute else None
    headroom = None if cube_busy is None else max(0.0, 1 - cube_busy)
    traffic_ns = (
        act / busy_bw * 1e9 * rule["traffic_cut"] if act and busy_bw else None
    )  # per step (act is per step)
    recompute_ns = ctx.per_step(compute * rule["recompute_cost"]) if compute else None
    share = ctx.share(traffic_ns)
    ev = {
        "activation_bytes_per_step": act,
        "peak_allocated_bytes": run.get("max_allocated_bytes"),
        "hbm_utilization": util,
        "cube_busy_share": cube_busy,
        "compute_headroom": headroom,
        "traffic_saved_ns_per_step": traffic_ns,
        "recompute_cost_ns_per_step": recompute_ns,
        "related_queries": [ctx.command("hbm_utilization"), ctx.command("cube_efficiency")],
    }
    vals = _values(
        rule,
        ctx,
        act=_size(act),
        util=_pct(util),
        headroom=_pct(headroom),
        saving_ms=_ms(traffic_ns) or 0.0,
        saving_share=share or 0.0,
        recompute_ms=_ms(recompute_ns) or 0.0,
        reason=run.get("reason")
        or "allocated memory does not change inside the steps (no activations "
        "come and go in the allocator records)",
    )
    saving = _saving(_ms(traffic_ns), str(rule["saving_method"]), share)
    if not act:
        return _make(ctx, rule, fired=False, variant="no_data", values=vals, evidence=ev, saving=saving)
    if util is None or util < ctx.sat:
        return _make(ctx, rule, fired=False, variant="not_bound", values=vals, evidence=ev, saving=saving)
    if headroom is None or headroom < rule["min_headroom"]:
        return _make(ctx, rule, fired=False, variant="no_headroom", values=vals, evidence=ev, saving=saving)
    if share is None or share < rule["min_saving_share"]:
        return _make(ctx, rule, fired=False, variant="below", values=vals, evidence=ev, saving=saving)
    return _make(ctx, rule, fired=True, variant="fired", values=vals, evidence=ev, saving=saving, share=share)


def check_matmul_tiling(ctx: _Ctx, rule: Rule) -> Finding:
    rows = ctx.rows("cube_efficiency", {"top_n": 1000})
    target = float(rule["target_utilization"])
    flagged = []
    for r in rows:
        if (r.get("share_of_compute") or 0) < rule["min_op_share"]:
            continue
        fu, bu, mac, bdr = (
            r.get("flops_utilization"),
            r.get("bw_utilization"),
            r.get("mac_ratio"),
            r.get("block_dim_ratio"),
        )
        roof = max((x for x in (fu, bu) if x is not None), default=None)
        low_roofs = fu is not None and fu < rule["low_flops"] and (bu is None or bu < rule["low_bw"])
        low_mac = (
            fu is None and mac is not None and mac < rule["low_mac"] and (bu is None or bu < rule["low_bw"])
        )
        few_cores = bdr is not None and bdr < rule["low_block_dim_ratio"]
        if not (low_roofs or low_mac or few_cores):
            continue
        achieved = roof if roof is not None else mac if mac is not None else bdr
        gain = max(0.0, 1 - (achieved or 0) / target) if achieved is not None and achieved < target else 0.0
        if few_cores and bdr is not None:
            gain = max(gain, 1 - bdr)
        why = []
        if low_roofs:
            why.append(f"{_pct(fu)} of peak FLOP/s and {_pct(bu)} of peak HBM bandwidth")
        if low_mac:
            why.append(f"cube pipe busy {_pct(mac)}")
        if few_cores:
            why.append(f"block dim {r['block_dim']:.0f} of {r['max_block_dim']}")
        flagged.append(
            {
                "name": r["name"],
                "op_type": r["op_type"],
                "input_shapes": r["input_shapes"],
                "input_dtypes": r["input_dtypes"],
                "calls": r["calls"],
                "dur_ms": _ms(r["dur_ns"]),
                "share_of_compute": r["share_of_compute"],
                "flops_utilization": fu,
                "bw_utilization": bu,
                "mac_ratio": mac,
                "block_dim": r["block_dim"],
                "max_block_dim": r["max_block_dim"],
                "why": ", ".join(why),
                "saved_ns": (r["dur_ns"] or 0) * gain,
            }
        )
    compute = ctx.compute_ns()
    saved = sum(f["saved_ns"] for f in flagged)
    share_c = saved / compute if compute else None
    per_step = ctx.per_step(saved)
    ev = {
        "ops_checked": len(rows),
        "ops_flagged": len(flagged),
        "saved_ns_per_step": per_step,
        "saved_share_of_compute": share_c,
    }
    first = flagged[0] if flagged else {}
    vals = _values(
        rule,
        ctx,
        n=len(flagged),
        op=first.get("op_type", ""),
        shapes=first.get("input_shapes") or "shapes not recorded",
        dtypes=first.get("input_dtypes") or "dtypes not recorded",
        why=first.get("why", ""),
        op_share=first.get("share_of_compute") or 0.0,
        saving_ms=_ms(per_step) or 0.0,
        saving_share=share_c or 0.0,
        checked=len(rows),
    )
    for f in flagged:
        f["saved_ms"] = _ms(f.pop("saved_ns"))
    saving = _saving(_ms(per_step), str(rule["saving_method"]), ctx.share(per_step))
    if not rows:
        return _make(ctx, rule, fired=False, variant="none", values=vals, evidence=ev)
    if not flagged or share_c is None or share_c < rule["min_saving_share"]:
        return _make(
            ctx, rule, fired=False, variant="below", values=vals, evidence=ev, top_ops=flagged, saving=saving
        )
    return _make(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        evidence=ev,
        top_ops=flagged,
        saving=saving,
        share=share_c,
    )


def check_slow_rank(ctx: _Ctx, rule: Rule) -> Finding:
    rs, wr = _skew(ctx)
    if len(rs) < 2 or not any(r["collectives"] for r in rs.values()):
        return _make(
            ctx,
            rule,
            fired=False,
            variant="single",
            values=_values(rule, ctx, ranks=len(rs)),
            evidence={"ranks": len(rs)},
        )
    slow = max(rs, key=lambda r: _per_step_rank(rs[r], "lateness_ns"))
    fast = min(rs, key=lambda r: _per_step_rank(rs[r], "lateness_ns"))
    late = _per_step_rank(rs[slow], "lateness_ns")
    # a share needs a step to be a share of: a cluster summary without step times has none
    step_ns = ctx.mean_step_ns
    late_share = late / step_ns if step_ns else None
    split = lateness_split(ctx, slow, fast)
    d_sat, d_other, d_host = split["saturated_ns"], split["other_compute_ns"], split["host_idle_ns"]
    d_kernels = _per_step_rank(rs[slow], "compute_kernels") - _per_step_rank(rs[fast], "compute_kernels")
    causes = {"memory": d_sat, "compute": d_other, "host": d_host}
    cause = max(causes, key=lambda k: causes[k])
    if late <= 0 or causes[cause] < rule["min_explained"] * late:
        cause = "unexplained"
    hbm = ctx.hbm_ranks()
    vals = _values(
        rule,
        ctx,
        slow=slow,
        fast=fast,
        late_ms=_ms(late),
        late_share=late_share or 0.0,
        d_sat_ms=_ms(d_sat),
        d_compute_ms=_ms(d_other),
        d_host_ms=_ms(d_host),
        d_kernels=int(round(d_kernels)),
        slow_util=_pct((hbm.get(slow) or {}).get("busy_utilization")),
        fast_util=_pct((hbm.get(fast) or {}).get("busy_utilization")),
        advisor_ms=_ms(_per_step_rank(rs[fast], "peer_wait_ns")),
    )
    vals["cause_text"] = render(str(rule["causes"][cause]), vals, f"rules.slow_rank.causes.{cause}")
    ev = {
        "slow_rank": slow,
        "fast_rank": fast,
        "lateness_ns_per_step": late,
        "lateness_share": late_share,
        "cause": cause,
        "extra_saturated_ns_per_step": d_sat,
        "extra_other_compute_ns_per_step": d_other,
        "extra_host_idle_ns_per_step": d_host,
        "extra_kernels_per_step": d_kernels,
        "advisor_equivalent": render(str(rule["advisor_says"]), vals, "rules.slow_rank.advisor_says"),
        "related_queries": [ctx.command("wait_attribution", ctx.wait_params())],
    }
    tops = [
        {
            "rank": r,
            "lateness_ms_per_step": _ms(_per_step_rank(rs[r], "lateness_ns")),
            "kernels_per_step": _per_step_rank(rs[r], "compute_kernels"),
            "compute_ms_per_step": _ms(_per_step_rank(rs[r], "compute_ns")),
            "hbm_saturated_ms_per_step": _ms(_per_step_rank(wr.get(r, {}), "compute_hbm_saturated_ns")),
            "idle_host_ms_per_step": _ms(
                _per_step_rank(wr.get(r, {}), "idle_ns") + _per_step_rank(wr.get(r, {}), "host_ns")
            ),
        }
        for r in sorted(rs)
    ]
    share = ctx.share(late)
    saving = _saving(_ms(late), str(rule["saving_method"]), share)
    if late_share is None:
        return _make(
            ctx,
            rule,
            fired=False,
            variant="no_steps",
            values=vals,
            evidence=ev,
            top_ops=tops,
            saving=_saving(None, "no step times in the dump", None),
        )
    if late_share < rule["min_lateness_share"]:
        return _make(
            ctx, rule, fired=False, variant="balanced", values=vals, evidence=ev, top_ops=tops, saving=saving
        )
    return _make(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
        share=share,
    )


def check_slow_link(ctx: _Ctx, rule: Rule) -> Finding:
    rows = ctx.rows("comm_transport", rule.params)
    links = [r for r in rows if r["scope"] == "link" and r["transport"] != "SDMA" and r.get("bandwidth_bps")]
    if not links:
        return _make(ctx, rule, fired=False, variant="no_data", values=_values(rule, ctx))
    expected = {k.upper(): float(v) * 1e9 for k, v in rule["expected_gbps"].items()}
    best: dict[str, float] = {}
    for r in links:
        best[r["transport"]] = max(best.get(r["transport"], 0.0), r["bandwidth_bps"])
    slow = []
    saved = 0.0
    for r in links:
        exp = expected.get(r["transport"])
        vs_exp = r["bandwidth_bps"] / exp if exp else None
        vs_best = r["bandwidth_bps"] / best[r["transport"]] if best[r["transport"]] else None
        is_slow = (vs_exp is not None and vs_exp < rule["min_fraction_of_expected"]) or (
            vs_best is not None and vs_best < rule["min_fraction_of_best"]
        )
        if is_slow:
            target = max(x for x in (exp or 0.0, best[r["transport"]]) if x)
            saved += max(0.0, (r["transit_ns"] or 0) - (r["bytes"] or 0) / target * 1e9)
            slow.append(
                {
                    "rank": r["rank"],
                    "transport": r["transport"],
                    "gbps": r["bandwidth_bps"] / 1e9,
                    "expected_gbps": exp / 1e9 if exp else None,
                    "vs_expected": vs_exp,
                    "vs_best_rank": vs_best,
                    "gb": _gb(r["bytes"]),
                    "transit_ms": _ms(r["transit_ns"]),
                    "ops": r["ops"],
                }
            )
    w = ctx.wait_run() or {}
    comm = (
        (w.get("comm_transit_ns") or 0)
        + (w.get("comm_wait_other_ns") or 0)
        + (w.get("comm_wait_peer_hbm_ns") or 0)
    )
    transit_share = (w.get("comm_transit_ns") or 0) / comm if comm else None
    per_step = ctx.per_step(saved)
    share = ctx.share(per_step)
    small = next((r for r in rows if r["scope"] == "run"), {})
    first = slow[0] if slow else min(links, key=lambda r: r["bandwidth_bps"])
    first_d = (
        first
        if slow
        else {
            "rank": first["rank"],
            "transport": first["transport"],
            "gbps": first["bandwidth_bps"] / 1e9,
            "expected_gbps": (expected.get(first["transport"]) or 0) / 1e9 or None,
        }
    )
    vals = _values(
        rule,
        ctx,
        n=len(slow),
        rank=first_d["rank"],
        transport=first_d["transport"],
        gbps=first_d["gbps"],
        expected=_num(first_d.get("expected_gbps")),
        transit_share=_pct(transit_share),
        saving_ms=_ms(per_step) or 0.0,
        saving_share=share or 0.0,
        small_ops=small.get("small_ops") or 0,
    )
    ev = {
        "links": len(links),
        "slow_links": len(slow),
        "transit_share_of_comm": transit_share,
        "saved_ns_per_step": per_step,
        "advisor_equivalent": render(str(rule["advisor_says"]), vals, "rules.slow_link.advisor_says"),
    }
    tops = slow or [
        {"rank": r["rank"], "transport": r["transport"], "gbps": r["bandwidth_bps"] / 1e9} for r in links
    ]
    saving = _saving(_ms(per_step), str(rule["saving_method"]), share)
    if not slow:
        return _make(
            ctx, rule, fired=False, variant="ok", values=vals, evidence=ev, top_ops=tops, saving=saving
        )
    return _make(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
        share=share,
    )


def check_comm_alignment(ctx: _Ctx, rule: Rule) -> Finding:
    rows = ctx.rows("comm_transport", rule.params)
    run = next((r for r in rows if r["scope"] == "run"), {})
    ops = [r for r in rows if r["scope"] == "op" and (r.get("unaligned_packets") or 0) > 0]
    vals = _values(
        rule,
        ctx,
        packets=run.get("packets") or 0,
        unaligned=run.get("unaligned_packets") or 0,
        ops=run.get("unaligned_ops") or 0,
        unaligned_share=(run.get("unaligned_packets") or 0) / run["packets"] if run.get("packets") else 0.0,
        example=ops[0]["name"] if ops else "",
    )
    ev = {
        "packets": run.get("packets"),
        "unaligned_packets": run.get("unaligned_packets"),
        "unaligned_ops": run.get("unaligned_ops"),
        "has_packet_sizes": run.get("has_packet_sizes"),
    }
    tops = [
        {
            "rank": r["rank"],
            "name": r["name"],
            "transport": r["transport"],
            "packets": r["packets"],
            "unaligned_packets": r["unaligned_packets"],
            "bytes": r["bytes"],
        }
        for r in ops[:10]
    ]
    if not run.get("has_packet_sizes"):
        return _make(ctx, rule, fired=False, variant="no_data", values=vals, evidence=ev)
    if not run.get("unaligned_packets"):
        return _make(ctx, rule, fired=False, variant="ok", values=vals, evidence=ev)
    share = vals["unaligned_share"]
    return _make(ctx, rule, fired=True, variant="fired", values=vals, evidence=ev, top_ops=tops, share=share)


def check_small_packets(ctx: _Ctx, rule: Rule) -> Finding:
    rows = ctx.rows("comm_transport", rule.params)
    run = next((r for r in rows if r["scope"] == "run"), {})
    n, small = run.get("ops") or 0, run.get("small_ops") or 0
    ratio = small / n if n else 0.0
    op_rows = [r for r in rows if r["scope"] == "op" and r["transport"] in ("SDMA", "RDMA")]
    mean_mb = (sum(r["bytes"] or 0 for r in op_rows) / len(op_rows) / 1e6) if op_rows else 0.0
    vals = _values(
        rule,
        ctx,
        ops=n,
        small=small,
        ratio=ratio,
        mean_mb=mean_mb,
        small_mb=(run.get("small_bytes") or 0) / 1e6,
    )
    ev = {
        "ops": n,
        "small_ops": small,
        "small_ratio": ratio,
        "small_bytes": run.get("small_bytes"),
        "mean_op_bytes": mean_mb * 1e6,
    }
    tops = [
        {
            "rank": r["rank"],
            "name": r["name"],
            "transport": r["transport"],
            "mb": (r["bytes"] or 0) / 1e6,
            "transit_ms": _ms(r["transit_ns"]),
        }
        for r in op_rows
        if r["small_ops"]
    ][:10]
    if not n:
        return _make(ctx, rule, fired=False, variant="no_data", values=vals, evidence=ev)
    if ratio <= rule["max_small_ratio"]:
        return _make(ctx, rule, fired=False, variant="ok", values=vals, evidence=ev)
    return _make(ctx, rule, fired=True, variant="fired", values=vals, evidence=ev, top_ops=tops, share=None)


def check_aicpu_ops(ctx: _Ctx, rule: Rule) -> Finding:
    rows = ctx.rows("op_exec_modes", rule.params)
    cpu = [r for r in rows if (r.get("task_type") or "").upper() == "AI_CPU"]
    slow = [r for r in cpu if (r["max_dur_ns"] or 0) >= rule["min_task_ns"]]
    total = sum(r["dur_ns"] or 0 for r in cpu)
    share_c = sum(r["share_of_compute"] or 0 for r in cpu)
    per_step = ctx.per_step(total)
    share = ctx.share(per_step)
    doubles = sorted({r["op_type"] for r in cpu if "DOUBLE" in (r.get("input_dtypes") or "").upper()})
    vals = _values(
        rule,
        ctx,
        n=len(cpu),
        types=", ".join(r["op_type"] for r in cpu[:5]),
        ms=_ms(per_step) or 0.0,
        share_c=share_c,
        doubles=", ".join(doubles) or "none",
    )
    ev = {
        "aicpu_op_types": len(cpu),
        "aicpu_ns": total,
        "aicpu_share_of_compute": share_c,
        "double_dtype_ops": doubles,
    }
    tops = [
        {
            "op_type": r["op_type"],
            "calls": r["calls"],
            "dur_ms": _ms(r["dur_ns"]),
            "max_dur_us": (r["max_dur_ns"] or 0) / 1e3,
            "share_of_compute": r["share_of_compute"],
            "input_dtypes": r["input_dtypes"],
        }
        for r in cpu[:10]
    ]
    saving = _saving(_ms(per_step), str(rule["saving_method"]), share)
    if not slow:
        return _make(ctx, rule, fired=False, variant="none", values=vals, evidence=ev, top_ops=tops)
    return _make(
        ctx,
        rule,
        fired=True,
        variant="fired",
        values=vals,
        evidence=ev,
        top_ops=tops,
        saving=saving,
        share=share_c,
    )


def check_dynamic_shape(ctx: _Ctx, rule: Rule) -> Finding:
    rows = ctx.rows("op_exec_modes", rule.params)
    with_state = rows[0]["ops_with_state"] if rows else 0
    static = rows[0]["static_ops"] if rows else 0
    idle = next(
        (
            r
            for r in ctx.rows("device_idle", ctx.rules["rules"]["prefetch_overlap"].get("params", {}))
            if r["scope"] == "run"
        ),
        {},
    )
    free_share = (idle.get("free_ns") or 0) / idle["window_ns"] if idle.get("window_ns") else 0.0
    vals = _values(
        rule,
        ctx,
        n=with_state,
        static=static,
        free_share=free_share,
        free_ms=_ms(ctx.per_step(idle.get("free_ns"))) or 0.0,
        gaps=idle.get("free_gaps") or 0,
    )
    ev = {
        "ops_with_state": with_state,
        "static_ops": static,
        "free_share": free_share,
        "advisor_equivalent": render(str(rule["advisor_says"]), vals, "rules.dynamic_shape.advisor_says"),
    }
    if not with_state:
        return _make(ctx, rule, fired=False, variant="no_data", values=vals, evidence=ev)
    if static:
        return _make(ctx, rule, fired=False, variant="ok", values=vals, evidence=ev)
    return _make(ctx, rule, fired=True, variant="fired", values=vals, evidence=ev, share=None)


def check_free_time(ctx: _Ctx, rule: Rule) -> Finding:
    rows = ctx.rows("device_idle", ctx.rules["rules"]["prefetch_overlap"].get("params", {}))
    run = next((r for r in rows if r["scope"] == "run"), None)
    if not run or not run["window_ns"]:
        return _make(ctx, rule, fired=False, variant="no_data", values=_values(rule, ctx))
    free = run["free_ns"] or 0
    free_share = free / run["window_ns"]
    parts = {
        "data loading": run["free_loading_ns"] or 0,
        "host->device copies": run["free_host_copy_ns"] or 0,
        "synchronisation": run["free_sync_ns"] or 0,
    }
    parts["other host work / launch gaps"] = max(0, free - sum(parts.values()))
    causes = ", ".join(
        f"{k} {_pct(v / free if free else 0)}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v
    )
    per_step = ctx.per_step(free)
    share = ctx.share(per_step)
    vals = _values(
        rule,
        ctx,
        free_share=free_share,
        free_ms=_ms(per_step) or 0.0,
        gaps=run["free_gaps"],
        largest_ms=_ms(run["largest_free_gap_ns"]) or 0.0,
        causes=causes or "none",
        main_cause=max(parts, key=lambda k: parts[k]),
    )
    ev = {
        "free_ns": free,
        "free_share": free_share,
        "free_gaps": run["free_gaps"],
        "largest_free_gap_ns": run["largest_free_gap_ns"],
        "causes_ns": parts,
        "advisor_equivalent": render(str(rule["advisor_says"]), vals, "rules.free_time.advisor_says"),
    }
    saving = _saving(_ms(per_step), str(rule["saving_method"]), share)
    if free_share < rule["min_free_share"]:
        return _make(ctx, rule, fired=False, variant="ok", values=vals, evidence=ev, saving=saving)
    return _make(ctx, rule, fired=True, variant="fired", values=vals, evidence=ev, saving=saving, share=share)


CHECKS: dict[str, Callable[[_Ctx, Rule], Finding]] = {
    "bandwidth_bound": check_bandwidth_bound,
    "comm_waits_on_memory": check_comm_waits_on_memory,
    "top_hbm_ops": check_top_hbm_ops,
    "operator_fusion": check_operator_fusion,
    "ub_reuse": check_ub_reuse,
    "memory_layout": check_memory_layout,
    "prefetch_overlap": check_prefetch_overlap,
    "mixed_precision": check_mixed_precision,
    "gradient_checkpointing": check_gradient_checkpointing,
    "matmul_tiling": check_matmul_tiling,
    "slow_rank": check_slow_rank,
    "slow_link": check_slow_link,
    "comm_alignment": check_comm_alignment,
    "small_packets": check_small_packets,
    "aicpu_ops": check_aicpu_ops,
    "dynamic_shape": check_dynamic_shape,
    "free_time": check_free_time,
}


# ---- verdict -------------------------------------------------------------------------------------------------
def _hbm_summary(ctx: _Ctx) -> dict[str, Any]:
    """The run's HBM bandwidth as the verdict may cite it: the busiest graded rank's utilisation, or for sampled
    counters too coarse to resolve the kernels their step mean, highest sample and upper bound, or a modeled
    lower bound; with the grade, a text, and whether it is known to be below the not-bound line."""
    from . import grades

    hbm = ctx.hbm_ranks()
    utils = {r: x["busy_utilization"] for r, x in hbm.items() if x.get("busy_utilization") is not None}
    out: dict[str, Any] = {
        "util": None,
        "rank": None,
        "below_line": False,
        "grade": grades.hbm_grade(None, ctx.device_kind),
    }
    if utils:
        r = max(utils, key=lambda k: utils[k])
        g = grades.hbm_grade(hbm[r], ctx.device_kind)
        out.update(
            util=utils[r],
            rank=r,
            grade=g,
            below_line=utils[r] < ctx.not_bound,
            text=f"utilisation {_pct(utils[r])} on rank {r} ({g['grade']}: {g['detail']})",
        )
        return out
    sampled = {
        r: x for r, x in hbm.items() if x.get("evidence") == "sampled" and x.get("utilization") is not None
    }
    if sampled:
        r = max(
            sampled, key=lambda k: (sampled[k].get("busy_utilization_max") or 0.0, sampled[k]["utilization"])
        )
        x = sampled[r]
        umax = x.get("busy_utilization_max")
        period = (x.get("sample_period_ns") or 0) / 1e6
        bound = "up to 100%" if umax is None or umax >= 1 else f"at most {umax:.0%}"
        out.update(
            rank=r,
            grade=grades.hbm_grade(x, ctx.device_kind),
            mean=x["utilization"],
            max_sample=x.get("max_utilization"),
            busy_bound=min(umax, 1.0) if umax is not None else None,
            below_line=all(
                v.get("busy_utilization_max") is not None and v["busy_utilization_max"] < ctx.not_bound
                for v in sampled.values()
            ),
            text=(
                f"counters average {x['utilization']:.1%} of peak on rank {r} (sampled every {period:g} ms, "
                f"highest sample {(x.get('max_utilization') or 0):.1%}; {bound} while computing)"
            ),
        )
        return out
    lower = [x.get("modeled_utilization_lower") for x in hbm.values() if x.get("modeled_utilization_lower")]
    if lower:
        out.update(
            lower=max(lower), text=f"only a modeled lower bound ({max(lower):.1%} of peak over the step)"
        )
    else:
        out["text"] = "no HBM bytes in the dump"
    return out


def _verdict(ctx: _Ctx, findings: list[Finding]) -> dict[str, Any]:
    from . import grades

    w = ctx.wait_run()
    hs = _hbm_summary(ctx)
    util, top_rank = hs["util"], hs["rank"]
    scaling, method = _scaling(ctx)
    cov = ctx.coverage()
    capture = {
        "ranks_captured": cov.get("ranks_captured"),
        "job_ranks": cov.get("job_ranks"),
        "job_ranks_source": cov.get("job_ranks_source"),
        "job_ranks_exact": cov.get("job_ranks_exact"),
        "missing_ranks": cov.get("missing_ranks") or "",
        "complete": cov.get("complete"),
        "kernel_coverage": cov.get("kernel_coverage"),
    }
    tmpl = ctx.rules["verdict"]
    common = {
        "hbm_utilization": util,
        "hbm_utilization_rank": top_rank,
        "hbm_evidence": hs["grade"],
        "hbm_mean_utilization": hs.get("mean"),
        "hbm_max_sample": hs.get("max_sample"),
        "hbm_busy_utilization_bound": hs.get("busy_bound"),
        "scaling_efficiency": scaling if method != "compute_fraction" else None,
        "scaling_method": method,
        "compute_fraction": (w or {}).get("compute_fraction"),
        "capture": capture,
        "device_kind": ctx.device_kind,
    }
    if ctx.device_kind == "cpu":
        host_ops = int((ctx.store_run_info().get("rows") or {}).get("host_ops") or 0)
        return {
            "bound": None,
            "confidence": "cannot tell",
            "headline": render(tmpl["no_device"], {"host_ops": host_ops}, "verdict.no_device"),
            **common,
            "shares": {},
            "mean_step_ms": None,
            "ranks": len(ctx.hbm_ranks()),
            "steps": 0,
        }
    if not w or not w.get("verdict"):
        info = ctx.store_run_info()
        k = ctx.con.execute(
            "SELECT count(*), count(*) FILTER (WHERE task_type = 'cuda_profiler_range') FROM kernels "
            "WHERE run_id = $r",
            {"r": ctx.run_id},
        ).fetchone() or (0, 0)
        variant = (
            "cluster_summary"
            if str(info.get("format", "")).endswith("cluster") and not k[0]
            else "ranges_only"
            if k[0] and k[0] == k[1]
            else "none"
        )
        return {
            "bound": None,
            "confidence": "cannot tell",
            "headline": render(tmpl[variant], {"ranges": k[1]}, f"verdict.{variant}"),
            **common,
            "shares": {},
            "mean_step_ms": None,
            "ranks": len(ctx.hbm_ranks()),
            "steps": 0,
        }
    bound = str(w["verdict"]).removesuffix("-bound")
    shares = {
        "memory": w["memory_share"],
        "communication": w["communication_share"],
        "compute": w["compute_share"],
        "idle_host": w["idle_host_share"],
    }
    wall = w["wall_ns"] or 1
    capture_text = grades.CAPTURE_ADVICE["gpu" if ctx.device_kind == "gpu" else "ascend"]
    vals: dict[str, Any] = {
        "util": _pct(util),
        "util_rank": top_rank if top_rank is not None else "?",
        "not_bound": ctx.not_bound,
        "sat": ctx.sat,
        "scaling": _num(scaling),
        "scaling_method": method.replace("_", " "),
        "scaling_text": _scaling_text(scaling, method),
        "hbm_text": hs.get("text", ""),
        "hbm_grade": f"{hs['grade']['grade']}: {hs['grade']['detail']}",
        "capture": capture_text,
        "memory_share": shares["memory"] or 0.0,
        "communication_share": shares["communication"] or 0.0,
        "compute_share": shares["compute"] or 0.0,
        "idle_host_share": shares["idle_host"] or 0.0,
        "transit_share": (w["comm_transit_ns"] or 0) / wall,
        "wait_share": ((w["comm_wait_other_ns"] or 0) + (w["comm_wait_peer_hbm_ns"] or 0)) / wall,
        "idle_share": (w["idle_ns"] or 0) / wall,
        "host_share": (w["host_ns"] or 0) / wall,
    }
    graded = util is not None or hs["below_line"]
    confidence = "judged"
    variant = {
        "memory": "memory",
        "communication": "communication",
        "compute": "compute",
        "host/idle": "host_idle",
    }[bound]
    if bound == "communication":
        comm = (
            (w["comm_transit_ns"] or 0)
            + (w["comm_wait_other_ns"] or 0)
            + (w["comm_wait_peer_hbm_ns"] or 0)
            + (w.get("comm_unsplit_ns") or 0)
        )
        if comm and (w.get("comm_unsplit_ns") or 0) >= 0.5 * comm:
            variant = "unsplit"
        elif util is not None and util >= ctx.not_bound:
            variant = "communication_busy_hbm"
        elif ctx.peak() is None:
            variant = "communication_no_peak"
        elif not hs["below_line"]:
            variant = "communication_hbm_unknown"
    elif bound == "compute" and not graded:
        variant = "compute_no_peak" if ctx.peak() is None else "compute_ungraded"
        confidence = "cannot tell"
    cw = next((f for f in findings if f.id == "comm_waits_on_memory" and f.fired), None)
    if cw is not None:
        variant = "memory_waits" if bound == "memory" else variant
        vals.update(
            waiting=cw.evidence["waiting_rank"],
            late=cw.evidence["late_rank"],
            wait_ms=_ms(cw.evidence["peer_wait_ns_per_step"]),
            late_util=_pct(cw.evidence.get("late_rank_hbm_utilization")),
        )
    if util is None and variant in ("memory", "compute") and ctx.peak() is None:
        variant += "_no_peak"
    headline = render(tmpl[variant], vals, f"verdict.{variant}")
    missing_ns = w.get("comm_wait_missing_ranks_ns") or 0
    if capture["complete"] is False:
        n_missing = (capture["job_ranks"] or 0) - (capture["ranks_captured"] or 0)
        ids = capture["missing_ranks"]
        missing = f"{n_missing} not in the dump" + (f": ranks {ids}" if ids else "")
        # a job size read from rank ids is a lower bound (ranks above the highest id named may exist)
        job = capture["job_ranks"] if capture.get("job_ranks_exact") else f"at least {capture['job_ranks']}"
        if missing_ns / wall >= 0.05:
            headline = render(
                tmpl["partial"],
                {
                    "captured": capture["ranks_captured"],
                    "job": job,
                    "missing": missing,
                    "missing_share": missing_ns / wall,
                    "local": headline,
                },
                "verdict.partial",
            )
            confidence = "cannot tell"
        else:
            headline = f"{capture['ranks_captured']} of {job} ranks captured ({missing}); {headline}"
    kc = capture.get("kernel_coverage")
    if kc is not None and kc < 0.9:
        # a partial task list (data_simplification, a capture cut short) under-counts every device share
        headline += (
            f"; note: the device task list covers only {kc:.0%} of the device time step_trace_time "
            "reports, so the shares above rest on part of each step"
        )
    return {
        "bound": bound,
        "confidence": confidence,
        "headline": headline,
        **common,
        "shares": shares,
        "mean_step_ms": _ms(w["mean_step_ns"]),
        "ranks": len(ctx.wait_by_rank()),
        "steps": w["steps"],
    }


# ---- entry point ---------------------------------------------------------------------------------------------
def evaluate(
    store: Any,
    run_id: str | None = None,
    *,
    device: str | None = None,
    peaks: Any = None,
    baseline: str | None = None,
    rules: str | Path | None = None,
    workers: int | None = None,
) -> Report:
    """Run every check of the rules file over one run (default: the most recently ingested) and return a Report.

    device: a preset name (traceql.devices) instead of the one detected in the dump; peaks: a devices.Device or
    a mapping of peak params ({"peak_hbm_bps": 1.6e12}); baseline: a run (e.g. 1 card) whose mean step time
    gives the scaling efficiency. rules: another rules file (tests, site policies). workers: threads running the
    metric queries (default: up to 4)."""
    from . import engine, queries

    rules_data = load_rules(rules)
    rid = _resolve_run(store, run_id)
    con = engine.connect(store, runs=[rid, baseline], analysis=True)
    try:
        base_ns = queries.baseline_step_ns(store, baseline, con=con) if baseline else None
        ctx = _Ctx(con, store, rid, device, peaks, baseline, base_ns, rules_data)
        ctx.prefetch(workers if workers is not None else min(4, os.cpu_count() or 1))
        findings: list[Finding] = []
        order = sorted(rules_data["rules"].items(), key=lambda kv: int(kv[1]["step"]))
        for rid_, rdata in order:
            rule = Rule(rid_, rdata, rules_data)
            try:
                findings.append(CHECKS[rid_](ctx, rule))
            except QueryError as e:  # one check's query failing must not hide the others
                findings.append(
                    Finding(
                        rid_,
                        str(rdata["title"]),
                        "info",
                        str(rdata["optimisation"]),
                        int(rdata["step"]),
                        False,
                        f"check could not run: {e}",
                        {"error": str(e)},
                        [],
                        {},
                        "",
                        str(rdata.get("suggestion", "")),
                    )
                )
        verdict = _verdict(ctx, findings)
        meta = ctx.meta
        dev = {
            "preset": device,
            "peaks": json.loads(meta.get(b"traceql.peaks", b"{}") or b"{}"),
            "note": meta.get(b"traceql.peaks_note", b"").decode(),
        }
        rep = Report(rid, verdict, findings, dev, int(rules_data.get("version", 1)))
        rep.late_queries = list(ctx.late)
        return rep
    finally:
        con.close()


def _resolve_run(store: Any, run_id: str | None) -> str:
    """The given run (must exist), else the most recently ingested one."""
    from .errors import StoreError
    from .store import Store

    st = store if isinstance(store, Store) else Store(store)
    if run_id:
        st.run(run_id)
        return run_id
    latest = st.latest_run()
    if latest is None:
        raise StoreError(f"no runs in store {st.root} (run `traceql ingest PATH` first, or pass --store)")
    return latest


# ---- markdown ------------------------------------------------------------------------------------------------
def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, dict)):
        return json.dumps(_clean(v), ensure_ascii=False)
    return "" if v is None else str(v)


def _markdown(rep: Report, include_silent: bool) -> str:
    v = rep.verdict
    out = [f"# traceql findings: run `{rep.run_id}`", "", f"**{v.get('headline', '')}**", ""]
    if rep.device.get("note"):
        out += [f"Peaks: {rep.device['note']}.", ""]
    out += ["| step | check | severity | fired | finding |", "|---|---|---|---|---|"]
    for f in rep.findings:
        if f.fired or include_silent:
            msg = f.message.replace("|", "\\|").replace("\n", " ")
            out.append(
                f"| {f.checklist_step} | {f.id} | {f.severity} | {'yes' if f.fired else 'no'} | {msg} |"
            )
    for f in rep.findings:
        if not (f.fired or include_silent):
            continue
        out += [
            "",
            f"## {f.checklist_step}. {f.title} ({f.severity}{'' if f.fired else ', did not fire'})",
            "",
            f.message,
            "",
            f"- optimisation: {f.optimisation}",
        ]
        if f.saving.get("value") is not None:
            out.append(
                f"- estimated saving: {f.saving['value']:.3g} {f.saving['unit']} ({f.saving.get('method', '')})"
            )
        if f.suggestion and f.fired:
            out.append(f"- suggestion: {f.suggestion}")
        out.append(f"- query: `{f.query}`")
        if f.top_ops:
            cols = list(f.top_ops[0].keys())
            out += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            for row in f.top_ops[:10]:
                out.append("| " + " | ".join(_fmt(row.get(c)).replace("|", "\\|") for c in cols) + " |")
    return "\n".join(out) + "\n"
