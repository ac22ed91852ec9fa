"""Conform parser output to the canonical Arrow schemas (the one place columns are cast and filled)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from . import schema


def conform(
    table_name: str,
    data: pa.Table | pa.RecordBatch | Mapping[str, Sequence[Any]],
    run_id: str,
    rank: int,
    dictionary_keys: bool = False,
) -> pa.Table:
    """Return `data` as a pa.Table with exactly the canonical columns of `table_name`, in order.

    Missing columns become nulls, `run_id` is filled in, and `rank` unless the parser gives one per row (cluster-level files), values are cast to the canonical type
    (safe casts only: a parser must already have converted units and parsed numbers). An unknown column is a
    programming error in the parser, not bad input, so it raises ValueError.

    dictionary_keys: a MAP column whose keys come dictionary-encoded (a CSV's metric names, see
    parsers._csv._build_maps) keeps them so, for a Parquet writer (parquet_writer), which writes such keys as
    they are; the file reads back with the canonical text keys. Casting them to text here made 12.5M key
    strings for a 500k-row kernel_details (0.77 CPU-s), which the writer then hashed or copied again.
    """
    target = schema.arrow_schema(table_name)
    if isinstance(data, Mapping):
        n = len(next(iter(data.values()))) if data else 0
        cols: dict[str, pa.Array | pa.ChunkedArray] = {}
        for name, values in data.items():
            if isinstance(values, (pa.Array, pa.ChunkedArray)):
                cols[name] = values  # already Arrow: cast below, never round-trip through Python objects
            else:
                cols[name] = (
                    pa.array(values, type=target.field(name).type)
                    if name in target.names
                    else pa.array(values)
                )
    else:
        n = data.num_rows
        cols = {name: data.column(name) for name in data.schema.names}
    unknown = set(cols) - set(target.names)
    if unknown:
        raise ValueError(f"{table_name}: parser produced non-canonical columns {sorted(unknown)}")
    arrays = []
    for field in target:
        if field.name == "run_id":
            arrays.append(pa.repeat(pa.scalar(run_id, pa.string()), n))
        elif field.name == "rank" and "rank" not in cols:
            arrays.append(pa.repeat(pa.scalar(rank, pa.int32()), n))
        elif field.name in cols:
            col = cols[field.name]
            want = (dictionary_keys and _keyed_like(col.type, field.type)) or field.type
            if want != field.type:
                target = target.set(target.get_field_index(field.name), field.with_type(want))
            arrays.append(col if col.type == want else col.cast(want))
        else:
            arrays.append(pa.nulls(n, type=field.type))
    return pa.Table.from_arrays(arrays, schema=target)


def _keyed_like(have: pa.DataType, want: pa.DataType) -> pa.DataType | None:
    """`want` (a canonical MAP type) with the dictionary-encoded keys of `have`, when `have` is a MAP whose keys
    are the dictionary encoding of `want`'s key type; otherwise None."""
    if not (pa.types.is_map(have) and pa.types.is_map(want) and pa.types.is_dictionary(have.key_type)):
        return None
    if have.key_type.value_type != want.key_type:
        return None
    return pa.map_(have.key_type, want.item_type)


def _dictionary_keyed(t: pa.DataType) -> bool:
    return bool(pa.types.is_map(t) and pa.types.is_dictionary(t.key_type))


def plain_keys(schema_: pa.Schema) -> pa.Schema:
    """`schema_` with every MAP's dictionary-encoded keys as their plain type (the canonical schema's)."""
    for i, f in enumerate(schema_):
        if _dictionary_keyed(f.type):
            schema_ = schema_.set(i, f.with_type(pa.map_(f.type.key_type.value_type, f.type.item_type)))
    return schema_


def parquet_writer(path: Any, schema_: pa.Schema, compression: str = "zstd") -> Any:
    """A ParquetWriter with the options every traceql Parquet file shares (parquet_options).

    A schema with dictionary-encoded MAP keys (conform's dictionary_keys) is written without the stored Arrow
    schema: the Parquet column (a dictionary page and indices) is what text keys would give, and a reader then
    gets the canonical map<string, ...> (every canonical type is a plain Parquet type, so nothing else needs
    that schema); with it, pyarrow would read the keys back dictionary-encoded."""
    import pyarrow.parquet as pq

    opts = parquet_options(schema_)
    if any(_dictionary_keyed(f.type) for f in schema_):
        opts["store_schema"] = False
    return pq.ParquetWriter(path, schema_, compression=compression, **opts)


def use_parse_memory_pool() -> None:
    """Parse with Arrow's jemalloc pool when this pyarrow has it (Linux wheels do). The default mimalloc pool
    keeps freed pages mapped, so a streaming parse's peak RSS crept up with the input size (trace_view
    ingest, 0.25 GB -> 4 GB: 396-486 -> 530-590 MB); with jemalloc 430 -> 471 MB at the same speed.
    Buffers already allocated keep their own pool, so switching mid-process is safe."""
    import pyarrow as pa

    try:
        pool = pa.jemalloc_memory_pool()
    except (NotImplementedError, AttributeError):
        return
    if pa.default_memory_pool().backend_name != pool.backend_name:
        pa.set_memory_pool(pool)


def dictionary_columns(schema_: pa.Schema) -> list[str]:
    """The columns worth Parquet dictionary encoding: the flat ones that are not integer or floating-point.

    Timestamps, durations, ids and sample values are mostly distinct: the writer hashes them into a dictionary
    and falls back to plain once it is full, which cost a third of writing a device-task kernels table and
    made the file larger (532k rows: 0.59 -> 0.39 CPU-s, 5.7 -> 3.8 MB; measured, issue 18). Text columns
    (names, task types, run id) repeat and keep it. Maps and lists are written plain: the writer matches these
    names against leaf paths (`metrics.key_value.key`), so a nested column's name never turned it on, and
    turning it on for text metrics keys cost CPU for the same file size after zstd (500k kernel_details rows:
    0.91 -> 1.12 CPU-s, 20.9 MB both): the writer hashed 12.5M strings. Keys that arrive dictionary-encoded
    are the exception (below)."""
    flat = [
        f.name
        for f in schema_
        if not (_nested(f.type) or pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
    ]
    # dictionary-encoded map keys (conform's dictionary_keys) are written as they are: their indices, no hashing
    # (500k kernel_details rows: the metrics map 0.82 -> 0.58 CPU-s, 20.8 -> 11.9 MB)
    return flat + [f"{f.name}.key_value.key" for f in schema_ if _dictionary_keyed(f.type)]


def statistics_columns(schema_: pa.Schema) -> list[str]:
    """The columns whose Parquet min/max statistics are written: the flat ones (ts_ns ranges, ids, names).

    A map's or list's leaf statistics serve no reader here (DuckDB prunes row groups on top-level columns, and
    nothing filters on a metric's key text) and were the costliest part of the write: min/max over every key
    string of `metrics` (12.5M entries in a 500k-row kernel_details) took 0.45 of its 1.23 CPU-s; a whole
    500k-row kernels table 1.86 -> 1.26 CPU-s, the file 29.2 MB either way (measured 2026-12-03)."""
    return [f.name for f in schema_ if not _nested(f.type)]


def parquet_options(schema_: pa.Schema) -> dict[str, Any]:
    """ParquetWriter keyword arguments every traceql Parquet file shares (besides its codec)."""
    return {"use_dictionary": dictionary_columns(schema_), "write_statistics": statistics_columns(schema_)}


def _nested(t: pa.DataType) -> bool:
    return bool(pa.types.is_nested(t))
