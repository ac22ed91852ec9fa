"""The role of a unit in an RL job (verl: actor_update, actor_compute_log_prob, rollout replicas ...): the name of
the nearest folder above the unit that a profiler did not make. verl (and most RL frameworks) write each role's
profiles into a folder of its own, `<dump>/<role>/<rank>_ascend_pt/...` or `<dump>/<role>/<file>.pt.trace.json`.
Written per rank as run_meta `traceql.role`; queries/roles.sql reads it, and
a run speaks per role only when its ranks carry two or more roles.
"""

from __future__ import annotations

import re
from pathlib import Path

# folders profilers and launchers create themselves: never a role
_MADE = re.compile(
    r"^(ASCEND_PROFILER_OUTPUT|PROF_.*|.*_ascend_pt|.*_ascend_ms|device_\d+|host|mindstudio_profiler_output|"
    r"rank[-_]?\d+|\d+|profil(e|er|ing)(_?(data|output|result)s?)?|traces?|capture_traces|logs?|tmp)$",
    re.IGNORECASE,
)


def role_of(unit_path: str | Path, root: str | Path | None = None) -> str | None:
    """The role folder above a unit (a file or a rank folder), or None when every folder above looks profiler-made
    within three levels. root: the dump the user named; only folders below it are roles (the dump's own folder is
    its name, not a role, and a copy of it elsewhere, as an s3:// dump's ranks are, must get the same answer)."""
    p = Path(unit_path)
    stop = Path(root) if root is not None else None
    for parent in list(p.parents)[:3]:
        if stop is not None and (parent == stop or parent in stop.parents):
            return None
        name = parent.name
        if name and not _MADE.match(name):
            return name
    return None
