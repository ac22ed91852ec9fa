"""Directories owned by a live process: a store's staging dirs and traceql's temporary dirs.

Each owned dir `<parent>/<name>/` has a sibling lock file `<parent>/<name>.lock` that its creator holds with
an exclusive flock for as long as it uses the dir. The kernel drops the lock when the owner dies, however it
dies (kill -9, OOM kill), so `reap()` can tell a dead owner's leftovers from a live one's work without
guessing from mtimes (a long ingest's dir mtime stops changing in its first seconds; NFS clocks skew).
Forked workers inherit the lock's open file, so a dir stays owned while any of its writers lives.

Every dir this process creates is also registered, so `release_all()` (atexit, a fatal signal in a worker)
removes it on every exit path Python sees; only kill -9 leaves one behind, for the next reaper.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import uuid
from pathlib import Path

LOCK_SUFFIX = ".lock"
TEMP_PREFIX = "traceql-"


class OwnedDir:
    """A directory plus the flock that says its owner is alive."""

    def __init__(self, path: Path, lock: Path, fd: int) -> None:
        self.path, self.lock, self.fd, self.pid = path, lock, fd, os.getpid()

    def release(self, remove: bool = True) -> None:
        """Remove the dir (unless it was moved away: remove=False), then the lock file, then drop the lock."""
        _REGISTRY.pop(str(self.path), None)
        if self.fd < 0:
            return
        if remove:
            shutil.rmtree(self.path, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.unlink(self.lock)  # while still holding it: no reaper can mistake the dir for a dead one's
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = -1


_REGISTRY: dict[str, OwnedDir] = {}


def make(parent: Path, prefix: str = "") -> OwnedDir:
    """Create `<parent>/<prefix><uuid>/`, owned by this process until release()."""
    import fcntl

    parent.mkdir(parents=True, exist_ok=True)
    while True:
        name = prefix + uuid.uuid4().hex
        lock = parent / (name + LOCK_SUFFIX)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # a reaper may have locked and unlinked the fresh file before our flock: then it is not ours
            if os.fstat(fd).st_ino == os.stat(lock, follow_symlinks=False).st_ino:
                break
        except OSError:
            pass
        os.close(fd)
    path = parent / name
    path.mkdir(mode=0o700)
    owned = OwnedDir(path, lock, fd)
    _REGISTRY[str(path)] = owned
    return owned


def owned(path: Path) -> OwnedDir | None:
    """The OwnedDir this process made at `path`, if any."""
    return _REGISTRY.get(str(path))


def reap(parent: Path, prefix: str = "", require_lock: bool = False) -> list[str]:
    """Remove the entries `<prefix>*` of `parent` whose owner is dead (their lock file can be locked) and
    lock files left without a dir. require_lock=False also removes entries with no lock file at all (a store's
    .staging holds nothing else traceql made: older versions' dirs and trash-*); True leaves those alone (the
    system temp folder: another program's `traceql-*` is not ours to judge). Returns the names removed."""
    import fcntl

    if not parent.is_dir() or parent.is_symlink():
        return []
    removed = []
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return []
    for name in names:
        if not name.startswith(prefix) or name.endswith(LOCK_SUFFIX):
            continue
        if str(parent / name) in _REGISTRY:
            continue  # ours, alive
        lock = parent / (name + LOCK_SUFFIX)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW)
        except FileNotFoundError:
            if not require_lock:
                remove_tree(parent / name)
                removed.append(name)
            continue
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live owner holds it
            remove_tree(parent / name)
            with contextlib.suppress(OSError):
                os.unlink(lock)
            removed.append(name)
        finally:
            os.close(fd)
    # lock files whose dir is gone (an owner killed after its dir was committed or removed)
    for name in names:
        if (
            name.startswith(prefix)
            and name.endswith(LOCK_SUFFIX)
            and not (parent / name[: -len(LOCK_SUFFIX)]).exists()
        ):
            _reap_lock_only(parent / name)
    return removed


def _reap_lock_only(lock: Path) -> None:
    import fcntl

    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(lock)
    except OSError:
        pass
    finally:
        os.close(fd)


def remove_tree(p: Path) -> None:
    if p.is_symlink() or not p.is_dir():
        with contextlib.suppress(OSError):
            p.unlink()  # a planted link: drop the link, never its target
    else:
        shutil.rmtree(p, ignore_errors=True)


class TempDir:
    """A private temporary dir in the system temp folder (`traceql-<kind>-<uuid>`), in place of
    tempfile.TemporaryDirectory (same .name / .cleanup() / with): removed by cleanup(), at interpreter exit,
    by a worker's fatal-signal handler (traceql._procs), or by the next ingest's reaper after a kill -9."""

    def __init__(self, kind: str) -> None:
        self._dir = make(Path(tempfile.gettempdir()), f"{TEMP_PREFIX}{kind}-")
        self.name = str(self._dir.path)

    def cleanup(self) -> None:
        self._dir.release()

    def __enter__(self) -> str:
        return self.name

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def reap_temp() -> list[str]:
    """Remove `traceql-*` temp dirs of dead processes (only lock-owned ones: see reap)."""
    return reap(Path(tempfile.gettempdir()), TEMP_PREFIX, require_lock=True)


def release_all() -> None:
    """Remove every dir this process owns (not those inherited from a parent across fork)."""
    for d in list(_REGISTRY.values()):
        if d.pid == os.getpid():
            d.release()


atexit.register(release_all)
