"""Whether two runs can be compared, and if so whether the candidate's step time got better, worse or neither.

Comparability: a verdict needs the same job recorded the same way. Refused (no verdict, exit 1) when the
profilers differ (a Kineto trace vs an Ascend dump; allowed with --mode cross), the devices differ (both named;
allowed with --mode cross), the rank counts differ, a side has no step to time, or the two runs share too
little of their device time in common operator types to be the same work. Everything else that differs
(export type, profiler level, PMU group, step count, the bytes' evidence grade) is listed as a difference, and
what a profiler-level difference hides is spelled out from the tables each side has.

Verdict (step time = the step window, mean over ranks, one sample per step): Welch's t interval of the
difference of the means at 95% (t from the table below; df by Welch-Satterthwaite). Significant and at least
the minimum effect (default 1% of the base) -> improvement / regression; inside the interval and the interval
inside +-minimum effect -> neutral; the spread covers the delta otherwise -> inconclusive; a side with one
step has no spread, so unless the steps are identical the answer is inconclusive. A confident wrong answer is
worse than "inconclusive".
"""

from __future__ import annotations

import math
from typing import Any

from .model import OpGroup, RunInfo, RunNumbers, stats

# two-sided 95% Student t quantiles by degrees of freedom (df > 30: 1.96 is within 4% of the true value)
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    25: 2.060,
    30: 2.042,
}
MIN_SHARED_TIME = 0.5  # refuse when neither run has this share of its device time in operator types both have

ASCEND_FORMATS = ("torch_npu", "msprof", "cluster", "ascend")


def t95(df: float) -> float:
    if df >= 30:
        return 1.96 if df > 60 else _T95[30]
    k = max(1, int(math.floor(df)))  # floor: the conservative side
    while k not in _T95:
        k -= 1
    return _T95[k]


def family(fmt: str) -> str:
    f = fmt.lower()
    if "kineto" in f:
        return "kineto"
    if any(a in f for a in ASCEND_FORMATS):
        return "ascend"
    return f or "unknown"


def _norm_device(d: str | None) -> str | None:
    return "".join(ch for ch in d.lower() if ch.isalnum()) if d else None


# what a table recorded on one side only means for the comparison
TABLE_MEANING = {
    "comm_ops": "the collectives' time split (transit vs waiting): without it exposed communication cannot be told apart into moving data and waiting",
    "comm_matrix": "per-link traffic between ranks",
    "comm_bandwidth": "per-transport bandwidth of the collectives",
    "op_stats": "the profiler's own per-operator statistics",
    "counters": "sampled HBM/LLC bandwidth counters: without them nothing can be called HBM-saturated and bytes fall back to modeled",
    "l2_cache": "per-task L2 hit rates",
    "memory": "allocator memory samples",
    "host_ops": "host-side (framework/CANN) events",
    "flows": "host -> device launch links",
    "steps": "the profiler's step boundaries and step_trace split",
    "kernels": "device kernels",
}


def shared_time(base: list[OpGroup], cand: list[OpGroup]) -> tuple[float | None, float | None, int]:
    """Share of each side's device time in operator types both sides have, and how many types they share."""
    tb: dict[str, int] = {}
    tc: dict[str, int] = {}
    for o in base:
        tb[o.op_type] = tb.get(o.op_type, 0) + o.dur_ns
    for o in cand:
        tc[o.op_type] = tc.get(o.op_type, 0) + o.dur_ns
    both = set(tb) & set(tc)
    sb, sc = sum(tb.values()), sum(tc.values())
    fb = sum(tb[k] for k in both) / sb if sb else None
    fc = sum(tc[k] for k in both) / sc if sc else None
    return fb, fc, len(both)


class _Differences:
    """What differs between the sides, in the order found, and the refusals among them."""

    def __init__(self) -> None:
        self.refusals: list[str] = []
        self.diffs: list[dict[str, Any]] = []

    def add(self, aspect: str, bv: Any, cv: Any, effect: str, refuse: bool = False) -> None:
        self.diffs.append({"aspect": aspect, "base": bv, "cand": cv, "effect": effect, "refused": refuse})
        if refuse:
            self.refusals.append(f"{aspect}: {effect}")


