"""Ingest and analysis at scale: traceql side by side with the tools users would pick instead, same inputs.

    .venv/bin/python benchmarks/bench_ingest.py --compare-venv /tmp/bench-venv           # default cases
    .venv/bin/python benchmarks/bench_ingest.py --cases tv:0.25,tv:1,kd:500000 --markdown
    .venv/bin/python benchmarks/bench_ingest.py --cases cluster:8x250,analysis,reopen --dir /tmp/tq-bench --keep

Cases (comma separated, run in order):
  tv:<GB>          one torch_npu folder whose ASCEND_PROFILER_OUTPUT/trace_view.json is <GB> (1 GB = 1e9 bytes):
                   a real level1 trace_view.json (TV_SOURCE) tiled by tile_real.py in its own layout (one line,
                   `}, {` and `},{` gaps, ids within int64); traceql.synth's where ../shared/real_traces is absent
  stv:<GB>         the same from traceql.synth.large_trace_view (the tv input of the tables before 2026-12-06)
  kineto:<GB>      one PyTorch Kineto trace (torch.profiler on a GPU, traceql.synth.large_kineto) of <GB>, read by
                   the DuckDB reader (the default) and by the ijson reader (TRACEQL_KINETO_READER=ijson); the
                   DuckDB floor reads the file as one JSON object (run up to ~1/14 of the RAM available)
  kd:<rows>        one torch_npu folder with a kernel_details.csv of <rows> rows x 46 columns (PipeUtilization)
  dev:<GB>         shapes (traceql.synth.shapes): a trace_view.json of device tasks only (X on Ascend Hardware,
  host:<GB>        8 args each), of host ops only, or of HBM counter samples only; input and store deleted
  ctr:<GB>         after measuring
  kdi:<rows>       a kernel_details.csv whose 4 streams interleave (time order only per stream: the store sorts)
  many small ranks: cluster:<N>x<MB> with a large N (e.g. cluster:64x4)
  cluster:<N>x<MB> an N-rank cluster folder of full torch_npu dumps, <MB> per rank (1 MB = 1e6 bytes)
  dcluster:<N>x<MB> the same, kernel-dense (synth.large.dense_cluster_scenario: ~480k kernels per GB)
  analysis         every query the findings use, then the findings (`traceql findings --all`), over the
                   store of the last cluster case
  reopen           re-open that store and run a query with the dump moved away (nothing is re-parsed)
  truncated        the largest tv input cut at 60%: how fast and how cheaply ingest fails, and its message
  real:<file>:<MB> a real dump's kernel_details.csv or trace_view.json (a path, or one relative to
                   ../shared/real_traces) tiled to <MB> (benchmarks/tile_real.py: its rows/events repeated, each
                   copy later in time): real column sets, arg sets and cell spellings traceql.synth does not write

Inputs come from traceql.synth (the real torch_npu text formats, seeded, deterministic) and are written to a
temp dir (or --dir), never into the repo. Every measurement runs in a fresh subprocess: wall time, CPU time
(user+sys of the whole process tree, from getrusage of the reaped children), peak RSS (sum over the process
tree, polled every 20 ms) and the 1-min load average before/after. Comparison tools run with the Python of
--compare-venv (see benchmarks/requirements.txt); a tool that is missing there is skipped with a note.

Comparisons (same input, same run):
  duckdb floor     DuckDB's raw JSON/CSV reader writing the X events (or the CSV) to Parquet: the practical floor
                   (trace_view cases also with the C events kept: the like-for-like floor for counter-heavy files)
  json+pandas      json.load + pandas.DataFrame + to_parquet of the X events (what an HTA-style load does)
  orjson+pandas    the same with orjson;  msgspec: typed msgspec decode -> Arrow -> Parquet
  HTA              HolisticTraceAnalysis TraceAnalysis() on a Kineto-form copy of the trace (numeric ts, object
                   root); only up to --hta-max-gb per case (it needs ~10x the file in RAM)
  msprof-analyze   `msprof-analyze cluster -m all` and `msprof-analyze advisor all` on a copy of the cluster
                   folder (they write their outputs into it)

Ratios are reported as "traceql is Nx faster" (tool time / traceql time), on wall and on CPU seconds: on a
loaded machine wall time mostly measures the load, CPU seconds much less so. "CPU s/GB" (CPU seconds per 1e9
input bytes) is the figure the ingest targets are stated in (issue 48), beside MB/s (wall) and peak RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = "ASCEND_PROFILER_OUTPUT"
REAL_TRACES = ROOT.parent / "shared" / "real_traces"
RUN = "bench"

# ---------------------------------------------------------------------------------------------------------
# measuring one subprocess


@dataclass
class Result:
    case: str
    tool: str
    input_bytes: int
    wall: float | None = None
    cpu: float | None = None
    rss: int | None = None  # peak RSS of the whole process tree, bytes
    rc: int | None = None
    load: tuple[float, float] = (0.0, 0.0)
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.wall is not None


def _tree_rss(ps: Any, pid: int) -> int:
    try:
        p = ps.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except ps.Error:
        return 0
    total = 0
    for q in procs:
        with contextlib.suppress(ps.Error):
            total += q.memory_info().rss
    return total


def run_measured(
    cmd: list[str], *, timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None
) -> dict[str, Any]:
    """Run `cmd`; return wall, cpu (user+sys of it and its reaped descendants), peak tree RSS, rc, output."""
    import psutil

    load0 = os.getloadavg()[0]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        peak = [0]
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], _tree_rss(psutil, proc.pid))
                stop.wait(0.02)

        th = threading.Thread(target=poll, daemon=True)
        th.start()
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_tree(psutil, proc.pid)
            rc = proc.wait()
        wall = time.perf_counter() - t0
        stop.set()
        th.join()
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return {
        "wall": wall,
        "cpu": cpu,
        "rss": peak[0],
        "rc": rc,
        "out": text,
        "timed_out": timed_out,
        "load": (load0, os.getloadavg()[0]),
    }


def _kill_tree(ps: Any, pid: int) -> None:
    """Stop the process we started and its descendants (by pid, never by name)."""
    try:
        p = ps.Process(pid)
        procs = [*p.children(recursive=True), p]
    except ps.Error:
        return
    for q in procs:
        with contextlib.suppress(ps.Error):
            q.kill()


PRIORITY: list[str] = []  # set by --priority: a prefix that runs the command in its own top-priority session


def priority_prefix(level: int) -> list[str]:
    """Run a command in a new session (= its own scheduler autogroup) whose autogroup nice is `level`.

    With sched_autogroup on (most distros), plain `nice` only ranks processes *within* one session; CPU is
    shared between sessions first. A session of its own at autogroup nice -20 gets nearly all the CPU it asks
    for, which approximates an idle machine on a loaded one (it starves everyone else meanwhile: use briefly).
    Needs root (or CAP_SYS_NICE)."""
    return [
        "setsid",
        "-w",
        "bash",
        "-c",
        f'echo {level} > /proc/self/autogroup && exec nice -n {level} "$@"',
        "--",
    ]


def measure(
    case: str,
    tool: str,
    nbytes: int,
    cmd: list[str],
    *,
    timeout: float,
    ok_rc: tuple[int, ...] = (0,),
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Result:
    m = run_measured([*PRIORITY, *cmd], timeout=timeout, env=env, cwd=cwd)
    r = Result(case, tool, nbytes, m["wall"], m["cpu"], m["rss"], m["rc"], m["load"])
    r.extra["out"] = m["out"][-4000:]
    if m["timed_out"]:
        r.note = f"timed out after {timeout:.0f} s"
        r.rc = None
    elif m["rc"] not in ok_rc:
        last = [ln for ln in m["out"].strip().splitlines() if ln.strip()][-1:] or ["(no output)"]
        r.note = f"exit {m['rc']}: {last[0][:160]}"
    else:
        r.rc = 0
    per_gb = f" ({m['cpu'] / (nbytes / 1e9):.2f}/GB)" if nbytes else ""
    print(
        f"  {case:16s} {tool:24s} wall {m['wall']:7.1f}s cpu {m['cpu']:7.1f}s{per_gb} rss {m['rss'] / 2**20:6.0f} MB "
        f"load {m['load'][0]:.1f}->{m['load'][1]:.1f} {r.note}",
        file=sys.stderr,
        flush=True,
    )
    return r


# ---------------------------------------------------------------------------------------------------------
# inputs (traceql.synth), cached under the work dir by their parameters


def _done(path: Path) -> Path:
    return path.with_name(path.name + ".complete")


def gen_trace_view(work: Path, gb: float, seed: int) -> Path:
    """<work>/tv-<gb>GB/x_ascend_pt (a torch_npu folder holding only trace_view.json)."""
    from traceql.synth import large_trace_view

    folder = work / f"tv-{gb:g}GB-s{seed}" / "x_ascend_pt"
    if not _done(folder).exists():
        shutil.rmtree(folder, ignore_errors=True)
        info = large_trace_view(folder / OUT_DIR / "trace_view.json", int(gb * 1e9), seed)
        _note(f"generated {folder} ({info['bytes'] / 1e6:.0f} MB in {info['seconds']:.0f} s)")
        _done(folder).touch()
    return folder


# The trace_view every tv case tiles (issue 48): a real level1 torch_npu file, its layout kept byte for byte
TV_SOURCE = (
    "Ascend__msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
)


def tile_trace_view(work: Path, gb: float) -> Path | None:
    """<work>/tvtile-<gb>GB/x_ascend_pt: the real TV_SOURCE tiled to <gb> GB by tile_real.py (one line, the real
    `}, {` / `},{` gaps, ids within int64); None when ../shared/real_traces is absent."""
    from tile_real import tile

    src = REAL_TRACES / TV_SOURCE
    if not src.is_file():
        return None
    folder = work / f"tvtile-{gb:g}GB" / "x_ascend_pt"
    if not _done(folder).exists():
        shutil.rmtree(folder, ignore_errors=True)
        t = time.monotonic()
        info = tile(src, folder / OUT_DIR / "trace_view.json", int(gb * 1e9))
        _note(f"tiled {src.name} x{info['copies']} -> {folder} ({info['bytes'] / 1e6:.0f} MB, "
              f"{time.monotonic() - t:.0f} s)")  # fmt: skip
        _done(folder).touch()
    return folder


def tv_folder(work: Path, gb: float, seed: int) -> tuple[Path, str]:
    """The input of a tv case and its label: the real-layout tile, or traceql.synth's trace_view where the real
    traces are absent (said in the case name)."""
    folder = tile_trace_view(work, gb)
    if folder is not None:
        return folder, "real level1 tile"
    _note(f"{REAL_TRACES / TV_SOURCE} absent: tv:{gb:g} runs on traceql.synth's trace_view instead")
    return gen_trace_view(work, gb, seed), "synth"


SHAPES = {  # case kind -> traceql.synth.shapes writer of a trace_view.json of that shape
    "dev": "device_trace_view",  # device tasks only (X on Ascend Hardware, 8 args each), as issue 18's dump
    "host": "host_trace_view",  # host ops only (cpu_op X events, 2 args)
    "ctr": "counter_trace_view",  # HBM counter samples only (C events)
}


def gen_shape(work: Path, kind: str, gb: float, seed: int) -> Path:
    """<work>/<kind>-<gb>GB/x_ascend_pt (a torch_npu folder holding one trace_view.json of that shape)."""
    from traceql.synth import shapes

    folder = work / f"{kind}-{gb:g}GB-s{seed}" / "x_ascend_pt"
    if not _done(folder).exists():
        shutil.rmtree(folder, ignore_errors=True)
        info = getattr(shapes, SHAPES[kind])(folder / OUT_DIR / "trace_view.json", int(gb * 1e9), seed)
        _note(f"generated {folder} ({info['bytes'] / 1e6:.0f} MB in {info['seconds']:.0f} s)")
        _done(folder).touch()
    return folder


def gen_interleaved_kd(work: Path, rows: int, seed: int) -> Path:
    from traceql.synth.shapes import interleaved_kernel_details

    folder = work / f"kdi-{rows}-s{seed}" / "x_ascend_pt"
    if not _done(folder).exists():
        shutil.rmtree(folder, ignore_errors=True)
        info = interleaved_kernel_details(folder / OUT_DIR / "kernel_details.csv", rows, 4, seed)
        _note(f"generated {folder} ({info['bytes'] / 1e6:.0f} MB, {rows} rows in {info['seconds']:.0f} s)")
        _done(folder).touch()
    return folder


def gen_kineto(work: Path, gb: float, seed: int) -> Path:
    """<work>/kineto-<gb>GB/trace.json (a plain Kineto trace)."""
    from traceql.synth.large_kineto import large_kineto

    path = work / f"kineto-{gb:g}GB-s{seed}" / "trace.json"
    if not _done(path).exists():
        info = large_kineto(path, int(gb * 1e9), seed)
        _note(
            f"generated {path} ({info['bytes'] / 1e6:.0f} MB, {info['events']} events in {info['seconds']:.0f} s)"
        )
        _done(path).touch()
    return path


def gen_kernel_details(work: Path, rows: int, seed: int) -> Path:
    from traceql.synth.large import large_kernel_details

    folder = work / f"kd-{rows}-s{seed}" / "x_ascend_pt"
    if not _done(folder).exists():
        shutil.rmtree(folder, ignore_errors=True)
        info = large_kernel_details(folder / OUT_DIR / "kernel_details.csv", rows, seed)
        _note(f"generated {folder} ({info['bytes'] / 1e6:.0f} MB, {rows} rows in {info['seconds']:.0f} s)")
        _done(folder).touch()
    return folder


def gen_cluster(work: Path, n: int, mb: int, seed: int, dense: bool = False) -> Path:
    from traceql.synth import write_cluster

    folder = work / f"{'dcluster' if dense else 'cluster'}-{n}x{mb}MB-s{seed}"
    if not _done(folder).exists():
        shutil.rmtree(folder, ignore_errors=True)
        info = write_cluster(folder, n, mb * 1_000_000, seed, dense=dense)
        _note(f"generated {folder} ({int(info['bytes']) / 1e6:.0f} MB in {float(info['seconds']):.0f} s)")  # type: ignore[call-overload, arg-type]
        _done(folder).touch()
    return folder


_TS = re.compile(rb'"ts": "(-?\d+(?:\.\d+)?)"')


def to_kineto(src: Path, dst_dir: Path, rank: int) -> Path:
    """A Kineto-form copy for HTA: {"distributedInfo": {"rank": r}, "traceEvents": [...]} with numeric ts.

    Streams in 8 MiB chunks cut after an event's closing brace, so `"ts": "..."` never straddles a cut."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    dst = dst_dir / f"rank{rank}_trace.json"
    if _done(dst).exists():
        return dst
    head = json.dumps(
        {"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 1, "backend": "hccl"}}
    )
    with open(src, "rb") as fh, open(dst, "wb") as out:
        out.write(head[:-1].encode() + b', "traceEvents": ')
        carry = b""
        while chunk := fh.read(8 << 20):
            buf = carry + chunk
            cut = buf.rfind(b"}") + 1
            out.write(_TS.sub(rb'"ts": \1', buf[:cut]))
            carry = buf[cut:]
        out.write(_TS.sub(rb'"ts": \1', carry) + b"}")
    _done(dst).touch()
    return dst


def _note(msg: str) -> None:
    print(f"# {msg}", file=sys.stderr, flush=True)


def dir_bytes(path: Path, pattern: str = "*") -> int:
    return sum(
        p.stat().st_size for p in path.rglob(pattern) if p.is_file() and not p.name.endswith(".complete")
    )


# ---------------------------------------------------------------------------------------------------------
# the comparison tools (run with the compare venv's Python; each reads argv and writes Parquet)

DUCK_TV = r"""
import sys, duckdb
out, files = sys.argv[1], sys.argv[2:]
cols = "{'ph': 'VARCHAR', 'name': 'VARCHAR', 'cat': 'VARCHAR', 'pid': 'VARCHAR', 'tid': 'VARCHAR', 'ts': 'VARCHAR', 'dur': 'VARCHAR', 'args': 'JSON'}"
src = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
duckdb.connect().execute(
    f"COPY (SELECT ph, name, cat, pid, tid, TRY_CAST(replace(ts, '.', '') AS BIGINT) AS ts_ns, dur, args "
    f"FROM read_json({src}, format='array', columns={cols}, maximum_object_size=33554432) WHERE ph = 'X') "
    f"TO '{out}' (FORMAT parquet, COMPRESSION zstd)")
"""

DUCK_TV_XC = DUCK_TV.replace("WHERE ph = 'X'", "WHERE ph IN ('X', 'C')")

# A Kineto trace is one JSON object ({"traceEvents": [...], ...}): DuckDB's read_json takes it as one record
# (maximum_object_size = the file) and unnests the events; it holds ~9x the file in memory doing so
DUCK_KINETO = r"""
import os, sys, duckdb
src, out = sys.argv[1].replace("'", "''"), sys.argv[2].replace("'", "''")
ev = "STRUCT(ph VARCHAR, name VARCHAR, cat VARCHAR, pid VARCHAR, tid VARCHAR, ts VARCHAR, dur VARCHAR, args JSON)[]"
duckdb.connect().execute(
    f"COPY (SELECT e.* FROM (SELECT unnest(traceEvents) AS e FROM read_json('{src}', format='unstructured', "
    f"columns={{'traceEvents': '{ev}'}}, maximum_object_size={os.path.getsize(sys.argv[1]) + 2**20})) WHERE e.ph = 'X') "
    f"TO '{out}' (FORMAT parquet, COMPRESSION zstd)")
"""
KINETO_FLOOR_RAM = 10  # x the file, what DUCK_KINETO needs (2.2 GB RSS for 250 MB): checked before it runs

PANDAS_TV = r"""
import json, sys
import pandas as pd
out, files = sys.argv[1], sys.argv[2:]
loads = json.loads
if LOADER == "orjson":
    import orjson
    loads = orjson.loads
for i, f in enumerate(files):  # one rank at a time, as a per-rank loader would
    with open(f, "rb") as fh:
        events = loads(fh.read())
    if isinstance(events, dict):  # a Kineto trace: {"traceEvents": [...], ...}
        events = events["traceEvents"]
    df = pd.DataFrame(events)
    del events
    x = df[df["ph"] == "X"].copy()
    x["ts"] = pd.to_numeric(x["ts"]) # float64 us, as HTA keeps it
    x["args"] = x["args"].map(lambda a: json.dumps(a) if isinstance(a, dict) else None)
    x.to_parquet(f"{out}.{i}", compression="zstd")
    del df, x
"""

MSGSPEC_TV = r"""
import sys
import msgspec, pyarrow as pa, pyarrow.parquet as pq
out, files = sys.argv[1], sys.argv[2:]
class Ev(msgspec.Struct):
    ph: str = ""
    name: str = ""
    cat: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: str | float | None = None
    dur: float | None = None
    args: msgspec.Raw = msgspec.Raw(b"")  # kept as raw JSON text, not decoded
dec = msgspec.json.Decoder(list[Ev])
for i, f in enumerate(files):
    with open(f, "rb") as fh:
        evs = dec.decode(fh.read())
    xs = [e for e in evs if e.ph == "X"]
    t = pa.table({
        "name": [e.name for e in xs], "cat": [e.cat for e in xs], "pid": [str(e.pid) for e in xs],
        "tid": [str(e.tid) for e in xs], "ts": [str(e.ts) for e in xs], "dur": [e.dur for e in xs],
        "args": [bytes(e.args).decode() or None for e in xs]})
    pq.write_table(t, f"{out}.{i}", compression="zstd")
    del evs, xs, t
"""

HTA = r"""
import logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
print("ranks", len(a.t.traces), "rows", sum(len(a.t.get_trace(r)) for r in a.t.traces))
"""

DUCK_CSV = r"""
import sys, duckdb
src, out = sys.argv[1], sys.argv[2]
duckdb.connect().execute(f"COPY (SELECT * FROM read_csv('{src}')) TO '{out}' (FORMAT parquet, COMPRESSION zstd)")
"""

PANDAS_CSV = r"""
import sys
import pandas as pd
pd.read_csv(sys.argv[1]).to_parquet(sys.argv[2], compression="zstd")
"""


@dataclass
class Tools:
    venv: Path | None
    timeout: float
    hta_max_gb: float
    skip: set[str]
    ingest_args: list[str] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)

    @property
    def py(self) -> str | None:
        p = self.venv / "bin" / "python" if self.venv else None
        return str(p) if p and p.exists() else None

    def has(self, module: str) -> bool:
        if not self.py:
            return False
        return subprocess.run([self.py, "-c", f"import {module}"], capture_output=True).returncode == 0

    def missing(self, case: str, tool: str, nbytes: int, why: str) -> None:
        self.results.append(Result(case, tool, nbytes, note=f"skipped: {why}"))
        _note(f"{case} {tool}: skipped ({why})")

    def add(self, r: Result) -> Result:
        self.results.append(r)
        return r

    def want(self, tool: str) -> bool:
        """A --skip entry names a tool by a word of its name ('HTA' skips "HTA TraceAnalysis", not
        "json+pandas (HTA-style)": a substring match skipped json+pandas on every trace_view case)."""
        name = tool.lower()
        words = set(re.split(r"[\s()+]+", name))
        return not any(s.lower() in words or name.startswith(s.lower()) for s in self.skip)

    # -- traceql -----------------------------------------------------------------------------------------
    def traceql_ingest(
        self,
        case: str,
        src: Path,
        store: Path,
        nbytes: int,
        *extra: str,
        tool: str = "traceql",
        ok_rc: tuple[int, ...] = (0,),
    ) -> Result:
        shutil.rmtree(store, ignore_errors=True)
        cmd = [
            sys.executable,
            "-m",
            "traceql",
            "ingest",
            str(src),
            "--store",
            str(store),
            "--name",
            RUN,
            "--quiet",
            "--no-check",
            *(extra or self.ingest_args),
        ]
        return self.add(measure(case, tool, nbytes, cmd, timeout=self.timeout, ok_rc=ok_rc, cwd=ROOT))

    # -- JSON loaders --------------------------------------------------------------------------------------
    def json_tools(self, case: str, files: list[Path], nbytes: int, scratch: Path) -> None:
        py = self.py or sys.executable  # duckdb is a traceql dependency: the floor always runs
        if self.want("duckdb"):
            self.add(
                measure(
                    case,
                    "duckdb read_json floor",
                    nbytes,
                    [py, "-c", DUCK_TV, str(scratch / "duck.parquet"), *map(str, files)],
                    timeout=self.timeout,
                )
            )
            # the X-only floor writes nothing for a counter-heavy trace: the same floor keeping the C events too
            # (the rows traceql writes there) is the fair one for that shape, so both are reported
            self.add(
                measure(
                    case,
                    "duckdb read_json floor (X and C events)",
                    nbytes,
                    [py, "-c", DUCK_TV_XC, str(scratch / "duck.parquet"), *map(str, files)],
                    timeout=self.timeout,
                )
            )
        self.python_loaders(case, files, nbytes, scratch)
        if self.want("HTA"):
            self.hta(case, files, nbytes, scratch)

    def python_loaders(
        self, case: str, files: list[Path], nbytes: int, scratch: Path, msgspec: bool = True
    ) -> None:
        """json/orjson + pandas (and msgspec's typed decode of a trace_view array) of the same files."""
        avail = _available_memory()
        biggest = max(f.stat().st_size for f in files)
        for tool, loader, script, module in (
            ("json+pandas (HTA-style)", "json", PANDAS_TV, "pandas"),
            ("orjson+pandas", "orjson", PANDAS_TV, "orjson"),
            ("msgspec typed", "", MSGSPEC_TV, "msgspec"),
        ):
            if tool.startswith("msgspec") and not msgspec:
                continue
            if not self.want(tool):
                continue
            if not self.py or not self.has(module) or not self.has("pyarrow"):
                self.missing(case, tool, nbytes, f"{module}/pyarrow not in --compare-venv")
                continue
            need = biggest * (4 if tool.startswith("msgspec") else 8)
            if need > avail * 0.7:
                self.missing(
                    case,
                    tool,
                    nbytes,
                    f"needs ~{need / 2**30:.1f} GiB RAM, {avail / 2**30:.1f} GiB available",
                )
                continue
            code = script.replace("LOADER", repr(loader))
            self.add(
                measure(
                    case,
                    tool,
                    nbytes,
                    [self.py, "-c", code, str(scratch / "pd.parquet"), *map(str, files)],
                    timeout=self.timeout,
                )
            )

    def hta(self, case: str, files: list[Path], nbytes: int, scratch: Path) -> None:
        if not self.py or not self.has("hta"):
            self.missing(case, "HTA", nbytes, "HolisticTraceAnalysis not in --compare-venv")
            return
        if nbytes > self.hta_max_gb * 1e9:
            self.missing(case, "HTA", nbytes, f"input over --hta-max-gb {self.hta_max_gb:g}")
            return
        kdir = scratch / "kineto"
        for r, f in enumerate(files):
            to_kineto(f, kdir, r)
        self.add(
            measure(case, "HTA TraceAnalysis", nbytes, [self.py, "-c", HTA, str(kdir)], timeout=self.timeout)
        )
        shutil.rmtree(kdir, ignore_errors=True)

    # -- CSV ---------------------------------------------------------------------------------------------
    def csv_tools(self, case: str, csv: Path, nbytes: int, scratch: Path) -> None:
        py = self.py or sys.executable
        if self.want("duckdb"):
            self.add(
                measure(
                    case,
                    "duckdb read_csv floor",
                    nbytes,
                    [py, "-c", DUCK_CSV, str(csv), str(scratch / "d.parquet")],
                    timeout=self.timeout,
                )
            )
        if self.want("pandas"):
            if self.py and self.has("pandas") and self.has("pyarrow"):
                self.add(
                    measure(
                        case,
                        "pandas read_csv",
                        nbytes,
                        [self.py, "-c", PANDAS_CSV, str(csv), str(scratch / "p.parquet")],
                        timeout=self.timeout,
                    )
                )
            else:
                self.missing(case, "pandas read_csv", nbytes, "pandas/pyarrow not in --compare-venv")

    # -- msprof-analyze -----------------------------------------------------------------------------------
    def msprof(self, case: str, cluster: Path, nbytes: int, scratch: Path) -> None:
        exe = self.venv / "bin" / "msprof-analyze" if self.venv else None
        for tool, args in (
            ("msprof-analyze cluster", ["cluster", "-m", "all"]),
            ("msprof-analyze advisor", ["advisor", "all", "-l", "en"]),
        ):
            if not self.want(tool):
                continue
            if exe is None or not exe.exists():
                self.missing(case, tool, nbytes, "msprof-analyze not in --compare-venv")
                continue
            copy = scratch / "msprof-copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(cluster, copy, copy_function=os.link)  # hard links: it only adds files
            out = scratch / "msprof-out"
            out.mkdir(exist_ok=True)
            extra = ["-o", str(out)] if tool.endswith("advisor") else []
            r = self.add(
                measure(
                    case,
                    tool,
                    nbytes,
                    [str(exe), *args, "-d", str(copy), *extra],
                    timeout=self.timeout,
                    cwd=out,
                )
            )
            produced = (
                sorted(str(p.relative_to(copy)) for p in (copy / "cluster_analysis_output").glob("*"))
                if (copy / "cluster_analysis_output").is_dir()
                else []
            )
            produced += sorted(p.name for p in out.rglob("*") if p.is_file())
            r.extra["produced"] = produced
            if r.ok and not produced:
                r.note = "ran but wrote no output"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)


