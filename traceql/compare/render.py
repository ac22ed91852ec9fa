"""A Comparison as a plain-text table view (the terminal, `--format table`) or markdown (PRs, CI logs). JSON is
Comparison.to_dict().

Both read only the JSON dict and are built from the same named sections (comparability, step, traffic,
operators, framework, findings), each given the table renderer of its format, so every format says the same
thing. Numbers are for people: fixed decimals, no scientific notation (the JSON keeps the exact values).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import Any

from ..numbers import human_number
from .model import Comparison


def _num(x: float | None, scale: float = 1.0, signed: bool = False) -> str:
    """x / scale for people ('+' kept for deltas, '-' when unknown): thousands separated, decimals by size
    (3 significant digits or more), never scientific notation; below 0.001 it says so instead of 1.8e-06."""
    return "-" if x is None else human_number(x / scale, signed)


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


#: prose lines of the text view wrap at this width (tables keep their rows whole)
TEXT_WIDTH = 120

Table = Callable[[list[str], list[list[str]]], list[str]]


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table."""
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return out


def _numeric(cell: str) -> bool:
    return bool(_NUMBER.match(cell.strip()))


_NUMBER = re.compile(r"^[+-]?(<)?[\d,]*\.?\d+(\.\.\d+)?$|^-$")


