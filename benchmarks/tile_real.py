"""Benchmark inputs made from a real dump file: its rows or events repeated until the file reaches a size.

traceql.synth writes the shapes the issue names with the profilers' column names, but its values, arg sets
and cell spellings are its own. A real file tiled keeps the real ones (a level1 kernel_details.csv's 46
columns, triple-quoted shape cells, N/A runs; a trace_view.json's call stacks with CRLF, string `ts`,
flow pairs), so a shape traceql was never tuned on is measured too. Each copy is moved later in time by the
source's span (plus 1 ms), so a source in time order gives a tiled file in time order; flow ids are made
unique per copy; metadata events (ph M) are kept once. Exact timestamps are not the point here (the parsers'
exactness is tested elsewhere): string timestamps stay exact (Decimal), integers stay integers (each copy
moves by whole µs), other numbers become floats.

    python benchmarks/tile_real.py SRC DST MB     # e.g. a level1 kernel_details.csv to 150 MB
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

START_COLUMNS = ("Start Time(us)", "Start Time")  # torch_npu kernel_details / op_summary-style tables
GAP_US = Decimal(1000)


def _shift(ts: Any, by: Decimal) -> Any:
    if isinstance(ts, str):
        d = Decimal(ts.strip())
        places = -d.as_tuple().exponent if isinstance(d.as_tuple().exponent, int) else 0
        return f"{d + by:.{max(0, places)}f}"
    if isinstance(ts, int) and by == by.to_integral_value():
        return ts + int(
            by
        )  # an integer stays one (a Kineto reader takes reals past 2**43 µs slowly: exactness)
    if isinstance(ts, (int, float)):
        return float(Decimal(repr(ts)) + by)
    return ts


def tile_csv(src: Path, dst: Path, target_bytes: int) -> dict[str, int]:
    """Repeat the data rows of the CSV `src` into `dst` until it holds >= target_bytes; the start-time
    column of each copy is moved past the previous copy's end."""
    with src.open(encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], [r for r in rows[1:] if r]
    start = next((header.index(c) for c in START_COLUMNS if c in header), None)
    if start is None:
        raise SystemExit(f"{src}: no start-time column (one of {', '.join(START_COLUMNS)})")
    dur = next((header.index(c) for c in ("Duration(us)", "Duration") if c in header), None)
    times = [Decimal(r[start]) for r in body if len(r) > start and _is_number(r[start])]
    ends = [
        Decimal(r[start]) + (Decimal(r[dur]) if dur is not None and _is_number(r[dur]) else 0)
        for r in body
        if len(r) > start and _is_number(r[start])
    ]
    span = (max(ends) - min(times) + GAP_US) if times else GAP_US
    dst.parent.mkdir(parents=True, exist_ok=True)
    copies = n = 0
    with dst.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        while fh.tell() < target_bytes:
            by = span * copies
            for r in body:
                if len(r) > start and _is_number(r[start]):
                    r = [*r[:start], _shift(r[start], by), *r[start + 1 :]]
                w.writerow(r)
                n += 1
            copies += 1
    return {"bytes": dst.stat().st_size, "rows": n, "copies": copies}


def tile_trace_json(src: Path, dst: Path, target_bytes: int) -> dict[str, int]:
    """Repeat the events of a Chrome-trace JSON array (trace_view.json) or object ({"traceEvents": [...]})
    into `dst` until it holds >= target_bytes; written as the source's root shape, uncompressed. An object
    root's other keys (Kineto's deviceProperties, ...) are kept ahead of the events."""
    raw = gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
    doc = json.loads(raw.decode("utf-8"))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    meta = [e for e in events if isinstance(e, dict) and e.get("ph") == "M"]
    timed = [e for e in events if isinstance(e, dict) and e.get("ph") != "M"]
    starts = [Decimal(str(e["ts"]).strip()) for e in timed if "ts" in e]
    ends = [Decimal(str(e["ts"]).strip()) + Decimal(str(e.get("dur", 0))) for e in timed if "ts" in e]
    span = (max(ends) - min(starts) + GAP_US) if starts else GAP_US
    span = span.to_integral_value(rounding="ROUND_CEILING")  # whole µs: integer timestamps stay integers
    int_ids = [e["id"] for e in timed if isinstance(e.get("id"), int)]
    id_step = (max(int_ids) + 1) if int_ids else 0
    dst.parent.mkdir(parents=True, exist_ok=True)
    copies = n = 0
    with dst.open("w", encoding="utf-8") as fh:
        if isinstance(doc, dict):
            head = {k: v for k, v in doc.items() if k != "traceEvents"}
            fh.write(json.dumps(head, ensure_ascii=False)[:-1] + (", " if head else "") + '"traceEvents": ')
        fh.write("[")
        first = True
        for e in meta:
            fh.write(("" if first else ",\n") + json.dumps(e, ensure_ascii=False))
            first = False
            n += 1
        while fh.tell() < target_bytes:
            by = span * copies
            for e in timed:
                e = dict(e)
                if "ts" in e:
                    e["ts"] = _shift(e["ts"], by)
                if "id" in e and e.get("ph") in ("s", "f", "t"):
                    e["id"] = (
                        e["id"] + id_step * copies if isinstance(e["id"], int) else f"{e['id']}-{copies}"
                    )
                fh.write(("" if first else ",\n") + json.dumps(e, ensure_ascii=False))
                first = False
                n += 1
            copies += 1
        fh.write("]")
        if isinstance(doc, dict):
            fh.write("}")
    return {"bytes": dst.stat().st_size, "rows": n, "copies": copies}


def tile(src: Path, dst: Path, target_bytes: int) -> dict[str, int]:
    if src.suffix == ".csv":
        return tile_csv(src, dst, target_bytes)
    if src.name.endswith((".json", ".json.gz")):
        return tile_trace_json(src, dst, target_bytes)
    raise SystemExit(f"{src}: expected a .csv table or a .json/.json.gz trace")


def _is_number(s: str) -> bool:
    try:
        Decimal(s.strip())
    except ArithmeticError:
        return False
    return bool(s.strip()) and s.strip().lower() not in ("nan", "inf", "-inf", "infinity")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    info = tile(Path(sys.argv[1]), Path(sys.argv[2]), int(float(sys.argv[3]) * 1e6))
    print(info)
