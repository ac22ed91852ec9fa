"""A floor under issue 48's derive budget: one rank's derive with no computation at all, in DuckDB.

For each rank of a prepared run, in one DuckDB session with the derive's own settings (traceql.derive._connect:
threads, memory budget, spill folder, insertion order not kept), this

  - reads the inputs the rank-level derived SQL reads: every column of the rank's kernels and the columns of its
    HBM counter samples that _hbm_samples reads, each value decoded (a count of every column: a bare count(*)
    reads no column at all);
  - writes each stored rank-level derived table again, its rows as stored, with the derive's COPY options
    (zstd, traceql.rank_writer.ROW_GROUP rows per group) and no sort. Reading the stored file back is part of
    that figure, so it is a little above the write alone.

Nothing is computed: no join, window, sort or aggregate. What the derive costs above this floor is its logic.
The figures are process CPU-seconds (DuckDB's threads included), per rank and in all.

    python benchmarks/derive_floor.py STORE [--run RUN] [--ranks 0,3]

STORE must be prepared (`traceql ingest` of a multi-rank dump prepares it; `traceql findings` prepares a single
trace). Beside the derive's own per-table CPU (benchmarks/README.md, "Issue 48"), the difference is the logic.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from traceql import derive, derived_tables
from traceql._duck import sql_path_list, sql_str
from traceql.rank_writer import ROW_GROUP
from traceql.store import rank_of_file
from traceql.stores import open_store

if TYPE_CHECKING:
    import duckdb

# what _hbm_samples (queries/_helpers.sql) reads of the counters: the HBM series' samples
_HBM = (
    "SELECT run_id, rank, channel, metric, ts_ns, value FROM read_parquet({files}) "
    "WHERE upper(track) = 'HBM' AND metric IN ('read_bw', 'write_bw') AND unit = 'bytes/s'"
)


def _cpu(con: duckdb.DuckDBPyConnection, sql: str) -> float:
    c0 = time.process_time()
    con.execute(sql).fetchall()
    return time.process_time() - c0


def rank_floor(con: duckdb.DuckDBPyConnection, files: dict[str, list[str]], out: Path) -> tuple[float, float]:
    """(read, write) CPU-seconds of one rank: its inputs decoded, its stored derived tables written again."""
    read = 0.0
    if files.get("kernels"):
        read += _cpu(con, f"SELECT count(COLUMNS(*)) FROM read_parquet({sql_path_list(files['kernels'])})")
    if files.get("counters"):
        hbm = _HBM.format(files=sql_path_list(files["counters"]))
        read += _cpu(con, f"SELECT count(COLUMNS(*)) FROM ({hbm})")
    write = 0.0
    for table in derived_tables.tables():
        if table.level != "rank" or not files.get(table.name):
            continue
        dst = out / f"{table.name}.parquet"
        write += _cpu(
            con,
            f"COPY (SELECT * FROM read_parquet({sql_path_list(files[table.name])})) TO {sql_str(str(dst))} "
            f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {ROW_GROUP})",
        )
    return read, write


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("--run", help="run id (default: the store's only or latest run)")
    ap.add_argument("--ranks", help="comma-separated ranks (default: every rank)")
    ap.add_argument("--threads", type=int, default=2, help="DuckDB threads, as the derive's rank sessions")
    args = ap.parse_args()
    st = open_store(args.store)
    run = args.run or st.latest_run()
    if run is None:
        raise SystemExit(f"{args.store}: no runs")
    info = st.run(run)
    run_dir = st.run_path(run, info)
    files: dict[str, list[str]] = info["files"]
    ranks = sorted({r for fl in files.values() for x in fl if (r := rank_of_file(x)) is not None and r >= 0})
    if args.ranks:
        ranks = [int(r) for r in args.ranks.split(",")]
    with tempfile.TemporaryDirectory(prefix="derive-floor-") as tmp:
        con = derive._connect(Path(tmp), args.threads, derive.build_memory())
        total = 0.0
        for rank in ranks:
            mine = {t: [str(run_dir / x) for x in fl if rank_of_file(x) == rank] for t, fl in files.items()}
            read, write = rank_floor(con, mine, Path(tmp))
            total += read + write
            print(f"rank {rank}: read {read:.3f}  write {write:.3f}  floor {read + write:.3f} CPU-s")
        con.close()
    print(f"{len(ranks)} ranks: floor {total:.2f} CPU-s")


if __name__ == "__main__":
    main()
