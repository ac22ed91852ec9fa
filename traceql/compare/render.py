"""A Comparison as text (the terminal) or markdown (PRs, CI logs). JSON is Comparison.to_dict().

Both read only the JSON dict, so every format says the same thing.
"""

from __future__ import annotations

from typing import Any

from .model import Comparison


def _num(x: float | None, scale: float = 1.0, signed: bool = False) -> str:
    """x / scale with 4 significant digits ('+' kept for deltas), '-' when unknown."""
    return "-" if x is None else f"{x / scale:{'+' if signed else ''}.4g}"


def ms_text(ns: float | None) -> str:
    return _num(ns, 1e6)


def dms_text(ns: float | None) -> str:
    return _num(ns, 1e6, signed=True)


def gb_text(b: float | None) -> str:
    return _num(b, 1e9)


def dgb_text(b: float | None) -> str:
    return _num(b, 1e9, signed=True)


_gbps = gb_text  # bytes/s -> GB/s: the same scaling
_n = _num


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return out


def headline(d: dict[str, Any]) -> str:
    b, c = d["base"]["run_id"], d["cand"]["run_id"]
    comp = d["comparability"]
    if not comp["comparable"]:
        return f"{c} vs {b}: not comparable because " + "; ".join(comp["refusals"])
    v = d["verdict"]
    return f"{c} vs {b}: {v['verdict'].upper()}: {v['why']}"