def text_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """A plain-text table: columns padded to their widest cell, numbers right-aligned, a rule under the header
    (reads in a terminal, in a pipe and in a CI log alike)."""
    cols = len(head)
    cells = [head, *[[*r, *[""] * (cols - len(r))][:cols] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(cols)]
    right = [all(_numeric(r[i]) for r in rows if r[i]) and any(r[i] for r in rows) for i in range(cols)]

    def line(r: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if ra else c.ljust(w) for c, w, ra in zip(r, widths, right, strict=True)
        ).rstrip()

    return [line(head), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def headline(d: dict[str, Any]) -> str:
    b, c = d["base"]["run_id"], d["cand"]["run_id"]
    comp = d["comparability"]
    if not comp["comparable"]:
        return f"{c} vs {b}: not comparable because " + "; ".join(comp["refusals"])
    v = d["verdict"]
    return f"{c} vs {b}: {v['verdict'].upper()}: {v['why']}"


def _title(d: dict[str, Any]) -> list[str]:
    b, cd = d["base"], d["cand"]
    lines = [
        f"# traceql compare: {cd['run_id']} (cand) vs {b['run_id']} (base)",
        "",
        f"**{headline(d)}**",
        "",
    ]
    if d.get("gate"):
        g = d["gate"]
        lines += [f"Gate {100 * g['threshold']:g}%: {'TRIPPED' if g['tripped'] else 'ok'} ({g['why']})", ""]
    return lines


def _comparability(d: dict[str, Any], table: Table) -> list[str]:
    """What the two runs are and whether they can be compared (the refusals, what a difference hides)."""
    b, cd = d["base"], d["cand"]
    comp = d["comparability"]
    L = ["## Comparability", ""]
    L += table(
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
    return L


def _step(d: dict[str, Any], table: Table) -> list[str]:
    """The step window and its parts, base vs cand, and per rank when there are several."""
    st = d["step"]
    L = ["", f"## Step time and where it went ({st['unit']}, ms)", ""]
    w = st["wall_ns"]
    rows = [["step window", ms_text(w["base"]), ms_text(w["cand"]), dms_text(w["delta"])]]
    rows += [
        [p["label"], ms_text(p["base"]), ms_text(p["cand"]), dms_text(p["delta"])]
        for p in st["parts"].values()
    ]
    L += table(["", "base", "cand", "delta"], rows)
    if len(d["ranks"]) > 1:
        L += ["", "Per rank (mean step window, ms):", ""]
        L += table(
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
    return L


def _traffic_totals(tr: dict[str, Any], table: Table) -> list[str]:
    rows = [
        [
            name,
            _n(t["base"]["kernels_per_step"]),
            _n(t["cand"]["kernels_per_step"]),
            gb_text(t["base"]["hbm_bytes_per_step"]),
            gb_text(t["cand"]["hbm_bytes_per_step"]),
            dgb_text(t["delta_hbm_bytes_per_step"]),
            f"{t['base']['grade']} / {t['cand']['grade']}",
        ]
        for name, t in tr["totals"].items()
    ]
    return table(
        ["kernels", "kernels/step base", "cand", "GB/step base", "cand", "delta GB", "grade base / cand"],
        rows,
    )


def _traffic_by_op(tr: dict[str, Any], table: Table) -> list[str]:
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
    return table(["operator type", "GB/step base", "cand", "delta", "GB/s base", "cand", "grade"], rows)


def _traffic(d: dict[str, Any], table: Table) -> list[str]:
    """HBM traffic: totals, by operator type, and the fused groups."""
    tr = d["traffic"]
    L = ["", f"## Memory traffic ({tr['unit']}; grade: measured = PMU, sampled, modeled)", ""]
    L += _traffic_totals(tr, table) + [""] + _traffic_by_op(tr, table)
    if tr["fused_groups"]:
        L += ["", "Fused groups (producer -> consumer chains round-tripping HBM):", ""]
        L += table(
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
    return L


_OP_HEAD = ["operator", "shapes", "calls/step base", "cand", "ms/step base", "cand", "delta ms", "delta GB"]


def _op_row(r: dict[str, Any]) -> list[str]:
    base, cand = r["base"] or {}, r["cand"] or {}
    return [
        r["op_type"],
        (r["shapes"] or "")[:40],
        _n(base.get("calls_per_step")),
        _n(cand.get("calls_per_step")),
        ms_text(base.get("dur_ns_per_step")),
        ms_text(cand.get("dur_ns_per_step")),
        dms_text(r["delta"]["dur_ns_per_step"]),
        dgb_text(r["delta"]["hbm_bytes_per_step"]),
    ]


def _operators(d: dict[str, Any], table: Table) -> list[str]:
    """Operators added, removed and changed (the ten largest of each)."""
    op = d["operators"]
    cnt = op["counts"]
    L = [
        "",
        f"## Operators (matched by {op['matched_by']})",
        "",
        f"{cnt['added']} added, {cnt['removed']} removed, {cnt['changed']} changed, {cnt['unchanged']} unchanged",
        "",
    ]
    for kind in ("added", "removed", "changed"):
        if op[kind]:
            L += [f"{kind.capitalize()}:", ""] + table(_OP_HEAD, [_op_row(r) for r in op[kind][:10]]) + [""]
    return L


def _framework(d: dict[str, Any], table: Table) -> list[str]:
    """The host-side framework operators (modeled), when both runs have them."""
    fw = d.get("framework")
    if not fw or "skipped" in fw:
        return []
    keys = ("ops_per_step", "modeled_bytes_per_step", "modeled_flops_per_step", "device_kernels_per_step")
    L = [f"## Framework operators (host side, {fw['grade']})", "", fw["what"], ""]
    L += table(
        ["", "base", "cand", "ratio"],
        [[k, _n(fw[k]["base"]), _n(fw[k]["cand"]), _n(fw[k]["ratio"])] for k in keys],
    )
    return L + [""]


def _finding_line(kind: str, x: dict[str, Any]) -> str:
    then = (x.get("then") or {}).get("saving") or {}
    now = (x.get("now") or {}).get("saving") or {}
    sv = ""
    if then.get("value") is not None or now.get("value") is not None:
        unit = then.get("unit") or now.get("unit") or ""
        sv = f" (saving {_n(then.get('value'))} -> {_n(now.get('value'))} {unit})"
    which = x.get("now") if kind != "resolved" else x.get("then")
    return f"- **{kind}** {x['id']}{sv}: {(which or {}).get('message', '')}"


def _findings(d: dict[str, Any]) -> list[str]:
    """Both runs' verdicts and the findings resolved, new and persisting."""
    f = d.get("findings")
    if not f:
        return []
    L = ["## Findings", "", f"- base: {f['verdict']['base']}", f"- cand: {f['verdict']['cand']}", ""]
    if f.get("caveat"):
        L += [f"Caveat: {f['caveat']}", ""]
    L += [_finding_line(kind, x) for kind in ("resolved", "new", "persisting") for x in f[kind]]
    if not any(f[k] for k in ("resolved", "new", "persisting")):
        L.append("No check fired on either run.")
    return L + [""]


def _document(d: dict[str, Any], table: Table) -> list[str]:
    return (
        _title(d)
        + _comparability(d, table)
        + _step(d, table)
        + _traffic(d, table)
        + _operators(d, table)
        + _framework(d, table)
        + _findings(d)
    )


def _windows_only(d: dict[str, Any], text: str) -> str:
    """No step marker on either side: every number is over the profiled window, and the text says so."""
    if not d.get("windows_only"):
        return text
    from ..findings.windows import reword

    return reword(text).replace("\n\n", f"\n\nNote: {WINDOWS_NOTE}\n\n", 1)


WINDOWS_NOTE = (
    "neither run has a step marker (no ProfilerStep, no engine step annotation): each side is one profiled "
    "window per rank, so the times and bytes below are totals over that window"
)


def to_markdown(c: Comparison | dict[str, Any]) -> str:
    d = c.to_dict() if isinstance(c, Comparison) else c
    return _windows_only(d, "\n".join(_document(d, _table)) + "\n")


def to_text(c: Comparison | dict[str, Any]) -> str:
    """The terminal view (`--format table`): the same sections, with plain-text tables (aligned columns, a rule
    under the header) and no markdown emphasis."""
    d = c.to_dict() if isinstance(c, Comparison) else c
    lines: list[str] = []
    for ln in (x.replace("**", "") for x in _document(d, text_table)):
        if len(ln) > TEXT_WIDTH and "  " not in ln:  # prose (a table row always has two-space gaps): wrap it
            indent = "  " if ln.startswith("- ") else ""
            lines += textwrap.wrap(ln, TEXT_WIDTH, subsequent_indent=indent, break_on_hyphens=False)
        else:
            lines.append(ln)
    return _windows_only(d, "\n".join(lines) + "\n")
