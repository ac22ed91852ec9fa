"""The on-disk store: plain Parquet per run/table/rank plus one manifest.json.

Layout (readable by the stock duckdb shell and pandas/polars):

    <store>/manifest.json                          runs, their files and metadata (the single source of truth)
    <store>/runs/<run_id>.<gen>/<table>/r<rank>-<k>.parquet   one generation of a run (manifest: runs.<id>.dir)
    <store>/views.sql                              CREATE VIEW statements for the duckdb shell (`.read views.sql`)
    <store>/.staging/<uuid>/ + <uuid>.lock         runs being written, each owned by its ingest's flock
    <store>/.lock                                  writers' exclusive lock (every manifest change)
    <store>/.readers.lock                          readers' shared lock (engine.connect holds it per connection)
    <store>/.cache/                                files any process may rebuild (the report's script bundle)

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
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import schema
from .errors import StoreError
from .version import __version__

MANIFEST = "manifest.json"
STORE_FORMAT = 2
# 1: before generation dirs (a run lives in runs/<run_id>/, the manifest has no `dir`): read as is
READABLE_FORMATS = (1, 2)
_DIR_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")
RUN_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def default_store() -> Path:
    return Path(os.environ.get("TRACEQL_STORE", ".traceql"))


def is_remote(root: Any) -> bool:
    """Whether a store root names object storage (a URL with a scheme other than file://)."""
    s = str(root) if root is not None else ""
    return "://" in s and not s.startswith("file://")


def local_path(root: str | Path) -> Path:
    """A local store root: `file:///x` -> /x, anything else as a path."""
    s = str(root)
    return Path(s[len("file://") :]) if s.startswith("file://") else Path(root)


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
    """The rank a store file holds, from its name (`<table>/r<rank>-<tag>.parquet`, as rank_writer.RankWriter and
    traceql.derive name them); None for a name that does not follow the layout."""
    m = _RANK_FILE.search(rel)
    return int(m.group(1)) if m else None


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
    """A local store (a folder). A URL root (s3://...) is an ObjectStore (traceql.store_fs): open either with
    traceql.stores.open_store, which picks the class from the root."""

    def __init__(self, root: str | Path | None = None) -> None:
        if is_remote(root if root is not None else os.environ.get("TRACEQL_STORE")):
            # a URL taken as a local folder would create ./s3:/bucket: the caller skipped open_store
            raise StoreError(
                f"store {root}: a URL store is opened with traceql.stores.open_store, not Store()"
            )
        self.root = local_path(root) if root is not None else default_store()

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

    def cache_dir(self) -> Path | None:
        """The store's `.cache/` folder (files any process may rebuild: the report's script bundle), created if
        missing; refused if it is a symlink. None where the store keeps no cache (not writable here)."""
        if not os.access(self.root, os.W_OK):
            return None
        return self._own_dir(".cache")

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


# ---- .cache/: files any process may rebuild (the report's script bundle, kept query results) ----------------
def cache_folder(store: Store, switch: str, sub: str = "") -> Path | None:
    """Where `store` keeps files of one kind in its `.cache/` (`sub`, a folder in it), or None where it keeps
    none: the environment variable `switch` set to 0, an object store, a store this process cannot write or open
    here, or a folder that is a symbolic link (the store must own what is written)."""
    from .errors import TraceQLError

    if os.environ.get(switch, "1") == "0":
        return None
    try:
        root = store.cache_dir()
    except (TraceQLError, OSError):
        return None
    if root is None or (sub and (root / sub).is_symlink()):
        return None
    return root / sub if sub else root


def write_cache_file(
    path: Path, write: Callable[[Path], object], errors: tuple[type[Exception], ...] = (OSError,)
) -> bool:
    """Write a `.cache/` file atomically: `write` fills a temporary file, renamed over `path` (a concurrent reader
    sees the old file or the whole new one). A read-only or full folder, or another of `errors` from `write`,
    only costs the next process a rebuild: False, nothing left behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        os.replace(tmp, path)
    except errors:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True
