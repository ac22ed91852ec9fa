"""The on-disk store: plain Parquet per run/table/rank plus one manifest.json.

Layout (readable by the stock duckdb shell and pandas/polars):

    <store>/manifest.json                          runs, their files and metadata (the single source of truth)
    <store>/runs/<run_id>.<gen>/<table>/r<rank>-<k>.parquet   one generation of a run (manifest: runs.<id>.dir)
    <store>/views.sql                              CREATE VIEW statements for the duckdb shell (`.read views.sql`)
    <store>/.staging/<uuid>/ + <uuid>.lock         runs being written, each owned by its ingest's flock
    <store>/.lock                                  writers' exclusive lock (every manifest change)
    <store>/.readers.lock                          readers' shared lock (engine.connect holds it per connection)

Crash safety (kill -9 or power loss at any instant leaves a store that opens, with every listed run complete):
- a commit never touches a directory the manifest lists: the new run is renamed from .staging to a *fresh*
  generation dir `runs/<run>.<gen>`, its files and dirs fsynced, then the manifest is replaced (temp file,
  fsync, os.replace, fsync of the store dir). Until that replace the old manifest and all its files stand;
  after it the new ones do. `--replace` and `rm` only change the manifest.
- whatever the manifest no longer lists (a replaced or removed run's dir, superseded derived files, a dead
  ingest's staging dir, a crashed commit's orphan, a temp manifest) is reaped under the writers' lock
  (`_reap`: after every manifest change, and as the start-up check `tidy()` when an ingest starts); runs/
  entries only while no reader holds the shared readers' lock, so a query that read the old manifest keeps
  its files until it ends (an open connection defers the deletion to a later write).
STORE_FORMAT 1 stores (runs/<run_id>/ with no `dir` in the manifest) are read as they are; the next commit
writes the manifest as format 2 and gives new runs generation dirs. The start-up check also repairs the torn
state a kill could leave in a format-1 `--replace` (the old run dir back from .staging/trash-*), and readers
report a run whose listed files are missing by name (engine._damaged).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import schema
from .errors import StoreError
from .version import __version__

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow.parquet as pq

MANIFEST = "manifest.json"
STORE_FORMAT = 2
# 1: before generation dirs (a run lives in runs/<run_id>/, the manifest has no `dir`): read as is
READABLE_FORMATS = (1, 2)
_DIR_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")
RUN_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# Rows per Parquet row group: small enough to stream, large enough for DuckDB scans.
ROW_GROUP = 128 * 1024


def default_store() -> Path:
    return Path(os.environ.get("TRACEQL_STORE", ".traceql"))


def check_run_name(name: str) -> str:
    """Run names become directory names: allow a safe character set only (no traversal, no hidden dirs)."""
    if not RUN_NAME_RE.match(name) or name in {".", ".."}:
        raise StoreError(
            f"invalid run name {name!r}: use letters, digits, '.', '_' and '-' (max 128, not starting with . or -)"
        )
    return name


def run_name_from_path(path: Path) -> str:
    stem = path.name
    for suffix in (".gz", ".json", ".csv", ".db"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._") or "run"
    return cleaned[:128]


_RANK_FILE = re.compile(r"(?:^|/)r(-?\d+)-[^/]*\.parquet$")


def rank_of_file(rel: str) -> int | None:
    """The rank a store file holds, from its name (`<table>/r<rank>-<tag>.parquet`, as RankWriter and
    traceql.derive name them); None for a name that does not follow the layout."""
    m = _RANK_FILE.search(rel)
    return int(m.group(1)) if m else None


@dataclass
class RankWriter:
    """Streams canonical batches for one rank into Parquet files under a staging run dir (one writer per table
    and part).

    A part is a separately time-ordered stream of one table's rows (`<table>/r<rank>-<tag>-<part>.parquet`):
    a parser that produces rows of one table from sources that are each in time order but interleave (torch_npu's
    host events come before the CANN events, which are interleaved with the device events; percent counters are
    rescaled at the end of the file) writes them as parts, so every file stays time-sorted as written and none
    needs the post-write sort (a full external sort of the table: 1.3 s for 2M counter rows)."""

    run_dir: Path
    run_id: str
    rank: int
    tag: str = "0"
    rows: dict[str, int] = field(default_factory=dict)
    _writers: dict[str, pq.ParquetWriter] = field(default_factory=dict)  # by file (relative path)
    files: dict[str, list[str]] = field(default_factory=dict)
    # per file: last ts_ns written, and whether rows so far arrived in time order (then no re-sort is needed)
    _last_ts: dict[str, int] = field(default_factory=dict)
    _unsorted: set[str] = field(default_factory=set)
    file_rows: dict[str, int] = field(default_factory=dict)  # rows written, per file (relative path)
    # seal(): files closed early, and the background sorts of those that need one (see seal)
    _sealed: set[str] = field(default_factory=set)
    _sorts: list[Any] = field(default_factory=list)
    _sorter: Any = None
    # rows of a file that arrive after it went out of time order: Arrow IPC beside it, merged by its sort
    _spills: dict[str, Any] = field(default_factory=dict)
    # write(apart_by=...): the files whose rows now go to parts by value, and each (file, value)'s part name
    _apart: set[str] = field(default_factory=set)
    _apart_parts: dict[tuple[str, Any], str] = field(default_factory=dict)

    def write(self, table: str, data: Any, part: str = "", apart_by: str | None = None) -> None:
        """Append rows to the table's file for `part`.

        apart_by: a column whose values are separately time-ordered streams (kernels: stream_id; a multi-stream
        kernel_details.csv may group its rows by stream; counters: track, as a trace_view writes each counter
        process's samples in order, in blocks that interleave). Once the rows stop arriving in time order, they and
        every later row of this file go to one part per value (up to APART_MAX; the rest share one part), so
        each file is still in time order as written and the post-write sort is skipped (on a 500k-row
        kernel_details.csv of 4 interleaved streams it added ~6 CPU-s to a ~10 CPU-s parse). Rows that arrive
        in order keep the one file, as without apart_by."""
        from ._arrow_helpers import conform

        # Arrow rows that can be split as they are are conformed per part, after the split: a reorder then moves
        # the parser's own column types (a kernels map's dictionary-encoded keys), not the canonical text
        raw = data if apart_by is not None and _splittable(data, apart_by) else None
        t = raw if raw is not None else conform(table, data, self.run_id, self.rank, dictionary_keys=True)
        if t.num_rows == 0:
            return
        rel = self._rel(table, part)
        if rel in self._sealed:
            raise RuntimeError(f"{rel}: written after seal()")
        if apart_by is not None and (rel in self._apart or not self._in_order(rel, t)):
            self._apart.add(rel)
            for value, rows in _split_by(t, apart_by):
                if raw is not None:
                    rows = conform(table, rows, self.run_id, self.rank, dictionary_keys=True)
                key = (rel, value)
                if key not in self._apart_parts:
                    n = len([k for k in self._apart_parts if k[0] == rel])
                    # an integer (a stream id) names its part; a text value (a counter track's name, which may
                    # hold any character) is numbered in order of first sight
                    name = f"s{value}" if isinstance(value, int) else f"v{n}"
                    self._apart_parts[key] = name if n < APART_MAX and value is not None else "s-rest"
                sub = self._apart_parts[key]
                self._write_file(table, self._part_rel(table, part, sub), rows)
            return
        self._write_file(
            table, rel, t if raw is None else conform(table, t, self.run_id, self.rank, dictionary_keys=True)
        )

    def _rel(self, table: str, part: str) -> str:
        return f"{table}/r{self.rank}-{self.tag}{'-' + part if part else ''}.parquet"

    def _part_rel(self, table: str, part: str, sub: str) -> str:
        """The file of `part`'s apart part `sub` (see write's apart_by)."""
        return self._rel(table, f"{part}-{sub}" if part else sub)

    def _write_file(self, table: str, rel: str, t: Any) -> None:
        from ._arrow_helpers import parquet_writer, plain_keys

        w = self._writers.get(rel)
        if w is None:  # the first rows of this file (it may stay empty when they are already out of order)
            (self.run_dir / table).mkdir(parents=True, exist_ok=True)
            w = parquet_writer(self.run_dir / rel, t.schema)
            self._writers[rel] = w
            self.files.setdefault(table, []).append(rel)
        self.rows[table] = self.rows.get(table, 0) + t.num_rows
        self.file_rows[rel] = self.file_rows.get(rel, 0) + t.num_rows
        if rel not in self._unsorted and "ts_ns" in t.schema.names:
            ts = t.column("ts_ns")
            if _ordered_after(self._last_ts.get(rel), ts):
                last = _last_valid(ts)
                if last is not None:
                    self._last_ts[rel] = last
            else:  # the first rows out of time order: they and all later rows go to the spill (see _spill)
                self._unsorted.add(rel)
        if rel in self._unsorted:  # to be sorted anyway: no Parquet encoding now, none to decode in the sort
            # the spill holds the canonical types the Parquet file reads back with (the sort reads both)
            self._spill(rel, t.cast(plain_keys(t.schema)))
            return
        if not t.schema.equals(w.schema):
            t = t.cast(w.schema)  # map keys dictionary-encoded in one batch and not in another: as the first
        w.write_table(t, row_group_size=ROW_GROUP)

    def _spill(self, rel: str, t: Any) -> None:
        """Append rows to `rel`'s spill: once a file is out of time order its later rows are only ever read back by
        its sort, so they are written as lz4 Arrow IPC instead of zstd Parquet, and the sort reads them back
        without decoding Parquet (a 1 GB trace_view's host ops come in end-time order: ~1.4M rows that were
        encoded, decoded and encoded again).

        Each write is sorted by time first (stable, NULLs last) and stored in small record batches, so the spill
        is a few time-ordered runs after the Parquet file's own in-order rows, and the sort merges them in one
        pass instead of dealing every row into time buckets and reading it back (traceql._sort). A trace_view's
        host ops are out of order only within a write (a parent after its children): the real level1 file tiled
        to 250 MB / 1 GB gives one run, to 4 GB 27."""
        import pyarrow as pa

        from ._sort import RUN_CHUNK_ROWS, sorted_by_time

        w = self._spills.get(rel)
        if w is None:
            w = pa.ipc.new_file(
                str(self._spill_path(rel)), t.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")
            )
            self._spills[rel] = w
        w.write_table(sorted_by_time(t), max_chunksize=RUN_CHUNK_ROWS)

    def _spill_path(self, rel: str) -> Path:
        return self.run_dir / f"{rel}.unsorted.arrow"

    def _close_file(self, rel: str) -> None:
        for writers in (self._writers, self._spills):
            w = writers.pop(rel, None)
            if w is not None:
                w.close()

    def _sort_file(self, rel: str) -> None:
        """Sort `rel` with its spill (if any), then delete the spill."""
        spill = self._spill_path(rel)
        sort_parquet_by_time(self.run_dir / rel, *([spill] if spill.exists() else []))
        with contextlib.suppress(FileNotFoundError):
            spill.unlink()

    def seal(self, table: str, part: str = "") -> None:
        """No more rows for `table`'s file `part` (and the parts write(apart_by=...) made of it): close it now,
        and sort it in a background thread if its rows did not arrive in time order, so the sort runs beside
        the parser's remaining work (a trace_view's flow pairing and comm ops, the folder's other files)
        instead of after it. close() waits for these sorts and raises the first error."""
        rel = self._rel(table, part)
        mine = {rel} | {
            self._part_rel(table, part, sub) for (r, _), sub in self._apart_parts.items() if r == rel
        }
        for r in self.files.get(table, []):
            if r in self._sealed or r not in mine:
                continue
            self._sealed.add(r)
            self._close_file(r)
            if r in self._unsorted:
                if self._sorter is None:
                    from concurrent.futures import ThreadPoolExecutor

                    # one thread: sorts run one at a time, each within the sort's own memory budget
                    self._sorter = ThreadPoolExecutor(1, thread_name_prefix="traceql-sort")
                self._unsorted.discard(r)
                self._sorts.append(self._sorter.submit(self._sort_file, r))

    def _wait_for_sorts(self) -> None:
        """Wait for every background sort; raise the first one's error."""
        sorts, self._sorts = self._sorts, []
        errors = [e for f in sorts if (e := f.exception()) is not None]
        if self._sorter is not None:
            self._sorter.shutdown(wait=True)
            self._sorter = None
        if errors:
            raise errors[0]

    def abort(self) -> None:
        """Close every writer on an error path, ignoring their errors (the staging dir is discarded anyway);
        a ParquetWriter left open prints 'Exception ignored in ParquetWriter.__del__' when collected. A
        background sort still running is waited for, so nothing writes into the staging dir once this returns."""
        writers, self._writers = list(self._writers.values()), {}
        _abandon(writers)
        spills, self._spills = list(self._spills.values()), {}
        for w in spills:
            with contextlib.suppress(BaseException):
                w.close()
        with contextlib.suppress(BaseException):  # an error path already: the first error is the one reported
            self._wait_for_sorts()

    def _in_order(self, rel: str, t: Any) -> bool:
        """Would these rows keep the file `rel` in time order (nothing written to it is out of order)?"""
        if "ts_ns" not in t.schema.names or rel in self._unsorted:
            return rel not in self._unsorted
        return _ordered_after(self._last_ts.get(rel), t.column("ts_ns"))

    def close(self, sort: bool = True) -> None:
        """Close every file, wait for the background sorts, and sort the files still out of time order
        (sort=False: leave them as written: a file's in-order rows, then its spilled writes in the order written, each
        in its own time order, see _spill)."""
        writers, self._writers = list(self._writers.values()), {}
        for i, w in enumerate(writers):
            try:
                w.close()
            except BaseException:
                _abandon(writers[i:])  # one failed close (disk full) must not leave the others to __del__
                raise
        spills, self._spills = list(self._spills.values()), {}
        for w in spills:
            w.close()
        self._wait_for_sorts()
        for rels in self.files.values():
            for rel in rels:
                if rel in self._unsorted and sort:
                    self._sort_file(rel)
                elif self._spill_path(rel).exists():
                    append_to_parquet(self.run_dir / rel, self._spill_path(rel))
        self.largest_first()

    def largest_first(self) -> None:
        """Order each table's files by rows, most first (stable). DuckDB estimates a read_parquet over a list of
        files as the first file's rows times the number of files: a table whose first file was a small part
        (a counter track of 900 samples before parts of 600k and 1.2M) was estimated at ~7k rows instead of
        2M and chosen as a hash join's build side, with every row under one key (rank): the
        counters_outside_run_window check took 3.5 s instead of 0.09 s on a 1 GB trace_view (measured)."""
        for rels in self.files.values():
            rels.sort(key=lambda rel: -self.file_rows.get(rel, 0))


