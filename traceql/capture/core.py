"""Capture orchestration: choose the backend, run a workload or a user script under its profiler, write
capture_meta.json beside the dump, and (optionally) ingest it.

Dump layout (one folder per capture):
    <out>/<name>-<YYYYmmdd-HHMMSS>/
        capture_meta.json          device, versions, workload/script, size, profiler options, CUPTI availability
        <worker>.<ns>.pt.trace.json[.gz]     torch.profiler (CPU/CUDA): the file to ingest
        <worker>_<ts>_ascend_pt/   torch_npu: the folder to ingest
        cupti_counters.json        CUDA only, when the CUPTI range profiler produced counters (plain JSON)
`ingest_path` in capture_meta.json names what `traceql ingest` should be given.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TraceQLError
from ..version import __version__

INSTALL_CAPTURE = "pip install 'traceql[capture]'"
INSTALL_NPU = "pip install 'traceql[npu]'"
DEVICES = ("auto", "cpu", "cuda", "npu")
META_FILE = "capture_meta.json"


class CaptureError(TraceQLError):
    """Capture could not run: a missing dependency, no such device, a script that could not be started."""


@dataclass
class Schedule:
    wait: int = 1
    warmup: int = 1
    active: int = 2

    def __post_init__(self) -> None:
        if self.wait < 0 or self.warmup < 0 or self.active < 1:
            raise CaptureError(
                f"bad schedule wait={self.wait} warmup={self.warmup} active={self.active}: need wait>=0, warmup>=0, active>=1"
            )

    @property
    def total(self) -> int:
        return self.wait + self.warmup + self.active

    def as_dict(self) -> dict[str, int]:
        return {"wait": self.wait, "warmup": self.warmup, "active": self.active}


@dataclass
class NpuOptions:
    aic_metrics: str = "memory"  # see npu_driver.AIC_METRICS
    level: int = 1
    export: str = "text"  # text | db | both
    l2_cache: bool = True


@dataclass
class Backend:
    kind: str  # cpu | cuda | npu
    device: str  # torch device string: cpu, cuda:0, npu:0
    name: str  # human device name
    versions: dict[str, str | None] = field(default_factory=dict)


def require_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise CaptureError(
            f"traceql capture needs PyTorch, which is not installed: {INSTALL_CAPTURE} "
            f"(CPU/CUDA), or {INSTALL_NPU} on an Ascend NPU machine"
        ) from None
    return torch


def _npu_state() -> tuple[bool, str]:
    """(usable, why not) for torch_npu: importable, and at least one NPU visible."""
    try:
        import torch
        import torch_npu  # noqa: F401  (patches torch.npu in)
    except ImportError:
        return (
            False,
            f"torch_npu is not installed ({INSTALL_NPU}; torch_npu must match your torch and CANN versions)",
        )
    except Exception as e:  # noqa: BLE001 - a broken CANN install raises all sorts; report it, don't crash
        return False, f"torch_npu failed to import: {type(e).__name__}: {e}"
    try:
        n = torch.npu.device_count() if torch.npu.is_available() else 0  # type: ignore[attr-defined]
    except Exception as e:  # noqa: BLE001
        return False, f"torch_npu could not query NPUs: {type(e).__name__}: {e}"
    return (
        n > 0,
        "" if n > 0 else "torch_npu is installed but no NPU is visible (torch.npu.is_available() is False)",
    )


def choose_backend(requested: str = "auto") -> Backend:
    """The profiler backend for --device: npu when torch_npu sees a device, else cuda when available, else cpu."""
    if requested not in DEVICES:
        raise CaptureError(f"unknown --device {requested!r}: use one of {', '.join(DEVICES)}")
    torch = require_torch()
    versions: dict[str, str | None] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    if requested in ("auto", "npu"):
        ok, why = _npu_state()
        if ok:
            import torch_npu

            versions["torch_npu"] = getattr(torch_npu, "__version__", None)
            name = _safe(lambda: torch.npu.get_device_name(0)) or "Ascend NPU"
            return Backend("npu", "npu:0", name, versions)
        if requested == "npu":
            raise CaptureError(f"--device npu: {why}")
    if requested in ("auto", "cuda"):
        if torch.cuda.is_available():
            return Backend("cuda", "cuda:0", torch.cuda.get_device_name(0), versions)
        if requested == "cuda":
            why = (
                "this torch build has no CUDA"
                if torch.version.cuda is None
                else "torch.cuda.is_available() is False"
            )
            raise CaptureError(f"--device cuda: no CUDA device ({why}); use --device cpu")
    return Backend("cpu", "cpu", platform.processor() or platform.machine() or "cpu", versions)


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except Exception:  # noqa: BLE001
        return None


def new_dump_dir(out: Path | None, name: str) -> Path:
    base = Path(out) if out else Path("traceql_dumps")
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "capture"
    d = base / f"{safe}-{stamp}"
    n = 1
    while d.exists():  # two captures in the same second
        n += 1
        d = base / f"{safe}-{stamp}-{n}"
    try:
        d.mkdir(parents=True)
    except OSError as e:
        raise CaptureError(f"cannot create dump folder {d}: {e.strerror or e}") from None
    return d


def _ingest_path(kind: str, dump: Path) -> Path | None:
    if kind == "npu":
        from .npu_driver import dump_dirs

        found = dump_dirs(dump)
        return dump if len(found) > 1 else (found[0] if found else None)
    from .torch_driver import trace_files

    files = trace_files(dump)
    return files[0] if files else None


def _write_meta(dump: Path, meta: dict[str, Any]) -> None:
    (dump / META_FILE).write_text(json.dumps(meta, indent=1, default=str) + "\n")


def _base_meta(backend: Backend) -> dict[str, Any]:
    return {
        "traceql_version": __version__,
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "device": {"kind": backend.kind, "torch_device": backend.device, "name": backend.name},
        "versions": backend.versions,
    }


def _reset_peak(torch: Any, kind: str) -> None:
    if kind == "cuda":
        torch.cuda.reset_peak_memory_stats()
    elif kind == "npu":
        torch.npu.reset_peak_memory_stats()


def _peak(torch: Any, kind: str) -> int | None:
    if kind == "cuda":
        return int(torch.cuda.max_memory_allocated())
    if kind == "npu":
        return int(torch.npu.max_memory_allocated())
    return None


def open_profiler(
    backend: Backend,
    dump: Path,
    worker: str,
    schedule: Schedule | None,
    npu: NpuOptions,
    use_gzip: bool,
    all_threads: bool = False,
) -> tuple[Any, str, dict[str, Any]]:
    """(profiler context, profiler name, options used) for the backend; schedule None records start to stop."""
    sched = schedule.as_dict() if schedule else None
    if backend.kind == "npu":
        from . import npu_driver

        prof, opts = npu_driver.open_profiler(
            dump, worker, sched, npu.aic_metrics, npu.level, npu.export, npu.l2_cache
        )
        return prof, "torch_npu.profiler", opts
    from . import torch_driver

    prof, opts = torch_driver.open_profiler(backend.kind, dump, worker, sched, use_gzip, all_threads)
    return prof, "torch.profiler", opts


def capture_workload(
    name: str,
    size: str = "small",
    out: Path | None = None,
    device: str = "auto",
    schedule: Schedule | None = None,
    npu: NpuOptions | None = None,
    cupti: bool = True,
    use_gzip: bool = False,
) -> dict[str, Any]:
    """Run a built-in workload under the backend's profiler; returns capture_meta (with `dump` and `ingest_path`)."""
    from . import workloads

    wl = workloads.get(name)
    if size not in workloads.SIZES:
        raise CaptureError(f"unknown --size {size!r}: use small or full")
    schedule = schedule or Schedule()
    npu = npu or NpuOptions()
    backend = choose_backend(device)
    torch = require_torch()
    dump = new_dump_dir(out, wl.name)
    ctx = workloads.Ctx(
        device=torch.device(tensor_device(backend)), kind=backend.kind, size=size, params=wl.sizes[size]
    )
    walls: list[float] = []
    try:
        step = wl.build(ctx)
        all_threads = wl.all_threads_on_cpu and backend.kind == "cpu"
        prof, prof_name, options = open_profiler(backend, dump, wl.name, schedule, npu, use_gzip, all_threads)
        with prof:
            for i in range(schedule.total):
                if i == schedule.wait + schedule.warmup:
                    _reset_peak(torch, backend.kind)
                t0 = time.perf_counter()
                step()
                walls.append(time.perf_counter() - t0)
                prof.step()
    except (RuntimeError, MemoryError) as e:
        # torch reports device trouble (out of memory, no kernel for a dtype) as RuntimeError: one line, no dump
        shutil.rmtree(dump, ignore_errors=True)
        hint = " (try --size small)" if size == "full" else ""
        raise CaptureError(
            f"workload {wl.name} failed on {backend.kind}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}{hint}"
        ) from e
    meta = _base_meta(backend)
    meta.update(
        run_name=wl.name,
        workload={
            "name": wl.name,
            "experiment": wl.experiment,
            "role": wl.role,
            "pair": wl.pair,
            "title": wl.title,
            "article": wl.article,
        },
        size=size,
        params=wl.sizes[size],
        profiler=prof_name,
        profiler_options=options,
        measured={
            "step_wall_s": walls,
            "active_step_wall_s": walls[schedule.wait + schedule.warmup :],
            "peak_device_memory_bytes": _peak(torch, backend.kind),
        },
    )
    meta["cupti_counters"] = _cupti(backend, step, schedule, dump, cupti)
    return _finish(dump, backend, meta)


