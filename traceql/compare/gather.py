"""The per-run numbers a comparison needs, read through the metric library (queries/*.sql), nothing recomputed.

Step split: wait_attribution's step rows (the same timeline `findings` uses, so a compare never disagrees with
the report of either run). Operators and bytes: compare_ops (kernel_bytes grouped by type and signature).
Fused groups: fusion_chains. Recording kind: compare_run_info. Findings: traceql.findings.evaluate. Host-side
framework operators (Kineto captures, where a CPU run has no device kernels): traceql.capture.compare.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..errors import QueryError
from ..rows import (
    QUERY_ROWS,
    CompareFrameworkOpsRow,
    CompareKernelNamesRow,
    CompareOpsRow,
    CompareRunInfoRow,
    FusionChainsRow,
    WaitAttributionRow,
)
from .model import GRADE_OF_SOURCE, SPLIT_PARTS, OpGroup, RunInfo, RunNumbers, StepRow

Row = TypeVar("Row")

# a collective's kernel is named per instance (hcom_allReduce__868_3_1): match collectives by their kind
_COMM_INSTANCE = re.compile(r"(_+\d+)+$")
# host-side analysis (capture.compare.run_metrics) is a Python sweep over aten ops: bounded so a big cluster's
# compare stays fast; past this the framework section says it was skipped
MAX_FRAMEWORK_OPS = 200_000


if TYPE_CHECKING:  # pragma: no cover
    from ..analysis import Analysis


def op_key(op_type: str, is_comm: bool) -> str:
    return _COMM_INSTANCE.sub("", op_type).rstrip("_") if is_comm else op_type


def kernel_types(session: Analysis) -> dict[str, str]:
    """name -> op_type as the dump types it (the most frequent type of a name)."""

    out: dict[str, str] = {}
    for r in _read(session, "compare_kernel_names", CompareKernelNamesRow)[0]:
        out.setdefault(str(r["name"]), str(r["op_type"]))
    return out


def _read(
    session: Analysis, query: str, row: type[Row], params: dict[str, Any] | None = None
) -> tuple[list[Row], Any]:
    """A query's rows typed as its TypedDict (traceql.rows, from the SQL header), so mypy checks the columns
    read here (the row type must be the query's), and its Arrow table (for its metadata)."""
    if QUERY_ROWS.get(query) is not row:
        raise TypeError(f"{query}: rows are {QUERY_ROWS.get(query)}, not {row}")
    t = session.query(query, params)
    return cast("list[Row]", list(t.to_pylist())), t


def run_info(session: Analysis) -> RunInfo:

    rows, t = _read(session, "compare_run_info", CompareRunInfoRow)
    r = rows[0]
    # the device findings use for this run (--device, the dump's name, or the 910B inference), one resolution
    resolved = (t.schema.metadata or {}).get(b"traceql.device", b"").decode() or None
    return RunInfo(
        run_id=session.run_id,
        format=str(r["format"] or ""),
        device=resolved if session.device else (r["device"] or resolved),
        device_preset=resolved,
        ranks=int(r["ranks"] or 0),
        profiler_level=r["profiler_level"],
        aic_metrics=r["aic_metrics"],
        export_type=r["export_type"],
        # counts: never null (count(*) / min / max over at least the run's one row); `or 0` only narrows
        kernels=int(r["kernels"] or 0),
        steps_min=int(r["steps_per_rank_min"] or 0),
        steps_max=int(r["steps_per_rank_max"] or 0),
        rows=json.loads(r["rows"] or "{}"),
    )


def step_rows(session: Analysis) -> tuple[list[StepRow], str]:

    rows, t = _read(session, "wait_attribution", WaitAttributionRow)
    note = (t.schema.metadata or {}).get(b"traceql.peaks_note", b"").decode()
    out = []
    for r in rows:
        wall, rank = r["wall_ns"], r["rank"]
        if r["scope"] != "step" or not wall or rank is None:  # a step row names its rank
            continue
        parts: dict[str, int] = {k: int(r[k] or 0) for k, _ in SPLIT_PARTS if k in r}
        out.append(StepRow(rank=int(rank), step=r["step"], wall_ns=int(wall), parts=parts))
    return out, note


def op_groups(session: Analysis) -> list[OpGroup]:

    out = []
    for r in _read(session, "compare_ops", CompareOpsRow)[0]:
        is_comm = bool(r["is_comm"])
        key = op_key(str(r["op_type"]), is_comm)
        out.append(
            OpGroup(
                key=f"{key}|{r['input_shapes']}|{r['input_dtypes']}",
                op_type=key,
                # '' where the dump records none (the query's header): never null
                shapes=r["input_shapes"] or "",
                dtypes=r["input_dtypes"] or "",
                is_comm=is_comm,
                calls=int(r["calls"] or 0),
                dur_ns=int(r["dur_ns"] or 0),
                hbm_bytes=int(r["hbm_bytes"] or 0),
                bytes_dur_ns=int(r["bytes_dur_ns"] or 0),
                calls_with_bytes=int(r["calls_with_bytes"] or 0),
                grade_calls=_grade_calls(r),
                example=str(r["example_name"] or ""),
            )
        )
    return out


def _grade_calls(r: CompareOpsRow | CompareFrameworkOpsRow) -> dict[str, int]:
    """Calls per byte grade (measured / sampled / modeled), from the query's per-source counts."""
    return {
        GRADE_OF_SOURCE["pmu"]: int(r["pmu_calls"] or 0),
        GRADE_OF_SOURCE["sampled"]: int(r["sampled_calls"] or 0),
        GRADE_OF_SOURCE["modeled"]: int(r["modeled_calls"] or 0),
    }


def chain_rows(session: Analysis) -> list[FusionChainsRow]:

    try:
        rows, _t = _read(session, "fusion_chains", FusionChainsRow, {"top_n": 50})
    except QueryError:
        return []  # a run the chain query cannot read still compares on everything else
    return [r for r in rows if r["scope"] == "pattern"]


def framework_metrics(session: Analysis, fmt: str) -> dict[str, Any] | None:
    """Host-side operator numbers (outermost aten ops: count, modeled bytes and FLOPs per profiled step) of a
    Kineto run (torch.profiler captures: a CPU capture has no device kernels, so these are its operators);
    None for other formats (their kernels carry the numbers), a run without aten ops, or too many to sweep."""
    if "kineto" not in fmt.lower():
        return None
    run_id = session.run_id
    con = session.con.cursor()
    row = con.execute(
        "SELECT count(*) FROM host_ops WHERE run_id = ? AND name LIKE 'aten::%'", [run_id]
    ).fetchall()[0]
    n = int(row[0]) if row else 0
    if n == 0:
        return None
    if n > MAX_FRAMEWORK_OPS:
        return {"skipped": f"{n} aten ops: more than {MAX_FRAMEWORK_OPS} to sweep in a compare"}
    from ..capture.compare import run_metrics

    m = run_metrics(con, run_id)
    keep = (
        "steps",
        "ops_per_step",
        "op_counts",
        "modeled_bytes_per_step",
        "modeled_flops_per_step",
        "flops_per_modeled_byte",
        "max_op_modeled_bytes",
        "modeled_bytes_by_dtype",
        "copy_ops_per_step",
        "memory_rise_bytes",
    )
    out = {k: m.get(k) for k in keep}
    dev = m.get("device") or {}
    out["device_kernels_per_step"] = dev.get("kernels_per_step")
    out["device_kernel_ns_per_step"] = dev.get("kernel_ns_per_step")
    return out


def framework_op_groups(session: Analysis) -> list[OpGroup]:
    """--mode cross: kernels grouped by the framework operator that launched them (compare_framework_ops)."""

    out = []
    for r in _read(session, "compare_framework_ops", CompareFrameworkOpsRow)[0]:
        fw = str(r["framework_op"])
        out.append(
            OpGroup(
                key=fw,
                op_type=fw,
                shapes="",
                dtypes="",
                is_comm=bool(r["is_comm"]),
                calls=int(r["calls"] or 0),
                dur_ns=int(r["dur_ns"] or 0),
                hbm_bytes=int(r["hbm_bytes"] or 0),
                bytes_dur_ns=int(r["bytes_dur_ns"] or 0),
                calls_with_bytes=int(r["calls_with_bytes"] or 0),
                grade_calls=_grade_calls(r),
                example=str(r["example_kernel"] or ""),
            )
        )
    return out


def gather(
    session: Analysis,
    *,
    with_findings: bool = True,
    cross: bool = False,
    with_chains: bool = True,
) -> RunNumbers:
    """Every number the comparison reads of one run, from its analysis session (one query cache: the findings
    reuse the step split the comparison read)."""
    info = run_info(session)
    steps, note = step_rows(session)
    ops = op_groups(session)
    for o in ops:
        for g, n in o.grade_calls.items():
            info.grade_calls[g] = info.grade_calls.get(g, 0) + n
    rep = None
    if with_findings:
        from ..findings import evaluate_session

        rep = evaluate_session(session)
    return RunNumbers(
        info=info,
        steps=steps,
        ops=ops,
        chains=chain_rows(session) if with_chains else [],
        names=kernel_types(session),
        framework=framework_metrics(session, info.format),
        framework_ops=framework_op_groups(session) if cross else None,
        findings=rep,
        peaks_note=note,
    )
