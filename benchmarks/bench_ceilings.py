"""What DuckDB itself reaches on this machine for a part of traceql's job: the ceilings under issue 18's targets.

    .venv/bin/python benchmarks/bench_ceilings.py --dir /tmp/tq-bench                  # tv:1,kineto:1,kdi:500000
    .venv/bin/python benchmarks/bench_ceilings.py --cases tv:0.25,real:level1-tv:250 --repeat 3

Issue 18 asks for >= 300 MB/s on a 1 GB trace_view and >= 200 MB/s on Kineto (2 cores), and for >= 0.8x of
DuckDB's raw reader on every shape. bench_ingest.py measures traceql against that raw reader; this script asks
the question under it: how fast is DuckDB alone, on every core, doing *less* than traceql does? A target above
such a ceiling cannot be met by any traceql built on DuckDB, however its own code is tuned.

Cases (comma separated; each row of a case is run --repeat times, rows alternating, medians printed):
  tv:<GB>        bench_ingest's tv input: the real level1 trace_view.json tiled in its own layout (tile_real.py;
                 traceql.synth's mix where ../shared/real_traces is absent):
                   traceql ingest;  the raw reader (read_json of the array -> X and C events to Parquet, as
                   bench_ingest's floor);  the same events rewritten as NDJSON (prepared untimed), read by DuckDB
                   on every thread: count(*) (the issue's "316 MB/s") and X+C events -> Parquet; and traceql's
                   own DuckDB query (trace_view._fast_sql: args split into key/value lists) -> Parquet, over the
                   array (one thread, as traceql's reader runs it) and over the NDJSON (every thread)
  kineto:<GB>    a traceql.synth Kineto trace: traceql ingest; its events as compact NDJSON (prepared untimed):
                   X events -> Parquet on every thread, with args as one JSON text and split into key/value
                   lists (the one-object raw reader is bench_ingest's kineto case)
  kdi:<rows>     a kernel_details.csv whose 4 streams interleave: traceql ingest; the raw reader (read_csv with
                   sniffed types -> Parquet); every cell as text -> Parquet; and the least exact conversion
                   traceql must do (numbers TRY_CAST from text, the five µs columns to exact int64 ns; no cell-form
                   checks, no N/A markers, no maps, no time order) -> Parquet
  real:<file>:<MB>  a real trace_view.json or kernel_details.csv (path, or relative to ../shared/real_traces)
                   tiled to <MB> (benchmarks/tile_real.py); the rows of tv or kdi above

MB/s is always the original file's bytes over wall time. DuckDB runs in this Python (the same DuckDB traceql
uses), in a fresh process per run, measured like bench_ingest (wall, CPU of the process tree, peak RSS).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_ingest as bi  # noqa: E402  (benchmarks/ is not a package)

TV_COLUMNS = (
    "{'ph': 'VARCHAR', 'name': 'VARCHAR', 'cat': 'VARCHAR', 'pid': 'VARCHAR', 'tid': 'VARCHAR', "
    "'ts': 'VARCHAR', 'dur': 'VARCHAR', 'id': 'VARCHAR', 'args': 'JSON'}"
)
# the events' fields as bench_ingest's floor reads them, then written out as X+C events to Parquet ({args}: the args
# as one JSON text, or ARGS_SPLIT)
XC_TO_PARQUET = (
    "COPY (SELECT ph, name, cat, pid, tid, TRY_CAST(replace(ts, '.', '') AS BIGINT) AS ts_ns, dur, {args} "
    "FROM {src} WHERE ph IN {phs}) TO '{out}' (FORMAT parquet, COMPRESSION zstd)"
)
# each event's args split into key and value-text lists: the least a reader does to fill the store's `extra` MAP and
# the canonical args (traceql's Kineto query reads exactly these lists, then maps them in Arrow)
ARGS_SPLIT = "json_keys(args) AS k, json_extract(args, '$.*')::VARCHAR[] AS v"

DUCK = r"""
import sys, duckdb
con = duckdb.connect()
con.execute(sys.argv[1])
print(con.fetchall() if con.description else "")
"""


def _read_json(path: Path, fmt: str) -> str:
    return f"read_json('{path}', format='{fmt}', columns={TV_COLUMNS}, maximum_object_size=33554432)"


def _duck(case: str, tool: str, nbytes: int, sql: str) -> bi.Result:
    return bi.measure(case, tool, nbytes, [sys.executable, "-c", DUCK, sql], timeout=3600)


def _traceql(case: str, nbytes: int, target: Path, work: Path) -> bi.Result:
    store = work / "store"
    shutil.rmtree(store, ignore_errors=True)
    r = bi.measure(
        case,
        "traceql ingest",
        nbytes,
        [sys.executable, "-m", "traceql", "ingest", str(target), "--store", str(store)],
        timeout=3600,
        cwd=bi.ROOT,
    )
    shutil.rmtree(store, ignore_errors=True)
    return r


def _prepare_ndjson(src_sql: str, dst: Path) -> None:
    """Untimed: the events of `src_sql` (a read_json) as NDJSON, one event a line (DuckDB's JSON writer)."""
    import duckdb

    if not dst.exists():
        duckdb.connect().execute(f"COPY (SELECT * FROM {src_sql}) TO '{dst}' (FORMAT json)")


def _kineto_events_array(src: Path, dst: Path) -> None:
    """Untimed: the bytes of a Kineto trace's traceEvents array, as a file of its own (a plain JSON array)."""
    from traceql.parsers._kineto_duck import array_end, array_start

    if dst.exists():
        return
    size = src.stat().st_size
    with open(src, "rb") as fh:
        start = array_start(fh.read(1 << 20))
        fh.seek(max(0, size - (1 << 20)))
        tail_at = fh.tell()
        end = array_end(fh.read())
        if start is None or end is None:
            raise SystemExit(f"{src}: no traceEvents array found")
        fh.seek(start)
        left = tail_at + end + 1 - start
        with open(dst, "wb") as out:
            while left > 0:
                chunk = fh.read(min(left, 64 << 20))
                out.write(chunk)
                left -= len(chunk)


def rows_tv(case: str, trace_view: Path, folder: Path, work: Path) -> list[Any]:
    nbytes = trace_view.stat().st_size
    nd = work / f"{case.replace(':', '-')}.ndjson"
    _prepare_ndjson(_read_json(trace_view, "array"), nd)
    phs = "('X', 'C')"
    return [
        lambda: _traceql(case, nbytes, folder, work),
        lambda: _duck(
            case,
            "duckdb raw reader (array, X+C)",
            nbytes,
            XC_TO_PARQUET.format(
                src=_read_json(trace_view, "array"), phs=phs, args="args", out=work / "o.parquet"
            ),
        ),
        lambda: _duck(
            case,
            "duckdb NDJSON count(*)",
            nbytes,
            f"SELECT count(*) FROM {_read_json(nd, 'newline_delimited')}",
        ),
        lambda: _duck(
            case,
            "duckdb NDJSON, X+C -> Parquet",
            nbytes,
            XC_TO_PARQUET.format(
                src=_read_json(nd, "newline_delimited"), phs=phs, args="args", out=work / "o.parquet"
            ),
        ),
        lambda: _duck(
            case, "duckdb array, traceql's query -> Parquet", nbytes, _traceql_query(trace_view, work)
        ),
        lambda: _duck(
            case,
            "duckdb NDJSON, traceql's query -> Parquet",
            nbytes,
            _traceql_query(trace_view, work, nd),
        ),
    ]


def _traceql_query(trace_view: Path, work: Path, ndjson: Path | None = None) -> str:
    """traceql's own DuckDB query over a trace_view (trace_view._fast_sql: the events it maps, args split into key
    and value lists, every field as text), written to Parquet and nothing else: what its reader's producer costs.
    With `ndjson`, the same query over the NDJSON copy, which DuckDB reads on every thread."""
    from traceql.parsers import _chrome_json as cj
    from traceql.parsers.trace_view import _fast_sql

    sql = _fast_sql(cj.sniff(trace_view), ndjson)
    if ndjson is not None:
        sql = sql.replace("format='array'", "format='newline_delimited'")
    return f"COPY ({sql}) TO '{work / 'o.parquet'}' (FORMAT parquet, COMPRESSION zstd)"


def rows_kineto(case: str, trace: Path, work: Path) -> list[Any]:
    nbytes = trace.stat().st_size
    arr = work / f"{case.replace(':', '-')}.events.json"
    nd = work / f"{case.replace(':', '-')}.ndjson"
    _kineto_events_array(trace, arr)
    _prepare_ndjson(_read_json(arr, "array"), nd)
    arr.unlink()
    return [
        lambda: _traceql(case, nbytes, trace, work),
        lambda: _duck(
            case,
            "duckdb NDJSON, X -> Parquet",
            nbytes,
            XC_TO_PARQUET.format(
                src=_read_json(nd, "newline_delimited"), phs="('X')", args="args", out=work / "o.parquet"
            ),
        ),
        lambda: _duck(
            case,
            "duckdb NDJSON, X, args split -> Parquet",
            nbytes,
            XC_TO_PARQUET.format(
                src=_read_json(nd, "newline_delimited"), phs="('X')", args=ARGS_SPLIT, out=work / "o.parquet"
            ),
        ),
    ]


US_COLUMNS = ("Start Time(us)", "Duration(us)", "Wait Time(us)", "aicore_time(us)", "aiv_time(us)")


def _kd_exact_sql(csv: Path, out: Path) -> str:
    """The least a validated reader must do: every cell read as text, numbers cast from it (TRY_CAST), the µs
    columns to exact int64 ns through DECIMAL; text columns (as the sniffer types them) as they are."""
    import duckdb

    types = duckdb.sql(f"DESCRIBE SELECT * FROM read_csv('{csv}')").fetchall()
    cols = []
    for name, typ, *_ in types:
        q = '"' + name.replace('"', '""') + '"'
        if name in US_COLUMNS:
            cols.append(f"TRY_CAST(round(TRY_CAST({q} AS DECIMAL(26,6)) * 1000) AS BIGINT) AS {q}")
        elif typ == "VARCHAR":
            cols.append(q)
        else:
            cols.append(f"TRY_CAST({q} AS DOUBLE) AS {q}")
    # type_pushdown would turn the TRY_CASTs into the reader's strict typed parse (traceql disables it too)
    return (
        "SET disabled_optimizers = 'type_pushdown'; "
        f"COPY (SELECT {', '.join(cols)} FROM read_csv('{csv}', all_varchar=true)) "
        f"TO '{out}' (FORMAT parquet, COMPRESSION zstd)"
    )


def rows_kd(case: str, csv: Path, folder: Path, work: Path) -> list[Any]:
    nbytes = csv.stat().st_size
    out = work / "o.parquet"
    return [
        lambda: _traceql(case, nbytes, folder, work),
        lambda: _duck(
            case,
            "duckdb raw reader (sniffed)",
            nbytes,
            f"COPY (SELECT * FROM read_csv('{csv}')) TO '{out}' (FORMAT parquet, COMPRESSION zstd)",
        ),
        lambda: _duck(
            case,
            "duckdb all text -> Parquet",
            nbytes,
            f"COPY (SELECT * FROM read_csv('{csv}', all_varchar=true)) TO '{out}' (FORMAT parquet, COMPRESSION zstd)",
        ),
        lambda: _duck(case, "duckdb exact casts, unchecked", nbytes, _kd_exact_sql(csv, out)),
    ]


def case_rows(kind: str, arg: str, work: Path, seed: int) -> list[Any]:
    name = f"{kind}:{arg}"
    if kind == "tv":
        folder, _ = bi.tv_folder(work, float(arg), seed)  # the real-layout tile, as bench_ingest's tv case
        return rows_tv(name, folder / bi.OUT_DIR / "trace_view.json", folder, work)
    if kind == "kineto":
        return rows_kineto(name, bi.gen_kineto(work, float(arg), seed), work)
    if kind == "kdi":
        folder = bi.gen_interleaved_kd(work, int(arg), seed)
        return rows_kd(name, folder / bi.OUT_DIR / "kernel_details.csv", folder, work)
    if kind == "real":
        file, mb = arg.rsplit(":", 1)
        src = Path(file)
        if not src.is_absolute() and not src.exists():
            src = bi.ROOT.parent / "shared" / "real_traces" / file
        folder = work / f"real-{src.parent.name}-{src.stem}-{mb}MB" / "x_ascend_pt"
        dst = folder / bi.OUT_DIR / src.name
        if not dst.exists():
            import subprocess

            dst.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [sys.executable, str(bi.ROOT / "benchmarks" / "tile_real.py"), str(src), str(dst), mb],
                check=True,
            )
        if src.suffix == ".csv":
            return rows_kd(f"real:{src.stem}:{mb}", dst, folder, work)
        return rows_tv(f"real:{src.stem}:{mb}", dst, folder, work)
    raise SystemExit(f"unknown case {name!r}")