def tensor_device(backend: Backend) -> str:
    """Where workload tensors go (a seam for tests that mock torch_npu on a CPU-only machine)."""
    return backend.device


def _cupti(backend: Backend, step: Any, schedule: Schedule, dump: Path, enabled: bool) -> dict[str, Any]:
    if backend.kind != "cuda":
        return {
            "attempted": False,
            "available": False,
            "reason": f"CUPTI counters are CUDA-only (device is {backend.kind})",
        }
    if not enabled:
        return {"attempted": False, "available": False, "reason": "disabled with --no-cupti"}
    from .torch_driver import cupti_pass

    # one step: per-kernel counters replay every kernel, which can be slow on a step of thousands of kernels
    return cupti_pass(step, 1, dump / "cupti_counters.json", dump / ".cupti_scratch")


def _finish(dump: Path, backend: Backend, meta: dict[str, Any]) -> dict[str, Any]:
    shutil.rmtree(dump / ".cupti_scratch", ignore_errors=True)
    ingest_path = _ingest_path(backend.kind, dump)
    meta["ingest_path"] = str(ingest_path.relative_to(dump)) if ingest_path else None
    _write_meta(dump, meta)
    meta["dump"] = str(dump)
    return meta


# --- user scripts ---------------------------------------------------------------------------------------------------