def comparability(
    b: RunNumbers, c: RunNumbers, mode: str
) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """(refusals, differences, hidden): why no verdict, everything that differs, what the difference hides."""
    d = _Differences()
    cross = mode == "cross"
    _profilers_and_devices(d, b.info, c.info, cross)
    _layouts(d, b, c)
    _recordings(d, b, c)
    _shared_work(d, b, c, cross)
    return d.refusals, d.diffs, hidden_by_difference(b, c)


def _profilers_and_devices(d: _Differences, bi: RunInfo, ci: RunInfo, cross: bool) -> None:
    """Different profilers or devices: refused unless --mode cross."""
    fb, fc = family(bi.format), family(ci.format)
    if fb != fc:
        d.add(
            "dump kind",
            bi.format,
            ci.format,
            f"base is a {bi.format} recording and cand a {ci.format} one: different profilers"
            + ("" if cross else " (a GPU baseline against an NPU port: use --mode cross)"),
            refuse=not cross,
        )
    elif bi.format != ci.format:
        d.add(
            "dump kind",
            bi.format,
            ci.format,
            "same profiler family, different export: the same events, read from other files",
        )
    db_, dc = _norm_device(bi.device), _norm_device(ci.device)
    if bi.device_preset and ci.device_preset:
        # both resolve to a preset: the presets decide (a dump's 'Ascend910B3' and an inferred 910B are one card)
        db_, dc = bi.device_preset, ci.device_preset
    if db_ and dc and db_ != dc:
        d.add(
            "device",
            bi.device,
            ci.device,
            f"different devices ({bi.device} vs {ci.device})"
            + ("" if cross else ": use --mode cross to compare across devices"),
            refuse=not cross,
        )
    elif (db_ is None) != (dc is None):
        d.add("device", bi.device, ci.device, "one side names no device: peaks may differ between the sides")


def _layouts(d: _Differences, b: RunNumbers, c: RunNumbers) -> None:
    """A different rank count is another job; a side without steps has nothing to time."""
    bi, ci = b.info, c.info
    if bi.ranks != ci.ranks:
        d.add(
            "rank count",
            bi.ranks,
            ci.ranks,
            f"base has {bi.ranks} rank(s) and cand {ci.ranks}: a different parallel layout is not the same job "
            "(for scaling, use `traceql findings --baseline`)",
            refuse=True,
        )
    for side, r in (("base", b), ("cand", c)):
        if not r.steps:
            d.refusals.append(f"steps: {side} run {r.info.run_id!r} has no step or kernel to time")
        elif no_step := stepless_ranks(r):
            d.refusals.append(f"steps: {side} run {r.info.run_id!r} {_stepless_why(no_step, r)}")


def _recordings(d: _Differences, b: RunNumbers, c: RunNumbers) -> None:
    """Recorded differently (level, PMU group, export, peaks, step count): listed, never refused."""
    bi, ci = b.info, c.info
    for aspect, bv, cv in (
        ("profiler level", bi.profiler_level, ci.profiler_level),
        ("PMU metric group", bi.aic_metrics, ci.aic_metrics),
        ("export type", bi.export_type, ci.export_type),
    ):
        if bv != cv:
            d.add(aspect, bv, cv, "recorded differently: see what the difference hides")
    if b.peaks_note != c.peaks_note:
        d.add(
            "HBM peak",
            b.peaks_note,
            c.peaks_note,
            "the sides' HBM peaks were chosen differently, so what counts as "
            "HBM-saturated compute may differ: pass --device to use one preset for both",
        )
    if (bi.steps_min, bi.steps_max) != (ci.steps_min, ci.steps_max):
        d.add(
            "step count",
            [bi.steps_min, bi.steps_max],
            [ci.steps_min, ci.steps_max],
            "different numbers of profiled steps per rank: compared per step",
        )