def _code_version() -> str:
    """The commit measured, plus the files that differed from it (timings depend on the working tree)."""

    def git(*a: str) -> str:
        r = subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=False)
        return r.stdout.rstrip()  # not strip(): porcelain's first line starts with its status column

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = [ln[3:] for ln in git("status", "--porcelain", "--", "traceql").splitlines() if ln.strip()]
    return head + (f" + uncommitted changes in {', '.join(dirty)}" if dirty else "")


def _available_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


# ---------------------------------------------------------------------------------------------------------
# cases


@dataclass
class State:
    work: Path
    seed: int
    tools: Tools
    last_store: Path | None = None
    last_cluster: Path | None = None
    largest_tv: Path | None = None


def case_tv(st: State, gb: float, synth: bool = False) -> None:
    """tv:<GB> on the real-layout tile (tv_folder), stv:<GB> on traceql.synth's trace_view (earlier tables)."""
    if synth:
        folder, label = gen_trace_view(st.work, gb, st.seed), "synth"
    else:
        folder, label = tv_folder(st.work, gb, st.seed)
    case = f"tv {gb:g} GB ({label})"
    tv = folder / OUT_DIR / "trace_view.json"
    n = tv.stat().st_size
    _note(f"{case}: {tv} ({n / 1e6:.0f} MB)")
    scratch = st.work / "scratch"
    scratch.mkdir(exist_ok=True)
    r = st.tools.traceql_ingest(case, folder, st.work / "store-tv", n)
    _rows(r, st.work / "store-tv")
    st.tools.json_tools(case, [tv], n, scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    if st.largest_tv is None or st.largest_tv.stat().st_size < n:
        st.largest_tv = tv


def case_shape(st: State, kind: str, gb: float) -> None:
    """A trace_view.json of one shape (SHAPES), traceql beside the DuckDB floor and json+pandas; the input and
    store are deleted after measuring (disk)."""
    case = f"{kind} {gb:g} GB"
    folder = gen_shape(st.work, kind, gb, st.seed)
    tv = folder / OUT_DIR / "trace_view.json"
    n = tv.stat().st_size
    _note(f"{case}: {tv} ({n / 1e6:.0f} MB)")
    scratch = st.work / "scratch"
    scratch.mkdir(exist_ok=True)
    store = st.work / f"store-{kind}"
    _rows(st.tools.traceql_ingest(case, folder, store, n), store)
    shutil.rmtree(store, ignore_errors=True)
    st.tools.json_tools(case, [tv], n, scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(folder.parent, ignore_errors=True)


def case_kdi(st: State, rows: int) -> None:
    """An interleaved multi-stream kernel_details.csv (rows in time order only per stream: the store sorts)."""
    case = f"kdi {rows // 1000}k rows"
    folder = gen_interleaved_kd(st.work, rows, st.seed)
    csv = folder / OUT_DIR / "kernel_details.csv"
    n = csv.stat().st_size
    scratch = st.work / "scratch"
    scratch.mkdir(exist_ok=True)
    store = st.work / "store-kdi"
    _rows(st.tools.traceql_ingest(case, folder, store, n), store)
    shutil.rmtree(store, ignore_errors=True)
    st.tools.csv_tools(case, csv, n, scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(folder.parent, ignore_errors=True)


def _kineto_floor(st: State, case: str, src: Path, n: int) -> None:
    floor = "duckdb read_json floor (the file as one object)"
    if st.tools.want(floor):
        avail = _available_memory()
        if n * KINETO_FLOOR_RAM > avail * 0.7:
            st.tools.missing(case, floor, n, f"needs ~{n * KINETO_FLOOR_RAM / 2**30:.1f} GiB RAM, "
                             f"{avail / 2**30:.1f} GiB available")  # fmt: skip
        else:
            out = st.work / "duck-kineto.parquet"
            cmd = [st.tools.py or sys.executable, "-c", DUCK_KINETO, str(src), str(out)]
            st.tools.add(measure(case, floor, n, cmd, timeout=st.tools.timeout))
            out.unlink(missing_ok=True)


def case_kineto(st: State, gb: float) -> None:
    case = f"kineto {gb:g} GB"
    src = gen_kineto(st.work, gb, st.seed)
    n = src.stat().st_size
    store = st.work / "store-kineto"
    _rows(st.tools.traceql_ingest(case, src, store, n), store)
    shutil.rmtree(store, ignore_errors=True)
    _kineto_floor(st, case, src, n)
    scratch = st.work / "scratch"
    scratch.mkdir(exist_ok=True)
    st.tools.python_loaders(case, [src], n, scratch, msgspec=False)  # msgspec's script types an array root
    shutil.rmtree(scratch, ignore_errors=True)
    if not st.tools.want("traceql (ijson reader)"):  # `--skip ijson`: ~10x slower at 4 GB
        return
    cmd = [
        sys.executable,
        "-m",
        "traceql",
        "ingest",
        str(src),
        "--store",
        str(store),
        "--name",
        RUN,
        "--quiet",
        "--no-check",
        *st.tools.ingest_args,
    ]
    env = {**os.environ, "TRACEQL_KINETO_READER": "ijson"}
    r = st.tools.add(
        measure(case, "traceql (ijson reader)", n, cmd, timeout=st.tools.timeout, env=env, cwd=ROOT)
    )
    _rows(r, store)
    shutil.rmtree(store, ignore_errors=True)


def case_kd(st: State, rows: int) -> None:
    case = f"kd {rows // 1000}k rows"
    folder = gen_kernel_details(st.work, rows, st.seed)
    csv = folder / OUT_DIR / "kernel_details.csv"
    n = csv.stat().st_size
    scratch = st.work / "scratch"
    scratch.mkdir(exist_ok=True)
    r = st.tools.traceql_ingest(case, folder, st.work / "store-kd", n)
    _rows(r, st.work / "store-kd")
    st.tools.csv_tools(case, csv, n, scratch)
    shutil.rmtree(scratch, ignore_errors=True)


def tile_real_file(work: Path, src: Path, mb: float) -> tuple[Path, Path]:
    """A real file tiled to `mb` MB by tile_real.py, made once under `work` (reused while its .complete marker is
    there): the torch_npu folder it sits in, and the tiled file (<folder>/ASCEND_PROFILER_OUTPUT/<name>)."""
    from tile_real import tile

    name = src.name.removesuffix(".gz")
    folder = work / f"real-{src.parent.parent.name}-{name}-{mb:g}MB" / "x_ascend_pt"
    dst = folder / OUT_DIR / name
    if not _done(folder).exists():
        shutil.rmtree(folder, ignore_errors=True)
        t = time.monotonic()
        info = tile(src, dst, int(mb * 1e6))
        _note(f"tiled {src} x{info['copies']} -> {dst} ({info['bytes'] / 1e6:.0f} MB, {info['rows']} rows, "
              f"{time.monotonic() - t:.0f} s)")  # fmt: skip
        _done(folder).touch()
    return folder, dst


def case_real(st: State, src: Path, mb: float) -> None:
    """A real file tiled to `mb` MB beside the DuckDB floor of its kind: a kernel_details.csv or trace_view.json
    in a torch_npu folder of its own, a Kineto trace (object root) as the file itself."""
    src = src if src.is_absolute() else REAL_TRACES / src
    if not src.is_file():
        _note(f"real:{src}: no such file (../shared/real_traces absent?); case skipped")
        return
    folder, dst = tile_real_file(st.work, src, mb)
    root, name = folder.parent, dst.name
    n = dst.stat().st_size
    case = f"real {src.parent.name}/{name} {n / 1e6:.0f} MB"
    # a Kineto trace is one object (real ones start with a newline before the brace); a trace_view is an array
    with dst.open("rb") as fh:
        kineto = dst.suffix == ".json" and fh.read(4096).lstrip().startswith(b"{")
    store = st.work / "store-real"
    _rows(st.tools.traceql_ingest(case, dst if kineto else folder, store, n), store)
    shutil.rmtree(store, ignore_errors=True)
    scratch = st.work / "scratch"
    scratch.mkdir(exist_ok=True)
    if dst.suffix == ".csv":
        st.tools.csv_tools(case, dst, n, scratch)
    elif kineto:
        _kineto_floor(st, case, dst, n)
    else:
        st.tools.json_tools(case, [dst], n, scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)


def case_cluster(st: State, n_ranks: int, mb: int, dense: bool = False) -> None:
    kind = "dcluster" if dense else "cluster"
    case = f"{kind} {n_ranks}x{mb}MB"
    folder = gen_cluster(st.work, n_ranks, mb, st.seed, dense)
    n = dir_bytes(folder)
    store = st.work / f"store-{kind}-{n_ranks}x{mb}"
    r = st.tools.traceql_ingest(case, folder, store, n)
    _rows(r, store)
    if r.ok and st.tools.want("traceql -j1"):
        st.tools.traceql_ingest(
            case, folder, st.work / "store-j1", n, "-j", "1", tool="traceql -j1 (1 worker)"
        )
        shutil.rmtree(st.work / "store-j1", ignore_errors=True)
    st.last_store, st.last_cluster = (store if r.ok else None), folder
    scratch = st.work / "scratch"
    scratch.mkdir(exist_ok=True)
    st.tools.msprof(case, folder, n, scratch)
    tvs = sorted(folder.glob(f"*/{OUT_DIR}/trace_view.json"))
    st.tools.json_tools(case, tvs, sum(p.stat().st_size for p in tvs), scratch)
    shutil.rmtree(scratch, ignore_errors=True)


def case_analysis(st: State) -> None:
    if st.last_store is None:
        _note("analysis: no cluster store (run a cluster case first)")
        return
    n = dir_bytes(st.last_cluster) if st.last_cluster else 0
    case = f"analysis ({st.last_store.name.removeprefix('store-')})"
    cmd = [
        sys.executable,
        "-m",
        "traceql",
        "findings",
        "--store",
        str(st.last_store),
        "--run",
        RUN,
        "--all",
        "--format",
        "json",
        "--output",
        str(st.work / "findings.json"),
    ]
    # the first analysis of a run builds its derived tables (traceql.derive); later ones reuse them
    for tool in ("traceql findings --all (1st: builds tables)", "traceql findings --all (again)"):
        r = st.tools.add(measure(case, tool, n, cmd, timeout=st.tools.timeout, cwd=ROOT))
        if r.ok:
            rep = json.loads((st.work / "findings.json").read_text())
            checks = rep.get("findings", rep.get("checks", []))
            r.extra["checks"] = len(checks) if isinstance(checks, list) else None
            r.note = f"{r.extra['checks']} checks"
        r.extra["store_mb"] = dir_bytes(st.last_store, "*.parquet") / 1e6


def case_reopen(st: State) -> None:
    """Open the store with the dump moved away and run a query: must not re-parse (and cannot)."""
    if st.last_store is None or st.last_cluster is None:
        _note("reopen: no cluster store (run a cluster case first)")
        return
    case = "reopen"
    hidden = st.last_cluster.with_name(st.last_cluster.name + ".moved")
    os.replace(st.last_cluster, hidden)
    try:
        sql = "SELECT rank, count(*) AS kernels, sum(dur_ns) AS busy_ns FROM kernels GROUP BY rank ORDER BY rank"
        cmd = [sys.executable, "-m", "traceql", "sql", sql, "--store", str(st.last_store), "--format", "csv"]
        r = st.tools.add(
            measure(case, "traceql sql (dump moved away)", 0, cmd, timeout=st.tools.timeout, cwd=ROOT)
        )
        r.note = (r.note + " " if r.note else "") + f"{len(r.extra['out'].strip().splitlines()) - 1} rows"
        cmd = [sys.executable, "-c", "import duckdb, pyarrow, traceql.engine"]
        st.tools.add(measure(case, "python + imports only", 0, cmd, timeout=st.tools.timeout, cwd=ROOT))
    finally:
        os.replace(hidden, st.last_cluster)


def case_manyruns(st: State, n_runs: int) -> None:
    """A store of many runs: open it and query one run. Runs are copies of one ingested sample run (the store
    layout and manifest are what matter, and ingesting hundreds of dumps would take the whole benchmark)."""
    src_store = st.work / "store-manyruns"
    if not (src_store / "manifest.json").exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "traceql",
                "ingest",
                str(ROOT / "sample_traces" / "torch_npu_2rank"),
                "--store",
                str(src_store),
                "--name",
                "r0000",
                "-q",
                "--no-check",
            ],
            check=True,
            cwd=ROOT,
            capture_output=True,
        )
        # one analysis builds r0000's derived tables, so every copy is an analysed run (the steady state)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "traceql",
                "query",
                "rank_summary",
                "--store",
                str(src_store),
                "--run",
                "r0000",
                "--format",
                "csv",
            ],
            check=True,
            cwd=ROOT,
            capture_output=True,
        )
    m = json.loads((src_store / "manifest.json").read_text())
    base = m["runs"]["r0000"]
    for i in range(1, n_runs):
        rid = f"r{i:04d}"
        if rid not in m["runs"]:
            shutil.copytree(src_store / "runs" / "r0000", src_store / "runs" / rid)
            m["runs"][rid] = dict(base)
    (src_store / "manifest.json").write_text(json.dumps(m))
    n_files = sum(len(fl) for info in m["runs"].values() for fl in info.get("files", {}).values())
    case = f"{n_runs} runs ({n_files} files)"
    cmd = [
        sys.executable,
        "-m",
        "traceql",
        "query",
        "rank_summary",
        "--store",
        str(src_store),
        "--run",
        "r0001",
        "--format",
        "csv",
    ]
    st.tools.add(measure(case, "traceql query (one run)", 0, cmd, timeout=st.tools.timeout, cwd=ROOT))
    cmd = [
        sys.executable,
        "-m",
        "traceql",
        "sql",
        "SELECT count(*) FROM kernels",
        "--store",
        str(src_store),
        "--format",
        "csv",
    ]
    st.tools.add(measure(case, "traceql sql (all runs)", 0, cmd, timeout=st.tools.timeout, cwd=ROOT))


