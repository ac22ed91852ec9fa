"""Runs a user's script under the profiler, unmodified: `python -m traceql.capture.runner CONFIG -- TARGET...`.

Started by `traceql capture -- python train.py ...` in the user's own interpreter (PYTHONPATH points at this
traceql). TARGET is `script.py ARGS...` or `-m module ARGS...`, run with runpy as `__main__` with sys.argv set
as if it had been started directly, so its output and exit code pass through unchanged.

Profiler steps: every optimizer.step() (torch.optim's global post-hook) advances the wait/warmup/active
schedule; with window_s the profiler records from the start for window_s seconds (a SIGALRM timer stops it on
the main thread) or until the script ends. The profiler options come from the same driver modules the built-in
workloads use. Only the standard library and torch (+ torch_npu) are imported here.
"""

from __future__ import annotations

import json
import runpy
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


class _Session:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.prof: Any = None
        self.steps_seen = 0
        self.stopped = False
        self.result: dict[str, Any] = {}

    def start(self) -> None:
        from .core import Backend, NpuOptions, Schedule, open_profiler

        b = self.cfg["backend"]
        backend = Backend(b["kind"], b["device"], b["kind"])
        dump = Path(self.cfg["dump"])
        window = self.cfg.get("window_s")
        sched = None if window else Schedule(**self.cfg["schedule"])  # a window records from start to stop
        prof, name, options = open_profiler(
            backend,
            dump,
            self.cfg["worker_name"],
            sched,
            NpuOptions(**self.cfg["npu"]),
            self.cfg.get("use_gzip", False),
        )
        if window:
            options["window_s"] = window
        self.result.update(profiler=name, options=options)
        self.prof = prof
        prof.start()
        if window:
            signal.signal(signal.SIGALRM, lambda *_: self.stop())
            signal.setitimer(signal.ITIMER_REAL, float(window))
        else:
            import torch.optim.optimizer as optim_mod

            optim_mod.register_optimizer_step_post_hook(self._on_optimizer_step)

    def _on_optimizer_step(self, *_: Any) -> None:
        if self.stopped:
            return
        self.steps_seen += 1
        self.prof.step()
        total = sum(self.cfg["schedule"].values())
        if self.steps_seen >= total:
            self.stop()  # schedule done: the trace is written, stop paying for the profiler

    def stop(self) -> None:
        if self.stopped or self.prof is None:
            return
        self.stopped = True
        if self.cfg.get("window_s"):
            signal.setitimer(signal.ITIMER_REAL, 0)
        # stopping while recording writes the trace (the (RECORD, None) transition calls on_trace_ready);
        # stopping during wait/warmup writes nothing, and capture says so
        self.prof.stop()

    def finish(self) -> None:
        self.stop()
        self.result["steps_seen"] = self.steps_seen


def _run_target(target: list[str]) -> int:
    """Run the script/module as __main__; return its exit code (SystemExit honoured, exceptions -> 1)."""
    runner: Callable[..., Any]
    if target[0] == "-m":
        sys.argv = [target[1], *target[2:]]
        runner, arg = runpy.run_module, target[1]
        kwargs: dict[str, Any] = {"run_name": "__main__", "alter_sys": True}
    else:
        script = str(Path(target[0]).resolve())
        sys.argv = [target[0], *target[1:]]
        sys.path.insert(0, str(Path(script).parent))  # as `python script.py` does
        runner, arg = runpy.run_path, script
        kwargs = {"run_name": "__main__"}
    try:
        runner(arg, **kwargs)
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except BaseException:  # the script's own traceback, as python would print it
        traceback.print_exc()
        return 1
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(
            "usage: python -m traceql.capture.runner CONFIG.json -- script.py ARGS | -m module ARGS",
            file=sys.stderr,
        )
        return 2
    cfg = json.loads(Path(argv[0]).read_text())
    session = _Session(cfg)
    try:
        session.start()
    except Exception as e:  # noqa: BLE001 - reported to the parent, which turns it into one error line
        session.result["error"] = f"profiler could not start: {type(e).__name__}: {e}"
        Path(cfg["result"]).write_text(json.dumps(session.result))
        return 1
    code = _run_target(argv[2:])
    try:
        session.finish()
    except Exception as e:  # noqa: BLE001
        session.result["error"] = f"profiler could not write the trace: {type(e).__name__}: {e}"
    Path(cfg["result"]).write_text(json.dumps(session.result, default=str))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
