"""Filesystem errors of the store (disk full, read-only, a path through a file, no permission) as one line
naming the path and what to do, instead of an `internal error` after pyarrow tracebacks (issue 22).

pyarrow raises OSError without errno (the reason is in the message text), so the reason is taken from errno
when there is one, else from the message.
"""

from __future__ import annotations

import errno
import os

from .errors import StoreError

_ADVICE = {
    errno.ENOSPC: ("no space left on the device", "free some space or pass --store on another disk"),
    errno.EDQUOT: ("disk quota exceeded", "free some space or pass --store on another disk"),
    errno.EFBIG: ("file too large for this filesystem or limit", "pass --store on another filesystem"),
    errno.EROFS: ("the filesystem is read-only", "pass --store with a writable folder"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "pass --store with a folder path"),
    errno.EEXIST: (
        "the path exists and is not a traceql store folder",
        "pass --store with a new or existing store folder",
    ),
    errno.EISDIR: ("a folder is where a file should be", "pass --store with a traceql store folder"),
    errno.EACCES: (
        "permission denied",
        "check the folder's permissions, or pass --store with a folder you can write",
    ),
    errno.EPERM: (
        "operation not permitted",
        "check the folder's permissions, or pass --store with a folder you can write",
    ),
    errno.ENOENT: (
        "a folder on the path does not exist or cannot hold files",
        "pass --store with a normal folder",
    ),
    errno.EIO: ("input/output error from the device", "check the disk, or pass --store on another one"),
}
_BY_TEXT = {os.strerror(n).lower(): n for n in _ADVICE}


def reason(e: OSError) -> int | None:
    """errno of `e`, or the one its message names (pyarrow: 'IOError: ... No space left on device')."""
    if e.errno in _ADVICE:
        return e.errno
    text = str(e).lower()
    for msg, n in _BY_TEXT.items():
        if msg in text:
            return n
    return None


def store_error(e: OSError, where: object, doing: str) -> StoreError | None:
    """A StoreError for `e` if it is one of the filesystem conditions above, else None."""
    n = reason(e)
    if n is None:
        return None
    what, todo = _ADVICE[n]
    path = e.filename if isinstance(e.filename, str) and e.filename else str(where)
    return StoreError(f"{path}: {what} while {doing}; {todo} (nothing was changed in the store)")
