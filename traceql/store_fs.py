"""A store whose root is a URL: `s3://bucket/prefix` (or any fsspec URL for reading), beside the local store.

Same data layout as a local store (`runs/<run>.<gen>/<table>/r<rank>-<n>.parquet`, traceql.store), so the
views, derived tables and queries are unchanged; what differs is how a run becomes visible, because object
storage has no rename and no flock:

    <root>/store.json                  marks the store (format, layout "object")
    <root>/manifest.d/<run>.json       one record per run (the run's manifest entry), name case-folded
    <root>/runs/<run>.<gen>/...        the run's files, written *before* its record exists

Commit protocol (`ObjectStore.publish`):
- every file of a run is uploaded under a fresh generation prefix `runs/<run>.<gen>/` that no record names:
  that prefix is the staging area (readers list records, never prefixes, so they cannot see it). Writing
  the files in place instead of under `.staging/` and copying them saves a full copy of the run (object
  stores copy, they do not rename).
- then the record is put with a conditional write: `If-None-Match: *` for a new run (S3 answers 412 when the
  key exists), `If-Match: <etag>` for `--replace` (412 when another writer replaced it meanwhile). The put is
  atomic: a reader sees the old record or the new one, never half a run, and of two writers of one run name
  exactly one wins; the loser deletes its generation prefix and reports the run as taken.
- the record key is the case-folded run name, so `Demo` and `demo` collide at the same conditional put.
- nothing is deleted while a reader may hold it: a replaced generation and a dead writer's prefix are
  removed by `reap()` only once older than `REAP_AFTER_S` (object stores have no readers' lock).

DuckDB reads the Parquet through the same fsspec filesystem, registered on each connection
(`register_all`; httpfs is never loaded: it downloads itself at run time and the SQL sandbox disables it).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import schema
from .errors import StoreError
from .store import STORE_FORMAT, Store, check_run_name
from .store import is_remote as is_remote  # defined with the local store; importable here as before
from .store import local_path as local_path
from .version import __version__

if TYPE_CHECKING:  # pragma: no cover
    import duckdb

RECORDS = "manifest.d"
MARKER = "store.json"
# a generation prefix no record names is removed only after this long: a writer still uploading, or a reader
# still scanning a replaced generation, is not cut off (object stores have no lock to tell)
REAP_AFTER_S = 6 * 3600
# fsspec filesystems of the object stores opened in this process, by protocol: every DuckDB connection traceql
# makes registers them (engine, derive), so `s3://...` paths in views resolve through fsspec, never httpfs
_FILESYSTEMS: dict[str, Any] = {}


class URLPath(str):
    """A URL that joins like a Path (`root / "runs" / d`) and prints as the URL, so the code that builds a
    run's file list from `store.root` (engine views, derive) works unchanged on an object store."""

    def __truediv__(self, other: object) -> URLPath:
        return URLPath(self.rstrip("/") + "/" + str(other).strip("/"))

    @property
    def name(self) -> str:
        return self.rstrip("/").rsplit("/", 1)[-1]


def register_all(con: duckdb.DuckDBPyConnection) -> None:
    """Register the object stores' filesystems on a DuckDB connection (a no-op when none is open)."""
    for fs in _FILESYSTEMS.values():
        con.register_filesystem(fs)


def _strip(url: str) -> str:
    return url.split("://", 1)[1] if "://" in url else url


