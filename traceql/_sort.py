"""Sort a Parquet file by ts_ns within a fixed memory budget, whatever its row width and row order.

Why not DuckDB's ORDER BY: under the ingest's 128 MB limit DuckDB 2.0's sort fails with "failed to pin block"
on a 1M-row kernels table of 44 columns with two MAP columns (a 300 MB kernel_details.csv whose streams
interleave), with 1 thread as with 2, instead of spilling (issue 18). A larger limit only moves the row count
where it fails, and lifts every ingest worker's RSS.

How (a distribution sort, two passes over the file, memory bounded by `budget` bytes of Arrow data):
1. the ts_ns column alone is read (8 bytes a row, one row group at a time) to sample its quantiles;
2. if the whole table fits the budget it is sorted in memory; otherwise rows are dealt into buckets of
   consecutive time ranges, each a temp Parquet file sized to fit the budget (one batch in memory at a time);
3. each bucket in time order is read, sorted (stable: rows with equal ts_ns keep file order) and appended to
   the output. Buckets are Arrow IPC files (lz4): written once and read once, where Parquet's encoders cost
   half the sort's time. A bucket that came out larger than planned (skewed times) is sorted the same way on its own;
   one holding a single timestamp is copied as it is (already in order).
When the rows are already a few time-ordered runs one after another (a RankWriter's file: its in-order rows,
then a spill whose every write was sorted; see RankWriter._spill) they are merged instead, in one pass: time
slabs sized to the budget from a sample of ts_ns, each slab taking the next rows below its upper bound from every
run (one small record batch a run in memory), sorted (unless they all came from one run: in order already) and
appended. No bucket files are written or read back.
NULL ts_ns rows go last, as `ORDER BY ts_ns NULLS LAST` put them. Temp files live in a private dir beside the
file (inside the store's staging run dir: never the dump folder or the working directory) and are removed
on every path.
"""

from __future__ import annotations

import bisect
import functools
import math
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

# Arrow bytes sorted in memory at once (buckets aim at half, sampling is approximate); the sort's taken copy
# doubles it.
DEFAULT_BUDGET = 64 << 20
_SAMPLE = 64 * 1024  # ts_ns values sampled for the bucket boundaries
# Rows per record batch of a RankWriter's sorted spill: what the merge holds of each run at a time
RUN_CHUNK_ROWS = 2048
# The merge is taken for at most this many runs (more: the distribution sort), and only while one record
# batch of each stays within a quarter of the budget
MAX_RUNS = 64


