"""msprof-analyze `cluster_analysis_output/` (formats.md §1.1, §4, §5.3) -> canonical tables.

| file | table | rank column |
|---|---|---|
| cluster_step_trace_time.csv | steps (source='cluster_step_trace_time') | `Index` of Type=rank rows; -1 for Type=stage rows |
| cluster_communication.json | comm_ops (source='cluster_communication'), comm_bandwidth | the inner rank keys |
| cluster_communication_matrix.json | comm_matrix | -1 (links carry src_rank/dst_rank) |
| communication_group.json | run_meta (`communication_group.*` keys) | -1 |

Rank handling. One cluster unit covers many ranks, but a RankWriter stamps every row with one rank. The unit
claims rank -1 ("cluster-level rows"): stage rows, the matrix and the group table are written through it. Rows
that belong to one rank are written through one extra RankWriter per rank in the same staging run dir
(file tag `<unit tag>c`), whose files and row counts are merged back into the unit's writer so the ingest
records them in the manifest (`_RankFanout`). meta["ranks"] lists the ranks those rows belong to.

When the unit is ingested together with the per-rank dumps it was computed from, its per-rank rows repeat the
ranks' own communication*.json / step_trace_time.csv. Unit option `alongside=rank_dumps` (set by the caller)
makes the parser write only what the rank dumps lack (stage rows, communication groups); otherwise the
`source` columns of steps/comm_ops tell the copies apart (comm_bandwidth/comm_matrix have no such column).
Units: µs/ms -> ns, HCCL MB = 10^6 B, GB/s = 10^9 B/s (see parsers/torch_npu.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadTraceError
from ._ascend_text import (
    comm_rows,
    flatten,
    matrix_rows,
    read_json,
    select_rows,
    step_dur,
    step_exprs,
    step_number,
    write_rows,
)
from ._csv import CsvFile
from .base import Unit

if TYPE_CHECKING:  # pragma: no cover
    from ..rank_writer import RankWriter

NAME = "msprof_analyze_cluster"
DIR_NAME = "cluster_analysis_output"
STEP_TRACE = "cluster_step_trace_time.csv"
COMM = "cluster_communication.json"
MATRIX = "cluster_communication_matrix.json"
GROUPS = "communication_group.json"
CLUSTER_FILES = (STEP_TRACE, COMM, MATRIX)  # communication_group.json alone is not a cluster output
CLUSTER_RANK = -1  # rank value of rows that belong to no single rank


class _RankFanout:
    """Per-rank RankWriters next to the unit's own writer; close() folds their files/rows into it."""

    def __init__(self, out: RankWriter) -> None:
        self.out = out
        self.writers: dict[int, RankWriter] = {}

    def write(self, rank: int, table: str, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        if rank == self.out.rank:
            write_rows(self.out, table, rows)
            return
        w = self.writers.get(rank)
        if w is None:
            from ..rank_writer import RankWriter

            w = RankWriter(self.out.run_dir, self.out.run_id, rank, tag=f"{self.out.tag}c")
            self.writers[rank] = w
        write_rows(w, table, rows)

    def close(self) -> None:
        for w in self.writers.values():
            w.close(sort=False)  # out.close() sorts every file it lists, these included
            for table, files in w.files.items():
                self.out.files.setdefault(table, []).extend(files)
            for table, n in w.rows.items():
                self.out.rows[table] = self.out.rows.get(table, 0) + n
            self.out.file_rows.update(w.file_rows)


def _rank_key(path: Path, key: object, where: str) -> int:
    try:
        return int(str(key).strip())
    except ValueError:
        raise BadTraceError(path, f"{where}: expected a rank id, got {key!r}") from None


def parse_cluster_step_trace(path: Path, fan: _RankFanout, out: RankWriter, per_rank: bool) -> None:
    csv = CsvFile(path)
    csv.require("Step", "Type", "Index", "Computing")
    exprs = step_exprs(csv)
    exprs["__type"] = csv.txt("Type")
    exprs["__index"] = csv.txt("Index")
    by_rank: dict[int, list[dict[str, Any]]] = {}
    stages: list[dict[str, Any]] = []
    for r in select_rows(csv, exprs):
        kind, index = (r.pop("__type") or "").lower(), r.pop("__index")
        if kind == "rank":
            r["dur_ns"] = step_dur(r)
            r["source"] = "cluster_step_trace_time"
            by_rank.setdefault(_rank_key(path, index, "Type=rank row Index"), []).append(r)
        else:
            # a stage row holds, per column, the max over the ranks in its Index tuple (e.g. "(0, 1, 2, 3)"):
            # their sum is no wall time, so dur_ns stays null
            r["source"] = f"cluster_step_trace_time:{kind or 'unknown'} {index}"
            stages.append(r)
    if per_rank:
        for rank, rows in sorted(by_rank.items()):
            fan.write(rank, "steps", rows)
    write_rows(out, "steps", stages)


def parse_cluster_communication(path: Path, fan: _RankFanout) -> None:
    data = read_json(path, "cluster_communication.json: {rank set|p2p: {step: {op@group: {rank: {...}}}}}")
    if not isinstance(data, dict):
        raise BadTraceError(path, "expected a JSON object keyed by rank-set tuple or 'p2p'")
    ops: dict[int, list[dict[str, Any]]] = {}
    bws: dict[int, list[dict[str, Any]]] = {}
    for group_key, steps in data.items():
        kind = "p2p" if str(group_key).strip().lower() == "p2p" else "collective"
        if not isinstance(steps, dict):
            raise BadTraceError(path, f"{group_key!r}: expected an object keyed by step")
        for step_key, entries in steps.items():
            if not isinstance(entries, dict):
                raise BadTraceError(path, f"{group_key!r} {step_key!r}: expected an object of ops")
            for op_key, per_rank in entries.items():
                if not isinstance(per_rank, dict):
                    raise BadTraceError(path, f"op {op_key!r}: expected an object keyed by rank id")
                for rank_key, op in per_rank.items():
                    rank = _rank_key(path, rank_key, f"op {op_key!r}")
                    op_row, bw_rows = comm_rows(
                        op_key,
                        op,
                        path=path,
                        step=step_number(step_key),
                        kind=kind,
                        source="cluster_communication",
                    )
                    if op_row:
                        ops.setdefault(rank, []).append(op_row)
                    bws.setdefault(rank, []).extend(bw_rows)
    for rank in sorted(set(ops) | set(bws)):
        fan.write(rank, "comm_ops", ops.get(rank, []))
        fan.write(rank, "comm_bandwidth", bws.get(rank, []))


def parse_cluster_matrix(path: Path, out: RankWriter) -> None:
    data = read_json(
        path, "cluster_communication_matrix.json: {rank set|p2p: {step: {op@group: {'src-dst': {...}}}}}"
    )
    if not isinstance(data, dict):
        raise BadTraceError(path, "expected a JSON object keyed by rank-set tuple or 'p2p'")
    rows: list[dict[str, Any]] = []
    for group_key, steps in data.items():
        if not isinstance(steps, dict):
            raise BadTraceError(path, f"{group_key!r}: expected an object keyed by step")
        for step_key, entries in steps.items():
            if not isinstance(entries, dict):
                raise BadTraceError(path, f"{group_key!r} {step_key!r}: expected an object of ops")
            for op_key, links in entries.items():
                rows.extend(matrix_rows(op_key, links, path=path, step=step_number(step_key)))
    write_rows(out, "comm_matrix", rows)


def communication_group_meta(path: Path) -> list[dict[str, Any]]:
    """communication_group.json -> run_meta rows: the rank lists as JSON text, and per group (new layout)
    `communication_group.group.<group_name>.<type|rank_set|group_id|pg_name>` so a group hash can be named."""
    data = read_json(path, 'communication_group.json: {"collective": [[ranks]...], "p2p": [...], ...}')
    if not isinstance(data, dict):
        raise BadTraceError(path, "expected a JSON object with 'collective'/'p2p' rank lists")
    rows: list[dict[str, Any]] = []
    for key, val in data.items():
        if key == "comm_group_parallel_info" and isinstance(val, list):
            for i, g in enumerate(val):
                if not isinstance(g, dict):
                    raise BadTraceError(path, f"comm_group_parallel_info[{i}]: expected an object")
                gid = str(g.get("group_name") or f"#{i}")
                rows += [{"key": k, "value": v} for k, v in flatten(g, f"communication_group.group.{gid}")]
        else:
            rows += [{"key": k, "value": v} for k, v in flatten(val, f"communication_group.{key}")]
    return rows


class ClusterParser:
    name = NAME
    description = "msprof-analyze cluster_analysis_output (cluster step trace, communication, matrix, groups)"

    def claim(self, path: Path) -> list[Unit] | None:
        if path.is_dir() and any((path / f).is_file() for f in CLUSTER_FILES):
            return [Unit(NAME, str(path), CLUSTER_RANK)]
        return None

    def parse(self, unit: Unit, out: RankWriter) -> dict[str, Any]:
        path = Path(unit.path)
        per_rank = dict(unit.options).get("alongside") != "rank_dumps"
        fan = _RankFanout(out)
        parsed = []
        try:
            if (path / STEP_TRACE).is_file():
                parse_cluster_step_trace(path / STEP_TRACE, fan, out, per_rank)
                parsed.append(STEP_TRACE)
            if per_rank and (path / COMM).is_file():
                parse_cluster_communication(path / COMM, fan)
                parsed.append(COMM)
            if per_rank and (path / MATRIX).is_file():
                parse_cluster_matrix(path / MATRIX, out)
                parsed.append(MATRIX)
            if (path / GROUPS).is_file():
                write_rows(out, "run_meta", communication_group_meta(path / GROUPS))
                parsed.append(GROUPS)
        finally:
            fan.close()
        return {"device": None, "ranks": sorted(fan.writers), "files": parsed, "warnings": []}


PARSERS = [ClusterParser()]