def case_truncated(st: State) -> None:
    src = st.largest_tv or gen_trace_view(st.work, 0.25, st.seed) / OUT_DIR / "trace_view.json"
    size = src.stat().st_size
    cut = int(size * 0.6)
    folder = st.work / "truncated" / "x_ascend_pt"
    (folder / OUT_DIR).mkdir(parents=True, exist_ok=True)
    dst = folder / OUT_DIR / "trace_view.json"
    with open(src, "rb") as fh, open(dst, "wb") as out:
        left = cut
        while left > 0:
            chunk = fh.read(min(left, 8 << 20))
            out.write(chunk)
            left -= len(chunk)
    r = st.tools.traceql_ingest(
        f"truncated {cut / 1e9:.2f} GB", folder, st.work / "store-trunc", cut, ok_rc=(1,)
    )
    msg = r.extra["out"]
    r.note = (
        ("fails, names byte " + str(cut))
        if f"byte {cut}" in msg
        else ("no byte offset in: " + msg.strip()[-160:])
    )
    shutil.rmtree(folder.parent, ignore_errors=True)
    shutil.rmtree(st.work / "store-trunc", ignore_errors=True)


def _rows(r: Result, store: Path) -> None:
    """Row counts from the manifest (so the table shows how much each ingest produced)."""
    try:
        m = json.loads((store / "manifest.json").read_text())
        rows = m["runs"][RUN]["rows"]
        r.extra["rows"] = rows
        r.extra["store_mb"] = dir_bytes(store, "*.parquet") / 1e6
        r.note = (r.note + " " if r.note else "") + f"{sum(rows.values()) / 1e6:.2f}M rows"
    except (OSError, KeyError, ValueError):
        pass


