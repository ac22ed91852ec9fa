"""A ceiling under issue 48's kernel_details target: DuckDB alone writing a kernel_details.csv in the store's shape.

DuckDB reads the CSV with every cell as text (N/A as null) and writes, in one COPY to zstd Parquet, the columns
traceql's `kernels` table holds: the typed ones (exact µs -> ns for the four time columns, integer and double
casts), the PipeUtilization counters (every column from `aicore_time(us)` on) as the `metrics` MAP and
`HF32 Eligible` as `extra`. No cell-form checks, no N/A variants, no time order: less than traceql does. Its
CPU-seconds beside `read_csv` -> Parquet (the raw reader, 46 flat columns, no maps) show what the store's shape
itself costs DuckDB.

    python benchmarks/tree_usage.py python benchmarks/kd_store_shape.py kernel_details.csv /tmp/out.parquet

The input is a level1-style kernel_details.csv (the real one tiled by tile_real.py: its header names the
columns used below).
"""

from __future__ import annotations

import csv
import sys

import duckdb


def _q(c: str) -> str:
    return '"' + c.replace('"', '""') + '"'


def _ns(c: str) -> str:
    return f"CAST(round(TRY_CAST({_q(c)} AS DECIMAL(38,3)) * 1000) AS BIGINT)"


def _big(c: str) -> str:
    return f"TRY_CAST({_q(c)} AS BIGINT)"


def _dbl(c: str) -> str:
    return f"TRY_CAST({_q(c)} AS DOUBLE)"


def store_shape_sql(src: str, out: str) -> str:
    with open(src, newline="") as fh:
        header = next(csv.reader(fh))
    metrics = header[header.index("aicore_time(us)") :]
    nulls = (
        "hbm_read_bytes",
        "hbm_write_bytes",
        "ub_read_bytes",
        "ub_write_bytes",
        "l2_read_bytes",
        "l2_write_bytes",
    )
    cols = [
        "'r' AS run_id", "0 AS rank", "NULL::INTEGER AS device_id", f"{_big('Step Id')} AS step",
        f"{_q('Name')} AS name", f"{_q('Type')} AS op_type", f"{_q('Accelerator Core')} AS task_type",
        "false AS is_comm", f"{_big('Stream ID')} AS stream_id", f"{_big('Task ID')} AS task_id",
        f"{_big('Model ID')} AS model_id", f"{_q('Context ID')} AS context_id", "NULL::BIGINT AS connection_id",
        f"{_ns('Start Time(us)')} AS ts_ns", f"{_ns('Duration(us)')} AS dur_ns", f"{_ns('Wait Time(us)')} AS wait_ns",
        f"{_big('Block Dim')} AS block_dim", f"{_big('Mix Block Dim')} AS mix_block_dim",
        f"{_q('OP State')} AS op_state", f"{_q('Input Shapes')} AS input_shapes",
        f"{_q('Input Data Types')} AS input_dtypes", f"{_q('Input Formats')} AS input_formats",
        f"{_q('Output Shapes')} AS output_shapes", f"{_q('Output Data Types')} AS output_dtypes",
        f"{_q('Output Formats')} AS output_formats", *[f"NULL::BIGINT AS {c}" for c in nulls],
        "NULL::DOUBLE AS l2_hit_rate", f"{_ns('aicore_time(us)')} AS aicore_time_ns",
        f"{_ns('aiv_time(us)')} AS aiv_time_ns", f"{_dbl('aic_mac_ratio')} AS mac_ratio",
        f"{_dbl('aiv_vec_ratio')} AS vec_ratio", f"{_dbl('aic_scalar_ratio')} AS scalar_ratio",
        f"{_dbl('aiv_mte2_ratio')} AS mte2_ratio", f"{_dbl('aiv_mte3_ratio')} AS mte3_ratio",
        "NULL::DOUBLE AS flops",
        "MAP([" + ", ".join("'" + m + "'" for m in metrics) + "], [" + ", ".join(_dbl(m) for m in metrics) + "]) AS metrics",
        f"MAP(['HF32 Eligible'], [{_q('HF32 Eligible')}]) AS extra",
    ]  # fmt: skip
    source = f"read_csv('{src}', all_varchar=true, header=true, nullstr=['N/A'])"
    return f"COPY (SELECT {', '.join(cols)} FROM {source}) TO '{out}' (FORMAT parquet, COMPRESSION zstd)"


if __name__ == "__main__":
    duckdb.connect().execute(store_shape_sql(sys.argv[1], sys.argv[2]))