APART_MAX = 32  # parts of one file by write(apart_by=...) value; more values share one part (then sorted)


def _ordered_after(last: int | None, ts: Any) -> bool:
    """Are the non-null ts values non-decreasing and none below `last` (the file's last written ts)?"""
    import pyarrow.compute as pc

    ts = pc.drop_null(ts)
    if hasattr(ts, "combine_chunks"):
        ts = ts.combine_chunks()
    if len(ts) == 0:
        return True
    from ._sort import nondecreasing

    return (last is None or ts[0].as_py() >= last) and nondecreasing(ts)


def _last_valid(ts: Any) -> int | None:
    import pyarrow.compute as pc

    ts = pc.drop_null(ts)
    return None if len(ts) == 0 else ts[len(ts) - 1].as_py()


def _splittable(data: Any, col: str) -> bool:
    """Can RankWriter.write order and split `data` before conforming it: Arrow rows holding the split column and
    int64 ts_ns (what the order check reads)?"""
    import pyarrow as pa

    if not isinstance(data, (pa.Table, pa.RecordBatch)):
        return False
    names = data.schema.names
    return col in names and "ts_ns" in names and data.schema.field("ts_ns").type == pa.int64()


# Rows that come in runs of one value at least this long on average are split by slicing (see _split_by)
SPLIT_RUN_ROWS = 256


