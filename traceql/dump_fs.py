"""A dump whose root is a URL (`s3://prof/job42/`, any fsspec URL): detected on the driver, parsed on the workers.

The parsers read local files (sqlite3 opens a path, DuckDB's CSV/JSON scans take paths, the sniffers stat and
seek), so rather than teach every parser file objects, a rank's files are brought to the node that parses
them, and only there:

- detection (driver): one recursive listing of the dump (`fs.find`, sizes included), then a *sniff mirror*
  in a private temp dir: the same tree with every file at its true size (`progress.input_bytes` and the
  sniffers' size checks see the real numbers), small files (<= FULL_BYTES) copied whole, larger ones only
  their first and last SNIFF_BYTES (the sniffers read heads, Kineto's also the tail), the middle a sparse
  hole. SQLite files are copied whole: a rank id is read from a table whose pages can be anywhere in the
  file. `parsers.detect` runs on the mirror as on a local dump, and the units' paths are mapped back to URLs.
  The mirror costs at most 2 x SNIFF_BYTES per file (plus whole SQLite files) and is deleted after detection.
- parse (worker: traceql.distributed's parse_rank): `fetch_unit` copies the unit's *scope* (the dump's
  child folder that holds it, e.g. one `*_ascend_pt` rank folder: parsers read a unit's siblings, such as
  profiler_info or device_*/info.json, and a db unit names its rank folder in its options) to a temp dir on
  the worker, streamed file by file (fsspec `get`, bounded memory), parses there and deletes it. The disk
  used is one rank's dump per running task.

Nothing is ever written to the dump's location: the dump filesystem is only listed and read.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from .errors import BadTraceError
from .parsers import Unit

FULL_BYTES = 256 << 10  # files up to this size are copied whole into the sniff mirror
SNIFF_BYTES = 64 << 10  # of larger files, this much of the head and of the tail (the sniffers' largest read)
_SQLITE_MAGIC = b"SQLite format 3\x00"
_OPT_PATHS = ("root", "analysis")  # Unit options that hold a path inside the dump (parsers.torch_npu_db)


def is_url(path: Any) -> bool:
    """Whether a dump path names a URL (anything with a scheme, file:// included, goes through fsspec)."""
    return "://" in str(path)


class RemoteDump:
    """An fsspec dump root: its listing, the sniff mirror for detection, and unit <-> URL mapping."""

    def __init__(self, url: str) -> None:
        try:
            import fsspec
        except ImportError as e:  # pragma: no cover - the extra is missing
            raise BadTraceError(
                url, "a dump on object storage needs fsspec: pip install 'traceql[s3]'"
            ) from e
        self.url = url.rstrip("/")
        try:
            self.fs, base = fsspec.core.url_to_fs(self.url)
        except (ImportError, ValueError) as e:
            raise BadTraceError(url, f"cannot open ({e}); for s3:// install 'traceql[s3]'") from e
        self.base = base.rstrip("/")
        self.protocol = self.url.split("://", 1)[0]
        try:
            self.fs.invalidate_cache(self.base)
            found = self.fs.find(self.base, detail=True)
            if not found and self.fs.isfile(self.base):
                found = {self.base: self.fs.info(self.base)}
        except FileNotFoundError:
            found = {}
        except OSError as e:
            raise BadTraceError(url, f"cannot list the dump ({type(e).__name__}: {e})") from e
        if not found:
            raise BadTraceError(url, "no such file or directory (no objects under this prefix)")
        self.single_file = list(found) == [self.base]
        # relative path -> size; a single-file dump is its own name
        if self.single_file:
            self.files = {self.base.rsplit("/", 1)[-1]: int(found[self.base].get("size") or 0)}
        else:
            self.files = {
                k[len(self.base) + 1 :]: int(v.get("size") or 0)
                for k, v in found.items()
                if v.get("type") != "directory" and k.startswith(self.base + "/")
            }

    # ---- detection ---------------------------------------------------------------------------------------
    def build_mirror(self, into: Path) -> Path:
        """Write the sniff mirror under `into`; returns the mirror's dump path (a folder, or the one file)."""
        name = self.base.rsplit("/", 1)[-1] or "dump"
        root = into / name
        if not self.single_file:
            root.mkdir(parents=True)
        whole: list[str] = []
        ranged: list[str] = []
        for rel, size in self.files.items():
            (whole if size <= FULL_BYTES else ranged).append(rel)
        heads = self._ranges([(rel, 0, SNIFF_BYTES) for rel in ranged])
        head_of = dict(zip(ranged, heads, strict=True))
        whole += [rel for rel in ranged if head_of[rel].startswith(_SQLITE_MAGIC)]
        ranged = [rel for rel in ranged if not head_of[rel].startswith(_SQLITE_MAGIC)]
        tails = self._ranges([(rel, self.files[rel] - SNIFF_BYTES, self.files[rel]) for rel in ranged])
        for rel in whole:
            dst = self._local(root, rel)
            dst.parent.mkdir(parents=True, exist_ok=True)
            self.fs.get_file(self.key(rel), str(dst))
        for rel, tail in zip(ranged, tails, strict=True):
            dst = self._local(root, rel)
            dst.parent.mkdir(parents=True, exist_ok=True)
            with open(dst, "wb") as fh:
                fh.write(head_of[rel])
                fh.truncate(self.files[rel])  # a sparse hole: the true size, no bytes on disk
                fh.seek(self.files[rel] - len(tail))
                fh.write(tail)
        return root

    def _local(self, root: Path, rel: str) -> Path:
        if self.single_file:
            return root
        if rel.startswith("/") or ".." in rel.split("/"):
            raise BadTraceError(f"{self.url}/{rel}", "an object name that leaves the dump is refused")
        return root / rel

    def _ranges(self, spans: list[tuple[str, int, int]]) -> list[bytes]:
        if not spans:
            return []
        keys = [self.key(rel) for rel, _s, _e in spans]
        out = self.fs.cat_ranges(keys, [s for _r, s, _e in spans], [e for _r, _s, e in spans])
        return [bytes(b) if isinstance(b, (bytes, bytearray)) else b"" for b in out]

    def key(self, rel: str) -> str:
        return self.base if self.single_file else f"{self.base}/{rel}"

    def to_remote(self, unit: Unit, mirror: Path) -> Unit:
        """A unit detected on the mirror, with its paths as URLs (what a worker fetches)."""

        def url(p: str) -> str:
            rel = os.path.relpath(p, mirror)
            return self.url if rel == "." else f"{self.url}/{Path(rel).as_posix()}"

        opts = tuple((k, url(v) if k in _OPT_PATHS else v) for k, v in unit.options)
        return replace(unit, path=url(unit.path), options=opts)

    def input_bytes(self, unit_url: str) -> int:
        """The bytes a unit reads, as progress.input_bytes counts them on a local dump."""
        rel = unit_url[len(self.url) :].strip("/")
        if self.single_file or rel in self.files:
            return self.files[rel] if rel in self.files else next(iter(self.files.values()))
        prefix = f"{rel}/" if rel else ""
        for sub in ("ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output"):
            inner = f"{prefix}{sub}/"
            if any(r.startswith(inner) for r in self.files):
                prefix = inner
                break
        return sum(s for r, s in self.files.items() if r.startswith(prefix))


def scope_of(unit_url: str, dump_url: str) -> str:
    """The folder (URL) a unit's worker copies: the dump's child that holds the unit, or the whole dump."""
    rel = unit_url[len(dump_url.rstrip("/")) :].strip("/")
    if not rel or "/" not in rel:
        # the dump itself, or a file/folder directly in it: a folder child is its own scope; a file directly
        # in a cluster folder has no siblings a parser reads, so the file alone
        return unit_url
    return f"{dump_url.rstrip('/')}/{rel.split('/', 1)[0]}"


def fetch_unit(unit: Unit, dump_url: str, into: Path) -> Unit:
    """Copy a remote unit's scope to `into` (same relative layout) and return the unit pointing there."""
    import fsspec

    scope = scope_of(unit.path, dump_url)
    fs, key = fsspec.core.url_to_fs(scope)
    name = scope.rstrip("/").rsplit("/", 1)[-1]
    local = into / name
    try:
        if fs.isfile(key):
            fs.get_file(key, str(local))
        else:
            # a recursive get streams each object to its file (never whole in memory)
            for src, info in fs.find(key, detail=True).items():
                if info.get("type") == "directory":
                    continue
                rel = src[len(key.rstrip("/")) + 1 :]
                if rel.startswith("/") or ".." in rel.split("/"):
                    raise BadTraceError(f"{scope}/{rel}", "an object name that leaves the dump is refused")
                dst = local / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                fs.get_file(src, str(dst))
    except FileNotFoundError as e:
        raise BadTraceError(scope, "vanished from object storage during the ingest") from e

    def loc(u: str) -> str:
        rel = u[len(scope.rstrip("/")) :].strip("/")
        return str(local / rel) if rel else str(local)

    opts = tuple((k, loc(v) if k in _OPT_PATHS else v) for k, v in unit.options)
    return replace(unit, path=loc(unit.path), options=opts)


def detect_remote(url: str) -> tuple[RemoteDump, list[Unit]]:
    """The dump's units (paths as URLs), detected on a sniff mirror that is deleted before returning."""
    from ._owned import TempDir
    from .parsers import detect

    dump = RemoteDump(url)
    with TempDir("sniff") as tmp:
        mirror = dump.build_mirror(Path(tmp))
        try:
            units = detect(mirror)
        except BadTraceError as e:
            raise relocate(e, str(mirror), dump.url) from None  # name the URL, not the mirror's temp path
        return dump, [dump.to_remote(u, mirror) for u in units]


def relocate(e: BadTraceError, local: str, url: str) -> BadTraceError:
    """The same error naming `url` where it named the local copy `local` (the user knows only the URL)."""
    return type(e)(e.path.replace(local, url), e.detail.replace(local, url))
