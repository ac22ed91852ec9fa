"""'Did you mean' for names a user types: runs, queries, device presets, tables (difflib, no new dependency)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest known name (case-insensitive), or '' when none is close enough.
    Meant to be appended to an 'unknown ...' error message."""
    known = [str(k) for k in known]
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(str(name).lower(), list(by_lower), n=1, cutoff=0.75)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""