def _shared_work(d: _Differences, b: RunNumbers, c: RunNumbers, cross: bool) -> None:
    """The same work: enough device time in operator types both runs have (same mode), and kernels on both
    sides or neither."""
    bi, ci = b.info, c.info
    if bi.kernels and ci.kernels and not cross:
        sb, sc, n = shared_time(b.ops, c.ops)
        if sb is not None and sc is not None:
            refuse = max(sb, sc) < MIN_SHARED_TIME
            if refuse or min(sb, sc) < 0.999:
                d.add(
                    "shared operators",
                    round(sb, 4),
                    round(sc, 4),
                    f"{100 * sb:.0f}% of base's and {100 * sc:.0f}% of cand's device time is in the {n} operator "
                    "type(s) both runs have" + (": not the same work" if refuse else ""),
                    refuse=refuse,
                )
    elif (bi.kernels == 0) != (ci.kernels == 0):
        d.add(
            "device kernels",
            bi.kernels,
            ci.kernels,
            "one side recorded no device kernels: a host-only trace against a device one",
            refuse=not cross,
        )


def hidden_by_difference(b: RunNumbers, c: RunNumbers) -> list[str]:
    """What one side records and the other does not, from the tables and byte sources each has."""
    out: list[str] = []
    for side, x, other in (("base", b, c), ("cand", c, b)):
        lacks = [t for t, n in other.info.rows.items() if n and not x.info.rows.get(t)]
        for t in sorted(lacks):
            level = f" ({x.info.profiler_level})" if x.info.profiler_level else ""
            out.append(f"{side}{level} has no {t}: {TABLE_MEANING.get(t, 'a table the other side has')}")
    bh, ch = b.info.rows.get("host_ops", 0), c.info.rows.get("host_ops", 0)
    if bh and ch and abs(bh - ch) > 0.05 * max(bh, ch):
        more, fewer = ("cand", "base") if ch > bh else ("base", "cand")
        out.append(
            f"{more} records {abs(ch - bh)} more host events than {fewer} ({max(bh, ch)} vs {min(bh, ch)}): "
            f"host-side layers {fewer} does not trace, so host-op counts are not comparable"
        )
    lb, lc = b.info.profiler_level, c.info.profiler_level
    if lb != lc and (lb or lc):
        out.append(
            f"profiler levels differ ({lb or 'unknown'} vs {lc or 'unknown'}): a higher level records more and "
            "adds its own overhead, so step-time deltas include profiling overhead, not only the code change"
        )
    gb = {g for g, n in b.info.grade_calls.items() if n}
    gc = {g for g, n in c.info.grade_calls.items() if n}
    if gb != gc:
        out.append(
            f"HBM bytes are {', '.join(sorted(gb)) or 'absent'} on base and {', '.join(sorted(gc)) or 'absent'} "
            "on cand: traffic deltas carry the weaker grade and are not measurements where a side is modeled"
        )
    if b.info.aic_metrics != c.info.aic_metrics and (b.info.aic_metrics or c.info.aic_metrics):
        none_side = [
            s for s, x in (("base", b), ("cand", c)) if (x.info.aic_metrics or "").upper().endswith("NONE")
        ]
        for s in none_side:
            out.append(
                f"{s} recorded no PMU metrics (aic_metrics NONE): no per-kernel measured bytes or pipeline "
                "ratios, so its HBM traffic is sampled or modeled"
            )
    return out


def stepless_ranks(r: RunNumbers) -> list[int]:
    """The ranks whose only window is the whole dump (step_windows' step NULL: no step markers and no step ids
    on the kernels). Their one 'step' is the whole trace: timed against real steps it reads as a +91% or
    +1914% regression, and every per-step count (kernels, bytes) divides by a wrong number (issue 47)."""
    return sorted({s.rank for s in r.steps if s.step is None})


def _stepless_why(ranks: list[int], r: RunNumbers) -> str:
    every = len(ranks) == len({s.rank for s in r.steps})
    who = "has no step windows on any rank" if every else f"has no step windows on rank(s) {_ranks(ranks)}"
    return (
        f"{who}: its whole trace would count as one step, so step times and per-step counts would not "
        "compare like with like; profile with step markers (torch profiler schedule / ProfilerStep, msprof "
        "step_trace)" + ("" if every else ", or ingest only the ranks that have steps")
    )


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")


