"""The on-disk store: plain Parquet per run/table/rank plus one manifest.json.

Layout (readable by the stock duckdb shell and pandas/polars):

    <store>/manifest.json                          runs, their files and metadata (the single source of truth)
    <store>/runs/<run_id>/<table>/r<rank>-<k>.parquet
    <store>/views.sql                              CREATE VIEW statements for the duckdb shell (`.read views.sql`)
    <store>/.staging/<uuid>/...                    runs being written (ignored by readers)

Atomicity: a run is written under .staging, then its directory is renamed into runs/ and the manifest is
replaced (write temp file, os.replace), both under an exclusive lock. Readers only see files the manifest
lists, so a crash at any point leaves the previous state visible; leftovers are cleaned on the next write.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__, schema
from .errors import StoreError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    import pyarrow.parquet as pq

MANIFEST = "manifest.json"
STORE_FORMAT = 1
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

    def write(self, table: str, data: Any, part: str = "") -> None:
        import pyarrow.parquet as pq

        from ._arrow_helpers import conform

        t = conform(table, data, self.run_id, self.rank)
        if t.num_rows == 0:
            return
        rel = f"{table}/r{self.rank}-{self.tag}{'-' + part if part else ''}.parquet"
        w = self._writers.get(rel)
        if w is None:
            (self.run_dir / table).mkdir(parents=True, exist_ok=True)
            w = pq.ParquetWriter(self.run_dir / rel, t.schema, compression="zstd")
            self._writers[rel] = w
            self.files.setdefault(table, []).append(rel)
        w.write_table(t, row_group_size=ROW_GROUP)
        self.rows[table] = self.rows.get(table, 0) + t.num_rows
        if "ts_ns" in t.schema.names and rel not in self._unsorted:
            self._track_order(rel, t.column("ts_ns"))

    def abort(self) -> None:
        """Close every writer on an error path, ignoring their errors (the staging dir is discarded anyway);
        a ParquetWriter left open prints 'Exception ignored in ParquetWriter.__del__' when collected."""
        writers, self._writers = list(self._writers.values()), {}
        _abandon(writers)

    def _track_order(self, rel: str, ts: pa.ChunkedArray) -> None:
        import pyarrow.compute as pc

        ts = pc.drop_null(ts)
        if hasattr(ts, "combine_chunks"):
            ts = ts.combine_chunks()
        if len(ts) == 0:
            return
        first = ts[0].as_py()
        ordered = first >= self._last_ts.get(rel, first) and (
            len(ts) < 2 or pc.all(pc.greater_equal(ts.slice(1), ts.slice(0, len(ts) - 1))).as_py()
        )
        if ordered:
            self._last_ts[rel] = ts[len(ts) - 1].as_py()
        else:
            self._unsorted.add(rel)

    def close(self, sort: bool = True) -> None:
        writers, self._writers = list(self._writers.values()), {}
        for i, w in enumerate(writers):
            try:
                w.close()
            except BaseException:
                _abandon(writers[i:])  # one failed close (disk full) must not leave the others to __del__
                raise
        if sort:
            for rels in self.files.values():
                for rel in rels:
                    if rel in self._unsorted:
                        sort_parquet_by_time(self.run_dir / rel)


def _abandon(writers: list[Any]) -> None:
    for w in writers:
        try:
            w.close()
        except BaseException:  # noqa: BLE001, S110  # an error path already: the first error is the one reported
            pass
        w.is_open = False  # pyarrow's __del__ closes again (and prints) while is_open is still set


def sort_parquet_by_time(path: Path) -> None:
    """Rewrite a Parquet file ordered by ts_ns, so row-group min/max stats let DuckDB skip by time.

    Parsers stream events in file order (grouped by track, not by time). DuckDB's sort spills to disk under
    its memory limit, so this stays bounded for GB-sized ranks; it reads the compressed Parquet, not the dump.
    """
    import tempfile

    import duckdb

    tmp = path.with_suffix(".sorted.tmp")
    # a private spill dir per call: ranks of one table sort in parallel worker processes
    spill = Path(tempfile.mkdtemp(prefix=".sort-", dir=path.parent))
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET memory_limit='128MB'")  # spill rather than lift the worker's RSS: at 256MB the ingest peak grew from 0.5 GB (0.25 GB trace) to 0.63 GB (1-4 GB); at 128MB 0.5-0.62 GB
        con.execute("SET preserve_insertion_order=false")
        con.execute(f"SET temp_directory='{str(spill).replace(chr(39), chr(39) * 2)}'")
        src = str(path).replace("'", "''")
        dst = str(tmp).replace("'", "''")
        con.execute(
            f"COPY (SELECT * FROM read_parquet('{src}') ORDER BY ts_ns NULLS LAST) TO '{dst}' "
            f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP})"
        )
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    os.replace(tmp, path)


class Store:
    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_store()

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
        if not isinstance(m, dict) or not isinstance(m.get("runs", {}), dict) or not all(
            isinstance(v, dict) for v in m.get("runs", {}).values()
        ):
            raise StoreError(f"{self.manifest_path}: manifest is damaged (expected an object with a 'runs' object of runs)")
        fmt = m.get("store_format")
        if fmt != STORE_FORMAT:
            raise StoreError(
                f"{self.manifest_path}: store format {fmt!r} is not supported by traceql {__version__} "
                f"(expects {STORE_FORMAT}); re-ingest into a new store"
            )
        return m

    def runs(self) -> dict[str, dict[str, Any]]:
        return dict(self.manifest().get("runs", {}))

    def run(self, run_id: str) -> dict[str, Any]:
        runs = self.runs()
        if run_id not in runs:
            known = ", ".join(sorted(runs)) or "none"
            raise StoreError(f"no run {run_id!r} in store {self.root} (runs: {known})")
        return runs[run_id]

    def latest_run(self) -> str | None:
        """The most recently ingested run (ties: the larger name), or None for an empty store."""
        runs = self.runs()
        if not runs:
            return None
        return str(max(runs.items(), key=lambda kv: (str(kv[1].get("ingested_at", "")), kv[0]))[0])

    def table_files(self, table: str, only: set[str] | None = None) -> list[Path]:
        out: list[Path] = []
        for run_id, info in sorted(self.runs().items()):
            if only is not None and run_id not in only:
                continue
            for rel in info.get("files", {}).get(table, []):
                out.append(self.root / "runs" / run_id / rel)
        return out

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

    def _own_dir(self, name: str) -> Path:
        """A store sub-directory (runs/, .staging/), created if missing; refused if it is a symlink, so no
        write can be redirected outside the store."""
        d = self.root / name
        if d.is_symlink():
            raise StoreError(f"{d} is a symbolic link; refusing to write through it (the store must own it)")
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _run_dir(self, run_id: str) -> Path:
        check_run_name(run_id)  # no separators, no leading dot: the path stays directly under runs/
        runs = self.root / "runs"
        if runs.is_symlink():
            raise StoreError(f"{runs} is a symbolic link; refusing to write through it (the store must own it)")
        # the run dir itself may be a (planted) symlink: callers move or unlink the link, never follow it
        return runs / run_id

    def new_staging(self) -> Path:
        d = self._own_dir(".staging") / uuid.uuid4().hex
        d.mkdir()
        return d

    def check_can_add(self, run_id: str, replace: bool) -> None:
        check_run_name(run_id)
        if run_id in self.runs() and not replace:
            raise StoreError(f"run {run_id!r} already exists in {self.root}; use --replace to overwrite it")

    def commit(self, staging: Path, run_id: str, info: dict[str, Any], replace: bool = False) -> None:
        """Move a fully written staging dir into place and record it in the manifest, atomically."""
        check_run_name(run_id)
        with self.lock():
            m = self.manifest()
            if run_id in m["runs"] and not replace:
                raise StoreError(f"run {run_id!r} already exists in {self.root}; use --replace to overwrite it")
            self._own_dir("runs")
            final = self._run_dir(run_id)
            trash = None
            if final.exists() or final.is_symlink():
                # either the run being replaced, or an orphan from a crashed commit: move it aside first
                trash = self.root / ".staging" / f"trash-{uuid.uuid4().hex}"
                os.replace(final, trash)
            os.replace(staging, final)
            for p in final.rglob("*.parquet"):
                p.chmod(0o444)  # traceql never rewrites data in place
            info = dict(info, schema_version=schema.SCHEMA_VERSION, ingested_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
            m["runs"][run_id] = info
            m["store_format"] = STORE_FORMAT
            m["traceql_version"] = __version__
            self._write_manifest(m)
            if trash is not None:
                if trash.is_symlink():
                    trash.unlink()  # a planted link: drop the link, leave its target alone
                else:
                    shutil.rmtree(trash, ignore_errors=True)
        self.write_views_sql()

    def add_derived(self, run_id: str, staging: Path, built: dict[str, Any], expect_ingested_at: Any = None) -> None:
        """Move derived tables built under `staging` (traceql.derive) into a run and record them, atomically:
        files first (new names, so nothing a reader has open is touched), then the manifest; the run's previous
        derived files are removed after the switch. A no-op when the run changed meanwhile (re-ingested or
        removed) or another command stored current tables first."""
        from . import derive

        with self.lock():
            m = self.manifest()
            info = m["runs"].get(run_id)
            if info is None or info.get("ingested_at") != expect_ingested_at or derive.stored_for(info):
                return
            final = self._run_dir(run_id)
            if final.is_symlink() or not final.is_dir():
                raise StoreError(f"{final} is not a directory the store owns; not adding derived tables")
            old = [rel for t in derive.DERIVED_TABLES for rel in info.get("files", {}).get(t, [])]
            for rels in built["files"].values():
                for rel in rels:
                    dst = final / rel
                    dst.parent.mkdir(exist_ok=True)
                    os.replace(staging / rel, dst)
                    dst.chmod(0o444)
            files = dict(info.get("files", {}))
            files.update(built["files"])
            m["runs"][run_id] = dict(info, files=files, derived={"version": built["version"], "rows": built["rows"]})
            self._write_manifest(m)
            for rel in old:
                if rel not in files.get(rel.split("/")[0], []):
                    with contextlib.suppress(OSError):
                        (final / rel).unlink()
        self.write_views_sql()

    def remove(self, run_id: str) -> None:
        with self.lock():
            m = self.manifest()
            if run_id not in m["runs"]:
                raise StoreError(f"no run {run_id!r} in store {self.root}")
            target = self._run_dir(run_id)  # a tampered manifest id like '../../x' is refused here
            del m["runs"][run_id]
            self._write_manifest(m)
            if not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)
            else:
                target.unlink()
        self.write_views_sql()

    def _write_manifest(self, m: dict[str, Any]) -> None:
        tmp = self.root / f".{MANIFEST}.{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(m, indent=1, sort_keys=True), encoding="utf-8")
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self.manifest_path)

    def discard(self, staging: Path) -> None:
        shutil.rmtree(staging, ignore_errors=True)

    def clean_stale_staging(self) -> None:
        """Remove staging dirs left by crashed ingests (called under no lock: only dirs older than an hour)."""
        import time

        st = self.root / ".staging"
        if not st.is_dir() or st.is_symlink():
            return
        for d in st.iterdir():
            with contextlib.suppress(OSError):
                if time.time() - d.stat().st_mtime > 3600:
                    shutil.rmtree(d, ignore_errors=True)

    def write_views_sql(self) -> None:
        from .engine import views_sql

        tmp = self.root / f".views.{uuid.uuid4().hex}.tmp"
        tmp.write_text(views_sql(self, relative=True), encoding="utf-8")
        os.replace(tmp, self.root / "views.sql")


def all_tables() -> list[str]:
    return list(schema.TABLES)
