"""Only regular files are read from a dump.

A FIFO blocks an open() or read() for ever; /dev/zero and /dev/urandom (directly or through a symlink named
like a dump file) never end, so "read it whole" is a MemoryError naming no file (issue 22). Every dump path
is checked with os.stat (which follows the link to what would really be read) before a sniffer opens it, and
files are opened with O_NONBLOCK and checked again with fstat on the open descriptor, so a file swapped for a
FIFO between the two still cannot block.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from ..errors import BadTraceError
from ._limits import limit

_KINDS = [(stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")]  # fmt: skip


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _refuse(path: Path, mode: int) -> BadTraceError:
    via = f" (a symlink to {os.path.realpath(path)})" if os.path.islink(path) else ""
    return BadTraceError(
        path, f"is {_kind(mode)}{via}, expected a regular dump file: traceql reads only regular files"
    )


def check_regular(path: Path) -> os.stat_result:
    """stat of `path` (following symlinks); BadTraceError unless it is a regular file."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise BadTraceError(path, f"cannot read: {e.strerror or e}") from e
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, st.st_mode)
    return st


def check_tree(path: Path) -> None:
    """Refuse a dump (file or folder) holding anything but regular files and folders: checked before detection,
    so no sniffer ever opens a FIFO or a device. Symlinked folders are not descended (os.walk default)."""
    try:
        st = os.stat(path)
    except OSError:
        return  # a missing path: detection says so in its own words
    if stat.S_ISREG(st.st_mode):
        return
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, st.st_mode)
    for root, dirs, files in os.walk(path):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            p = os.path.join(root, name)
            try:
                m = os.stat(p).st_mode
            except OSError:
                continue  # a dangling link: nothing to read, the parsers ignore what they do not find
            if not (stat.S_ISREG(m) or stat.S_ISDIR(m)):
                raise _refuse(Path(p), m)


def open_regular(path: Path) -> BinaryIO:
    """Open a regular file for binary reading without ever blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise BadTraceError(path, f"cannot read: {e.strerror or e}") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, st.st_mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_small(path: Path, what: str = "metadata file") -> bytes:
    """The whole of a small regular file (profiler_info*.json...), refused past TRACEQL_MAX_METADATA_BYTES."""
    cap = limit("TRACEQL_MAX_METADATA_BYTES")
    with open_regular(path) as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise BadTraceError(path, f"a {what} larger than {cap} bytes is not what profilers write (raise the limit "
                                  "with TRACEQL_MAX_METADATA_BYTES)")  # fmt: skip
    return data