def _split_by(t: Any, col: str) -> list[tuple[Any, Any]]:
    """(value, rows) for each distinct value of `col` in first-seen order; rows keep their order.

    Rows that come in runs of one value (a multi-stream kernel_details' streams, a trace_view's counter tracks:
    blocks of hundreds to thousands of rows) are sliced, not copied: a value's rows are its runs' slices, as a
    table of chunks, which the Parquet writer takes as they are (500k interleaved kernel_details rows: the
    take of every column, two maps included, was 0.4 s of the main thread). Rows whose values alternate in
    short runs are grouped with one take."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = t.column(col)
    if hasattr(keys, "combine_chunks"):
        keys = keys.combine_chunks()
    uniq = pc.unique(keys)
    if len(uniq) == 1:
        return [(uniq[0].as_py(), t)]
    codes = pc.index_in(keys, value_set=uniq)  # NULL keys get the index of the NULL in uniq
    n = len(codes)
    change = pc.not_equal(codes.slice(1), codes.slice(0, n - 1))
    runs = 1 + (pc.sum(change).as_py() or 0)
    if runs * SPLIT_RUN_ROWS <= n:
        table = pa.Table.from_batches([t]) if isinstance(t, pa.RecordBatch) else t
        starts = [0, *(i + 1 for i in pc.indices_nonzero(change).to_pylist()), n]
        parts: dict[int, list[Any]] = {}
        run_codes = codes.take(pa.array(starts[:-1])).to_pylist()
        for code, a, b in zip(run_codes, starts[:-1], starts[1:], strict=True):
            parts.setdefault(code, []).append(table.slice(a, b - a))
        return [(uniq[c].as_py(), pa.concat_tables(parts[c])) for c in sorted(parts)]
    order = pc.sort_indices(codes)  # stable: each value's rows in file order
    grouped = t.take(order)
    counts = pc.value_counts(codes)
    by_code = {c["values"]: c["counts"] for c in counts.to_pylist()}
    out, start = [], 0
    for code in sorted(by_code):
        m = by_code[code]
        out.append((uniq[code].as_py(), grouped.slice(start, m)))
        start += m
    return out


def _abandon(writers: list[Any]) -> None:
    for w in writers:
        with contextlib.suppress(BaseException):  # an error path already: the first error is the one reported
            w.close()
        w.is_open = False  # pyarrow's __del__ closes again (and prints) while is_open is still set


def sort_parquet_by_time(path: Path, *more: Path) -> None:
    """Rewrite a Parquet file ordered by ts_ns, so row-group min/max stats let DuckDB skip by time; `more`: files
    of further rows (a RankWriter's spill) merged into it.

    Parsers stream events in file order (grouped by track or stream, not by time). traceql._sort sorts within
    a fixed memory budget by dealing rows into time-range buckets beside the file (inside the staging run
    dir), so it finishes for any row width and order; it reads the compressed Parquet, not the dump.
    """
    from ._sort import sort_by_time

    _rewrite(path, lambda tmp: sort_by_time(path, tmp, ROW_GROUP, more=more))


def append_to_parquet(path: Path, spill: Path) -> None:
    """Rewrite a Parquet file with the rows of an Arrow IPC file after its own, in order; delete the spill."""
    from ._sort import concat_files

    _rewrite(path, lambda tmp: concat_files([path, spill], tmp, ROW_GROUP))
    spill.unlink()


def _rewrite(path: Path, write: Callable[[Path], None]) -> None:
    """Replace `path` by what `write` writes to a temporary file beside it (removed if it fails)."""
    tmp = path.with_suffix(".rewrite.tmp")
    try:
        write(tmp)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.replace(tmp, path)


READERS_LOCK = ".readers.lock"


def _fsync_path(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _safe_rel(rel: str) -> bool:
    """A manifest file path that stays inside its run dir (a tampered manifest must not name ../x)."""
    parts = Path(rel).parts
    return bool(parts) and not Path(rel).is_absolute() and ".." not in parts


def _holds_run(d: Path, info: dict[str, Any]) -> bool:
    """Whether dir `d` holds every file the manifest entry lists, with the row counts it records."""
    import pyarrow.parquet as pq

    if d.is_symlink() or not d.is_dir():
        return False
    try:
        rows = info.get("rows", {})
        for table, rels in info.get("files", {}).items():
            n = sum(pq.ParquetFile(d / rel).metadata.num_rows for rel in rels)  # raises if one is missing
            if table in rows and n != rows[table]:  # derived tables record their rows elsewhere
                return False
    except (OSError, ValueError):  # missing or not Parquet (pyarrow raises ArrowInvalid, a ValueError)
        return False
    return True


class Store:
    # --- object storage hook (traceql.store_fs): a URL root (s3://...) opens an ObjectStore -------------
    def __new__(cls, root: str | Path | None = None, *args: Any, **kwargs: Any) -> Store:
        if cls is Store:
            from . import store_fs

            if store_fs.is_remote(root if root is not None else os.environ.get("TRACEQL_STORE")):
                return super().__new__(store_fs.ObjectStore)
        return super().__new__(cls)

    def __init__(self, root: str | Path | None = None) -> None:
        from .store_fs import local_path

        self.root = local_path(root) if root is not None else default_store()

    # --- end hook ---------------------------------------------------------------------------------------

    # ---- reading -------------------------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def manifest(self) -> dict[str, Any]:
        if not self.exists():
            return {"store_format": STORE_FORMAT, "runs": {}}
        try:
            m = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise StoreError(f"{self.manifest_path}: unreadable manifest ({e}); the store is damaged") from e
        if (
            not isinstance(m, dict)
            or not isinstance(m.get("runs", {}), dict)
            or not all(isinstance(v, dict) for v in m.get("runs", {}).values())
        ):
            raise StoreError(
                f"{self.manifest_path}: manifest is damaged (expected an object with a 'runs' object of runs)"
            )
        fmt = m.get("store_format")
        if type(fmt) is not int or fmt not in READABLE_FORMATS:
            raise StoreError(
                f"{self.manifest_path}: store format {fmt!r} is not supported by traceql {__version__} "
                f"(expects {' or '.join(map(str, READABLE_FORMATS))}); re-ingest into a new store"
            )
        m.setdefault("runs", {})
        return m

    def runs(self) -> dict[str, dict[str, Any]]:
        return dict(self.manifest().get("runs", {}))

    def run(self, run_id: str) -> dict[str, Any]:
        runs = self.runs()
        if run_id not in runs:
            known = ", ".join(sorted(runs)) or "none"
            from .suggest import did_you_mean

            hint = did_you_mean(run_id, runs)
            raise StoreError(f"no run {run_id!r} in store {self.root}{hint} (runs: {known})")
        return runs[run_id]

    def latest_run(self) -> str | None:
        """The most recently ingested run (ties: the larger name), or None for an empty store."""
        runs = self.runs()
        if not runs:
            return None
        return str(max(runs.items(), key=lambda kv: (str(kv[1].get("ingested_at", "")), kv[0]))[0])

    def run_dir_name(self, run_id: str, info: dict[str, Any]) -> str:
        """The directory under runs/ that holds a run: its generation dir (`dir` in the manifest), or the run
        id itself in a format-1 store. Refused when a tampered manifest names anything but one plain entry."""
        d = info.get("dir", run_id)
        if not isinstance(d, str) or not _DIR_RE.match(d):
            raise StoreError(
                f"{self.manifest_path}: run {run_id!r} names the directory {d!r}; the store is damaged"
            )
        return d

    def run_path(self, run_id: str, info: dict[str, Any] | None = None) -> Path:
        """Absolute-or-relative-to-cwd path of a run's directory (from the manifest, or `info` when given)."""
        return self.root / "runs" / self.run_dir_name(run_id, info if info is not None else self.run(run_id))

    def table_files(self, table: str, only: set[str] | None = None) -> list[Path]:
        out: list[Path] = []
        for run_id, info in sorted(self.runs().items()):
            if only is not None and run_id not in only:
                continue
            for rel in info.get("files", {}).get(table, []):
                out.append(self.run_path(run_id, info) / rel)
        return out

    def missing_files(self, only: set[str] | None = None) -> list[tuple[str, Path]]:
        """(run, file) for every file the manifest lists that is not on disk: a store damaged outside traceql
        (traceql itself never deletes a listed file). The check behind 'store is damaged' messages."""
        out = []
        for run_id, info in sorted(self.runs().items()):
            if only is None or run_id in only:
                base = self.run_path(run_id, info)
                out += [
                    (run_id, base / rel)
                    for rels in info.get("files", {}).values()
                    for rel in rels
                    if not (base / rel).is_file()
                ]
        return out

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the readers' shared lock: no writer deletes a file a manifest listed while it is held."""
        fd = self.reader_lock()
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)

    def reader_lock(self) -> int | None:
        """An open file holding the readers' shared lock (close it to release), taken *before* the manifest is
        read; None on a store this process cannot create the lock file in (a read-only copy: no writer)."""
        import fcntl

        path = self.root / READERS_LOCK
        for flags in (os.O_RDONLY | os.O_NOFOLLOW, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW):
            try:
                fd = os.open(path, flags, 0o644)
                break
            except FileNotFoundError:
                continue
            except OSError:
                return None
        else:
            return None
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while a writer deletes superseded files
        return fd

    # ---- writing -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive advisory lock around manifest changes; concurrent ingests serialise their commits."""
        import fcntl

        self.root.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a planted .lock symlink must not make traceql create or open a file outside the store
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _readers_excluded(self) -> Iterator[bool]:
        """True (and readers kept out) when no reader holds the shared lock now; False: some reader does."""
        import fcntl

        try:
            fd = os.open(self.root / READERS_LOCK, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError:
            yield False
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def _own_dir(self, name: str) -> Path:
        """A store sub-directory (runs/, .staging/), created if missing; refused if it is a symlink, so no
        write can be redirected outside the store."""
        d = self.root / name
        if d.is_symlink():
            raise StoreError(f"{d} is a symbolic link; refusing to write through it (the store must own it)")
        d.mkdir(parents=True, exist_ok=True)
        return d

    def new_staging(self) -> Path:
        """A fresh staging dir, owned (flock) by this process until commit() or discard()."""
        from . import _owned

        return _owned.make(self._own_dir(".staging")).path

    def discard(self, staging: Path) -> None:
        from . import _owned

        d = _owned.owned(staging)
        if d is not None:
            d.release()
        else:
            shutil.rmtree(staging, ignore_errors=True)

    def _check_name_free(self, runs: dict[str, Any], run_id: str, replace: bool) -> None:
        if run_id in runs and not replace:
            raise StoreError(f"run {run_id!r} already exists in {self.root}; use --replace to overwrite it")
        # case-insensitive filesystems (macOS, Windows) would mix Demo and demo: never let both exist
        clash = next((r for r in sorted(runs) if r != run_id and r.casefold() == run_id.casefold()), None)
        if clash is not None:
            raise StoreError(
                f"run {run_id!r} differs only in case from run {clash!r} in {self.root}; run names are compared "
                f"case-insensitively: pick another name, or name it {clash!r} (with --replace to overwrite it)"
            )

    def check_can_add(self, run_id: str, replace: bool) -> None:
        check_run_name(run_id)
        self._check_name_free(self.runs(), run_id, replace)

    def _check_files(self, base: Path, files: dict[str, list[str]], what: str) -> None:
        """Every file about to be listed exists under `base` (a manifest must never list a missing file)."""
        for rels in files.values():
            for rel in rels:
                if not _safe_rel(rel) or not (base / rel).is_file():
                    raise StoreError(
                        f"{base / rel}: missing from the {what}; nothing was committed (the store is unchanged)"
                    )

    def _seal(self, run_dir: Path, rels: list[str]) -> None:
        """Make a run's files read-only and durable (files, their dirs, the run dir, runs/) before a manifest
        lists them: after a power loss the manifest never names a file whose bytes were not on disk."""
        dirs = {run_dir, run_dir.parent}
        files = []
        for rel in rels:
            p = run_dir / rel
            p.chmod(0o444)  # traceql never rewrites data in place
            files.append(p)
            dirs.add(p.parent)
        if len(files) > 16:
            # fsync waits on the disk, not the CPU (~2 ms a file here): a run of 256 ranks has ~3,000 files,
            # seconds of waiting one after the other. In threads, all of them before any directory's
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=8) as ex:
                list(ex.map(_fsync_path, files))
        else:
            for p in files:
                _fsync_path(p)
        for d in sorted(dirs, key=lambda d: -len(d.parts)):  # deepest first
            _fsync_path(d, directory=True)

    def _publish(self, staging: Path, final: Path) -> None:
        """Rename a staging dir to its (fresh, unlisted) generation dir: one rename, invisible to readers."""
        os.replace(staging, final)

    def commit(self, staging: Path, run_id: str, info: dict[str, Any], replace: bool = False) -> None:
        """Move a fully written staging dir into place and record it in the manifest, atomically.

        The run gets a fresh generation dir; a replaced run's old dir stays listed until the new manifest is
        durable, and is reaped after (when no reader holds it)."""
        from . import _owned

        check_run_name(run_id)
        files: dict[str, list[str]] = info.get("files", {})
        with self.lock():
            m = self.manifest()
            self._check_name_free(m["runs"], run_id, replace)
            self._check_files(staging, files, f"staging dir of run {run_id!r}")
            runs = self._own_dir("runs")
            gen = f"{run_id}.{uuid.uuid4().hex[:12]}"
            final = runs / gen
            self._publish(staging, final)
            self._seal(final, [rel for rels in files.values() for rel in rels])
            # microseconds: "the most recent run" (latest_run, queries' default) and the derived tables' commit token
            # compare it, and two ingests within one second (a script's before/after) tied at seconds
            now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")
            m["runs"][run_id] = dict(info, dir=gen, schema_version=schema.SCHEMA_VERSION, ingested_at=now)
            self._write_manifest(m)  # the switch: before it the old state stands, after it the new one
            owned = _owned.owned(staging)
            if owned is not None:
                owned.release(remove=False)  # its dir is the run now; drop the lock file
            self._after_change(m)

    def add_derived(
        self, run_id: str, staging: Path, built: dict[str, Any], expect_ingested_at: Any = None
    ) -> None:
        """Move derived tables built under `staging` (traceql.derive) into a run and record them, atomically:
        files first (new names, so nothing a reader has open is touched), then the manifest; the run's previous
        derived files are reaped after the switch. A no-op when the run changed meanwhile (re-ingested or
        removed) or another command stored current tables first."""
        with self.lock():
            m = self.manifest()
            info = m["runs"].get(run_id)
            current = (info or {}).get("derived", {}).get("fingerprints") == built["fingerprints"]
            if info is None or info.get("ingested_at") != expect_ingested_at or current:
                return
            final = self.run_path(run_id, info)
            if final.is_symlink() or not final.is_dir():
                raise StoreError(f"{final} is not a directory the store owns; not adding derived tables")
            self._check_files(staging, built["files"], f"derived tables of run {run_id!r}")
            new = [rel for rels in built["files"].values() for rel in rels]
            for rel in new:
                dst = final / rel
                dst.parent.mkdir(exist_ok=True)
                os.replace(staging / rel, dst)
            self._seal(final, new)
            files = dict(info.get("files", {}))
            files.update(built["files"])
            m["runs"][run_id] = dict(
                info, files=files, derived={"fingerprints": built["fingerprints"], "rows": built["rows"]}
            )
            self._write_manifest(m)
            self._after_change(m)

    def remove(self, run_id: str) -> bool:
        """Drop a run from the manifest; its files go at once, or (while a reader holds the store) at the next
        write. Returns whether they are gone already."""
        check_run_name(run_id)  # a tampered manifest id like '../../x' is refused here
        with self.lock():
            m = self.manifest()
            if run_id not in m["runs"]:
                raise StoreError(f"no run {run_id!r} in store {self.root}")
            del m["runs"][run_id]
            self._write_manifest(m)
            return self._after_change(m)

    def tidy(self) -> bool:
        """The start-up check, under the writers' lock: reap what a killed ingest or commit left (see _reap).
        Returns False when superseded run files stay for now because a reader holds them."""
        with self.lock():
            return self._reap(self.manifest())

    def _after_change(self, m: dict[str, Any]) -> bool:
        self.write_views_sql()
        return self._reap(m)

    def _reap(self, m: dict[str, Any]) -> bool:
        """Remove everything the (durable) manifest `m` does not need; call under the writers' lock.

        - staging dirs whose ingest is dead (their flock is free), older versions' staging and trash dirs;
        - temp manifests / views left by a kill or a full disk (only written under this lock);
        - runs/ entries no run lists (replaced or removed generations, a crashed commit's orphan) and files a
          listed run dir holds but does not list (superseded derived tables): only while no reader holds the
          readers' lock, else left for the next writer."""
        from . import _owned

        self._repair_format_1(m)
        _owned.reap(self.root / ".staging")
        for p in self.root.glob(".*.tmp"):
            with contextlib.suppress(OSError):
                p.unlink()
        runs = self.root / "runs"
        if not runs.is_dir() or runs.is_symlink():
            return True
        keep: dict[str, set[str]] = {}
        for run_id, info in m["runs"].items():
            with contextlib.suppress(StoreError):
                keep.setdefault(self.run_dir_name(run_id, info), set()).update(
                    rel for rels in info.get("files", {}).values() for rel in rels
                )
        dead = [e for e in runs.iterdir() if e.name not in keep]
        for name, rels in keep.items():
            d = runs / name
            if d.is_dir() and not d.is_symlink():
                dead += [f for f in d.rglob("*.parquet") if f.relative_to(d).as_posix() not in rels]
        if not dead:
            return True
        with self._readers_excluded() as free:
            if not free:
                return False
            for e in dead:
                _owned.remove_tree(e)
        return True

    def _repair_format_1(self, m: dict[str, Any]) -> None:
        """Undo a format-1 commit torn by a kill (before generation dirs): it moved the old run dir to
        .staging/trash-*, then the new one into runs/<run>, then wrote the manifest, so a kill in between left
        the manifest describing files that are in the trash dir while runs/<run> holds the new ones or nothing.
        Put the trash dir back when it holds exactly what the manifest says and runs/<run> does not."""
        staging = self.root / ".staging"
        trash = sorted(staging.glob("trash-*")) if staging.is_dir() and not staging.is_symlink() else []
        for run_id, info in m["runs"].items():
            if "dir" in info or not trash or not _DIR_RE.match(run_id):
                continue
            current = self.root / "runs" / run_id
            if _holds_run(current, info):
                continue
            for t in trash:
                if not t.is_symlink() and _holds_run(t, info):
                    if current.exists() or current.is_symlink():
                        os.replace(current, staging / f"trash-{uuid.uuid4().hex}")  # reaped below
                    os.replace(t, current)
                    trash.remove(t)
                    break

    def _write_manifest(self, m: dict[str, Any]) -> None:
        """Replace the manifest durably: temp file, fsync, rename, fsync of the store dir."""
        m["store_format"] = STORE_FORMAT
        m["traceql_version"] = __version__
        tmp = self.root / f".{MANIFEST}.{uuid.uuid4().hex}.tmp"
        try:
            tmp.write_text(json.dumps(m, indent=1, sort_keys=True), encoding="utf-8")
            _fsync_path(tmp)
            os.replace(tmp, self.manifest_path)
        except BaseException as e:
            with contextlib.suppress(OSError):
                tmp.unlink()  # a full disk must not leave temp manifests behind
            if isinstance(e, OSError):
                raise StoreError(
                    f"{self.manifest_path}: cannot write the new manifest ({e.strerror or e}); "
                    "the store is unchanged"
                ) from e
            raise
        _fsync_path(self.root, directory=True)

    def write_views_sql(self) -> None:
        from .views import views_sql

        tmp = self.root / f".views.{uuid.uuid4().hex}.tmp"
        try:
            tmp.write_text(views_sql(self, relative=True), encoding="utf-8")
            os.replace(tmp, self.root / "views.sql")
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise


def all_tables() -> list[str]:
    return list(schema.TABLES)