def report(results: dict[str, list[bi.Result]]) -> str:
    ok = {k: [r for r in rs if r.rc == 0 and r.wall] for k, rs in results.items()}
    median = {k: statistics.median(r.wall for r in rs) for k, rs in ok.items() if rs}
    lines = [
        "| case | tool | runs | wall s (median, range) | MB/s | CPU-s | peak RSS MB | vs raw reader (wall) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, rs in ok.items():
        case, tool = key.split("\t")
        if not rs:
            lines.append(f"| {case} | {tool} | 0 | {results[key][0].note} | | | | |")
            continue
        wall = median[key]
        raw = [m for k, m in median.items() if k.startswith(case + "\t") and "raw reader" in k]
        ratio = f"{raw[0] / wall:.2f}x" if raw else ""
        walls = [r.wall for r in rs if r.wall]
        lines.append(
            f"| {case} | {tool} | {len(rs)} | {wall:.2f} ({min(walls):.2f}-{max(walls):.2f}) | "
            f"{rs[0].input_bytes / 1e6 / wall:.0f} | {statistics.median(r.cpu or 0 for r in rs):.1f} | "
            f"{max(r.rss or 0 for r in rs) / 2**20:.0f} | {ratio} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="tv:1,kineto:1,kdi:500000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", type=Path, help="inputs are generated and cached here (default: a temp dir)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    work = a.dir or Path(tempfile.mkdtemp(prefix="tq-ceilings-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[bi.Result]] = {}
    for spec in a.cases.split(","):
        kind, arg = spec.split(":", 1)
        rows = case_rows(kind, arg, work, a.seed)
        for _ in range(a.repeat):  # rows alternate: this machine's speed drifts over minutes
            for run in rows:
                r = run()
                results.setdefault(f"{r.case}\t{r.tool}", []).append(r)
    print(report(results))


if __name__ == "__main__":
    main()