# ---------------------------------------------------------------------------------------------------------
# report


def table(results: list[Result], markdown: bool) -> str:
    head = [
        "case",
        "tool",
        "input MB",
        "wall s",
        "MB/s",
        "CPU s",
        "CPU s/GB",
        "MB/CPU-s",
        "peak RSS MB",
        "traceql faster (wall)",
        "(CPU)",
        "load 1m",
        "note",
    ]
    base: dict[str, Result] = {}
    for r in results:
        if r.tool == "traceql" and r.ok:
            base[r.case] = r
    rows = []
    for r in results:
        mb = r.input_bytes / 1e6
        b = base.get(r.case)
        fast_w = fast_c = ""
        if b is not None and r is not b and r.ok and r.input_bytes and b.wall and b.cpu:
            fast_w = f"{r.wall / b.wall:.1f}x"  # type: ignore[operator]
            fast_c = f"{r.cpu / b.cpu:.1f}x" if r.cpu else ""
        rows.append(
            [
                r.case,
                r.tool,
                f"{mb:.0f}" if mb else "",
                f"{r.wall:.1f}" if r.wall is not None else "",
                f"{mb / r.wall:.0f}" if r.ok and mb and r.wall else "",
                f"{r.cpu:.1f}" if r.cpu is not None else "",
                f"{r.cpu / (mb / 1e3):.2f}" if r.ok and mb and r.cpu is not None else "",
                f"{mb / r.cpu:.0f}" if r.ok and mb and r.cpu else "",
                f"{r.rss / 2**20:.0f}" if r.rss else "",
                fast_w,
                fast_c,
                f"{r.load[0]:.1f}-{r.load[1]:.1f}" if r.wall is not None else "",
                r.note,
            ]
        )
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        out += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
        return "\n".join(out)
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def rss_flatness(results: list[Result]) -> str | None:
    """Per shape (tv, dev, host, ctr, kineto): traceql's peak RSS at each size and max/min over the sizes."""
    lines = []
    for kind in ("tv", "kineto", *SHAPES):
        tv = [
            (r.input_bytes, r.rss)
            for r in results
            if r.tool == "traceql" and r.case.startswith(kind + " ") and r.ok and r.rss
        ]
        if len(tv) < 2:
            continue
        lo, hi = min(x[1] for x in tv), max(x[1] for x in tv)  # type: ignore[type-var]
        sizes = ", ".join(f"{b / 1e9:.2f} GB: {m / 2**20:.0f} MB" for b, m in sorted(tv))  # type: ignore[operator]
        lines.append(f"traceql peak RSS over {kind} sizes ({sizes}): max/min = {hi / lo:.2f}")  # type: ignore[operator]
    return "\n".join(lines) or None


