"""msprof DB export (`msprof --export=on --type=db`): msprof_{timestamp}.db -> canonical tables.

Claims:
- an msprof_*.db file given on its own;
- a PROF_* folder holding msprof_*.db when its mindstudio_profiler_output/ has no text export (*.csv,
  *.json). A PROF_* folder with text output belongs to the msprof text parser ("msprof"), which makes the
  mirror-image check, so exactly one of the two claims any folder.
One unit per db file. An msprof db covers every device of the host: rows keep device_id (kernels) or the
device in the counter channel ("<deviceId>:<channel>") when a table holds more than one device. The rank is
RANK_DEVICE_MAP.rankId when the db records one (>= 0), else assigned by order.

The tables and their mapping are shared with the torch_npu DB export (_db_tables.py). msprof has no
analysis.db, so comm_ops come from COMMUNICATION_OP and comm_matrix / comm_bandwidth are aggregated from
COMMUNICATION_TASK_INFO.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._db_tables import DbExport, write_common, write_run_meta, write_step_windows
from ._device_info import device_info_rows
from ._sqlite import SqliteDb
from .base import Unit

if TYPE_CHECKING:  # pragma: no cover
    from ..rank_writer import RankWriter

DB_RE = re.compile(r"^msprof(?:_[0-9_]+)?\.db$")
WHAT = "an msprof_{timestamp}.db (msprof --type=db export) with a TASK table"


def has_text_output(prof_dir: Path) -> bool:
    """True when the msprof text parser claims this PROF_* folder (it then owns it; we decline). The check is
    the text parser's own, so exactly one of the two claims a folder."""
    from .msprof import has_text_output as text_parser_check

    return bool(text_parser_check(prof_dir / "mindstudio_profiler_output"))


def rank_from_db(db_path: Path) -> int | None:
    from .torch_npu_db import rank_from_db as rank_from_map

    return rank_from_map(db_path)


class MsprofDbParser:
    name = "msprof_db"
    description = "msprof (CANN) DB export: msprof_{timestamp}.db"

    def claim(self, path: Path) -> list[Unit] | None:
        if path.is_file():
            return [Unit(self.name, str(path), rank_from_db(path))] if DB_RE.match(path.name) else None
        if not path.is_dir() or not path.name.startswith("PROF_") or has_text_output(path):
            return None
        dbs = sorted(p for p in path.iterdir() if DB_RE.match(p.name) and p.is_file())
        return [Unit(self.name, str(db), rank_from_db(db)) for db in dbs] or None

    def parse(self, unit: Unit, out: RankWriter) -> dict[str, Any]:
        db = SqliteDb(Path(unit.path), WHAT)
        x: DbExport | None = None
        try:
            db.require("TASK", "startNs", "endNs", "globalTaskId")
            x = DbExport(db)
            meta = write_common(x, out, "msprof")
            with x.errors():
                write_step_windows(x, out)
            # the PROF_* folder holding the db may carry device_*/info.json (rated AI Core clock)
            dev_rows, dev_warnings = device_info_rows(Path(unit.path).parent)
            write_run_meta(out, meta.pop("rows") + dev_rows)
            x.warnings.extend(dev_warnings)
            meta["warnings"] = x.warnings
            meta["export"] = "db"
            return meta
        finally:
            if x is not None:
                x.close()
            db.close()


PARSERS = [MsprofDbParser()]