class ObjectStore(Store):
    """A Store on fsspec object storage. Readers: everything Store offers (manifest, runs, run_path...).
    Writers: `new_generation()` + uploads + `publish()`; the local-only machinery (flocks, staging dirs,
    fsync) is not used here."""

    def cache_dir(self) -> Path | None:
        """No cache on object storage: a rebuilt file is cheaper than a round trip per report."""
        return None

    def __init__(self, root: str | Path | None = None, storage_options: dict[str, Any] | None = None) -> None:
        try:
            import fsspec
        except ImportError as e:  # pragma: no cover - the extra is missing
            raise StoreError(f"store {root}: object storage needs fsspec: pip install 'traceql[s3]'") from e
        url = str(root if root is not None else os.environ.get("TRACEQL_STORE", "")).rstrip("/")
        try:
            fs, base = fsspec.core.url_to_fs(url, **(storage_options or {}))
        except (ImportError, ValueError) as e:
            raise StoreError(f"store {url}: cannot open ({e}); for s3:// install 'traceql[s3]'") from e
        self.fs = fs
        self.base = base.rstrip("/")
        self.root = URLPath(url)  # type: ignore[assignment]  # a URL, joined like a Path
        self._listed: set[str] = set()  # generation dirs whose listing fsspec has cached (run_dir_name)
        protocol = url.split("://", 1)[0]
        _FILESYSTEMS[protocol] = fs

    # ---- reading -------------------------------------------------------------------------------------
    def _key(self, *parts: str) -> str:
        return "/".join([self.base, *parts])

    @property
    def manifest_path(self) -> Path:
        return self.root / RECORDS

    def exists(self) -> bool:
        self.fs.invalidate_cache(self.base)
        return bool(self.fs.exists(self._key(MARKER)))

    def _records(self) -> dict[str, tuple[dict[str, Any], str]]:
        """run id -> (record, etag), read fresh (fsspec caches listings; a commit elsewhere must show)."""
        prefix = self._key(RECORDS)
        self.fs.invalidate_cache(prefix)
        try:
            entries = self.fs.ls(prefix, detail=True)
        except FileNotFoundError:
            return {}
        keys = [e["name"] for e in entries if e["type"] == "file" and e["name"].endswith(".json")]
        out: dict[str, tuple[dict[str, Any], str]] = {}
        for key in keys:
            try:
                info = self.fs.info(key)
                rec = json.loads(self.fs.cat_file(key))
            except FileNotFoundError:
                continue  # removed between the listing and the read
            except ValueError as e:
                raise StoreError(
                    f"{self.root}/{RECORDS}/{key.rsplit('/', 1)[-1]}: unreadable run record ({e})"
                ) from e
            if (
                not isinstance(rec, dict)
                or not isinstance(rec.get("run_id"), str)
                or not isinstance(rec.get("info"), dict)
            ):
                raise StoreError(f"{self.root}/{RECORDS}/{key.rsplit('/', 1)[-1]}: damaged run record")
            out[rec["run_id"]] = (rec["info"], str(info.get("ETag", "")))
        return out

    def manifest(self) -> dict[str, Any]:
        return {"store_format": STORE_FORMAT, "runs": {r: i for r, (i, _e) in self._records().items()}}

    def run_dir_name(self, run_id: str, info: dict[str, Any]) -> str:
        """As Store's; and the first time a run is named, one recursive listing of its generation dir, which
        fsspec caches: DuckDB then opens each file without a HEAD request per open (a findings pass opens
        every file of the run ~15 times: 3x faster on moto)."""
        d = super().run_dir_name(run_id, info)
        if d not in self._listed:
            self._listed.add(d)
            with contextlib.suppress(FileNotFoundError):
                self.fs.find(self._key("runs", d))
        return d

    def missing_files(self, only: set[str] | None = None) -> list[tuple[str, Path]]:
        out: list[tuple[str, Path]] = []
        for run_id, info in sorted(self.runs().items()):
            if only is None or run_id in only:
                base = self.run_path(run_id, info)
                for rels in info.get("files", {}).values():
                    out += [(run_id, base / rel) for rel in rels if not self.fs.exists(_strip(base / rel))]
        return out

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        yield  # nothing to lock: files are never deleted while young enough to be read (see reap)

    def reader_lock(self) -> int | None:
        return None

    # ---- writing -------------------------------------------------------------------------------------
    def check_can_add(self, run_id: str, replace: bool) -> None:
        check_run_name(run_id)
        check_writable(self.fs, str(self.root))  # before any parse: the refusal costs nothing
        self._check_name_free(self.runs(), run_id, replace)

    def new_generation(self, run_id: str) -> str:
        """A fresh, unlisted generation dir name for `run_id` (its prefix is where the run's files go)."""
        check_run_name(run_id)
        return f"{run_id}.{uuid.uuid4().hex[:12]}"

    def upload(self, local_dir: Path, gen: str, rels: list[str]) -> None:
        """Copy files written under a local dir to runs/<gen>/ with pyarrow's filesystem layer."""
        upload_files(str(self.root), local_dir, gen, rels)

    def publish(self, run_id: str, gen: str, info: dict[str, Any], replace: bool = False) -> None:
        """Make a run visible: its record put with a conditional write (see the module doc). The files must be
        under runs/<gen>/ already. Raises StoreError when another writer holds the name (this run's prefix
        is then deleted)."""
        check_run_name(run_id)
        try:
            self._publish_record(run_id, gen, info, replace)
        except BaseException:
            self.remove_generation(gen)
            raise
        self.write_views_sql()
        self.reap()

    def _publish_record(self, run_id: str, gen: str, info: dict[str, Any], replace: bool) -> None:
        records = self._records()
        self._check_name_free({r: i for r, (i, _e) in records.items()}, run_id, replace)
        base = self.root / "runs" / gen
        for rels in info.get("files", {}).values():
            for rel in rels:
                if not self.fs.exists(_strip(base / rel)):
                    raise StoreError(f"{base / rel}: missing from the run's upload; nothing was committed")
        # microseconds: "the most recent run" (latest_run, queries' default) and the derived tables' commit token
        # compare it, and two ingests within one second (a script's before/after) tied at seconds
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")
        entry = dict(info, dir=gen, schema_version=schema.SCHEMA_VERSION, ingested_at=now)
        body = json.dumps({"run_id": run_id, "info": entry, "traceql_version": __version__}, sort_keys=True)
        key = self._key(RECORDS, f"{run_id.casefold()}.json")
        etag = records[run_id][1] if replace and run_id in records else None
        self._put_marker()
        try:
            conditional_put(self.fs, key, body.encode(), etag)
        except FileExistsError as e:
            raise StoreError(
                f"run {run_id!r} was committed to {self.root} by another ingest meanwhile; this ingest's copy "
                "was discarded (use --replace to overwrite it)"
            ) from e

    def _put_marker(self) -> None:
        key = self._key(MARKER)
        if not self.fs.exists(key):
            self.fs.pipe_file(key, json.dumps({"store_format": STORE_FORMAT, "layout": "object"}).encode())

    def remove(self, run_id: str) -> bool:
        records = self._records()
        if run_id not in records:
            raise StoreError(f"no run {run_id!r} in store {self.root}")
        self.fs.rm_file(self._key(RECORDS, f"{run_id.casefold()}.json"))
        self.write_views_sql()
        return False  # its files go with the next reap after REAP_AFTER_S

    def remove_generation(self, gen: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(self._key("runs", gen), recursive=True)

    def reap(self, older_than_s: float = REAP_AFTER_S) -> list[str]:
        """Remove generation prefixes no record names whose newest object is older than `older_than_s`."""
        listed = {self.run_dir_name(r, i) for r, i in self.runs().items()}
        prefix = self._key("runs")
        self.fs.invalidate_cache(prefix)
        try:
            gens = [
                e["name"].rsplit("/", 1)[-1]
                for e in self.fs.ls(prefix, detail=True)
                if e["type"] == "directory"
            ]
        except FileNotFoundError:
            return []
        removed = []
        now = time.time()
        for gen in gens:
            if gen in listed:
                continue
            newest = max(
                (_mtime(i) for i in self.fs.find(self._key("runs", gen), detail=True).values()), default=0.0
            )
            if now - newest >= older_than_s:
                self.remove_generation(gen)
                removed.append(gen)
        return removed

    def tidy(self) -> bool:
        self.reap()
        return True

    def lock(self) -> Any:  # pragma: no cover - guards the local-only paths
        raise StoreError(f"store {self.root}: object stores are written by publish(), not under a lock")

    def write_views_sql(self) -> None:
        """<root>/views.sql for the stock duckdb shell, naming the Parquet by URL (the shell reads s3:// with its
        httpfs extension and an S3 secret: see VIEWS_HEADER). A convenience rewritten after every publish and
        rm from the records read then; the records stay the truth (two writers racing may leave it one run
        behind until the next write)."""
        from .views import views_sql

        body = VIEWS_HEADER.format(root=self.root) + views_sql(self, relative=False)
        with contextlib.suppress(
            OSError
        ):  # the run is committed already: a failed convenience copy is no error
            self.fs.pipe_file(self._key("views.sql"), body.encode())


VIEWS_HEADER = """-- traceql views over {root} (store on object storage). In the duckdb shell, with its httpfs extension:
--   duckdb -c "INSTALL httpfs; LOAD httpfs; CREATE SECRET (TYPE s3, PROVIDER credential_chain); .read views.sql"
-- after copying this file next to you (aws s3 cp {root}/views.sql .). Or, offline: traceql sql --store {root} "..."
"""


def check_writable(fs: Any, root: str) -> None:
    """Refuse, in one line, a store traceql cannot commit to atomically: writes need s3:// (conditional put)."""
    if not _is_s3(fs):
        raise StoreError(
            f"store {root}: traceql writes runs only to a local folder (a path or file://) or to s3:// (a "
            "commit is a conditional put, If-None-Match, which this filesystem does not offer); this store "
            "can be read"
        )


def _is_s3(fs: Any) -> bool:
    return getattr(fs, "protocol", None) in ("s3", "s3a", ("s3", "s3a"), ["s3", "s3a"]) or hasattr(
        fs, "call_s3"
    )


def _mtime(info: dict[str, Any]) -> float:
    m = info.get("LastModified") or info.get("mtime") or info.get("created")
    if isinstance(m, _dt.datetime):
        return m.timestamp()
    try:
        return float(m) if m is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def conditional_put(fs: Any, key: str, body: bytes, etag: str | None) -> None:
    """Put `body` at `key` only if it does not exist (etag None) or still has `etag`; FileExistsError when
    the condition fails (HTTP 412, or 409 from servers that answer a concurrent conditional write so).

    S3 (s3fs): PutObject with IfNoneMatch='*' / IfMatch=etag. Other fsspec backends: refused, since their
    plain put would let two writers both win."""
    check_writable(fs, f"{fs.protocol}://{key}")
    bucket, _, path = key.partition("/")
    cond = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
    try:
        fs.call_s3("put_object", Bucket=bucket, Key=path, Body=body, **cond)
    except FileExistsError:  # s3fs's translation of 412 to If-None-Match
        raise
    except Exception as e:  # botocore ClientError, translated by s3fs into an OSError (EINVAL for If-Match)
        text = f"{e} {getattr(e, '__cause__', '')}".lower()
        if any(
            k in text for k in ("412", "precondition", "pre-condition", "409", "conditionalrequestconflict")
        ):
            raise FileExistsError(key) from e
        raise
    fs.invalidate_cache(key.rsplit("/", 1)[0])


def upload_files(
    root_url: str, local_dir: Path, gen: str, rels: list[str], storage_options: dict[str, Any] | None = None
) -> None:
    """Copy `rels` (relative to local_dir) to `<root>/runs/<gen>/<rel>` through pyarrow's filesystem layer
    over the fsspec filesystem (runs anywhere: on a Ray worker node it opens the store itself)."""
    import fsspec
    import pyarrow.fs as pafs

    fs, base = fsspec.core.url_to_fs(root_url, **(storage_options or {}))
    dst = pafs.PyFileSystem(pafs.FSSpecHandler(fs))
    src = pafs.LocalFileSystem()
    for rel in rels:
        pafs.copy_files(
            str(local_dir / rel),
            f"{base.rstrip('/')}/runs/{gen}/{rel}",
            source_filesystem=src,
            destination_filesystem=dst,
        )


def download_files(
    root_url: str, gen: str, rels: list[str], local_dir: Path, storage_options: dict[str, Any] | None = None
) -> None:
    """Copy `<root>/runs/<gen>/<rel>` to `local_dir/<rel>` (the inverse of upload_files)."""
    import fsspec
    import pyarrow.fs as pafs

    fs, base = fsspec.core.url_to_fs(root_url, **(storage_options or {}))
    src = pafs.PyFileSystem(pafs.FSSpecHandler(fs))
    for rel in rels:
        (local_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        pafs.copy_files(
            f"{base.rstrip('/')}/runs/{gen}/{rel}",
            str(local_dir / rel),
            source_filesystem=src,
            destination_filesystem=pafs.LocalFileSystem(),
        )