def budget_bytes() -> int:
    """The sort's budget: TRACEQL_SORT_MEMORY (bytes, or with a KB/MB/GB suffix) or DEFAULT_BUDGET."""
    raw = os.environ.get("TRACEQL_SORT_MEMORY", "").strip().upper().replace("IB", "B")
    if not raw:
        return DEFAULT_BUDGET
    for suffix, mul in (("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("B", 1)):
        if raw.endswith(suffix):
            raw, scale = raw[: -len(suffix)].strip(), mul
            break
    else:
        scale = 1
    try:
        v = int(float(raw) * scale)
    except ValueError:
        return DEFAULT_BUDGET
    return max(v, 1 << 20)


def sort_by_time(
    src: Path, dst: Path, row_group: int, budget: int | None = None, more: Sequence[Path] = ()
) -> None:
    """Write `src`'s rows, then those of the files `more` (Parquet or Arrow IPC), to `dst` ordered by ts_ns
    (NULLs last; rows of equal ts_ns in that order), holding about `budget` bytes at a time."""
    import pyarrow.parquet as pq

    from ._arrow_helpers import parquet_options

    budget = budget or budget_bytes()
    tmp = Path(tempfile.mkdtemp(prefix=".sort-", dir=dst.parent))
    try:
        source = _Source([src, *more])
        with pq.ParquetWriter(
            dst, source.schema, compression="zstd", **parquet_options(source.schema)
        ) as out:
            runs = _runs(source, budget)
            if runs is None:
                _write_parts(_parts(source, budget, tmp, depth=0), out, row_group)
            else:
                _write_parts(runs.parts(), out, row_group)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def concat_files(paths: Sequence[Path], dst: Path, row_group: int) -> None:
    """Write the rows of `paths` (Parquet or Arrow IPC, one schema), in order, to the Parquet file `dst`."""
    import pyarrow.parquet as pq

    from ._arrow_helpers import parquet_options

    source = _Source(paths)
    with pq.ParquetWriter(dst, source.schema, compression="zstd", **parquet_options(source.schema)) as out:
        for chunk in source.chunks():
            out.write(chunk, row_group_size=row_group)  # a row group (Table) or an IPC record batch


class _File:
    """One file of rows: Parquet, or Arrow IPC (a bucket, or rows a RankWriter spilled)."""

    def __init__(self, path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = path
        self.ipc = path.suffix == ".arrow"
        if self.ipc:
            self._file = pa.OSFile(str(path))  # not mmap: mapped pages count as RSS
            self._r = pa.ipc.open_file(self._file)
            self.schema = self._r.schema
            self.num_rows = (
                self._r.count_rows() if hasattr(self._r, "count_rows") else self._r.read_all().num_rows
            )
        else:
            self._r = pq.ParquetFile(path)
            self.schema = self._r.schema_arrow
            self.num_rows = self._r.metadata.num_rows

    def chunks(self) -> Iterator[Any]:
        """The rows, one stored chunk (row group / record batch) at a time."""
        if self.ipc:
            for i in range(self._r.num_record_batches):
                yield self._r.get_batch(i)
        else:
            for i in range(self._r.metadata.num_row_groups):
                yield self._r.read_row_group(i)

    def ts_chunks(self) -> Iterator[Any]:
        if self.ipc:
            import pyarrow as pa

            # only the ts_ns buffers are read and decompressed, not the whole record batch
            with pa.OSFile(str(self.path)) as f:
                r = pa.ipc.open_file(
                    f, options=pa.ipc.IpcReadOptions(included_fields=[self.schema.get_field_index("ts_ns")])
                )
                for i in range(r.num_record_batches):
                    yield r.get_batch(i).column(0)
        else:
            for i in range(self._r.metadata.num_row_groups):
                yield self._r.read_row_group(i, columns=["ts_ns"]).column("ts_ns").combine_chunks()

    def batches(self, rows: int) -> Iterator[Any]:
        if self.ipc:
            for b in self.chunks():
                for off in range(0, b.num_rows, rows):
                    yield b.slice(off, rows)
        else:
            yield from self._r.iter_batches(batch_size=rows)

    def read(self) -> Any:
        return self._r.read_all() if self.ipc else self._r.read()

    def close(self) -> None:
        if self.ipc:
            self._file.close()
        else:
            self._r.close()


class _Source:
    """Rows to sort: the files in order (the Parquet file and what was spilled after it), or a bucket (an
    Arrow IPC file of this sort's own, `owned`: deleted once read) that came out too large."""

    def __init__(self, paths: Sequence[Path], owned: bool = False) -> None:
        self.files = [_File(p) for p in paths]
        self.owned = owned
        self.schema = self.files[0].schema
        self.num_rows = sum(f.num_rows for f in self.files)

    def chunks(self) -> Iterator[Any]:
        for f in self.files:
            yield from f.chunks()

    def ts_chunks(self) -> Iterator[Any]:
        for f in self.files:
            yield from f.ts_chunks()

    def batches(self, rows: int) -> Iterator[Any]:
        for f in self.files:
            yield from f.batches(rows)

    def read(self) -> Any:
        import pyarrow as pa

        tables = [f.read() for f in self.files]
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    def drop(self) -> None:
        """Done with these rows: a bucket is closed and deleted (the sorted file's own sources are kept)."""
        if self.owned:
            for f in self.files:
                f.close()
                f.path.unlink()

    def row_bytes(self) -> float:
        """Arrow bytes per row, from the first chunk actually read (Parquet's sizes are encoded sizes, far
        below what a MAP column takes in memory)."""
        for c in self.chunks():
            rows: int = c.num_rows
            if rows:
                per_row: float = float(c.nbytes) / rows
                return max(1.0, per_row)
        return 1.0


def _batch_rows(row_bytes: float, budget: int) -> int:
    return max(1024, int(budget / 4 / row_bytes))


def _write_parts(parts: Iterator[tuple[str, Any]], out: Any, row_group: int) -> None:
    """Append the parts (consecutive in time, see `_parts`) to the open ParquetWriter `out`.

    Each part is read and sorted one ahead, in a helper thread, while this thread writes the previous one (both
    are Arrow work that releases the GIL): the sort runs once a table is complete, usually with the other core
    idle (a 1 GB trace_view's host ops, 1.4M rows in 11 buckets: the writes were ~half of the buckets' time).
    One part ahead at most: memory stays within ~1.5x the budget. The one helper thread runs the jobs in the
    order they come, which the merge's jobs need (they read their runs one after another)."""
    from concurrent.futures import Future, ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="traceql-sort-part") as pool:
        ahead: Future[Any] | None = None
        for kind, job in parts:
            if kind == "table":
                nxt = pool.submit(job)
                if ahead is not None:
                    _append(out, ahead.result(), row_group)
                ahead = nxt
            else:  # "copy": streams its rows itself, after what came before it
                if ahead is not None:
                    _append(out, ahead.result(), row_group)
                    ahead = None
                job(out, row_group)
        if ahead is not None:
            _append(out, ahead.result(), row_group)


def _append(out: Any, table: Any, row_group: int) -> None:
    if table.num_rows:  # a merge slab may be empty (a cut at the first time): no empty row group
        out.write_table(table, row_group_size=row_group)


def _parts(src: _Source, budget: int, tmp: Path, depth: int) -> Iterator[tuple[str, Any]]:
    """src's rows as consecutive parts in time order: ("table", a function returning the part sorted) for a
    part that fits the budget, ("copy", a function writing the part to a ParquetWriter) for one whose times
    are all equal (or null). A bucket file is deleted once read."""
    n = src.num_rows
    row_bytes = src.row_bytes()
    if n * row_bytes <= budget or n <= 1 or depth > 8:
        # fits (depth > 8 cannot happen: each level narrows the time range; correctness before memory)
        yield "table", functools.partial(_read_sorted, src)
        return
    # at most 64 buckets a pass (each an open writer); a bucket left too large is split again
    lo, hi, bounds = _boundaries(src, min(64, math.ceil(2 * n * row_bytes / budget)))
    if lo is None or lo == hi:
        # every non-null time equal (or none): the non-null rows in file order, then the null ones
        yield "copy", functools.partial(_copy_then_drop, src, rows=_batch_rows(row_bytes, budget))
        return
    buckets = _deal(src, bounds, tmp, _batch_rows(row_bytes, budget))
    src.drop()
    for bucket in buckets:
        if bucket is not None:
            yield from _parts(_Source([bucket], owned=True), budget, tmp, depth + 1)


def _read_sorted(src: _Source) -> Any:
    table = src.read()
    src.drop()
    return _sorted(table)


def _copy_then_drop(src: _Source, out: Any, row_group: int, rows: int) -> None:
    _copy_nulls_last(src, out, row_group, rows)
    src.drop()


def _sorted(table: Any) -> Any:
    import pyarrow.compute as pc

    # One chunk first: take() over many chunks resolves every index to its chunk, ~2x the time of the same
    # take over one (a host_ops bucket with call-stack maps, 278k rows: 0.23 -> 0.11 s). The peak stays at two
    # copies (the caller holds no reference to the chunked table, so it is freed before the take).
    table = table.combine_chunks()
    idx = pc.sort_indices(table, sort_keys=[("ts_ns", "ascending", "at_end")])
    return table.take(idx)


def sorted_by_time(rows: Any) -> Any:
    """A Table of `rows` (Table or RecordBatch) ordered by ts_ns, NULLs last, rows of equal ts_ns in their order."""
    import pyarrow as pa

    return _sorted(pa.Table.from_batches([rows]) if isinstance(rows, pa.RecordBatch) else rows)


class _Runs:
    """Rows that are a few time-ordered runs, one after another in the files (see `_runs`), merged by slabs of
    time: slab j takes, from every run in file order, its next rows with ts_ns < cuts[j] (runs are sorted, so
    these are a prefix of what is left of it), then sorts them (stable: rows of equal ts_ns keep file order,
    which is run order, then order within a run). The NULL ts_ns rows, last in every run, come last."""

    def __init__(
        self, source: _Source, runs: list[list[tuple[int, int]]], cuts: list[int], write_bytes: float
    ) -> None:
        self.source = source
        self.runs = runs  # each run: its (file index, chunk index) in order
        self.cuts = cuts
        self.write_bytes = write_bytes  # NULL rows are written in pieces of about this many bytes
        self._cursors: list[_RunCursor] = []

    def parts(self) -> Iterator[tuple[str, Any]]:
        for hi in [*self.cuts, None]:
            yield "table", functools.partial(self._slab, hi)
        yield "copy", self._write_nulls

    def _open(self) -> list[_RunCursor]:
        if not self._cursors:
            self._cursors = [_RunCursor(self.source, run) for run in self.runs]
        return self._cursors

    def _slab(self, hi: int | None) -> Any:
        import pyarrow as pa

        taken = [list(c.below(hi)) for c in self._open()]
        table = pa.Table.from_batches([p for t in taken for p in t], schema=self.source.schema)
        # rows of one run only are in order already (a trace_view's host ops: each spilled write sorted, and
        # the writes one after another in time, so one run): no sort, no copy
        return _sorted(table) if sum(1 for t in taken if t) > 1 else table

    def _write_nulls(self, out: Any, row_group: int) -> None:
        """The NULL ts_ns rows, in run order, streamed: any number of them within the budget."""
        import pyarrow as pa

        held: list[Any] = []
        for b in (p for c in self._open() for p in c.rest()):
            held.append(b)
            if sum(x.num_rows for x in held) >= row_group or sum(x.nbytes for x in held) >= self.write_bytes:
                out.write_table(
                    pa.Table.from_batches(held, schema=self.source.schema), row_group_size=row_group
                )
                held = []
        if held:
            out.write_table(pa.Table.from_batches(held, schema=self.source.schema), row_group_size=row_group)


class _RunCursor:
    """One run's rows in order, a small record batch at a time (Parquet row groups are read in batches)."""

    def __init__(self, source: _Source, run: list[tuple[int, int]]) -> None:
        self._batches = self._read(source, run)
        self._pending: Any = None

    @staticmethod
    def _read(source: _Source, run: list[tuple[int, int]]) -> Iterator[Any]:
        for fi, ci in run:
            f = source.files[fi]
            if f.ipc:
                yield f._r.get_batch(ci)
            else:
                yield from f._r.iter_batches(batch_size=RUN_CHUNK_ROWS, row_groups=[ci])

    def _next(self) -> Any:
        if self._pending is None:
            self._pending = next(self._batches, None)
        return self._pending

    def below(self, hi: int | None) -> Iterator[Any]:
        """Take the run's next rows with ts_ns < hi (hi None: every non-null ts_ns left)."""
        import pyarrow.compute as pc

        while (b := self._next()) is not None:
            ts = b.column("ts_ns")
            valid = len(ts) - ts.null_count  # NULLs are last in a run
            n = valid if hi is None else int(pc.sum(pc.less(ts.slice(0, valid), hi)).as_py() or 0)
            if n:
                yield b.slice(0, n)
            if n < len(b):
                self._pending = b.slice(n)
                return
            self._pending = None

    def rest(self) -> Iterator[Any]:
        while (b := self._next()) is not None:
            yield b
            self._pending = None


def _runs(source: _Source, budget: int) -> _Runs | None:
    """The merge of `source`'s rows, when they are at most MAX_RUNS time-ordered runs one after another (a run:
    consecutive chunks, each ordered by ts_ns with NULLs only at its end, each starting at or after the last
    ts_ns before it; after a chunk holding a NULL only chunks of NULLs) and do not fit the budget as a whole
    (nor crowd a slab: see below); None otherwise."""
    import pyarrow as pa

    n = source.num_rows
    row_bytes = source.row_bytes()
    if n * row_bytes <= budget or n <= 1:
        return None  # sorted in memory at once
    runs: list[list[tuple[int, int]]] = []
    last: int | None = None
    closed = True  # the current run ended (a NULL) or none started
    stride = max(1, n // _SAMPLE)
    samples = []
    held = RUN_CHUNK_ROWS  # rows of a run in memory at once: Parquet is read RUN_CHUNK_ROWS at a time
    timed = 0  # rows with a ts_ns (the slabs'; the NULL rows are streamed after them)
    for fi, f in enumerate(source.files):
        for ci, ts in enumerate(f.ts_chunks()):
            if len(ts) == 0:
                continue
            if f.ipc:
                held = max(held, len(ts))  # an IPC chunk (record batch) is read whole
            valid = len(ts) - ts.null_count
            timed += valid
            head = ts.slice(0, valid)
            if head.null_count or not nondecreasing(head):
                return None  # a chunk out of order: not runs
            first = head[0].as_py() if valid else None
            if valid == 0 and runs:
                pass  # NULLs only: the end of the current run (its NULLs may span chunks)
            elif closed or last is None or (first is not None and first < last):
                runs.append([])
                if len(runs) > MAX_RUNS:
                    return None
            runs[-1].append((fi, ci))
            if valid:
                last = head[valid - 1].as_py()
                samples.append(head.take(pa.array(range(0, valid, stride), pa.int64())))
            closed = valid < len(ts)
    # what every run holds at once, besides the slab and its sorted copy
    if not samples or len(runs) * held * row_bytes > budget / 4:
        return None
    ordered = _sorted_sample(samples)
    cuts = _cuts(ordered, max(1, math.ceil(2 * timed * row_bytes / budget)))
    # rows per slab, from the sample (a sampled value stands for ~timed / len(sample) rows): a slab is all the rows of
    # its time range at once, so one timestamp held by many rows (skewed times) would overrun the budget; the
    # distribution sort copies such a bucket in a stream instead
    edges = [0, *(bisect.bisect_left(ordered, c) for c in cuts), len(ordered)]
    widest = max(b - a for a, b in zip(edges, edges[1:], strict=False))
    if widest * (timed / len(ordered)) * row_bytes > budget:
        return None
    return _Runs(source, runs, cuts, budget / 4)


def nondecreasing(ts: Any) -> bool:
    """Are the values of `ts` (an int array without NULLs) in non-decreasing order?"""
    import pyarrow.compute as pc

    return len(ts) < 2 or bool(pc.all(pc.greater_equal(ts.slice(1), ts.slice(0, len(ts) - 1))).as_py())


def _sorted_sample(samples: list[Any]) -> list[int]:
    """The sampled ts_ns values (Arrow arrays), in order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    every = pa.concat_arrays(samples)
    out: list[int] = every.take(pc.array_sort_indices(every)).to_pylist()
    return out


def _cuts(ordered: list[int], k: int) -> list[int]:
    """Up to k-1 distinct cut points splitting the sorted sample `ordered` into k parts of about equal count."""
    return sorted({ordered[(j * len(ordered)) // k] for j in range(1, k)})


def _boundaries(src: _Source, k: int) -> tuple[int | None, int | None, list[int]]:
    """min, max and up to k-1 distinct ts_ns cut points splitting the rows into k parts of about equal count
    (from a strided sample of the ts_ns column, read one chunk at a time)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    stride = max(1, src.num_rows // _SAMPLE)
    samples = []
    lo: int | None = None
    hi: int | None = None
    for col in src.ts_chunks():
        ts = pc.drop_null(col)
        if len(ts) == 0:
            continue
        mm = pc.min_max(ts).as_py()
        lo = mm["min"] if lo is None else min(lo, mm["min"])
        hi = mm["max"] if hi is None else max(hi, mm["max"])
        samples.append(ts.take(pa.array(range(0, len(ts), stride), pa.int64())))
    if lo is None:
        return None, None, []
    cuts = [c for c in _cuts(_sorted_sample(samples), k) if c != lo]
    if (
        not cuts and hi is not None and lo < hi
    ):  # most rows share the minimum: split them (all equal, so in order) from the rest
        cuts = [lo + 1]
    return lo, hi, cuts


def _deal(src: _Source, bounds: list[int], tmp: Path, batch_rows: int) -> list[Path | None]:
    """Deal the rows into len(bounds) + 2 bucket files: ts < bounds[0], ..., ts >= bounds[-1], then NULLs.
    Within a bucket rows keep file order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n_b = len(bounds) + 2
    stem = uuid.uuid4().hex[:12]
    paths = [tmp / f"{stem}-{i}.arrow" for i in range(n_b)]
    writers: list[Any] = [None] * n_b
    opts = pa.ipc.IpcWriteOptions(compression="lz4")
    try:
        for batch in src.batches(batch_rows):
            ts = batch.column("ts_ns")
            vals = pc.fill_null(ts, 0)
            b = pa.array([0] * len(ts), pa.int32())
            for c in bounds:  # bucket = number of cuts <= ts (the cuts are sorted)
                b = pc.add(b, pc.cast(pc.greater_equal(vals, c), pa.int32()))
            b = pc.if_else(pc.is_valid(ts), b, pa.scalar(n_b - 1, pa.int32()))
            grouped = batch.take(pc.sort_indices(b))  # stable: file order kept within each bucket
            counts = [0] * n_b
            for vc in pc.value_counts(b).to_pylist():
                counts[vc["values"]] = vc["counts"]
            start = 0
            # written at once (IPC writes are cheap even for small pieces): a slice kept for later would keep
            # its whole batch alive
            for i, c in enumerate(counts):
                if c:
                    if writers[i] is None:
                        writers[i] = pa.ipc.new_file(str(paths[i]), src.schema, options=opts)
                    writers[i].write_batch(grouped.slice(start, c))
                start += c
            del grouped
    finally:
        for w in writers:
            if w is not None:
                w.close()
    return [p if writers[i] is not None else None for i, p in enumerate(paths)]


def _copy_nulls_last(src: _Source, out: Any, row_group: int, batch_rows: int) -> None:
    import pyarrow.compute as pc

    for nulls in (False, True):
        for batch in src.batches(batch_rows):
            mask = pc.is_null(batch.column("ts_ns"))
            part = batch.filter(mask if nulls else pc.invert(mask))
            if part.num_rows:
                out.write_batch(part, row_group_size=row_group)