def per_step_times(r: RunNumbers) -> list[float]:
    """One sample per step: the mean over ranks of that step's window (ns); a rank without step ids is one."""
    by: dict[Any, list[int]] = {}
    for s in r.steps:
        by.setdefault(s.step if s.step is not None else ("rank", s.rank), []).append(s.wall_ns)
    return [sum(v) / len(v) for _, v in sorted(by.items(), key=lambda kv: str(kv[0]))]


def decide(base: list[float], cand: list[float], min_effect: float = 0.01) -> dict[str, Any]:
    sb, sc = stats(base), stats(cand)
    mb, mc = sb["mean"], sc["mean"]
    delta = mc - mb
    rel = delta / mb if mb else None
    band = min_effect * mb
    out: dict[str, Any] = {
        "base": sb,
        "cand": sc,
        "delta_ns": delta,
        "delta_rel": rel,
        "min_effect": min_effect,
        "confidence": 0.95,
        "interval_ns": None,
        "verdict": "inconclusive",
        "why": "",
    }
    word = "faster" if delta < 0 else "slower"
    head = (
        f"step {mb / 1e6:.4g} ms -> {mc / 1e6:.4g} ms ({'+' if delta >= 0 else ''}{delta / 1e6:.4g} ms, "
        f"{'+' if delta >= 0 else ''}{100 * (rel or 0):.2f}%)"
    )
    if sorted(base) == sorted(cand):
        out.update(
            verdict="neutral",
            interval_ns=[0.0, 0.0],
            why=f"{head}: identical step times ({sb['n']} step(s) each)",
        )
        return out
    if sb["n"] < 2 or sc["n"] < 2:
        out["why"] = (
            f"{head}: only {sb['n']} and {sc['n']} step(s), so there is no per-step spread to tell the delta "
            "from noise; profile more steps"
        )
        return out
    vb, vc = sb["sd"] ** 2 / sb["n"], sc["sd"] ** 2 / sc["n"]
    se = math.sqrt(vb + vc)
    if se == 0:
        half = 0.0
        df = float("inf")
    else:
        df = (vb + vc) ** 2 / ((vb**2 / (sb["n"] - 1) if vb else 0) + (vc**2 / (sc["n"] - 1) if vc else 0))
        half = t95(df) * se
    out["interval_ns"] = [delta - half, delta + half]
    noise = (
        f"per-step spread sd {sb['sd'] / 1e6:.3g} ms (base, {sb['n']} steps) and {sc['sd'] / 1e6:.3g} ms "
        f"(cand, {sc['n']} steps); 95% interval of the delta {(delta - half) / 1e6:+.4g} .. {(delta + half) / 1e6:+.4g} ms"
    )
    if abs(delta) > half:
        if abs(delta) < band:
            out.update(
                verdict="neutral",
                why=f"{head}: {word} beyond the noise but under the {100 * min_effect:g}% minimum effect; {noise}",
            )
        else:
            out.update(
                verdict="improvement" if delta < 0 else "regression",
                why=f"{head}: {word}, beyond the noise; {noise}",
            )
    elif abs(delta) + half <= band:
        out.update(
            verdict="neutral",
            why=f"{head}: within +-{100 * min_effect:g}% even at the ends of the interval; {noise}",
        )
    else:
        out.update(verdict="inconclusive", why=f"{head}: the per-step spread covers the delta; {noise}")
    return out


def gate(verdict: dict[str, Any] | None, threshold: float) -> dict[str, Any]:
    """--gate: tripped when the candidate is a regression (beyond the noise) by more than threshold (0..1)."""
    if verdict is None:
        return {"threshold": threshold, "tripped": False, "why": "no verdict (not comparable)"}
    rel = verdict.get("delta_rel") or 0.0
    tripped = verdict["verdict"] == "regression" and rel > threshold
    if tripped:
        why = f"step time regressed {100 * rel:.2f}% > {100 * threshold:g}%"
    elif rel > threshold:
        why = (
            f"step time {100 * rel:+.2f}% is past the {100 * threshold:g}% gate but the verdict is "
            f"{verdict['verdict']} (the noise covers it): not tripped; profile more steps"
        )
    else:
        why = f"step time {100 * rel:+.2f}% within the {100 * threshold:g}% gate"
    return {"threshold": threshold, "tripped": tripped, "why": why}
