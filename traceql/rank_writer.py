"""Writing one rank's canonical rows into a staging run dir: RankWriter and its spill/sort machinery.

A parser streams Arrow batches into a RankWriter (one per rank and tag); the writer conforms them to the
canonical schema (units were converted by the parser), writes one zstd Parquet file per table and part, keeps
each file in time order as written where it can (parts, apart_by; a short reorder window, reorder), spills rows
that arrive out of order as lz4 Arrow IPC beside the file and sorts or merges them at seal/close
(traceql._sort). The store (traceql.store) then commits the staging dir; it never imports this module, which
only writes files.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow.parquet as pq

# Rows per Parquet row group: small enough to stream, large enough for DuckDB scans.
ROW_GROUP = 128 * 1024


@dataclass
class RankWriter:
    """Streams canonical batches for one rank into Parquet files under a staging run dir (one writer per table
    and part).

    A part is a separately time-ordered stream of one table's rows (`<table>/r<rank>-<tag>-<part>.parquet`):
    a parser that produces rows of one table from sources that are each in time order but interleave (torch_npu's
    host events come before the CANN events, which are interleaved with the device events; percent counters are
    rescaled at the end of the file) writes them as parts, so every file stays time-sorted as written and none
    needs the post-write sort (a full external sort of the table: 1.3 s for 2M counter rows)."""

    run_dir: Path
    run_id: str
    rank: int
    tag: str = "0"
    rows: dict[str, int] = field(default_factory=dict)
    _writers: dict[str, pq.ParquetWriter] = field(default_factory=dict)  # by file (relative path)
    files: dict[str, list[str]] = field(default_factory=dict)
    # per file: last ts_ns written, and whether rows so far arrived in time order (then no re-sort is needed)
    _last_ts: dict[str, int] = field(default_factory=dict)
    _unsorted: set[str] = field(default_factory=set)
    file_rows: dict[str, int] = field(default_factory=dict)  # rows written, per file (relative path)
    # seal(): files closed early, and the background sorts of those that need one (see seal)
    _sealed: set[str] = field(default_factory=set)
    _sorts: list[Any] = field(default_factory=list)
    _sorter: Any = None
    # rows of a file that arrive after it went out of time order: Arrow IPC beside it, merged by its sort
    _spills: dict[str, Any] = field(default_factory=dict)
    # write(apart_by=...): the files whose rows now go to parts by value, and each (file, value)'s part name
    _apart: set[str] = field(default_factory=set)
    _apart_parts: dict[tuple[str, Any], str] = field(default_factory=dict)
    # write(reorder=True): per file, its table and the rows held back until they are in time order (_Window)
    _windows: dict[str, tuple[str, _Window]] = field(default_factory=dict)
    # per file: rows written but not yet encoded, gathered into one row group (see _add_to_group)
    _grouping: dict[str, list[Any]] = field(default_factory=dict)
    _grouping_bytes: int = 0

    def write(
        self, table: str, data: Any, part: str = "", apart_by: str | None = None, reorder: bool = False
    ) -> None:
        """Append rows to the table's file for `part`.

        apart_by: a column whose values are separately time-ordered streams (kernels: stream_id; a multi-stream
        kernel_details.csv may group its rows by stream; counters: track, as a trace_view writes each counter
        process's samples in order, in blocks that interleave). Once the rows stop arriving in time order, they and
        every later row of this file go to one part per value (up to APART_MAX; the rest share one part), so
        each file is still in time order as written and the post-write sort is skipped (on a 500k-row
        kernel_details.csv of 4 interleaved streams it added ~6 CPU-s to a ~10 CPU-s parse). Rows that arrive
        in order keep the one file, as without apart_by.

        reorder: the rows arrive nearly in time order, out of it by less than about one write (a trace_view's host
        ops come in end-time order: a parent after its children). They are held back in a window and written in
        time order once a later write shows that no row to come precedes them; a row that comes anyway earlier
        than what the file holds goes to the file's late part, sorted at seal (see _Window). Not with apart_by."""
        from ._arrow_helpers import conform

        if reorder and apart_by is not None:
            raise ValueError("write(): reorder and apart_by do not combine")

        # Arrow rows that can be split as they are are conformed per part, after the split: a reorder then moves
        # the parser's own column types (a kernels map's dictionary-encoded keys), not the canonical text
        raw = data if apart_by is not None and _splittable(data, apart_by) else None
        t = raw if raw is not None else conform(table, data, self.run_id, self.rank, dictionary_keys=True)
        if t.num_rows == 0:
            return
        rel = self._rel(table, part)
        if rel in self._sealed:
            raise RuntimeError(f"{rel}: written after seal()")
        if apart_by is not None and (rel in self._apart or not self._in_order(rel, t)):
            self._apart.add(rel)
            for value, rows in _split_by(t, apart_by):
                if raw is not None:
                    rows = conform(table, rows, self.run_id, self.rank, dictionary_keys=True)
                key = (rel, value)
                if key not in self._apart_parts:
                    n = len([k for k in self._apart_parts if k[0] == rel])
                    # an integer (a stream id) names its part; a text value (a counter track's name, which may
                    # hold any character) is numbered in order of first sight
                    name = f"s{value}" if isinstance(value, int) else f"v{n}"
                    self._apart_parts[key] = name if n < APART_MAX and value is not None else "s-rest"
                sub = self._apart_parts[key]
                self._write_file(table, self._part_rel(table, part, sub), rows)
            return
        if reorder and "ts_ns" in t.schema.names:
            self._write_reordered(table, part, rel, t)
            return
        self._write_file(
            table, rel, t if raw is None else conform(table, t, self.run_id, self.rank, dictionary_keys=True)
        )

    def _rel(self, table: str, part: str) -> str:
        return f"{table}/r{self.rank}-{self.tag}{'-' + part if part else ''}.parquet"

    def _part_rel(self, table: str, part: str, sub: str) -> str:
        """The file of `part`'s apart part `sub` (see write's apart_by)."""
        return self._rel(table, f"{part}-{sub}" if part else sub)

    def _late_rel(self, table: str, part: str) -> str:
        """The file of `part`'s rows that came too late for its reorder window (see write's reorder)."""
        return self._part_rel(table, part, "late")

    def _write_reordered(self, table: str, part: str, rel: str, t: Any) -> None:
        """write(reorder=True): rows through the file's window; those too late for it to the late part."""
        _, window = self._windows.setdefault(rel, (table, _Window()))
        on_time, late = window.split_late(t)
        if late is not None:
            late_rel = self._late_rel(table, part)
            # sorted at seal whatever order its rows come in (its every write spilled, see _spill): the late
            # rows are few when the window fits the stream, and their order is not known to be any better
            self._unsorted.add(late_rel)
            self._write_file(table, late_rel, late)
        self._write_settled(table, rel, window.add(on_time))

    def _write_settled(self, table: str, rel: str, rows: Any) -> None:
        if rows is not None and rows.num_rows:
            self._write_file(table, rel, rows)

    def _drain_windows(self, rels: set[str] | None = None) -> None:
        """Write every row the reorder windows of `rels` (None: all files) still hold: no more rows come."""
        for rel in [r for r in self._windows if rels is None or r in rels]:
            table, window = self._windows.pop(rel)
            self._write_settled(table, rel, window.drain())

    def _write_file(self, table: str, rel: str, t: Any) -> None:
        from ._arrow_helpers import parquet_writer, plain_keys

        w = self._writers.get(rel)
        if w is None:  # the first rows of this file (it may stay empty when they are already out of order)
            (self.run_dir / table).mkdir(parents=True, exist_ok=True)
            w = parquet_writer(self.run_dir / rel, t.schema)
            self._writers[rel] = w
            self.files.setdefault(table, []).append(rel)
        self.rows[table] = self.rows.get(table, 0) + t.num_rows
        self.file_rows[rel] = self.file_rows.get(rel, 0) + t.num_rows
        if rel not in self._unsorted and "ts_ns" in t.schema.names:
            ts = t.column("ts_ns")
            if _ordered_after(self._last_ts.get(rel), ts):
                last = _last_valid(ts)
                if last is not None:
                    self._last_ts[rel] = last
            else:  # the first rows out of time order: they and all later rows go to the spill (see _spill)
                self._unsorted.add(rel)
        if rel in self._unsorted:  # to be sorted anyway: no Parquet encoding now, none to decode in the sort
            # the spill holds the canonical types the Parquet file reads back with (the sort reads both)
            self._spill(rel, t.cast(plain_keys(t.schema)))
            return
        if not t.schema.equals(w.schema):
            t = t.cast(w.schema)  # map keys dictionary-encoded in one batch and not in another: as the first
        self._add_to_group(rel, t)

    def _add_to_group(self, rel: str, t: Any) -> None:
        """Encode t into rel's Parquet file once rel has GROUP_MIN_ROWS rows waiting, not as a row group per write:
        a parser's write for one file can be a few rows (a counter track's samples of one 32k-event batch, split by
        apart_by), and a row group's fixed costs (a dictionary page and statistics per column, a zstd frame per
        page) would outweigh them (benchmarks/README.md measures the counters' encoding both ways). Held rows are
        capped at GROUPING_BYTES over all files."""
        if rel not in self._grouping and t.num_rows >= GROUP_MIN_ROWS:  # a row group already: none to gather
            self._writers[rel].write_table(t, row_group_size=ROW_GROUP)
            return
        held = self._grouping.setdefault(rel, [])
        held.append(_compact(t))
        self._grouping_bytes += held[-1].nbytes
        if sum(x.num_rows for x in held) >= GROUP_MIN_ROWS:
            self._write_group(rel)
        elif self._grouping_bytes > GROUPING_BYTES:
            for r in list(self._grouping):
                self._write_group(r)

    def _write_group(self, rel: str) -> None:
        """Encode the rows rel holds (_add_to_group) as one row group (ROW_GROUP rows at most each)."""
        import pyarrow as pa

        held = self._grouping.pop(rel, [])
        if held:
            self._grouping_bytes -= sum(x.nbytes for x in held)
            rows = pa.concat_tables(held) if len(held) > 1 else held[0]
            self._writers[rel].write_table(rows, row_group_size=ROW_GROUP)

    def _spill(self, rel: str, t: Any) -> None:
        """Append rows to `rel`'s spill: once a file is out of time order its later rows are only ever read back by
        its sort, so they are written as lz4 Arrow IPC instead of zstd Parquet, and the sort reads them back
        without decoding Parquet (a 1 GB trace_view's host ops come in end-time order: ~1.4M rows that were
        encoded, decoded and encoded again).

        Each write is sorted by time first (stable, NULLs last) and stored in small record batches, so the spill
        is a few time-ordered runs after the Parquet file's own in-order rows, and the sort merges them in one
        pass instead of dealing every row into time buckets and reading it back (traceql._sort). A trace_view's
        host ops are out of order only within a write (a parent after its children): the real level1 file tiled
        to 250 MB / 1 GB gives one run, to 4 GB 27."""
        import pyarrow as pa

        from ._sort import RUN_CHUNK_ROWS, sorted_by_time

        w = self._spills.get(rel)
        if w is None:
            w = pa.ipc.new_file(
                str(self._spill_path(rel)), t.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")
            )
            self._spills[rel] = w
        w.write_table(sorted_by_time(t), max_chunksize=RUN_CHUNK_ROWS)

    def _spill_path(self, rel: str) -> Path:
        return self.run_dir / f"{rel}.unsorted.arrow"

    def _close_file(self, rel: str) -> None:
        self._write_group(rel)
        for writers in (self._writers, self._spills):
            w = writers.pop(rel, None)
            if w is not None:
                w.close()

    def _sort_file(self, rel: str) -> None:
        """Sort `rel` with its spill (if any), then delete the spill."""
        spill = self._spill_path(rel)
        sort_parquet_by_time(self.run_dir / rel, *([spill] if spill.exists() else []))
        with contextlib.suppress(FileNotFoundError):
            spill.unlink()

    def seal(self, table: str, part: str = "") -> None:
        """No more rows for `table`'s file `part` (and the parts write(apart_by=...) made of it): close it now,
        and sort it in a background thread if its rows did not arrive in time order, so the sort runs beside
        the parser's remaining work (a trace_view's flow pairing and comm ops, the folder's other files)
        instead of after it. close() waits for these sorts and raises the first error."""
        rel = self._rel(table, part)
        self._drain_windows({rel})  # before the files close: it writes the rows held back
        mine = {rel, self._late_rel(table, part)} | {
            self._part_rel(table, part, sub) for (r, _), sub in self._apart_parts.items() if r == rel
        }
        for r in self.files.get(table, []):
            if r in self._sealed or r not in mine:
                continue
            self._sealed.add(r)
            self._close_file(r)
            if r in self._unsorted:
                if self._sorter is None:
                    from concurrent.futures import ThreadPoolExecutor

                    # one thread: sorts run one at a time, each within the sort's own memory budget
                    self._sorter = ThreadPoolExecutor(1, thread_name_prefix="traceql-sort")
                self._unsorted.discard(r)
                self._sorts.append(self._sorter.submit(self._sort_file, r))

    def _wait_for_sorts(self) -> None:
        """Wait for every background sort; raise the first one's error."""
        sorts, self._sorts = self._sorts, []
        errors = [e for f in sorts if (e := f.exception()) is not None]
        if self._sorter is not None:
            self._sorter.shutdown(wait=True)
            self._sorter = None
        if errors:
            raise errors[0]

    def abort(self) -> None:
        """Close every writer on an error path, ignoring their errors (the staging dir is discarded anyway);
        a ParquetWriter left open prints 'Exception ignored in ParquetWriter.__del__' when collected. A
        background sort still running is waited for, so nothing writes into the staging dir once this returns."""
        self._windows = {}  # their rows are not written: the staging dir is discarded
        self._grouping, self._grouping_bytes = {}, 0
        writers, self._writers = list(self._writers.values()), {}
        _abandon(writers)
        spills, self._spills = list(self._spills.values()), {}
        for w in spills:
            with contextlib.suppress(BaseException):
                w.close()
        with contextlib.suppress(BaseException):  # an error path already: the first error is the one reported
            self._wait_for_sorts()

    def _in_order(self, rel: str, t: Any) -> bool:
        """Would these rows keep the file `rel` in time order (nothing written to it is out of order)?"""
        if "ts_ns" not in t.schema.names or rel in self._unsorted:
            return rel not in self._unsorted
        return _ordered_after(self._last_ts.get(rel), t.column("ts_ns"))

    def close(self, sort: bool = True) -> None:
        """Close every file, wait for the background sorts, and sort the files still out of time order
        (sort=False: leave them as written: a file's in-order rows, then its spilled writes in the order written, each
        in its own time order, see _spill)."""
        self._drain_windows()
        try:
            for rel in list(self._grouping):
                self._write_group(rel)
        except BaseException:
            self.abort()  # one failed write (disk full) must not leave the writers to __del__
            raise
        writers, self._writers = list(self._writers.values()), {}
        for i, w in enumerate(writers):
            try:
                w.close()
            except BaseException:
                _abandon(writers[i:])  # one failed close (disk full) must not leave the others to __del__
                raise
        spills, self._spills = list(self._spills.values()), {}
        for w in spills:
            w.close()
        self._wait_for_sorts()
        for rels in self.files.values():
            for rel in rels:
                if rel in self._unsorted and sort:
                    self._sort_file(rel)
                elif self._spill_path(rel).exists():
                    append_to_parquet(self.run_dir / rel, self._spill_path(rel))
        self.largest_first()

    def largest_first(self) -> None:
        """Order each table's files by rows, most first (stable). DuckDB estimates a read_parquet over a list of
        files as the first file's rows times the number of files: a table whose first file was a small part
        (a counter track of 900 samples before parts of 600k and 1.2M) was estimated at ~7k rows instead of
        2M and chosen as a hash join's build side, with every row under one key (rank): the
        counters_outside_run_window check took 3.5 s instead of 0.09 s on a 1 GB trace_view (measured)."""
        for rels in self.files.values():
            rels.sort(key=lambda rel: -self.file_rows.get(rel, 0))


APART_MAX = 32  # parts of one file by write(apart_by=...) value; more values share one part (then sorted)


# Rows a file gathers before encoding them as a row group (see RankWriter._add_to_group), and the Arrow bytes so
# held over all files at most: past it, every file encodes what it holds
GROUP_MIN_ROWS = 32 * 1024
GROUPING_BYTES = 8 << 20


def _compact(t: Any) -> Any:
    """t, copied when it is a small slice of larger buffers (apart_by's per-value slices of a batch): held back
    for a row group, a slice keeps its whole batch in memory, so a counter track of a few samples per batch
    would keep every batch it was cut from until its row group fills."""
    import pyarrow as pa

    if t.get_total_buffer_size() <= 2 * t.nbytes + (64 << 10):
        return t
    return t.take(pa.array(range(t.num_rows), pa.int64()))


# Arrow bytes one reorder window holds at most (write's reorder); past it, every held row is written at once. A
# real trace_view tiled to 1 GB holds its host ops' last one or two writes, 10-25 MB.
WINDOW_BYTES = 64 << 20


class _Window:
    """The rows of one file that write(reorder=True) holds back, for a stream that goes back in time by less than
    about one write.

    Rows written to the file are at or below `mark` and rows held at or above it, so a row that comes at or above
    it can still be placed; one below it is late (to the late part). Each write moves the mark up to the write's
    earliest ts_ns (the bet: no later row is earlier) and releases the held rows below it in time order: host ops
    in end-time order (a parent after its children) come out in start-time order after one sort each, where the
    spill path (RankWriter._spill) would sort each write, write it as IPC, read it back and merge it at seal
    (~1.5 CPU-s per GB of a real trace_view, ~4x the rows' one Parquet encoding). Rows with NULL ts_ns are late
    (the late part's sort puts them last)."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = WINDOW_BYTES if max_bytes is None else max_bytes
        self.mark: int | None = None
        self._held: list[_Held] = []  # as they came

    def split_late(self, t: Any) -> tuple[Any, Any | None]:
        """(the rows of t the window can still place, the late ones or None)."""
        import pyarrow.compute as pc

        ts = t.column("ts_ns")
        late = pc.is_null(ts)
        if self.mark is not None:
            late = pc.or_kleene(late, pc.less(ts, self.mark))
        if not pc.any(late).as_py():
            return t, None
        return t.filter(pc.invert(late)), t.filter(late)

    def add(self, t: Any) -> Any | None:
        """Hold t's rows (none late, none NULL); return the held rows now settled, in time order, or None."""
        if t.num_rows == 0:
            return None
        held = _Held.of(t)
        self._held.append(held)
        if sum(h.rows.nbytes for h in self._held) > self.max_bytes:
            # the stream goes back further than the window holds: its later rows may be late
            return self.drain()
        return self._release(held.low if self.mark is None else max(self.mark, held.low))

    def drain(self) -> Any | None:
        """Release every held row; a row that comes later below the last of them is late."""
        if not self._held:
            return None
        top = max(h.high for h in self._held)
        rows = self._release(None)
        self.mark = top
        return rows

    def _release(self, upto: int | None) -> Any | None:
        """The held rows with mark <= ts_ns < upto (None: every one), in time order (stable); mark := upto."""
        if upto is not None and self.mark is not None and upto <= self.mark:
            return None
        lo = self.mark
        giving = [h for h in self._held if upto is None or h.low < upto]
        self.mark = upto
        self._held = [h for h in self._held if upto is not None and h.high >= upto]  # rows still to release
        if not giving:
            return None
        if len(giving) == 1 and giving[0].ordered:  # in time order already: a slice, no copy
            rows = _time_slice(giving[0].rows, lo, upto)
        else:
            rows = _time_take([h.rows for h in giving], lo, upto)
        return rows if rows.num_rows else None


@dataclass
class _Held:
    """One write's rows in a _Window, with their least and largest ts_ns and whether they are in time order."""

    rows: Any
    low: int
    high: int
    ordered: bool

    @staticmethod
    def of(t: Any) -> _Held:
        import pyarrow.compute as pc

        from ._sort import nondecreasing

        ts = t.column("ts_ns").combine_chunks()
        mm = pc.min_max(ts).as_py()
        return _Held(t, mm["min"], mm["max"], nondecreasing(ts))


def _time_slice(t: Any, lo: int | None, hi: int | None) -> Any:
    """The rows of t (ordered by ts_ns, no NULLs) with lo <= ts_ns < hi (None: unbounded)."""
    import pyarrow.compute as pc

    ts = t.column("ts_ns")
    start = 0 if lo is None else int(pc.sum(pc.less(ts, lo)).as_py() or 0)
    end = t.num_rows if hi is None else int(pc.sum(pc.less(ts, hi)).as_py() or 0)
    return t.slice(start, end - start)


def _time_take(tables: list[Any], lo: int | None, hi: int | None) -> Any:
    """The rows of the tables with lo <= ts_ns < hi (None: unbounded), ordered by ts_ns (stable), by one
    take over them (a chunked take, not a copy of them all first)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ._arrow_helpers import plain_keys

    if any(not t.schema.equals(tables[0].schema) for t in tables):
        # map keys dictionary-encoded in one write and not in another (conform): the text both read back as
        tables = [t.cast(plain_keys(t.schema)) for t in tables]
    rows = pa.concat_tables(tables)
    ts = rows.column("ts_ns")
    bounds = [pc.greater_equal(ts, lo)] if lo is not None else []
    bounds += [pc.less(ts, hi)] if hi is not None else []
    if not bounds:
        return rows.take(pc.sort_indices(ts))
    pick = pc.indices_nonzero(bounds[0] if len(bounds) == 1 else pc.and_(*bounds))
    return rows.take(pick.take(pc.sort_indices(ts.take(pick))))


def _ordered_after(last: int | None, ts: Any) -> bool:
    """Are the non-null ts values non-decreasing and none below `last` (the file's last written ts)?"""
    import pyarrow.compute as pc

    ts = pc.drop_null(ts)
    if hasattr(ts, "combine_chunks"):
        ts = ts.combine_chunks()
    if len(ts) == 0:
        return True
    from ._sort import nondecreasing

    return (last is None or ts[0].as_py() >= last) and nondecreasing(ts)


def _last_valid(ts: Any) -> int | None:
    import pyarrow.compute as pc

    ts = pc.drop_null(ts)
    return None if len(ts) == 0 else ts[len(ts) - 1].as_py()


def _splittable(data: Any, col: str) -> bool:
    """Can RankWriter.write order and split `data` before conforming it: Arrow rows holding the split column and
    int64 ts_ns (what the order check reads)?"""
    import pyarrow as pa

    if not isinstance(data, (pa.Table, pa.RecordBatch)):
        return False
    names = data.schema.names
    return col in names and "ts_ns" in names and data.schema.field("ts_ns").type == pa.int64()


# Rows that come in runs of one value at least this long on average are split by slicing (see _split_by)
SPLIT_RUN_ROWS = 256


def _split_by(t: Any, col: str) -> list[tuple[Any, Any]]:
    """(value, rows) for each distinct value of `col` in first-seen order; rows keep their order.

    Rows that come in runs of one value (a multi-stream kernel_details' streams, a trace_view's counter tracks:
    blocks of hundreds to thousands of rows) are sliced, not copied: a value's rows are its runs' slices, as a
    table of chunks, which the Parquet writer takes as they are (500k interleaved kernel_details rows: the
    take of every column, two maps included, was 0.4 s of the main thread). Rows whose values alternate in
    short runs are grouped with one take."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = t.column(col)
    if hasattr(keys, "combine_chunks"):
        keys = keys.combine_chunks()
    uniq = pc.unique(keys)
    if len(uniq) == 1:
        return [(uniq[0].as_py(), t)]
    codes = pc.index_in(keys, value_set=uniq)  # NULL keys get the index of the NULL in uniq
    n = len(codes)
    change = pc.not_equal(codes.slice(1), codes.slice(0, n - 1))
    runs = 1 + (pc.sum(change).as_py() or 0)
    if runs * SPLIT_RUN_ROWS <= n:
        table = pa.Table.from_batches([t]) if isinstance(t, pa.RecordBatch) else t
        starts = [0, *(i + 1 for i in pc.indices_nonzero(change).to_pylist()), n]
        parts: dict[int, list[Any]] = {}
        run_codes = codes.take(pa.array(starts[:-1])).to_pylist()
        for code, a, b in zip(run_codes, starts[:-1], starts[1:], strict=True):
            parts.setdefault(code, []).append(table.slice(a, b - a))
        return [(uniq[c].as_py(), pa.concat_tables(parts[c])) for c in sorted(parts)]
    order = pc.sort_indices(codes)  # stable: each value's rows in file order
    grouped = t.take(order)
    counts = pc.value_counts(codes)
    by_code = {c["values"]: c["counts"] for c in counts.to_pylist()}
    out, start = [], 0
    for code in sorted(by_code):
        m = by_code[code]
        out.append((uniq[code].as_py(), grouped.slice(start, m)))
        start += m
    return out


def _abandon(writers: list[Any]) -> None:
    for w in writers:
        with contextlib.suppress(BaseException):  # an error path already: the first error is the one reported
            w.close()
        w.is_open = False  # pyarrow's __del__ closes again (and prints) while is_open is still set


def sort_parquet_by_time(path: Path, *more: Path) -> None:
    """Rewrite a Parquet file ordered by ts_ns, so row-group min/max stats let DuckDB skip by time; `more`: files
    of further rows (a RankWriter's spill) merged into it.

    Parsers stream events in file order (grouped by track or stream, not by time). traceql._sort sorts within
    a fixed memory budget by dealing rows into time-range buckets beside the file (inside the staging run
    dir), so it finishes for any row width and order; it reads the compressed Parquet, not the dump.
    """
    from ._sort import sort_by_time

    _rewrite(path, lambda tmp: sort_by_time(path, tmp, ROW_GROUP, more=more))


def append_to_parquet(path: Path, spill: Path) -> None:
    """Rewrite a Parquet file with the rows of an Arrow IPC file after its own, in order; delete the spill."""
    from ._sort import concat_files

    _rewrite(path, lambda tmp: concat_files([path, spill], tmp, ROW_GROUP))
    spill.unlink()


def _rewrite(path: Path, write: Callable[[Path], None]) -> None:
    """Replace `path` by what `write` writes to a temporary file beside it (removed if it fails)."""
    tmp = path.with_suffix(".rewrite.tmp")
    try:
        write(tmp)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.replace(tmp, path)
