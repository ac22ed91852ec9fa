"""The msprof DB schema version (META_DATA.SCHEMA_VERSION) read and gated before a db export is mapped.

What the exports write (verified on the real torch_npu db sample, `Ascend__msinsight/test/data/pytorch/db/
level1/rank{0,1}_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{0,1}.db`, torch_npu 2025-01):
`META_DATA(name TEXT, value TEXT)` rows `SCHEMA_VERSION = '1.0.0'`, `SCHEMA_VERSION_MAJOR = '1'`,
`SCHEMA_VERSION_MINOR = '0'`, `SCHEMA_VERSION_MICRO = '0'` (torch_npu creates META_DATA with the columns
(name, value): Ascend/pytorch `torch_npu/profiler/analysis/prof_common_func/_constant.py`,
`TableColumnsManager.TableColumns[META_DATA]`). The 2023 msprof_0.db sample (`Ascend__msinsight/server/src/
test/test_data/full_db/msprof_0.db`) has no META_DATA at all: older exports carry no version.

The rule (semantic versioning, as the three-part number reads): a major version this module knows (1) is
mapped; a newer major one is refused with one line naming the db and the versions traceql knows, because a new
major schema may rename or re-type the columns the mapping relies on and a silent wrong mapping is worse than
a refusal; a newer minor/micro of a known major is mapped (columns are discovered with PRAGMA table_info, new
tables and columns are tolerated) with a warning; no version at all (pre-2024 exports) is mapped as before.
An unreadable version string is refused: the file is not what an msprof/torch_npu writer makes.
"""

from __future__ import annotations

import re

from ..errors import BadTraceError
from ._sqlite import SqliteDb

KNOWN_MAJOR = 1
KNOWN_VERSIONS = ("1.0.0",)  # seen in real exports (see the module doc)

_VERSION_RE = re.compile(r"^\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?\s*$")


def read_version(db: SqliteDb) -> str | None:
    """META_DATA.SCHEMA_VERSION as written, else the MAJOR.MINOR.MICRO parts joined, else None."""
    if not db.has("META_DATA", "name", "value"):
        return None
    vals = {
        str(k): ("" if v is None else str(v))
        for k, v in db.rows(
            """SELECT "name", "value" FROM "META_DATA" WHERE "name" IN
               ('SCHEMA_VERSION', 'SCHEMA_VERSION_MAJOR', 'SCHEMA_VERSION_MINOR', 'SCHEMA_VERSION_MICRO')"""
        )
    }
    if "SCHEMA_VERSION" in vals:
        return vals["SCHEMA_VERSION"]
    if "SCHEMA_VERSION_MAJOR" in vals:
        parts = [vals.get(f"SCHEMA_VERSION_{p}", "0") or "0" for p in ("MAJOR", "MINOR", "MICRO")]
        return ".".join(parts)
    return None


def check_version(db: SqliteDb) -> tuple[str | None, list[str]]:
    """(version, warnings) for a db export traceql can map; BadTraceError for one it cannot."""
    version = read_version(db)
    if version is None:
        return None, []  # pre-2024 exports carry no version: mapped by their columns, as before
    m = _VERSION_RE.match(version)
    if m is None:
        raise BadTraceError(
            db.path,
            f"META_DATA.SCHEMA_VERSION is {version!r}, not a version number; expected MAJOR.MINOR.MICRO "
            f"as msprof/torch_npu write it (e.g. {KNOWN_VERSIONS[-1]})",
        )
    major = int(m.group(1))
    if major > KNOWN_MAJOR:
        raise BadTraceError(
            db.path,
            f"msprof DB schema version {version} is newer than this traceql understands (major {KNOWN_MAJOR}: "
            f"{', '.join(KNOWN_VERSIONS)}); its tables may have changed meaning. Upgrade traceql, or export "
            "the dump as text (torch_npu export_type=text / msprof --type=text) and ingest that",
        )
    warnings = []
    if version.strip() not in KNOWN_VERSIONS:
        warnings.append(
            f"{db.path}: msprof DB schema version {version} (traceql was checked on {', '.join(KNOWN_VERSIONS)}); "
            "mapped by its columns"
        )
    return version.strip(), warnings


__all__ = ["KNOWN_MAJOR", "KNOWN_VERSIONS", "check_version", "read_version"]
