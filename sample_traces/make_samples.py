"""Regenerate the samples under sample_traces/ (see README.md there for what each one shows).

    .venv/bin/python sample_traces/make_samples.py            # torch_npu_2rank/ and msprof/ (deterministic)
    .venv/bin/python sample_traces/make_samples.py --kineto   # also re-record kineto_cpu/ with torch.profiler

The torch_npu and msprof samples are synthetic and byte-identical on every run (tests/test_synth.py checks
that the committed files match a fresh generation). The Kineto sample is a real torch.profiler recording,
so re-recording it changes its timings: it is only rewritten with --kineto.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing traceql

from traceql.synth import article_scenario, write_torch_npu_dump  # noqa: E402

MAX_SAMPLE_BYTES = 500 * 1024
KINETO_FILE = "kineto_cpu/layernorm_matmul.pt.trace.json"


def make_torch_npu(out: Path) -> list[Path]:
    """2 ranks x 3 steps of the article's story, aic_metrics=Memory, HBM sampled every 1 ms on 4 channels."""
    shutil.rmtree(out, ignore_errors=True)
    sc = article_scenario(2, steps=3, slow_ranks=(1,))
    return write_torch_npu_dump(sc, out, aic_metrics="Memory")


def make_msprof(out: Path) -> Path | None:
    try:
        from traceql.synth.msprof_writer import make_msprof_sample
    except ImportError as e:  # written by another module owner; may not exist yet
        print(f"skipping msprof sample: {e}", file=sys.stderr)
        return None
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return Path(make_msprof_sample(out))


def make_kineto(path: Path) -> Path:
    """A real torch.profiler (Kineto) CPU trace of LayerNorm + Linear: schedule(wait=1, warmup=1, active=2),
    record_shapes=True, profile_memory=True."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    torch.set_num_threads(1)  # one intra-op thread: fewer, simpler events
    model = torch.nn.Sequential(torch.nn.LayerNorm(256), torch.nn.Linear(256, 256))
    x = torch.randn(64, 256)
    path.parent.mkdir(parents=True, exist_ok=True)

    def save(prof: profile) -> None:
        prof.export_chrome_trace(str(path))

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        record_shapes=True,
        profile_memory=True,
        on_trace_ready=save,
    ) as prof:
        for _ in range(4):
            with torch.no_grad():
                model(x).sum()
            prof.step()
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--kineto", action="store_true", help="also re-record the Kineto CPU sample (needs torch)"
    )
    ap.add_argument("--out", type=Path, default=HERE, help="where to write (default: this folder)")
    args = ap.parse_args(argv)
    made: list[Path] = [args.out / "torch_npu_2rank"]
    make_torch_npu(args.out / "torch_npu_2rank")
    prof = make_msprof(args.out / "msprof")
    if prof is not None:
        made.append(args.out / "msprof")
    if args.kineto:
        made.append(make_kineto(args.out / KINETO_FILE).parent)
    for m in made:
        size = sum(p.stat().st_size for p in m.rglob("*") if p.is_file())
        flag = "" if size < MAX_SAMPLE_BYTES else "  <-- over the 500 KB budget"
        print(f"{m.relative_to(args.out)}: {size / 1024:.1f} KiB{flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