_PYTHON_RE = re.compile(r"^python[0-9.]*(\.exe)?$")


def split_command(argv: list[str]) -> tuple[str, list[str], list[str]]:
    """(interpreter, interpreter flags, target+args) for `python [flags] script.py args` / `python -m mod args` /
    `script.py args`. The target list starts with the script path, or with '-m' and the module name."""
    if not argv:
        raise CaptureError(
            "nothing to run: give the script after --, e.g. traceql capture -- python train.py --steps 20"
        )
    first = argv[0]
    if first.endswith(".py"):
        return sys.executable, [], argv
    if not _PYTHON_RE.match(Path(first).name):
        raise CaptureError(
            f"traceql capture profiles Python scripts: give `python script.py ARGS` or `python -m module ARGS` after -- (got {first!r})"
        )
    exe = shutil.which(first) if os.sep not in first else first
    if not exe:
        raise CaptureError(f"interpreter {first!r} not found on PATH")
    flags: list[str] = []
    rest = argv[1:]
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        if rest[0] in ("-c", "-"):
            raise CaptureError("python -c / stdin scripts cannot be profiled: save the code to a file")
        flags.append(rest.pop(0))
    if not rest:
        raise CaptureError("no script given after the interpreter")
    if rest[0] == "-m" and len(rest) < 2:
        raise CaptureError("python -m needs a module name")
    return exe, flags, rest


def capture_script(
    argv: list[str],
    out: Path | None = None,
    device: str = "auto",
    schedule: Schedule | None = None,
    npu: NpuOptions | None = None,
    window_s: float | None = None,
    use_gzip: bool = False,
    name: str | None = None,
) -> dict[str, Any]:
    """Run the user's script in its own interpreter under the profiler (no edits to the script).

    Steps: each optimizer.step() is a profiler step (wait/warmup/active schedule), or with window_s the first
    window_s seconds are recorded. The script's output passes through; its exit code is meta["exit_code"].
    """
    exe, flags, target = split_command(argv)
    schedule = schedule or Schedule()
    npu = npu or NpuOptions()
    backend = choose_backend(device)  # checks torch here, so a missing install fails before the script starts
    label = name or (target[1] if target[0] == "-m" else Path(target[0]).stem)
    dump = new_dump_dir(out, label)
    config = {
        "backend": {"kind": backend.kind, "device": backend.device},
        "dump": str(dump.resolve()),
        "worker_name": label,
        "schedule": schedule.as_dict(),
        "npu": npu.__dict__,
        "window_s": window_s,
        "use_gzip": use_gzip,
        "result": str((dump / ".runner_result.json").resolve()),
    }
    cfg_path = dump / ".runner_config.json"
    cfg_path.write_text(json.dumps(config))
    # The runner is traceql.capture.runner, imported from this traceql in the user's interpreter (only stdlib +
    # torch are needed there). Only the traceql package goes on its path, through a link: adding the folder
    # that holds it could be a whole site-packages of another Python.
    path_dir = dump / ".runner_path"
    path_dir.mkdir()
    pkg = Path(__file__).resolve().parents[1]
    try:
        (path_dir / "traceql").symlink_to(pkg, target_is_directory=True)
        py_path = str(path_dir.resolve())
    except OSError:  # no symlinks here: fall back to the folder holding traceql
        py_path = str(pkg.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = py_path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [exe, *flags, "-m", "traceql.capture.runner", str(cfg_path.resolve()), "--", *target]
    try:
        proc = subprocess.run(cmd, env=env, check=False)
    except OSError as e:
        raise CaptureError(f"could not start {exe}: {e.strerror or e}") from None
    result_path = dump / ".runner_result.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    for p in (cfg_path, result_path):
        p.unlink(missing_ok=True)
    shutil.rmtree(path_dir, ignore_errors=True)
    meta = _base_meta(backend)
    meta.update(
        run_name=re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.") or "script",
        script={"argv": argv, "interpreter": exe},
        size=None,
        profiler=result.get("profiler"),
        profiler_options=result.get("options"),
        steps_seen=result.get("steps_seen"),
        mode="window" if window_s else "optimizer.step",
        exit_code=proc.returncode,
        runner_error=result.get("error"),
        cupti_counters={
            "attempted": False,
            "available": False,
            "reason": "not attempted for user scripts (it needs a second run)",
        },
    )
    return _finish(dump, backend, meta)
