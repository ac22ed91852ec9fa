"""One export's DuckDB session: the run's views and helper macros, the ranks and step windows in scope, the
device peaks and the clock offsets; rows come out as Arrow record batches (bounded memory: DuckDB streams
them, nothing holds a whole table).

The slice (`--rank`, `--steps`) is applied in SQL as constant per-rank predicates on `ts_ns`, which DuckDB
pushes into the Parquet scans (files are sorted by time, so row groups outside the window are skipped by
their min/max statistics): a sliced export reads only what it writes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import TraceQLError

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    import pyarrow as pa

BATCH_ROWS = 64 * 1024
_STEPS = re.compile(r"^\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?$")


def parse_steps(text: str | None) -> tuple[int, int] | None:
    """'10-12' -> (10, 12); '7' -> (7, 7); None -> None (every step)."""
    if text is None:
        return None
    m = _STEPS.match(text)
    if not m:
        raise TraceQLError(f"--steps {text!r}: expected a step id or a range A-B (e.g. 10-12)")
    a = int(m.group(1))
    b = int(m.group(2)) if m.group(2) is not None else a
    if b < a:
        raise TraceQLError(f"--steps {text!r}: the range ends before it starts")
    return a, b


@dataclass
class Session:
    con: Any
    cur: Any
    run_id: str
    run_format: str
    ranks: list[int]
    windows: (
        dict[int, tuple[int, int]] | None
    )  # rank -> [lo, hi) ns on the rank's own clock (None: everything)
    steps: tuple[int, int] | None
    peaks: dict[str, float | None]
    peaks_note: str
    spill: str | None = None  # DuckDB's temp directory for this session (removed on close)
    offsets: list[dict[str, Any]] = field(default_factory=list)  # clock_offsets rows
    shift: dict[int, int] = field(default_factory=dict)  # rank -> ns to subtract (applied offsets only)
    stored: bool = False
    only: int | None = None  # set while one rank is exported (the writer goes rank by rank)

    def where(self, ts: str = "ts_ns", rank: str = "rank") -> str:
        """SQL predicate selecting the ranks and step windows in scope (constants only: pushed into the scans)."""
        ranks = self.ranks if self.only is None else [r for r in self.ranks if r == self.only]
        if self.windows is None:
            return f"{rank} IN ({', '.join(str(int(r)) for r in ranks)})" if ranks else "false"
        parts = [
            f"({rank} = {int(r)} AND {ts} >= {int(lo)} AND {ts} < {int(hi)})"
            for r, (lo, hi) in sorted(self.windows.items())
            if r in ranks
        ]
        return "(" + " OR ".join(parts) + ")" if parts else "false"

    def batches(self, sql: str, params: dict[str, Any] | None = None) -> Iterator[pa.RecordBatch]:
        import duckdb

        from .._duck import arrow_reader, reraise_interrupt

        try:
            reader = arrow_reader(self.cur.sql(sql, params=params or None), BATCH_ROWS)
            yield from reader  # the batches are computed as they are read: errors come from here too
        except (duckdb.Error, RuntimeError) as e:
            reraise_interrupt(e)  # Ctrl-C: exit 130, not a failed export
            if not isinstance(e, duckdb.Error):
                raise
            raise TraceQLError(f"export of run {self.run_id!r}: {str(e).splitlines()[0]}") from e

    def rows(self, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for b in self.batches(sql, params):
            out.extend(b.to_pylist())
        return out

    def close(self) -> None:
        import shutil

        self.cur.close()
        self.con.close()
        if self.spill:
            shutil.rmtree(self.spill, ignore_errors=True)


def open_session(
    store: Any,
    run_id: str,
    *,
    ranks: list[int] | None = None,
    steps: tuple[int, int] | None = None,
    align: bool = True,
    device: str | None = None,
    peaks: dict[str, float] | None = None,
) -> Session:
    import shutil
    import tempfile

    from .. import derive, derived_tables, devices, queries
    from ..analysis import Analysis

    an = Analysis(store, run_id, device=device, peaks=peaks)
    con = an.con
    # bounded like the derived-table build: the sorts behind the (rank, track, ts) order spill beyond it
    # (TRACEQL_EXPORT_MEMORY, e.g. 512MB, overrides the share: benchmarks)
    limit = os.environ.get("TRACEQL_EXPORT_MEMORY", "")
    if not re.fullmatch(r"\d{1,6}(MB|GB)", limit):
        limit = derive.memory_limit(1)
    spill = tempfile.mkdtemp(prefix="traceql-export-")
    con.execute(f"SET memory_limit='{limit}'")
    con.execute("SET temp_directory=$d", {"d": spill})
    cur = an.cursor()  # all ranks: the clock offsets need every rank's collectives
    try:
        stored = derived_tables.stored_for(an.info)
        choice = devices.resolve(
            device=device, detected=queries.detected_device_names(cur), overrides=dict(peaks or {})
        )
        fmt_row = cur.execute("SELECT format FROM runs").fetchone()
        all_ranks = [
            int(r[0])
            for r in cur.execute(
                "SELECT DISTINCT rank FROM (SELECT rank FROM kernels UNION ALL SELECT rank FROM host_ops "
                "UNION ALL SELECT rank FROM comm_ops UNION ALL SELECT rank FROM counters) ORDER BY 1"
            ).fetchall()
        ]
        if ranks:
            missing = sorted(set(ranks) - set(all_ranks))
            if missing:
                raise TraceQLError(
                    f"run {run_id!r} has no rank {missing[0]} (ranks: {_ranges(all_ranks) or 'none'})"
                )
            chosen = sorted(set(ranks))
        else:
            chosen = all_ranks
        sess = Session(
            con,
            cur,
            run_id,
            str(fmt_row[0]) if fmt_row else "",
            chosen,
            None,
            steps,
            choice.peaks,
            choice.note,
            spill=spill,
            stored=stored,
        )
        sess.offsets = _offsets(cur)
        if align:
            sess.shift = {int(o["rank"]): int(o["offset_ns"]) for o in sess.offsets if o["applied"]}
        if steps is not None:
            sess.windows = _windows(cur, run_id, chosen, steps)
        return sess
    except BaseException:
        cur.close()
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
        raise


def _offsets(cur: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    from .. import queries

    sql = queries.get("clock_offsets").sql
    rel = cur.execute(sql)
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, r, strict=True)) for r in rel.fetchall()]


def _windows(
    cur: duckdb.DuckDBPyConnection, run_id: str, ranks: list[int], steps: tuple[int, int]
) -> dict[int, tuple[int, int]]:
    """Per rank: from the first chosen step's window start to the last one's end (the step windows every
    step metric uses, _helpers.sql _step_windows)."""
    a, b = steps
    rows = cur.execute(
        "SELECT rank, min(win_start), max(win_end) FROM step_windows WHERE step BETWEEN $a AND $b "
        "AND win_end > win_start GROUP BY rank",
        {"a": a, "b": b},
    ).fetchall()
    got = {int(r): (int(lo), int(hi)) for r, lo, hi in rows if int(r) in ranks}
    if not got:
        known = [
            int(r[0])
            for r in cur.execute(
                "SELECT DISTINCT step FROM step_windows WHERE step IS NOT NULL ORDER BY 1"
            ).fetchall()
        ]
        span = f"{a}" if a == b else f"{a}-{b}"
        raise TraceQLError(
            f"run {run_id!r} has no step {span} on the chosen ranks (steps: {_ranges(known) or 'none: the dump has no step ids'})"
        )
    return got


def _ranges(xs: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    out: list[str] = []
    for x in sorted(set(xs)):
        if out and "-" not in out[-1].lstrip("-") and int(out[-1]) == x - 1:
            out[-1] = f"{out[-1]}-{x}"
        elif out and "-" in out[-1].lstrip("-") and int(out[-1].rsplit("-", 1)[1]) == x - 1:
            out[-1] = f"{out[-1].rsplit('-', 1)[0]}-{x}"
        else:
            out.append(str(x))
    return ", ".join(out)
