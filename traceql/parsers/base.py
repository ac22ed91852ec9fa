"""Parser protocol, registry and format detection.

A parser claims a path (file or folder) cheaply — by names and first bytes, never by parsing it whole — and
splits it into Units: independently parseable pieces, normally one per rank. `parse` streams canonical
batches into a RankWriter (units are converted there, once) and returns metadata for the manifest.
Units are parsed in separate processes, so everything here must be picklable by name.
"""

from __future__ import annotations

import importlib
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import BadTraceError, UnknownFormatError

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    from ..rank_writer import RankWriter


@dataclass(frozen=True)
class Unit:
    parser: str  # registry name
    path: str  # file or folder this unit reads
    rank: int | None = None  # None: assign by order
    options: tuple[tuple[str, str], ...] = field(default=())


class Parser(Protocol):
    name: str
    description: str

    def claim(self, path: Path) -> list[Unit] | None:
        """Units for `path` if this parser recognises it, else None. Must be cheap."""

    def parse(self, unit: Unit, out: RankWriter) -> dict[str, Any]:
        """Write canonical tables for one unit; return metadata (device, format details, warnings)."""


# The built-in parsers' modules, in claim order: the first parser that claims a path wins (specific before
# generic). Each module lists its parsers in PARSERS; they are registered (register) on the first lookup, so a
# worker process that parses a unit imports them by name. A module that fails to import is an error, not a
# parser skipped: a broken install must not ingest a dump with another parser.
BUILTIN_MODULES = [
    "traceql.parsers.torch_npu",  # *_ascend_pt text export, single CSV/trace_view files
    "traceql.parsers.torch_npu_db",  # ascend_pytorch_profiler_*.db / analysis.db
    "traceql.parsers.msprof",  # PROF_* text output, msprof_*.json, op_summary CSV
    "traceql.parsers.msprof_db",  # msprof_*.db
    "traceql.parsers.nsys",  # Nsight Systems SQLite export (*.sqlite / *.db with META_DATA_EXPORT)
    "traceql.parsers.opprof",  # msprof op OPPROF_* folders (or one launch folder with OpBasicInfo_*.csv)
    "traceql.parsers.trace_view",  # a trace_view.json / msprof_*.json given on its own
    "traceql.parsers.kineto",  # torch.profiler / Kineto chrome traces (.json/.json.gz)
    "traceql.parsers.cluster",  # msprof-analyze cluster_analysis_output
]

_REGISTRY: dict[str, Parser] = {}  # name -> parser, in claim order
_BUILTINS_LOADED = False


def register(parser: Parser, *, first: bool = False) -> Parser:
    """Add a parser to the registry (`traceql.parsers.register(MyParser())`); returns it.

    It claims paths after the parsers registered before it, or before all of them with first=True (a format
    more specific than a built-in one that would also claim it). The registry is per process: ingest's
    worker processes see a parser registered at import time of a module they import (as the built-ins are),
    or inherited through fork. A second parser under a registered name is refused."""
    _load_builtins()
    name = getattr(parser, "name", None)
    if not isinstance(name, str) or not name or not callable(getattr(parser, "claim", None)):
        raise TypeError(f"{parser!r} is not a parser: it needs a name, claim(path) and parse(unit, out)")
    if not callable(getattr(parser, "parse", None)):
        raise TypeError(f"{parser!r} is not a parser: it needs a name, claim(path) and parse(unit, out)")
    if _REGISTRY.get(name, parser) is not parser:
        raise ValueError(f"a parser named {name!r} is already registered ({_REGISTRY[name]!r})")
    _REGISTRY[name] = parser
    if first:
        rest = {k: v for k, v in _REGISTRY.items() if k != name}
        _REGISTRY.clear()
        _REGISTRY.update({name: parser, **rest})
    return parser


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    _BUILTINS_LOADED = True  # before the loop: register() below calls back here
    for mod_name in BUILTIN_MODULES:
        for p in importlib.import_module(mod_name).PARSERS:
            register(p)


def registry() -> dict[str, Parser]:
    """Every registered parser by name, in claim order (the built-ins first, loaded on first use)."""
    _load_builtins()
    return _REGISTRY


def get(name: str) -> Parser:
    return registry()[name]


MAX_RANK = 2**31 - 1  # ranks are int32 in every launcher (torch.distributed, HCCL); the store keeps int64


def check_rank(value: int, path: str | Path, field: str) -> int:
    """A rank read from a dump, or BadTraceError naming the file and field when it is outside 0..MAX_RANK
    (a rank_id >= 2**63 was an internal OverflowError naming nothing)."""
    if not 0 <= value <= MAX_RANK:
        raise BadTraceError(path, f"{field} {value} is not a rank (expected 0..{MAX_RANK})")
    return value


def _check_units(units: list[Unit]) -> list[Unit]:
    for u in units:
        if u.rank is not None and u.rank != -1:  # -1: cluster-level rows (parsers.cluster)
            check_rank(u.rank, u.path, "rank")
    return units


def _claim(path: Path) -> list[Unit] | None:
    for p in registry().values():
        try:
            units = p.claim(path)
        except BadTraceError:
            raise
        except (OSError, ValueError, EOFError, RecursionError, zlib.error) as e:
            # a sniffer tripping over a damaged file still owes the user one line naming it (zlib.error: a
            # .gz whose deflate stream is corrupt, neither OSError nor ValueError; issue 47's fuzz run)
            raise BadTraceError(path, f"cannot read it to detect the format ({type(e).__name__}: {e})") from e
        if units:
            return _check_units(units)
    return None