def to_markdown(c: Comparison | dict[str, Any]) -> str:
    d = c.to_dict() if isinstance(c, Comparison) else c
    b, cd = d["base"], d["cand"]
    L: list[str] = [
        f"# traceql compare: {cd['run_id']} (cand) vs {b['run_id']} (base)",
        "",
        f"**{headline(d)}**",
        "",
    ]
    if d.get("gate"):
        g = d["gate"]
        L += [f"Gate {100 * g['threshold']:g}%: {'TRIPPED' if g['tripped'] else 'ok'} ({g['why']})", ""]
    comp = d["comparability"]
    L += ["## Comparability", ""]
    L += _table(
        ["", "base", "cand"],
        [
            ["run", b["run_id"], cd["run_id"]],
            ["format", b["format"], cd["format"]],
            ["device", str(b["device"] or "unknown"), str(cd["device"] or "unknown")],
            ["ranks", str(b["ranks"]), str(cd["ranks"])],
            ["profiler level", str(b["profiler_level"] or "-"), str(cd["profiler_level"] or "-")],
            ["PMU group", str(b["aic_metrics"] or "-"), str(cd["aic_metrics"] or "-")],
            [
                "steps per rank",
                "..".join(map(str, b["steps_per_rank"])),
                "..".join(map(str, cd["steps_per_rank"])),
            ],
            ["kernels", str(b["kernels"]), str(cd["kernels"])],
        ],
    )
    L.append("")
    for x in comp["differences"]:
        L.append(f"- {'**refused** ' if x['refused'] else ''}{x['aspect']}: {x['effect']}")
    if comp["hidden_by_difference"]:
        L += ["", "What the difference hides:", ""] + [f"- {h}" for h in comp["hidden_by_difference"]]
    st = d["step"]
    L += ["", f"## Step time and where it went ({st['unit']}, ms)", ""]
    rows = [
        [
            "step window",
            ms_text(st["wall_ns"]["base"]),
            ms_text(st["wall_ns"]["cand"]),
            dms_text(st["wall_ns"]["delta"]),
        ]
    ]
    rows += [
        [p["label"], ms_text(p["base"]), ms_text(p["cand"]), dms_text(p["delta"])]
        for p in st["parts"].values()
    ]
    L += _table(["", "base", "cand", "delta"], rows)
    if len(d["ranks"]) > 1:
        L += ["", "Per rank (mean step window, ms):", ""]
        L += _table(
            ["rank", "base", "cand", "delta"],
            [
                [
                    str(r["rank"]),
                    ms_text(r["wall_ns"]["base"]),
                    ms_text(r["wall_ns"]["cand"]),
                    dms_text(r["wall_ns"]["delta"]),
                ]
                for r in d["ranks"]
            ],
        )
    tr = d["traffic"]
    L += ["", f"## Memory traffic ({tr['unit']}; grade: measured = PMU, sampled, modeled)", ""]
    rows = []
    for name, t in tr["totals"].items():
        rows.append(
            [
                name,
                _n(t["base"]["kernels_per_step"]),
                _n(t["cand"]["kernels_per_step"]),
                gb_text(t["base"]["hbm_bytes_per_step"]),
                gb_text(t["cand"]["hbm_bytes_per_step"]),
                dgb_text(t["delta_hbm_bytes_per_step"]),
                f"{t['base']['grade']} / {t['cand']['grade']}",
            ]
        )
    L += _table(
        ["kernels", "kernels/step base", "cand", "GB/step base", "cand", "delta GB", "grade base / cand"],
        rows,
    )
    L += [""]
    rows = [
        [
            r["op_type"],
            gb_text((r["base"] or {}).get("hbm_bytes_per_step")),
            gb_text((r["cand"] or {}).get("hbm_bytes_per_step")),
            dgb_text(r["delta"]["hbm_bytes_per_step"]),
            _gbps((r["base"] or {}).get("achieved_bps")),
            _gbps((r["cand"] or {}).get("achieved_bps")),
            f"{(r['base'] or {}).get('grade', 'absent')} / {(r['cand'] or {}).get('grade', 'absent')}"
            + ("" if r["delta_grade"] == "measured" else f" (delta: {r['delta_grade']})"),
        ]
        for r in tr["by_op_type"][:15]
    ]
    L += _table(["operator type", "GB/step base", "cand", "delta", "GB/s base", "cand", "grade"], rows)
    if tr["fused_groups"]:
        L += ["", "Fused groups (producer -> consumer chains round-tripping HBM):", ""]
        L += _table(
            ["chain", "GB/step base", "cand", "delta", "grade"],
            [
                [
                    g["pattern"],
                    gb_text((g["base"] or {}).get("chain_hbm_bytes_per_step")),
                    gb_text((g["cand"] or {}).get("chain_hbm_bytes_per_step")),
                    dgb_text(g["delta_chain_hbm_bytes_per_step"]),
                    str(g["delta_grade"]),
                ]
                for g in tr["fused_groups"][:10]
            ],
        )
    op = d["operators"]
    cnt = op["counts"]
    L += [
        "",
        f"## Operators (matched by {op['matched_by']})",
        "",
        f"{cnt['added']} added, {cnt['removed']} removed, {cnt['changed']} changed, {cnt['unchanged']} unchanged",
        "",
    ]
    for kind in ("added", "removed", "changed"):
        if op[kind]:
            L += [f"{kind.capitalize()}:", ""]
            L += _table(
                [
                    "operator",
                    "shapes",
                    "calls/step base",
                    "cand",
                    "ms/step base",
                    "cand",
                    "delta ms",
                    "delta GB",
                ],
                [
                    [
                        r["op_type"],
                        (r["shapes"] or "")[:40],
                        _n((r["base"] or {}).get("calls_per_step")),
                        _n((r["cand"] or {}).get("calls_per_step")),
                        ms_text((r["base"] or {}).get("dur_ns_per_step")),
                        ms_text((r["cand"] or {}).get("dur_ns_per_step")),
                        dms_text(r["delta"]["dur_ns_per_step"]),
                        dgb_text(r["delta"]["hbm_bytes_per_step"]),
                    ]
                    for r in op[kind][:10]
                ],
            )
            L.append("")
    fw = d.get("framework")
    if fw and "skipped" not in fw:
        L += [f"## Framework operators (host side, {fw['grade']})", "", fw["what"], ""]
        L += _table(
            ["", "base", "cand", "ratio"],
            [
                [k, _n(fw[k]["base"]), _n(fw[k]["cand"]), _n(fw[k]["ratio"])]
                for k in (
                    "ops_per_step",
                    "modeled_bytes_per_step",
                    "modeled_flops_per_step",
                    "device_kernels_per_step",
                )
            ],
        )
        L.append("")
    f = d.get("findings")
    if f:
        L += ["## Findings", "", f"- base: {f['verdict']['base']}", f"- cand: {f['verdict']['cand']}", ""]
        if f.get("caveat"):
            L += [f"Caveat: {f['caveat']}", ""]
        for kind in ("resolved", "new", "persisting"):
            for x in f[kind]:
                then = (x.get("then") or {}).get("saving") or {}
                now = (x.get("now") or {}).get("saving") or {}
                sv = (
                    f" (saving {_n(then.get('value'))} -> {_n(now.get('value'))} {then.get('unit') or now.get('unit') or ''})"
                    if then.get("value") is not None or now.get("value") is not None
                    else ""
                )
                L.append(
                    f"- **{kind}** {x['id']}{sv}: {((x.get('now') if kind != 'resolved' else x.get('then')) or {}).get('message', '')}"
                )
        if not any(f[k] for k in ("resolved", "new", "persisting")):
            L.append("No check fired on either run.")
        L.append("")
    text = "\n".join(L) + "\n"
    if d.get("windows_only"):  # no step marker on either side: every number is over the profiled window
        from ..findings.windows import reword

        text = reword(text).replace("\n\n", f"\n\nNote: {WINDOWS_NOTE}\n\n", 1)
    return text


WINDOWS_NOTE = (
    "neither run has a step marker (no ProfilerStep, no engine step annotation): each side is one profiled "
    "window per rank, so the times and bytes below are totals over that window"
)


def to_text(c: Comparison | dict[str, Any]) -> str:
    """The terminal view: the markdown without the table rules, which reads fine as plain text."""
    lines = [ln for ln in to_markdown(c).splitlines() if not ln.startswith("|---")]
    return "\n".join(ln.replace("**", "") for ln in lines) + "\n"
