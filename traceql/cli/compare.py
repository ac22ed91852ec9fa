"""`traceql compare BASE CAND`: did the fix work? (traceql.compare)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ._options import MAX_GBPS, CompareFormat, StoreOpt, format_opt, in_range, output_opt, peaks

GATE_EXIT = 3  # --gate tripped (1 = error, incl. not comparable; 2 = usage error)


class Mode(str, Enum):
    same = "same"
    cross = "cross"


def parse_percent(text: str, option: str) -> float:
    """'5%', '5' or '0.5%' -> 0.05 / 0.05 / 0.005 (a bare number is percent too: `--gate 5` means 5%)."""
    t = text.strip().rstrip("%").strip()
    try:
        v = float(t)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a percentage like 5%", param_hint=option) from None
    if not 0 <= v < 1000:
        raise typer.BadParameter(f"{text!r} must be between 0% and 1000%", param_hint=option)
    return v / 100


def resolve_side(store: str | Path | None, arg: str, quiet: bool) -> str:
    """A run name in the store, or a dump path: the run ingested from that path before (same source), else
    ingested now under a name made from the path."""
    from ..errors import StoreError
    from ..store import run_name_from_path
    from ..stores import open_store
    from . import _console

    st = open_store(store)
    runs = st.runs() if st.exists() else {}
    if arg in runs:
        return arg
    p = Path(arg)
    if not p.exists():
        raise StoreError(
            f"{arg!r} is neither a run in store {st.root} (runs: {', '.join(sorted(runs)) or 'none'}) "
            "nor a dump path"
        )
    src = str(p.resolve())
    for rid, info in runs.items():
        if str(info.get("source", "")) == src:
            return rid
    from ..ingest import ingest
    from ..post_ingest import after_ingest, summary

    name, i = run_name_from_path(p.resolve()), 2
    base = name
    while name in runs:
        name, i = f"{base}-{i}", i + 1
    if not quiet:
        _console.info(f"ingesting {arg} as run {name!r}")
    info = ingest(p, store=st, name=name)
    # the same post-ingest policy as `traceql ingest`; its lines go to stderr: stdout is the comparison
    if not quiet:
        _console.info(summary(info))
    after_ingest(info, st, _console.report if not quiet else lambda level, text: None)
    return name


# compare's options, one alias each (as _options.StoreOpt), so compare_cmd's signature is one line per option.
_BaseArg = Annotated[
    str, typer.Argument(help="Baseline: a run name in the store, or a dump path (ingested first).")
]
_CandArg = Annotated[str, typer.Argument(help="Candidate: a run name, or a dump path.")]
_FormatOpt = Annotated[CompareFormat, format_opt("The comparison as a table, JSON or markdown.")]
_ModeOpt = Annotated[
    Mode,
    typer.Option(
        "--mode",
        help="same: one job before/after a change (default); cross: a "
        "baseline on another device/profiler (GPU vs NPU port), operators matched "
        "through the framework op that launched them.",
    ),
]
_GateOpt = Annotated[
    Optional[str],
    typer.Option(
        "--gate",
        help=f"Exit {GATE_EXIT} when the step time regresses (beyond the noise) by more than this, e.g. 5%.",
    ),
]
_MinEffectOpt = Annotated[
    str,
    typer.Option(
        "--min-effect",
        help="Smallest step-time change called an improvement or regression; below it the verdict is neutral.",
    ),
]
_DeviceOpt = Annotated[
    Optional[str],
    typer.Option(
        "--device",
        help="Device preset for the peaks of both runs (ascend910b, a100-80gb, h200...); default: detected per run.",
    ),
]
_PeakHbmOpt = Annotated[
    Optional[float],
    typer.Option(
        "--peak-hbm-gbps",
        help="Override the HBM peak of both runs, GB/s.",
        callback=in_range(0, MAX_GBPS, lo_open=True),
    ),
]
_NameMapOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--name-map",
        help='--mode cross: JSON/TOML file {"map": {"<regex on '
        'base kernel or op>": "<cand name>"}}, e.g. CUDA kernel -> Ascend op.',
    ),
]
_NoFindingsOpt = Annotated[bool, typer.Option("--no-findings", help="Skip the findings diff (faster).")]
_NoFusedGroupsOpt = Annotated[
    bool,
    typer.Option(
        "--no-fused-groups",
        help="Skip the fused-group traffic (the fusion_chains query: about half of a compare of big runs).",
    ),
]
_OutputOpt = Annotated[Optional[Path], output_opt("Write the comparison to FILE instead of stdout.")]


def compare_cmd(
    base: _BaseArg,
    cand: _CandArg,
    store: StoreOpt = None,
    fmt: _FormatOpt = CompareFormat.table,
    mode: _ModeOpt = Mode.same,
    gate: _GateOpt = None,
    min_effect: _MinEffectOpt = "1%",
    device: _DeviceOpt = None,
    peak_hbm_gbps: _PeakHbmOpt = None,
    name_map: _NameMapOpt = None,
    no_findings: _NoFindingsOpt = False,
    no_fused_groups: _NoFusedGroupsOpt = False,
    output: _OutputOpt = None,
) -> None:
    """Compare a candidate run against a baseline: did the fix work? A verdict (improvement, regression,
    neutral or inconclusive, with the per-step noise behind it) only when the runs are comparable; step time
    and where it went, HBM traffic per operator type and fused group with each side's evidence grade
    (measured / sampled / modeled), operators added/removed/changed, findings resolved/new/persisting.

    Exit codes: 0 ok, 1 error or not comparable (says why), 2 usage error, 3 --gate tripped.

    \b
    Examples:
      traceql compare before after
      traceql compare before after --format markdown -o diff.md
      traceql compare base cand --gate 5%                # CI: exit 3 on a >5% step-time regression
      traceql compare ./before_ascend_pt ./after_ascend_pt   # dump paths are ingested first
      traceql compare gpu-a100 npu-910b --mode cross --name-map cuda2ascend.json
    """
    from ..compare import compare, load_name_map

    gate_v = parse_percent(gate, "--gate") if gate is not None else None
    eff = parse_percent(min_effect, "--min-effect")
    if name_map is not None and mode != Mode.cross:
        raise typer.BadParameter("--name-map applies to --mode cross", param_hint="--name-map")
    rename = load_name_map(name_map) if name_map is not None else None
    b = resolve_side(store, base, quiet=False)
    c = resolve_side(store, cand, quiet=False)
    res = compare(
        store,
        b,
        c,
        mode=mode.value,
        device=device,
        peaks=peaks(peak_hbm_gbps),
        with_findings=not no_findings,
        min_effect=eff,
        gate=gate_v,
        name_map=rename,
        with_chains=not no_fused_groups,
    )
    d: dict[str, Any] = res.to_dict()
    _write(d, fmt, output)
    _verdict_exit(d, res.comparable, gate)


def _write(d: dict[str, Any], fmt: CompareFormat, output: Path | None) -> None:
    """The comparison in the chosen format, to --output or stdout."""
    from ..compare.render import to_markdown, to_text
    from . import _console
    from ._output import write_text

    if fmt == CompareFormat.json:
        import json

        text = json.dumps(d, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    elif fmt == CompareFormat.markdown:
        text = _console.safe(to_markdown(d), newlines=True)
    else:
        text = _console.safe(to_text(d), newlines=True)
    write_text(text, output)
    if output:
        _console.info(f"wrote {output}")


def _verdict_exit(d: dict[str, Any], comparable: bool, gate: str | None) -> None:
    """The headline on stderr, and the exit code: 1 (error) when not comparable, GATE_EXIT when --gate tripped."""
    from ..compare import NotComparableError
    from ..compare.render import headline
    from . import _console

    if not comparable:
        raise NotComparableError(headline(d))
    _console.info(headline(d))
    if d.get("gate") and d["gate"]["tripped"]:
        _console.info(f"--gate {gate}: {d['gate']['why']}")
        raise typer.Exit(GATE_EXIT)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_cmd)