def parse_cases(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        kind, _, arg = item.partition(":")
        if kind in ("tv", "stv", "kineto", *SHAPES):
            out.append((kind, float(arg or 1)))
        elif kind in ("kd", "kdi"):
            out.append((kind, int(float(arg or 500_000))))
        elif kind in ("cluster", "dcluster"):
            n, _, mb = (arg or "8x250").partition("x")
            out.append((kind, (int(n), int(mb))))
        elif kind in ("analysis", "reopen", "truncated"):
            out.append((kind, None))
        elif kind == "manyruns":
            out.append((kind, int(arg or 400)))
        elif kind == "real":
            path, _, mb = arg.rpartition(":")
            out.append((kind, (Path(path), float(mb))))
        else:
            raise SystemExit(
                f"unknown case {item!r} (tv:<GB>, stv:<GB>, dev:<GB>, host:<GB>, ctr:<GB>, kineto:<GB>, kd:<rows>, kdi:<rows>, "
                "cluster:<N>x<MB>, dcluster:<N>x<MB>, analysis, reopen, truncated, "
                "manyruns:<N>, real:<file>:<MB>)"
            )
    return out


def compile_traceql() -> None:
    """Byte-compile the traceql package before anything is timed. Under PYTHONDONTWRITEBYTECODE (set on this
    project's machines) every `traceql` process compiled its ~60 modules from source, ~0.3 s of each ingest's
    fixed cost (a 12 MB trace_view: 1.73 s -> 1.31-1.50 s); a user's install has the .pyc files (pip writes them,
    and an editable install's first run does), as the DuckDB floor's duckdb has. compileall writes them whatever
    that variable says, into __pycache__ (git-ignored)."""
    import compileall

    compileall.compile_dir(str(ROOT / "traceql"), quiet=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="tv:0.25,tv:1,kd:500000,cluster:8x250,analysis,reopen,truncated")
    ap.add_argument(
        "--compare-venv",
        type=Path,
        default=None,
        help="venv with the comparison tools "
        "(benchmarks/requirements.txt); without it only traceql and the DuckDB floor run",
    )
    ap.add_argument(
        "--dir", type=Path, default=None, help="work dir for inputs and stores (default: a temp dir)"
    )
    ap.add_argument(
        "--keep", action="store_true", help="keep the work dir (inputs are reused by the next run)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per measured command")
    ap.add_argument(
        "--hta-max-gb", type=float, default=0.3, help="largest input HTA is run on (it needs ~10x RAM)"
    )
    ap.add_argument(
        "--skip",
        default="",
        help="comma-separated tools not to run: a word or the start of a tool name (e.g. HTA,orjson,msprof)",
    )
    ap.add_argument("--ingest-args", default="", help="extra arguments for `traceql ingest` (e.g. '-j 1')")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (for the README)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results as JSON")
    ap.add_argument(
        "--priority",
        type=int,
        default=None,
        metavar="NICE",
        help="run each measured command in its own session at autogroup nice NICE (e.g. -20, root "
        "only): approximates an idle machine on a loaded one; starves other work meanwhile",
    )
    args = ap.parse_args()
    if args.priority is not None:
        PRIORITY[:] = priority_prefix(args.priority)

    sys.path.insert(0, str(ROOT))
    compile_traceql()
    cases = parse_cases(args.cases)
    work = args.dir or Path(tempfile.mkdtemp(prefix="traceql-bench-ingest-"))
    work.mkdir(parents=True, exist_ok=True)
    venv = args.compare_venv
    if venv is not None and not (venv / "bin" / "python").exists():
        _note(
            f"--compare-venv {venv}: no bin/python there; comparisons other than the DuckDB floor are skipped"
        )
        venv = None
    tools = Tools(
        venv, args.timeout, args.hta_max_gb, {s for s in args.skip.split(",") if s}, args.ingest_args.split()
    )
    st = State(work, args.seed, tools)
    code = _code_version()
    _note(
        f"work dir {work}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}; "
        f"free disk {shutil.disk_usage(work).free / 1e9:.0f} GB; traceql {code}"
    )
    try:
        for kind, arg in cases:
            if kind in ("tv", "stv"):
                case_tv(st, arg, synth=kind == "stv")
            elif kind in SHAPES:
                case_shape(st, kind, arg)
            elif kind == "kdi":
                case_kdi(st, arg)
            elif kind == "kineto":
                case_kineto(st, arg)
            elif kind == "kd":
                case_kd(st, arg)
            elif kind in ("cluster", "dcluster"):
                case_cluster(st, *arg, dense=kind == "dcluster")
            elif kind == "analysis":
                case_analysis(st)
            elif kind == "reopen":
                case_reopen(st)
            elif kind == "truncated":
                case_truncated(st)
            elif kind == "manyruns":
                case_manyruns(st, arg)
            elif kind == "real":
                case_real(st, *arg)
    finally:
        print(table(tools.results, args.markdown))
        flat = rss_flatness(tools.results)
        if flat:
            print(("\n" if args.markdown else "") + flat)
        prio = f"; each command in its own session at autogroup nice {args.priority}" if PRIORITY else ""
        print(f"traceql {code}")
        print(
            f"\n{os.cpu_count()} CPUs; load = 1-min load average before-after each command{prio}; "
            "traceql faster = tool time / traceql time on the same case."
        )
        if args.json:
            args.json.write_text(
                json.dumps([dict(r.__dict__.items()) for r in tools.results], indent=1, default=str)
            )
        if not args.keep and args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