def detect(path: Path, on_progress: Callable[[int, int], None] | None = None) -> list[Unit]:
    """Units to parse for `path`: the path itself, or (for a cluster folder) each child dump, one rank each.
    on_progress(done, total): called as each child of a cluster folder has been looked at (a progress bar:
    a folder of 1,000 rank dumps takes seconds to sniff)."""
    from ._files import check_tree

    check_tree(path)  # no sniffer may open a FIFO or a device (a hang, or /dev/zero read whole)
    return _with_roles(path, _detect(path, on_progress))


def _with_roles(root: Path, units: list[Unit]) -> list[Unit]:
    """Each unit with the RL role folder between the dump and it (parsers.roles), as option `role`: decided here,
    against the path the user named, so a dump copied elsewhere (s3://) keeps the same roles."""
    from .roles import role_of

    out = []
    for u in units:
        role = role_of(u.path, root)
        out.append(replace(u, options=(*u.options, ("role", role))) if role else u)
    return out


def _detect(path: Path, on_progress: Callable[[int, int], None] | None) -> list[Unit]:
    units = _claim(path)
    if units:
        return units
    if path.is_dir():
        found: list[Unit] = []
        owner: dict[int, Path] = {}
        children = sorted(path.iterdir(), key=lambda p: p.name)
        for i, child in enumerate(children):
            if on_progress is not None:
                on_progress(i, len(children))
            if child.name.startswith(".") or child.name == "cluster_analysis_output":
                continue
            if child.is_dir():
                u = _claim(child)
                if u:
                    for x in u:
                        # two rank folders claiming one rank would be merged into one rank's tables, silently
                        if x.rank is not None and x.rank >= 0:
                            other = owner.setdefault(x.rank, child)
                            if other != child:
                                raise BadTraceError(child, f"says it is rank {x.rank}, as does {other}: two rank folders "
                                                           "with one rank_id (copied folder? ingest them separately)")  # fmt: skip
                    found.extend(u)
        if on_progress is not None:
            on_progress(len(children), len(children))
        if found:
            # cluster-level outputs (msprof-analyze) ride along with the per-rank dumps
            cao = path / "cluster_analysis_output"
            if cao.is_dir():
                # the ranks' own files already give per-rank rows: the cluster parser adds only cluster-level ones
                found.extend(
                    replace(u, options=(*u.options, ("alongside", "rank_dumps"))) for u in _claim(cao) or []
                )
            return found
        raise UnknownFormatError(
            path,
            "no known profiler dump here (expected a *_ascend_pt folder with ASCEND_PROFILER_OUTPUT/, a PROF_* folder, "
            "a folder of those, or a trace .json/.json.gz/.db/.csv file)",
        )
    known_other = _unsupported_kind(path)
    if known_other:
        raise UnknownFormatError(path, known_other)
    raise UnknownFormatError(
        path,
        "not a recognised profiler dump (expected trace_view.json, msprof_*.json, a Kineto/torch.profiler "
        "trace .json/.json.gz, kernel_details.csv/op_summary_*.csv, or an ascend_pytorch_profiler/msprof .db)",
    )


def _unsupported_kind(path: Path) -> str | None:
    """The message for a profiler output traceql knows of but does not ingest, else None.

    - PyTorch Execution Trace (torch.profiler.ExecutionTraceObserver, Chakra ET; `"schema": "1.x.y-chakra..."`,
      `"nodes": [...]`): the operator graph with inputs/outputs, no device timeline. Skipped: traceql reads the
      Kineto trace recorded beside it.
    - Perfetto protobuf traces (`.pftrace`, e.g. from PyTorch's cupti_monitor profiler backend,
      `export_chrome_trace("x.pftrace")`): the perfetto package's TracePacket protos decode the file offline (no
      trace_processor needed). The encoder (pytorch `torch/csrc/profiler/cupti/monitor_pftrace.cpp`, commit
      39304f15) writes TrackDescriptors (process pid/name, thread pid/tid/name), one interned event-name table,
      then per group all TYPE_SLICE_BEGIN packets (timestamp, track_uuid, name_iid, flow_ids, the chrome args as
      debug_annotations) followed by all TYPE_SLICE_END packets, and **no category**: which slices are GPU
      kernels, copies, CUDA runtime calls or cpu_ops is only implied by the track names, which that source does
      not fix. Mapping them would be a guess, so the file is refused by name; the same window exported as
      chrome JSON (the default) carries `cat` and ingests fully.
    """
    name = path.name.lower()
    if name.endswith((".pftrace", ".perfetto-trace", ".perfetto")):
        return (
            "a Perfetto protobuf trace (.pftrace, e.g. the cupti_monitor profiler backend): not ingested, its track "
            "layout is not documented in the sources traceql reads; export the run as a Kineto/Chrome trace "
            "(prof.export_chrome_trace('trace.json')) and ingest that"
        )
    if name.endswith((".json", ".json.gz")):
        try:
            head = read_head(path, 2048)
        except (OSError, BadTraceError):
            return None
        if b'"nodes"' in head and (b"chakra" in head or b"execution_trace" in head):
            return (
                "a PyTorch Execution Trace (ExecutionTraceObserver / Chakra ET: an operator graph without a device "
                "timeline): not ingested; ingest the Kineto trace recorded beside it (the profiler's trace .json)"
            )
    return None


def read_head(path: Path, n: int = 4096) -> bytes:
    """First bytes of a file, gunzipped when it is gzip: what sniffers look at."""
    import gzip

    from ._files import open_regular

    with open_regular(path) as fh:
        head = fh.read(n)
        if head[:2] != b"\x1f\x8b":
            return head
        fh.seek(0)
        try:
            with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                return gz.read(n)
        except (OSError, EOFError):
            return b""
