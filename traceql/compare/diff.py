"""Side-by-side numbers and their deltas: the step split, per rank, memory traffic, operators, findings.

Every per-step number is per step of one rank (total / rank-steps), the unit `findings` uses for its savings,
so runs with different step counts compare. Traffic carries each side's evidence grade (measured = PMU,
sampled, modeled) and the delta the weaker one: a modeled-vs-measured difference is never a measurement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .model import SPLIT_PARTS, OpGroup, RunNumbers, weaker_grade

if TYPE_CHECKING:  # pragma: no cover
    from ..rows import FusionChainsRow

TOP = 25  # rows kept per operator list (the rest are counted)


def _per(total: float, n: int) -> float:
    return total / n if n else 0.0


def _delta(b: float | None, c: float | None) -> dict[str, Any]:
    d = None if b is None or c is None else c - b
    return {"base": b, "cand": c, "delta": d, "ratio": (c / b) if b and c is not None else None}


def step_split(b: RunNumbers, c: RunNumbers) -> dict[str, Any]:
    """Mean step window and each part of it, ns per rank-step, with the delta per step."""
    parts = [k for k, _ in SPLIT_PARTS if any(k in s.parts for s in b.steps + c.steps)]
    out: dict[str, Any] = {
        "unit": "ns per step of one rank",
        "rank_steps": {"base": b.rank_steps, "cand": c.rank_steps},
        "wall_ns": _delta(
            _per(sum(s.wall_ns for s in b.steps), b.rank_steps) if b.steps else None,
            _per(sum(s.wall_ns for s in c.steps), c.rank_steps) if c.steps else None,
        ),
        "parts": {},
    }
    labels = dict(SPLIT_PARTS)
    for k in parts:
        bv = _per(sum(s.parts.get(k, 0) for s in b.steps), b.rank_steps) if b.steps else None
        cv = _per(sum(s.parts.get(k, 0) for s in c.steps), c.rank_steps) if c.steps else None
        out["parts"][k] = {"label": labels[k], **_delta(bv, cv)}
    return out


def per_rank(b: RunNumbers, c: RunNumbers) -> list[dict[str, Any]]:
    ranks = sorted({s.rank for s in b.steps} | {s.rank for s in c.steps})
    out = []
    for r in ranks:
        bs = [s for s in b.steps if s.rank == r]
        cs = [s for s in c.steps if s.rank == r]
        row: dict[str, Any] = {
            "rank": r,
            "steps": {"base": len(bs), "cand": len(cs)},
            "wall_ns": _delta(
                _per(sum(s.wall_ns for s in bs), len(bs)) if bs else None,
                _per(sum(s.wall_ns for s in cs), len(cs)) if cs else None,
            ),
        }
        for k, _ in SPLIT_PARTS:
            if any(k in s.parts for s in bs + cs):
                row[k] = _delta(
                    _per(sum(s.parts.get(k, 0) for s in bs), len(bs)) if bs else None,
                    _per(sum(s.parts.get(k, 0) for s in cs), len(cs)) if cs else None,
                )
        out.append(row)
    return out


def _by(groups: list[OpGroup], key: str) -> dict[str, OpGroup]:
    out: dict[str, OpGroup] = {}
    for o in groups:
        k = o.op_type if key == "type" else o.key
        if k not in out:
            out[k] = OpGroup(
                key=k,
                op_type=o.op_type,
                shapes=o.shapes if key != "type" else "",
                dtypes=o.dtypes if key != "type" else "",
                is_comm=o.is_comm,
            )
        out[k].add(o)
    return out


def _side(o: OpGroup | None, n: int) -> dict[str, Any] | None:
    if o is None:
        return None
    return {
        "calls_per_step": _per(o.calls, n),
        "dur_ns_per_step": _per(o.dur_ns, n),
        "hbm_bytes_per_step": _per(o.hbm_bytes, n) if o.calls_with_bytes else None,
        "achieved_bps": o.hbm_bytes * 1e9 / o.bytes_dur_ns if o.bytes_dur_ns else None,
        "grade": o.grade,
        "example": o.example,
    }


def _tie_break(row: dict[str, Any]) -> tuple[float, str]:
    """Equal deltas (a run against itself, ops that did not move) rank by the larger side's time, then by key:
    the rows come from a set, whose order changes from one process to the next, and the JSON must not."""
    dur = max((s or {}).get("dur_ns_per_step") or 0 for s in (row["base"], row["cand"]))
    return -dur, row["key"]


def _pair(k: str, bo: OpGroup | None, co: OpGroup | None, nb: int, nc: int) -> dict[str, Any]:
    bs, cs = _side(bo, nb), _side(co, nc)
    either = bo or co
    assert either is not None  # k comes from the union of both sides' keys
    row: dict[str, Any] = {
        "key": k,
        "op_type": either.op_type,
        "is_comm": either.is_comm,
        "shapes": either.shapes,
        "dtypes": either.dtypes,
        "base": bs,
        "cand": cs,
    }

    def d(f: str) -> float | None:
        x = (bs or {}).get(f) if bs else 0.0
        y = (cs or {}).get(f) if cs else 0.0
        return None if x is None or y is None else y - x

    row["delta"] = {f: d(f) for f in ("calls_per_step", "dur_ns_per_step", "hbm_bytes_per_step")}
    row["delta_grade"] = (
        weaker_grade(bs["grade"] if bs else "none", cs["grade"] if cs else "none")
        if bs and cs
        else ((bs or cs or {}).get("grade", "none"))
    )
    return row


def traffic(b: RunNumbers, c: RunNumbers, rename: dict[str, str] | None = None) -> dict[str, Any]:
    """HBM bytes and achieved bandwidth per operator type and per fused group (fusion chain pattern)."""
    nb, nc = max(b.rank_steps, 1), max(c.rank_steps, 1)
    tb, tc = _by(_renamed(b.ops, rename), "type"), _by(c.ops, "type")
    rows = [_pair(k, tb.get(k), tc.get(k), nb, nc) for k in set(tb) | set(tc)]
    rows.sort(
        key=lambda r: (
            -abs(r["delta"]["hbm_bytes_per_step"] or 0),
            -abs(r["delta"]["dur_ns_per_step"] or 0),
            *_tie_break(r),
        )
    )

    def total(groups: list[OpGroup], n: int, comm: bool | None = None) -> dict[str, Any]:
        g = [o for o in groups if comm is None or o.is_comm == comm]
        with_b = [o for o in g if o.calls_with_bytes]
        calls = sum(o.calls for o in g)
        grades: dict[str, int] = {}
        for o in g:
            for k, v in o.grade_calls.items():
                grades[k] = grades.get(k, 0) + v
        return {
            "kernels_per_step": _per(calls, n),
            "hbm_bytes_per_step": _per(sum(o.hbm_bytes for o in with_b), n) if with_b else None,
            "achieved_bps": (sum(o.hbm_bytes for o in with_b) * 1e9 / s)
            if (s := sum(o.bytes_dur_ns for o in with_b))
            else None,
            "grades": grades,
            "grade": _grade(grades),
        }

    tot = {}
    for name, comm in (("all", None), ("compute", False), ("communication", True)):
        x, y = total(b.ops, nb, comm), total(c.ops, nc, comm)
        tot[name] = {
            "base": x,
            "cand": y,
            "delta_kernels_per_step": y["kernels_per_step"] - x["kernels_per_step"],
            "delta_hbm_bytes_per_step": None
            if x["hbm_bytes_per_step"] is None or y["hbm_bytes_per_step"] is None
            else y["hbm_bytes_per_step"] - x["hbm_bytes_per_step"],
            "delta_grade": weaker_grade(x["grade"], y["grade"]),
        }
    return {
        "unit": "per step of one rank",
        "totals": tot,
        "by_op_type": rows[:TOP],
        "op_types_omitted": max(0, len(rows) - TOP),
        "fused_groups": fused_groups(b, c),
    }


def _grade(grades: dict[str, int]) -> str:
    used = [g for g, n in grades.items() if n]
    return "none" if not used else used[0] if len(used) == 1 else "mixed"


def fused_groups(b: RunNumbers, c: RunNumbers) -> list[dict[str, Any]]:
    """Fusion-chain patterns (fusion_chains: producer -> consumer kernels round-tripping HBM) before vs after."""
    nb, nc = max(b.rank_steps, 1), max(c.rank_steps, 1)
    pb = {r["pattern"]: r for r in b.chains}
    pc = {r["pattern"]: r for r in c.chains}
    out = []
    for p in set(pb) | set(pc):
        x, y = pb.get(p), pc.get(p)

        def side(r: FusionChainsRow | None, n: int) -> dict[str, Any] | None:
            if r is None:
                return None
            return {
                "occurrences_per_step": _per(r["occurrences"] or 0, n),
                "chain_hbm_bytes_per_step": _per(r["chain_hbm_bytes"] or 0, n),
                "saved_bytes_per_step": _per(r["saved_bytes"] or 0, n),
                "dur_ns_per_step": _per(r["dur_ns"] or 0, n),
                "grade": "measured" if (src := r["hbm_bytes_source"]) == "pmu" else (src or "none"),
            }

        sx, sy = side(x, nb), side(y, nc)
        out.append(
            {
                "pattern": p,
                "base": sx,
                "cand": sy,
                "delta_chain_hbm_bytes_per_step": (sy or {}).get("chain_hbm_bytes_per_step", 0)
                - (sx or {}).get("chain_hbm_bytes_per_step", 0),
                "delta_grade": weaker_grade((sx or {}).get("grade", "none"), (sy or {}).get("grade", "none"))
                if sx and sy
                else (sx or sy or {}).get("grade"),
            }
        )
    out.sort(key=lambda r: (-abs(r["delta_chain_hbm_bytes_per_step"]), r["pattern"]))
    return out[:TOP]


def _renamed(groups: list[OpGroup], rename: dict[str, str] | None, on_names: bool = True) -> list[OpGroup]:
    """groups with the name map applied: a pattern matching the group's type (or, on_names, its kernel name:
    compare_ops keeps one group per kernel name) renames its type."""
    if not rename:
        return groups
    import copy
    import re

    out = []
    for o in groups:
        o2 = copy.copy(o)
        o2.grade_calls = dict(o.grade_calls)
        for pat, new in rename.items():
            # framework groups hold many kernels (the first may be a memset): their key only
            if re.search(pat, o.op_type) or (on_names and re.search(pat, o.example)):
                o2.op_type = new
                o2.key = o.key.replace(o.op_type, new, 1)
                break
        out.append(o2)
    return out


def operators(
    b: RunNumbers, c: RunNumbers, *, cross: bool = False, rename: dict[str, str] | None = None
) -> dict[str, Any]:
    """Added / removed / changed operators, matched by type and input signature (cross: by framework op)."""
    nb, nc = max(b.rank_steps, 1), max(c.rank_steps, 1)
    if cross:
        gb, gc = (
            _renamed(b.framework_ops or [], rename, on_names=False),
            _renamed(c.framework_ops or [], rename, on_names=False),
        )
        mb, mc, matched_by = (
            _by(gb, "type"),
            _by(gc, "type"),
            "framework operator that launched the kernels (aten op / torch_npu API)",
        )
    else:
        mb, mc, matched_by = _by(b.ops, "key"), _by(c.ops, "key"), "operator type and input shapes/dtypes"
    added, removed, changed = [], [], []
    unchanged = 0
    for k in set(mb) | set(mc):
        row = _pair(k, mb.get(k), mc.get(k), nb, nc)
        if k not in mb:
            added.append(row)
        elif k not in mc:
            removed.append(row)
        else:
            d, bs = row["delta"], row["base"]
            moved = (
                abs(d["calls_per_step"] or 0) > 1e-9
                or abs(d["dur_ns_per_step"] or 0) > 0.01 * max(bs["dur_ns_per_step"], 1)
                or abs(d["hbm_bytes_per_step"] or 0) > 0.01 * max(bs["hbm_bytes_per_step"] or 0, 1)
            )
            if moved:
                changed.append(row)
            else:
                unchanged += 1

    def top(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(rows, key=lambda r: (-abs(r["delta"]["dur_ns_per_step"] or 0), *_tie_break(r)))[:TOP]

    return {
        "matched_by": matched_by,
        "counts": {
            "added": len(added),
            "removed": len(removed),
            "changed": len(changed),
            "unchanged": unchanged,
        },
        "added": top(added),
        "removed": top(removed),
        "changed": top(changed),
    }


def findings_diff(b: RunNumbers, c: RunNumbers) -> dict[str, Any] | None:
    if b.findings is None or c.findings is None:
        return None
    fb = {f.id: f for f in b.findings.findings}
    fc = {f.id: f for f in c.findings.findings}

    def brief(f: Any) -> dict[str, Any]:
        return {"severity": f.severity, "message": f.message, "saving": f.saving}

    out: dict[str, Any] = {
        "resolved": [],
        "new": [],
        "persisting": [],
        "verdict": {
            "base": b.findings.verdict.get("headline"),
            "cand": c.findings.verdict.get("headline"),
            "base_bound": b.findings.verdict.get("bound"),
            "cand_bound": c.findings.verdict.get("bound"),
        },
        "caveat": None,
    }
    if (b.info.profiler_level, b.info.aic_metrics) != (c.info.profiler_level, c.info.aic_metrics):
        out["caveat"] = (
            "the runs were recorded at different profiler levels / PMU groups: a check can fire or go "
            "silent because one side lacks the data it reads, not because the code changed"
        )
    for fid in [*fb, *[k for k in fc if k not in fb]]:
        x, y = fb.get(fid), fc.get(fid)
        was, now = bool(x and x.fired), bool(y and y.fired)
        if was and not now and x is not None:
            out["resolved"].append(
                {"id": fid, "title": x.title, "then": brief(x), "now": brief(y) if y else None}
            )
        elif now and not was:
            out["new"].append({"id": fid, "title": y.title, "then": brief(x) if x else None, "now": brief(y)})  # type: ignore[union-attr]
        elif was and now:
            out["persisting"].append({"id": fid, "title": x.title, "then": brief(x), "now": brief(y)})  # type: ignore[union-attr]
    return out


def framework_diff(b: RunNumbers, c: RunNumbers) -> dict[str, Any] | None:
    """Host-side operators (Kineto captures): outermost aten ops and their modeled bytes/FLOPs per step."""
    if not b.framework or not c.framework:
        return None
    if "skipped" in b.framework or "skipped" in c.framework:
        return {"skipped": b.framework.get("skipped") or c.framework.get("skipped")}
    out: dict[str, Any] = {
        "grade": "modeled",
        "what": "outermost aten ops per profiled step (views and no-op conversions left out); "
        "modeled bytes = tensor input sizes from recorded shapes x dtypes (a lower bound)",
    }
    for k in (
        "ops_per_step",
        "modeled_bytes_per_step",
        "modeled_flops_per_step",
        "flops_per_modeled_byte",
        "max_op_modeled_bytes",
        "copy_ops_per_step",
        "device_kernels_per_step",
        "device_kernel_ns_per_step",
        "memory_rise_bytes",
    ):
        out[k] = _delta(b.framework.get(k), c.framework.get(k))
    ob, oc = b.framework.get("op_counts") or {}, c.framework.get("op_counts") or {}
    sb, sc = b.framework.get("steps") or 1, c.framework.get("steps") or 1
    out["op_counts_per_step"] = {
        k: _delta(ob.get(k, 0) / sb, oc.get(k, 0) / sc) for k in sorted(set(ob) | set(oc))
    }
    return out


def harmonize(b: RunNumbers, c: RunNumbers) -> None:
    """Make the two sides' operator keys comparable, in place, and note how (RunNumbers.notes):
    - a kernel a side leaves untyped (torch_npu Level0 writes no OP Type) takes the type the other side gives
      the same kernel name (same job, same kernels);
    - an operator type whose input shapes one side does not record is matched by type alone."""
    for x, y, side in ((b, c, "base"), (c, b, "cand")):
        typed = names = 0
        for o in x.ops:
            if o.op_type == o.example and o.example not in x.names and o.example in y.names:
                o.op_type = y.names[o.example]
                typed += o.calls
                names += 1
        if typed:
            x.notes.append(
                f"{side}: {typed} kernel(s) of {names} name(s) have no operator type in the dump; "
                "typed by the other run's type for the same kernel name"
            )
    no_shapes: set[str] = set()
    for x, y in ((b, c), (c, b)):
        types = {o.op_type for o in x.ops}
        for t in types:
            if all(not o.shapes for o in x.ops if o.op_type == t) and any(
                o.shapes for o in y.ops if o.op_type == t
            ):
                no_shapes.add(t)
    for x in (b, c):
        for o in x.ops:
            if o.op_type in no_shapes:
                o.shapes = o.dtypes = ""
            o.key = f"{o.op_type}|{o.shapes}|{o.dtypes}"
    if no_shapes:
        b.notes.append(
            f"{len(no_shapes)} operator type(s) matched by type alone: one side records no input shapes for them"
        )
