"""The one writer of every `-o PATH` (export, chart, report, compare, findings, sql, query): what is at PATH
decides how it is written, and a failure names PATH, never the store (issue 47).

- a new path or an existing regular file: written to a temp file in the same folder, then renamed over it, so
  an interrupt or a full disk leaves the old file (or nothing) there, never half a file; an existing file keeps
  its permission bits;
- a symlink: followed to what it points at, which is then written as above; the link itself stays a link;
- `-`: stdout;
- a FIFO or a character device (`-o /dev/stdout`, `-o >(gzip > x.gz)`, `-o /dev/null`): written through, in
  place. The user named that special file on purpose; a rename would replace the device node or the pipe by a
  plain file. What went through before an interrupt cannot be taken back (a pipe has no undo);
- a directory, a socket, a block device: refused in one line before any work.

Errors are TraceQLErrors `PATH: ...` with what to do; an interrupt (KeyboardInterrupt, SystemExit from
SIGTERM) removes the temp file and goes on up unchanged."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from .errors import TraceQLError

STDOUT = "-"

_ADVICE = {
    errno.ENOSPC: ("no space left on the device", "free some space or pass -o on another disk"),
    errno.EDQUOT: ("disk quota exceeded", "free some space or pass -o on another disk"),
    errno.EFBIG: ("file too large for this filesystem or limit", "pass -o on another filesystem"),
    errno.EROFS: ("the filesystem is read-only", "pass -o with a path on a writable filesystem"),
    errno.EACCES: ("permission denied", "pass -o with a path in a folder you can write"),
    errno.EPERM: ("operation not permitted", "pass -o with a path in a folder you can write"),
    errno.ENOENT: ("its folder does not exist", "create the folder or pass -o with an existing one"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "pass -o with a path in a folder"),
    errno.EISDIR: ("it is a directory", "pass -o with a file path"),
    errno.EIO: ("input/output error from the device", "check the disk, or pass -o on another one"),
}


class OutputError(TraceQLError):
    """The output path cannot be written: names it and what to do."""


def output_error(path: str | Path, e: OSError) -> OutputError:
    """An OSError met while writing `path`, as one line naming `path` (not the store, not the temp file)."""
    n = e.errno
    if n is None:  # pyarrow's OSErrors carry the reason in the text only
        text = str(e).lower()
        n = next((k for k in _ADVICE if os.strerror(k).lower() in text), None)
    if n in _ADVICE:
        what, todo = _ADVICE[n]
        return OutputError(f"{path}: cannot write the output: {what}; {todo}")
    return OutputError(f"{path}: cannot write the output: {e.strerror or e}")


def _kind(mode: int) -> str | None:
    """None for what is written in place or by rename; else the name of what is refused."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISBLK(mode):
        return "a block device"
    return None


def check(path: str | Path) -> None:
    """Refuse a target that can never be written (a directory, socket, block device, a missing folder)
    before any work is done; `-` and anything writable pass."""
    if str(path) == STDOUT:
        return
    p = Path(path)
    try:
        st = os.stat(p)  # follows a symlink: its target decides
    except FileNotFoundError:
        parent = Path(os.path.realpath(p)).parent
        if not parent.is_dir():
            raise OutputError(
                f"{p}: cannot write the output: no such directory {parent}; create it or pass -o "
                "with an existing folder"
            ) from None
        return
    except OSError as e:
        raise output_error(p, e) from None
    what = _kind(st.st_mode)
    if what is not None:
        raise OutputError(f"{p}: cannot write the output there: it is {what}; pass -o with a file path")


def _through(mode: int) -> bool:
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


@contextlib.contextmanager
def open_output(path: str | Path, binary: bool = False) -> Iterator[IO[Any]]:
    """A file object to write the output of PATH to (see the module docstring for what PATH may be). The
    output counts as written only when the block ends without an exception."""
    if str(path) == STDOUT:
        out: IO[Any] = sys.stdout.buffer if binary else sys.stdout
        yield out
        out.flush()
        return
    check(path)
    target = Path(os.path.realpath(path))  # a symlink (chain) followed; a dangling one names its target
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and _through(st.st_mode):
        with _mapped(path):
            fh = open(target, "wb" if binary else "w", **({} if binary else _TEXT))  # noqa: SIM115
        try:
            yield cast(IO[Any], _Guarded(fh, path))  # duck-typed: write/flush mapped, the rest the file's
        finally:
            with _mapped(path):
                fh.close()
        return
    with _mapped(path):
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with _mapped(path):
            fh = os.fdopen(fd, "wb" if binary else "w", **({} if binary else _TEXT))
        try:
            yield cast(IO[Any], _Guarded(fh, path))  # duck-typed: write/flush mapped, the rest the file's
        finally:
            with _mapped(path):
                fh.close()
        with _mapped(path):
            os.chmod(tmp, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
            os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_TEXT: dict[str, Any] = {"encoding": "utf-8", "newline": "\n"}


class _Guarded:
    """The output's file object, whose write/flush failures (a full disk under the writer's loop) name the
    output path; every other attribute is the file's own. Only the writes are mapped: an OSError of reading
    the store inside the same block stays the store's."""

    def __init__(self, fh: IO[Any], path: str | Path) -> None:
        self._fh = fh
        self._path = path

    def write(self, data: Any) -> int:
        with _mapped(self._path):
            return self._fh.write(data)

    def flush(self) -> None:
        with _mapped(self._path):
            self._fh.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)


@contextlib.contextmanager
def _mapped(path: str | Path) -> Iterator[None]:
    try:
        yield
    except OSError as e:
        raise output_error(path, e) from None


def _umask() -> int:
    # os.umask only reads by setting: set it back at once (the CLI is one thread at this point of a write)
    m = os.umask(0)
    os.umask(m)
    return m


def write_text(path: str | Path, text: str) -> None:
    with open_output(path) as fh:
        fh.write(text)


def write_bytes(path: str | Path, data: bytes) -> None:
    with open_output(path, binary=True) as fh:
        fh.write(data)
