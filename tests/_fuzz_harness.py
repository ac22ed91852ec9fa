"""The fuzz harness (mutators, seeds, the bounded CLI runner, the outcome rules) for fuzzing every parser with broken and hostile dumps: traceql must ingest what a dump holds or refuse it with
one line naming the file and exit 1 — never a traceback, a hang, a memory blow-up, or a changed store.

Two parts:

1. A corpus of mutated real dumps, run through the real CLI in subprocesses (`test_mutated_dump`). Seeds are
   discovered at run time: the real dumps under ../shared/real_traces (when present) and everything under
   sample_traces/. Each seed is one file of a dump; its *carrier* is a minimal copy of the dump (that file plus
   the small metadata JSONs next to it) so the right parser claims it. Mutations (see MUTATORS): truncation at
   random offsets, flipped bytes, CSV columns dropped/renamed/reordered/duplicated, numbers replaced by
   N/A/empty/NaN/huge/negative, duplicated header rows, BOM, CRLF, GBK-encoded Chinese op names, deeply nested
   and enormous JSON strings, array vs object roots, gzip that ends early, SQLite tables/columns dropped or
   retyped. For each input:
     - exit code 0 or 1, no "Traceback", every stderr line is a known kind (detected/warning/error, or the
       line saying an ingest of 2+ ranks builds its analysis tables);
     - exit 1: exactly one `error:` line, naming a path inside the carrier, and the store's manifest is
       byte-identical (the store is pre-populated with a run);
     - exit 0: every view is readable and every fidelity check runs; for value-preserving mutations (BOM,
       CRLF, column order, JSON whitespace, extra unknown column) the stored data equals the unmutated seed's
       (per-table row counts and per-column sums/hashes); for truncation, no table gains rows;
     - wall time < PER_INPUT_TIMEOUT_S and peak RSS of the process tree < RSS_LIMIT_MB (else killed).
   Knobs: TRACEQL_FUZZ_PER_SEED (mutations per seed, default 3), TRACEQL_FUZZ_SEED (default 1),
   TRACEQL_FUZZ_EXAMPLES (hypothesis examples per property, default 40), TRACEQL_FUZZ_RANDOM=1 (new hypothesis
   examples each run). A long local run: `TRACEQL_FUZZ_PER_SEED=40 TRACEQL_FUZZ_EXAMPLES=500
   TRACEQL_FUZZ_RANDOM=1 pytest tests/test_fuzz_*.py -q`.

2. Hypothesis property tests in-process (`test_hypothesis_*`): generated kernel_details.csv and trace_view.json
   contents through `traceql.ingest.ingest`: it returns or raises TraceQLError naming the file, and cells that
   hold a plain decimal are stored exactly (µs text -> ns).

Special files (a FIFO, /dev/zero behind a symlink, a directory with a file's name, a sparse 256 MB file) are in
`test_special_files`. The totals (inputs tried and outcomes) are printed at the end of the module's run.

Known parser bugs found by this harness are listed in KNOWN_BUGS with the reason; inputs hitting them are
reported as xfail (strict=False) so CI stays green while they are open, and any *other* failure fails.

Layout: this module holds the harness; the cases are tests/test_fuzz_mutated.py (part 1),
tests/test_fuzz_hypothesis.py (part 2), tests/test_fuzz_special_files.py and tests/test_fuzz_deep_json.py. They
share TALLY, so the totals printed at the end of each module count every case run so far.
"""

from __future__ import annotations

import bz2
import contextlib
import csv
import fnmatch
import gzip
import io
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, SAMPLES, SHARED

PER_SEED = int(os.environ.get("TRACEQL_FUZZ_PER_SEED", "3"))
FUZZ_SEED = int(os.environ.get("TRACEQL_FUZZ_SEED", "1"))
# hypothesis: examples per property, and derandomize (same examples every run) unless TRACEQL_FUZZ_RANDOM=1
EXAMPLES = int(os.environ.get("TRACEQL_FUZZ_EXAMPLES", "40"))
DERANDOMIZE = os.environ.get("TRACEQL_FUZZ_RANDOM") != "1"
# TRACEQL_FUZZ_MUTATORS=a,b: only these mutators (to exercise one class)
ONLY = {m for m in os.environ.get("TRACEQL_FUZZ_MUTATORS", "").split(",") if m}
PER_INPUT_TIMEOUT_S = 45.0
RSS_LIMIT_MB = 1500
LINE_KINDS = (
    "detected ",
    "warning: ",
    "error: ",
    "building the analysis tables ",
)  # the last: ingest of 2+ ranks

# (seed id glob, mutator glob, reason): failures matching one of these become xfail, anything else fails.
# Remove an entry when its bug is fixed (the input then simply passes).
KNOWN_BUGS: list[
    tuple[str, str, str]
] = []  # all fixed so far (claim errors, DuckDB OSError, huge JSON strings)


# ---------------------------------------------------------------------------------------------------------
# Seeds


@dataclass(frozen=True)
class Seed:
    id: str
    root: Path  # the dump: a folder (e.g. rank0_ascend_pt, PROF_x) or a lone file
    target: str  # path of the file to mutate, relative to root ("" when root is the file)

    @property
    def file(self) -> Path:
        return self.root / self.target if self.target else self.root

    @property
    def kind(self) -> str:
        n = self.file.name.lower()
        if n.endswith(".json.gz") or n.endswith(".gz"):
            return "jsongz"
        if n.endswith(".json"):
            return "json"
        if n.endswith(".csv"):
            return "csv"
        if n.endswith(".db"):
            return "db"
        return "other"


META_NAMES = ("profiler_info*.json", "profiler_metadata.json", "info.json*", "sample.json")


def _dump_seeds(prefix: str, root: Path, files: list[str] | None = None) -> list[Seed]:
    if not root.exists():
        return []
    if root.is_file():
        return [Seed(prefix, root, "")]
    out = []
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if not p.is_file() or p.name.endswith(("-shm", "-wal")) or p.stat().st_size == 0:
            continue
        if files is not None and p.name not in files:
            continue
        out.append(Seed(f"{prefix}/{rel}", root, rel))
    return out


def discover_seeds() -> list[Seed]:
    msi = SHARED / "Ascend__msinsight"
    seeds: list[Seed] = []
    seeds += _dump_seeds("level1", msi / "test/data/pytorch/text/level1/rank0_ascend_pt")
    seeds += _dump_seeds(
        "level0",
        msi / "test/data/pytorch/text/level0/rank0_ascend_pt",
        ["kernel_details.csv", "step_trace_time.csv"],
    )
    seeds += _dump_seeds("rank2023", msi / "server/src/test/test_data/test_rank_0")
    seeds += _dump_seeds("db_level1", msi / "test/data/pytorch/db/level1/rank0_ascend_pt")
    seeds += _dump_seeds("msprof_db", msi / "server/src/test/test_data/full_db/msprof_0.db")
    seeds += _dump_seeds("cluster", msi / "server/src/test/test_data/cluster_analysis_output")
    mpa = SHARED / "Ascend__msprof-analyze/test/ut/advisor"
    seeds += _dump_seeds("kd2023_arith", mpa / "advisor_backend/compute_advice/kernel_details.csv")
    seeds += _dump_seeds("tv_timeline", mpa / "timeline_advice/trace_view.json")
    hta = SHARED / "facebookresearch__HolisticTraceAnalysis/tests/data"
    seeds += _dump_seeds(
        "kineto_cupti", hta / "cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"
    )
    seeds += _dump_seeds("kineto_rank0", hta / "trace_filter/sampled_rank-0.json.gz")
    # sample_traces/: every dump folder (one rank of a multi-rank sample is enough) and every lone file
    if SAMPLES.is_dir():
        for top in sorted(SAMPLES.iterdir()):
            if top.is_file():
                continue
            ranks = sorted(d for d in top.iterdir() if d.is_dir())
            if ranks:
                seeds += _dump_seeds(f"sample/{top.name}/{ranks[0].name}", ranks[0])
            for f in sorted(top.iterdir()):
                if f.is_file():
                    seeds += _dump_seeds(f"sample/{top.name}/{f.name}", f)
    return [s for s in seeds if not fnmatch.fnmatch(s.file.name, "*.md") and not s.file.name.endswith(".py")]


SEEDS = discover_seeds()


def make_carrier(seed: Seed, dest: Path) -> tuple[Path, Path]:
    """Minimal copy of the seed's dump under dest: (what to ingest, the file to mutate)."""
    if not seed.target:
        out = dest / seed.root.name
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(seed.root, out)
        return out, out
    root = dest / seed.root.name
    for p in seed.root.rglob("*"):
        rel = p.relative_to(seed.root)
        if p.is_file() and (str(rel) == seed.target or any(fnmatch.fnmatch(p.name, g) for g in META_NAMES)):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, root / rel)
    return root, root / seed.target


# ---------------------------------------------------------------------------------------------------------
# Mutators: (rng, file) -> short description, or None when not applicable to this file. They edit in place.


@dataclass(frozen=True)
class Mutator:
    name: str
    kinds: tuple[str, ...]
    fn: Callable[[random.Random, Path], str | None]
    preserving: bool = False  # the data must come out identical if the input is accepted
    flagged: bool = False  # values no profiler writes: refused (exit 1), or accepted only with a warning


MUTATORS: list[Mutator] = []


def mutator(
    name: str, kinds: tuple[str, ...], preserving: bool = False, flagged: bool = False
) -> Callable[[Callable[..., str | None]], Callable[..., str | None]]:
    def deco(fn: Callable[..., str | None]) -> Callable[..., str | None]:
        MUTATORS.append(Mutator(name, kinds, fn, preserving, flagged))
        return fn

    return deco


ALL = ("csv", "json", "jsongz", "db", "other")
TEXT = ("csv", "json")


def _read_csv(p: Path) -> tuple[list[list[str]], str]:
    raw = p.read_bytes()
    nl = "\r\n" if b"\r\n" in raw[:65536] else "\n"
    text = raw.decode("utf-8-sig")
    return list(csv.reader(io.StringIO(text, newline=""))), nl


def write_csv(p: Path, rows: list[list[str]], nl: str = "\n", encoding: str = "utf-8") -> None:
    buf = io.StringIO()
    csv.writer(buf, lineterminator=nl).writerows(rows)
    p.write_bytes(buf.getvalue().encode(encoding))


def _numeric_cols(rows: list[list[str]]) -> list[int]:
    if len(rows) < 2:
        return []
    out = []
    for i in range(len(rows[0])):
        cell = rows[1][i].strip() if i < len(rows[1]) else ""
        try:
            float(cell)
            out.append(i)
        except ValueError:
            pass
    return out


@mutator("truncate", ALL)
def _truncate(rng: random.Random, p: Path) -> str:
    data = p.read_bytes()
    n = rng.randrange(0, max(1, len(data)))
    p.write_bytes(data[:n])
    return f"truncated to {n} of {len(data)} bytes"


@mutator("flip_bytes", ALL)
def _flip(rng: random.Random, p: Path) -> str:
    data = bytearray(p.read_bytes())
    if not data:
        return "empty"
    idx = sorted(rng.randrange(len(data)) for _ in range(rng.randint(1, 8)))
    for i in idx:
        data[i] ^= 1 << rng.randrange(8)
    p.write_bytes(bytes(data))
    return f"flipped bits at {idx}"


@mutator("empty_file", ALL)
def _empty(rng: random.Random, p: Path) -> str:
    p.write_bytes(b"")
    return "0 bytes"


@mutator("bom", TEXT, preserving=True)
def _bom(rng: random.Random, p: Path) -> str | None:
    data = p.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        return None
    p.write_bytes(b"\xef\xbb\xbf" + data)
    return "UTF-8 BOM prepended"


@mutator("crlf", ("csv",), preserving=True)
def _crlf(rng: random.Random, p: Path) -> str | None:
    data = p.read_bytes()
    if b"\r\n" in data:
        return None
    p.write_bytes(data.replace(b"\n", b"\r\n"))
    return "LF -> CRLF"


@mutator("lf", ("csv",), preserving=True)
def _lf(rng: random.Random, p: Path) -> str | None:
    data = p.read_bytes()
    if b"\r\n" not in data:
        return None
    p.write_bytes(data.replace(b"\r\n", b"\n"))
    return "CRLF -> LF"


@mutator("csv_drop_column", ("csv",))
def _drop_col(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    if not rows or len(rows[0]) < 2:
        return None
    i = rng.randrange(len(rows[0]))
    name = rows[0][i]
    write_csv(p, [r[:i] + r[i + 1 :] for r in rows], nl)
    return f"dropped column {name!r}"


@mutator("csv_rename_column", ("csv",))
def _rename_col(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    if not rows:
        return None
    i = rng.randrange(len(rows[0]))
    old = rows[0][i]
    rows[0][i] = rng.choice(
        [old.upper(), old + "_v2", old.replace("(us)", "(ms)"), old.replace(" ", "_"), "名称"]
    )
    write_csv(p, rows, nl)
    return f"renamed column {old!r} -> {rows[0][i]!r}"


@mutator("csv_reorder_columns", ("csv",), preserving=True)
def _reorder(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    if not rows or len(rows[0]) < 2 or any(len(r) != len(rows[0]) for r in rows):
        return None
    order = list(range(len(rows[0])))
    rng.shuffle(order)
    write_csv(p, [[r[i] for i in order] for r in rows], nl)
    return f"columns reordered {order[:6]}..."


@mutator("csv_extra_column", ("csv",), preserving=True)
def _extra_col(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    if not rows or any(len(r) != len(rows[0]) for r in rows):
        return None
    write_csv(p, [rows[0] + ["Future Column(us)"]] + [r + ["1.5"] for r in rows[1:]], nl)
    return "unknown column appended"


@mutator("csv_duplicate_column_name", ("csv",))
def _dup_col(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    if not rows or len(rows[0]) < 2:
        return None
    i, j = rng.sample(range(len(rows[0])), 2)
    rows[0][j] = rows[0][i]
    write_csv(p, rows, nl)
    return f"header has {rows[0][i]!r} twice"


@mutator("csv_duplicate_header_row", ("csv",))
def _dup_header(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    if len(rows) < 2:
        return None
    k = rng.randrange(1, len(rows))
    write_csv(p, rows[:k] + [rows[0]] + rows[k:], nl)
    return f"header row repeated at line {k + 1}"


@mutator("csv_numbers_replaced", ("csv",))
def _numbers(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    cols = _numeric_cols(rows)
    if not cols:
        return None
    col = rng.choice(cols)
    repl = rng.choice(
        [
            "N/A",
            "",
            "NaN",
            "nan",
            "inf",
            "-inf",
            "1e400",
            "-1",
            "-0.000001",
            "99999999999999999999999999",
            "0x1F",
            "1,5",
            "１２",
        ]
    )
    every = rng.random() < 0.5
    for r in rows[1:]:
        if col < len(r) and (every or rng.random() < 0.3):
            r[col] = repl
    write_csv(p, rows, nl)
    return f"column {rows[0][col]!r}: {'all' if every else 'some'} cells -> {repl!r}"


@mutator("csv_ragged_rows", ("csv",))
def _ragged(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    if len(rows) < 2:
        return None
    for r in rows[1:]:
        if r and rng.random() < 0.3:
            del r[rng.randrange(len(r)) :]
        elif rng.random() < 0.3:
            r.extend(["x"] * rng.randint(1, 3))
    write_csv(p, rows, nl)
    return "some rows short, some long"


@mutator("csv_gbk_names", ("csv",))
def _gbk(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    if len(rows) < 2:
        return None
    name_cols = [
        i
        for i, h in enumerate(rows[0])
        if h.strip() in ("Name", "Op Name", "OP Type", "Type", "API Name", "Component")
    ] or [0]
    for r in rows[1:]:
        for i in name_cols:
            if i < len(r):
                r[i] = "矩阵乘法_" + r[i]
    write_csv(p, rows, nl, encoding="gbk")
    return f"op names in Chinese, file encoded GBK (columns {name_cols})"


@mutator("csv_hostile_text", ("csv",))
def _hostile_text(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    if len(rows) < 2:
        return None
    evil = rng.choice(
        [
            "<img src=x onerror=alert(1)>",
            "</script><script>alert(1)</script>",
            "\x1b]0;pwned\x07",
            "'; DROP TABLE kernels; --",
            "[bold red]x[/]",
            "\x00nul",
        ]
    )
    for r in rows[1:]:
        if r:
            r[rng.randrange(len(r))] = evil
    write_csv(p, rows, nl)
    return f"random cells -> {evil!r}"


@mutator("csv_huge_cell", ("csv",))
def _huge_cell(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    if len(rows) < 2 or not rows[1]:
        return None
    rows[1][rng.randrange(len(rows[1]))] = "A" * 8_000_000
    write_csv(p, rows, nl)
    return "one 8 MB cell"


@mutator("header_only", ("csv",))
def _header_only(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    if not rows:
        return None
    write_csv(p, rows[:1], nl)
    return "header, no rows"


# ---- issue 22 classes: bombs, huge strings, wide headers, numbers no profiler writes, ranks out of range ----
# (special files, the first class, are test_special_files below: a FIFO cannot be a mutation in place, the
# harness itself would block reading it back)


@mutator("gzip_bomb", ("jsongz",))
def _gzip_bomb(rng: random.Random, p: Path) -> str | None:
    # ~70 MB of tiny JSON values from ~70 KB of gzip: past the inflate limit (200x, at least 64 MiB)
    block = b'"", ' * (1 << 18)
    with gzip.open(p, "wb", compresslevel=9) as gz:
        gz.write(b'{"schemaVersion": 1, "traceEvents": [')
        for _ in range(70):
            gz.write(block)
        gz.write(b'""]}')
    return "gzip inflating ~1000x"


@mutator("json_huge_string", ("json",))
def _json_huge_string(rng: random.Random, p: Path) -> str | None:
    raw = p.read_bytes()
    i = raw.find(b'"name"')
    if i < 0:
        return None
    j = raw.find(b'"', raw.find(b":", i) + 1)
    if j < 0:
        return None
    p.write_bytes(raw[: j + 1] + b"A" * (40 << 20) + raw[j + 1 :])
    return "a 40 MB string (past TRACEQL_MAX_STRING_BYTES)"


@mutator("csv_wide_header", ("csv",), preserving=False)
def _csv_wide_header(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    if not rows:
        return None
    n = rng.choice([3000, 20000])
    rows[0] += [f"wide{i}" for i in range(n)]
    for r in rows[1:]:
        r += ["1"] * n
    write_csv(p, rows, nl)
    return f"{n} extra columns"


@mutator("csv_nonstandard_numbers", ("csv",))
def _csv_nonstandard_numbers(rng: random.Random, p: Path) -> str | None:
    rows, nl = _read_csv(p)
    cols = _numeric_cols(rows)
    if not cols or len(rows) < 2:
        return None
    evil = rng.choice(["1_000", "0x1f", "\u0661\u0662", "Infinity", "1e400", "-NaN"])
    for r in rows[1:]:
        c = rng.choice(cols)
        if c < len(r):
            r[c] = evil
    write_csv(p, rows, nl)
    return f"numeric cells -> {evil!r}"


@mutator("csv_unclosed_quote", ("csv",), flagged=True)
def _csv_unclosed_quote(rng: random.Random, p: Path) -> str | None:
    """A quote opened in a cell and never closed (DuckDB read the rest of the file as one garbage row)."""
    raw = p.read_bytes()
    lines = raw.split(b"\n")
    body = [i for i in range(1, len(lines)) if lines[i].strip() and lines[i].count(b'"') % 2 == 0]
    if not body:
        return None
    i = rng.choice(body)
    cells = lines[i].split(b",")
    j = rng.randrange(len(cells))
    cells[j] = b'"' + cells[j]
    lines[i] = b",".join(cells)
    p.write_bytes(b"\n".join(lines))
    return f"unclosed quote on line {i + 1}"


@mutator("rank_out_of_range", ("json",))
def _rank_out_of_range(rng: random.Random, p: Path) -> str | None:
    if not p.name.startswith("profiler_info"):
        return None
    data = json.loads(p.read_bytes().decode("utf-8-sig"))
    if not isinstance(data, dict):
        return None
    data["rank_id"] = rng.choice([2**63, 2**64 + 1, 2**31])
    p.write_text(json.dumps(data))
    return f"rank_id {data['rank_id']}"


_NUM = "\x00NUM"


def _load_json(p: Path) -> Any:
    """JSON with every non-integer number kept as its text (see _dump_json): a float round trip would change
    values such as 1736408883704643.212 (19 digits, more than a double holds), i.e. mutate the data."""
    return json.loads(p.read_bytes().decode("utf-8-sig"), parse_float=lambda t: f"{_NUM}{t}\x00")


def _dump_json(d: Any, **kw: Any) -> str:
    import re

    return re.sub(r'"\\u0000NUM([^"\\]*)\\u0000"', r"\1", json.dumps(d, **kw))


def _trace_events(d: Any) -> list[dict[str, Any]]:
    ev = d.get("traceEvents") if isinstance(d, dict) else d
    return [e for e in ev if isinstance(e, dict)] if isinstance(ev, list) else []


@mutator("json_id_out_of_range", ("json",), flagged=True)
def _json_id_out_of_range(rng: random.Random, p: Path) -> str | None:
    """Event pids/tids past int64 (Kineto pid 2**63 used to drop every host op and step, exit 0)."""
    d = _load_json(p)
    key = rng.choice(["pid", "tid"])
    evs = [e for e in _trace_events(d) if e.get("ph") == "X" and isinstance(e.get(key), int)]
    if not evs:
        return None
    v = rng.choice([2**63, 2**63 + 7, 2**64, -(2**63) - 1])
    for e in rng.sample(evs, min(len(evs), rng.randint(1, 50))):
        e[key] = v
    p.write_text(_dump_json(d), encoding="utf-8")
    return f"event {key} -> {v}"


@mutator("json_nonstandard_numbers", ("json",), flagged=True)
def _json_nonstandard_numbers(rng: random.Random, p: Path) -> str | None:
    """ts/dur written as number text no profiler writes ('1_000' was read as 1000 µs; Unicode digits as digits)."""
    d = _load_json(p)
    key = rng.choice(["ts", "dur"])
    evs = [e for e in _trace_events(d) if e.get("ph") == "X" and key in e]
    if not evs:
        return None
    evil = rng.choice(["1_000", "\u0661\u0662\u0663", "\uff11\uff12", "0x1f", "NaN", "Infinity", "1e400"])
    for e in rng.sample(evs, min(len(evs), rng.randint(1, 20))):
        e[key] = evil if evil != "1e400" else f"{_NUM}1e400\x00"  # a bare JSON number past the float range
    p.write_text(_dump_json(d), encoding="utf-8")
    return f"event {key} -> {evil!r}"


@mutator("json_reformat", ("json",), preserving=True)
def _json_reformat(rng: random.Random, p: Path) -> str:
    p.write_text(
        _dump_json(_load_json(p), indent=rng.choice([None, 1, 4]), ensure_ascii=rng.random() < 0.5),
        encoding="utf-8",
    )
    return "same JSON, other whitespace/escaping"


@mutator("json_root_swap", ("json",))
def _root_swap(rng: random.Random, p: Path) -> str:
    d = _load_json(p)
    if isinstance(d, list):
        d = {"traceEvents": d}
        what = "array root -> {'traceEvents': [...]}"
    elif isinstance(d, dict):
        d = list(d.values()) if rng.random() < 0.5 else [d]
        what = "object root -> array"
    else:
        d = [d]
        what = "scalar root -> array"
    p.write_text(_dump_json(d), encoding="utf-8")
    return what


@mutator("json_scalar_root", ("json",))
def _scalar_root(rng: random.Random, p: Path) -> str:
    v = rng.choice(
        ["null", "0", '"text"', "[]", "{}", "[[]]", "[null]", '{"traceEvents": null}', '{"traceEvents": {}}']
    )
    p.write_text(v)
    return f"root is {v}"


def _walk(d: Any) -> list[tuple[Any, Any]]:
    """(container, key) for every value in a JSON document."""
    out = []
    stack = [d]
    while stack:
        c = stack.pop()
        items = c.items() if isinstance(c, dict) else enumerate(c) if isinstance(c, list) else []
        for k, v in items:
            out.append((c, k))
            if isinstance(v, (dict, list)):
                stack.append(v)
    return out


@mutator("json_values_replaced", ("json",))
def _json_values(rng: random.Random, p: Path) -> str | None:
    d = _load_json(p)
    slots = _walk(d)
    if not slots:
        return None
    repl = rng.choice(
        [None, "N/A", "", -1, -1.5e300, 1e308, 2**70, "1e400", "NaN", [], {}, True, "1736408883688177.930.5"]
    )
    picked = rng.sample(slots, min(len(slots), rng.randint(1, 25)))
    for c, k in picked:
        c[k] = repl
    p.write_text(_dump_json(d, allow_nan=True), encoding="utf-8")
    return f"{len(picked)} values -> {repl!r}"


@mutator("json_keys_dropped", ("json",))
def _json_keys(rng: random.Random, p: Path) -> str | None:
    d = _load_json(p)
    dict_slots = [(c, k) for c, k in _walk(d) if isinstance(c, dict)]
    if not dict_slots:
        return None
    key = rng.choice(dict_slots)[1]
    n = 0
    for c, k in list(_walk(d)):
        if isinstance(c, dict) and k == key and k in c:
            del c[k]
            n += 1
    p.write_text(_dump_json(d), encoding="utf-8")
    return f"key {key!r} removed everywhere ({n}x)"


@mutator("json_deep_nesting", ("json",))
def _deep(rng: random.Random, p: Path) -> str | None:
    d = _load_json(p)
    depth = rng.choice([2_000, 100_000])
    nested = "[" * depth + "]" * depth
    slots = [(c, k) for c, k in _walk(d) if isinstance(c, dict)]
    if not slots:
        p.write_text(nested)
        return f"root replaced by {depth}-deep nested arrays"
    c, k = rng.choice(slots)
    c[k] = "__NESTED__"
    text = _dump_json(d).replace('"__NESTED__"', nested, 1)
    p.write_text(text)
    return f"value of {k!r} -> {depth}-deep nested arrays"


@mutator("json_huge_string", ("json",))
def _huge_str(rng: random.Random, p: Path) -> str | None:
    d = _load_json(p)
    slots = [(c, k) for c, k in _walk(d) if isinstance(c[k], str)]
    if not slots:
        return None
    c, k = rng.choice(slots)
    c[k] = "x" * 30_000_000
    p.write_text(_dump_json(d))
    return f"value of {k!r} -> a 30 MB string"


@mutator("json_duplicate_keys_nan", ("json",))
def _dup_keys(rng: random.Random, p: Path) -> str | None:
    text = p.read_text(encoding="utf-8-sig")
    if '"ts":' not in text and '"dur":' not in text:
        return None
    text = text.replace('"dur":', '"dur": NaN, "dur":', 5).replace('"ts":', '"ts": Infinity, "ts":', 5)
    p.write_text(text)
    return "duplicate keys with NaN/Infinity literals"


@mutator("gzip_ends_early", ("jsongz",))
def _gz_early(rng: random.Random, p: Path) -> str:
    data = p.read_bytes()
    n = rng.randrange(10, max(11, len(data) - 8))
    p.write_bytes(data[:n])
    return f"gzip cut at {n} of {len(data)} bytes"


@mutator("gzip_garbage_member", ("jsongz",))
def _gz_garbage(rng: random.Random, p: Path) -> str:
    p.write_bytes(p.read_bytes() + gzip.compress(b"\x00garbage{["))
    return "a second gzip member of garbage"


@mutator("gzip_inner_mutation", ("jsongz",))
def _gz_inner(rng: random.Random, p: Path) -> str:
    inner = gzip.decompress(p.read_bytes())
    cut = rng.randrange(len(inner))
    p.write_bytes(gzip.compress(inner[:cut]))
    return f"valid gzip of JSON cut at {cut}"


@mutator("not_gzip", ("jsongz",))
def _not_gzip(rng: random.Random, p: Path) -> str:
    p.write_bytes(bz2.compress(gzip.decompress(p.read_bytes())))
    return "bzip2 data in a .gz name"


def _sqlite_tables(p: Path) -> list[str]:
    con = sqlite3.connect(p)
    try:
        return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    finally:
        con.close()


def _sqlite_exec(p: Path, sql: str) -> None:
    con = sqlite3.connect(p)
    try:
        con.executescript(sql)
        con.commit()
    finally:
        con.close()


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@mutator("db_drop_table", ("db",))
def _db_drop(rng: random.Random, p: Path) -> str | None:
    tables = [t for t in _sqlite_tables(p) if not t.startswith("sqlite_")]
    if not tables:
        return None
    t = rng.choice(tables)
    _sqlite_exec(p, f"DROP TABLE {_q(t)}")
    return f"table {t} dropped"


@mutator("db_rename_column", ("db",))
def _db_rename(rng: random.Random, p: Path) -> str | None:
    tables = [t for t in _sqlite_tables(p) if not t.startswith("sqlite_")]
    rng.shuffle(tables)
    con = sqlite3.connect(p)
    try:
        for t in tables:
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({_q(t)})")]
            if cols:
                c = rng.choice(cols)
                con.execute(f"ALTER TABLE {_q(t)} RENAME COLUMN {_q(c)} TO {_q(c + '_renamed')}")
                con.commit()
                return f"{t}.{c} renamed"
    except sqlite3.Error:
        return None
    finally:
        con.close()
    return None


@mutator("db_values_retyped", ("db",))
def _db_values(rng: random.Random, p: Path) -> str | None:
    tables = [t for t in _sqlite_tables(p) if not t.startswith("sqlite_")]
    rng.shuffle(tables)
    con = sqlite3.connect(p)
    try:
        for t in tables:
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({_q(t)})")]
            n = con.execute(f"SELECT count(*) FROM {_q(t)}").fetchone()[0]
            if cols and n:
                c = rng.choice(cols)
                v = rng.choice(["'N/A'", "NULL", "-1", "9.9e300", "X'00FF'", "''", "'１２'"])
                con.execute(f"UPDATE {_q(t)} SET {_q(c)} = {v} WHERE rowid % 2 = 0")
                con.commit()
                return f"{t}.{c} -> {v} in every other row"
    finally:
        con.close()
    return None


@mutator("db_empty_tables", ("db",))
def _db_empty(rng: random.Random, p: Path) -> str | None:
    tables = [t for t in _sqlite_tables(p) if not t.startswith("sqlite_")]
    if not tables:
        return None
    _sqlite_exec(p, ";".join(f"DELETE FROM {_q(t)}" for t in tables))
    return "every table emptied"


@mutator("db_oversized_value", ("db",), flagged=True)
def _db_oversized_value(rng: random.Random, p: Path) -> str | None:
    """STRING_IDS values past TRACEQL_MAX_STRING_BYTES (32 MiB): a generated value (SQLite makes it NULL) or a
    stored one (the read fails); the first was a silent NULL name."""
    if "STRING_IDS" not in _sqlite_tables(p):
        return None
    con = sqlite3.connect(p)
    try:
        ids = [r[0] for r in con.execute("SELECT id FROM STRING_IDS ORDER BY id LIMIT 200")]
        if not ids:
            return None
        picked = [rng.choice(ids)]  # one: each costs 33 MB of disk in the carrier
        con.executemany("UPDATE STRING_IDS SET value = CAST(zeroblob(?) AS TEXT) WHERE id = ?",
                        [((33 << 20), i) for i in picked])  # fmt: skip
        con.commit()
    finally:
        con.close()
    return f"STRING_IDS id {picked[0]}: a value of 33 MiB"


@mutator("not_sqlite", ("db",))
def _not_sqlite(rng: random.Random, p: Path) -> str:
    p.write_bytes(b"SQLite format 3\x00" + os.urandom(5000))
    return "SQLite magic followed by random bytes"


# ---------------------------------------------------------------------------------------------------------
# Running one input through the real CLI


@dataclass
class Outcome:
    code: int | None
    out: str
    err: str
    wall_s: float
    rss_mb: float
    killed: str | None = None  # "timeout" | "memory"


def run_cli(
    args: list[str], timeout: float = PER_INPUT_TIMEOUT_S, rss_limit_mb: float = RSS_LIMIT_MB
) -> Outcome:
    import psutil

    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEQL_")}
    cmd = [sys.executable, "-c", "from traceql.cli import main; main()", *args]
    t0 = time.monotonic()
    with open(os.devnull, "rb") as devnull, _tmpfile() as fo, _tmpfile() as fe:
        p = subprocess.Popen(
            cmd, stdin=devnull, stdout=fo, stderr=fe, env=env, cwd=ROOT, start_new_session=True
        )
        killed = None
        peak = 0.0
        try:
            proc = psutil.Process(p.pid)
            while p.poll() is None:
                try:
                    rss = proc.memory_info().rss + sum(
                        c.memory_info().rss for c in proc.children(recursive=True)
                    )
                    peak = max(peak, rss / 2**20)
                except psutil.Error:
                    pass
                if peak > rss_limit_mb:
                    killed = "memory"
                elif time.monotonic() - t0 > timeout:
                    killed = "timeout"
                if killed:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
                    break
                time.sleep(0.02)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        fo.seek(0)
        fe.seek(0)
        out = fo.read().decode("utf-8", "replace")
        err = fe.read().decode("utf-8", "replace")
    return Outcome(p.returncode, out, err, time.monotonic() - t0, peak, killed)


def _tmpfile() -> Any:
    import tempfile

    return tempfile.TemporaryFile()


# A warm worker: a subprocess that has imported traceql/duckdb/pyarrow once and runs `traceql.cli.main()` for
# each task it reads on stdin (argv as JSON), capturing what the CLI prints. An exception escaping main() is
# printed as the traceback a real run would show. Results go to a file named in the task, so a parser that
# writes to fd 1/2 cannot corrupt the protocol. The parent watches time and RSS and kills/restarts the worker
# on a hang or a memory blow-up. This makes an input cost ~0.1-0.3 s instead of a fresh interpreter's start.
WORKER = r"""
import contextlib, io, json, os, sys, traceback
from traceql.cli import main
import duckdb, pyarrow, pyarrow.parquet  # noqa: F401  (warm)
for line in sys.stdin:
    task = json.loads(line)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        sys.argv = ["traceql", *task["args"]]
        try:
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    tmp = task["result"] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"code": code, "out": out.getvalue(), "err": err.getvalue()}, fh)
    os.replace(tmp, task["result"])
"""


class Worker:
    MAX_TASKS = 40  # restart now and then: parsers may leak memory across runs, a fresh process bounds it

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.p: subprocess.Popen[bytes] | None = None
        self.tasks = 0
        self.n = 0

    def _start(self) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEQL_")}
        self.p = subprocess.Popen(
            [sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=env, cwd=ROOT, start_new_session=True,
        )  # fmt: skip
        self.tasks = 0
        return self.p

    def stop(self) -> None:
        if self.p is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
            self.p = None

    def run(
        self, args: list[str], timeout: float = PER_INPUT_TIMEOUT_S, rss_limit_mb: float = RSS_LIMIT_MB
    ) -> Outcome:
        import psutil

        if self.p is None or self.p.poll() is not None or self.tasks >= self.MAX_TASKS:
            self.stop()
            self._start()
        assert self.p is not None and self.p.stdin is not None
        self.n += 1
        self.tasks += 1
        result = self.tmp / f"result-{os.getpid()}-{id(self)}-{self.n}.json"
        t0 = time.monotonic()
        self.p.stdin.write((json.dumps({"args": args, "result": str(result)}) + "\n").encode())
        self.p.stdin.flush()
        proc = psutil.Process(self.p.pid)
        peak = 0.0
        killed = None
        while not result.exists():
            if self.p.poll() is not None:
                killed = f"worker died (exit {self.p.returncode})"
                break
            try:
                rss = proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
                peak = max(peak, rss / 2**20)
            except psutil.Error:
                pass
            if peak > rss_limit_mb:
                killed = "memory"
            elif time.monotonic() - t0 > timeout:
                killed = "timeout"
            if killed:
                break
            time.sleep(0.01)
        wall = time.monotonic() - t0
        if killed:
            self.stop()
            return Outcome(None, "", "", wall, peak, killed)
        r = json.loads(result.read_text(encoding="utf-8"))
        result.unlink()
        return Outcome(r["code"], r["out"], r["err"], wall, peak)


class Pool:
    """One Worker per thread; `map` runs argv lists concurrently."""

    def __init__(self, tmp: Path, n: int) -> None:
        import queue

        self.workers = [Worker(tmp) for _ in range(n)]
        self.free: Any = queue.Queue()
        for w in self.workers:
            self.free.put(w)

    def run(self, args: list[str], timeout: float = PER_INPUT_TIMEOUT_S) -> Outcome:
        w = self.free.get()
        try:
            return w.run(args, timeout)
        finally:
            self.free.put(w)

    def map(self, argvs: list[list[str]]) -> list[Outcome]:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(self.workers)) as ex:
            return list(ex.map(self.run, argvs))

    def close(self) -> None:
        for w in self.workers:
            w.stop()


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Any:
    p = Pool(tmp_path_factory.mktemp("fuzz_workers"), max(1, min(4, os.cpu_count() or 2)))
    yield p
    p.close()


def fingerprint(store: Path, run_id: str) -> dict[str, Any]:
    """Per table: row count and, per scalar column, (non-null count, sum or hash-sum). Maps, run_meta and
    `source` columns (which name files) are left out: the carrier's paths differ from the seed's."""
    from traceql import engine, schema

    con = engine.connect(store)
    fp: dict[str, Any] = {}
    for t in schema.TABLE_NAMES:
        if t == "run_meta":
            continue
        parts = ["count(*)"]
        cols = [
            c
            for c in schema.columns(t)
            if c.name not in ("run_id", "source") and not c.type.startswith("MAP")
        ]
        for c in cols:
            if c.type in ("BIGINT", "INTEGER"):
                parts.append(f"count({c.name}), sum({c.name})::HUGEINT")
            elif c.type == "DOUBLE":
                parts.append(f"count({c.name}), sum({c.name})")
            else:
                parts.append(f"count({c.name}), sum(hash({c.name}::VARCHAR))::HUGEINT")
        row = con.execute(f"SELECT {', '.join(parts)} FROM {t} WHERE run_id = ?", [run_id]).fetchone()
        vals = [f"{v:.9g}" if isinstance(v, float) else v for v in row]
        if vals[0]:
            fp[t] = vals
    con.close()
    return fp


def table_counts(store: Path, run_id: str) -> dict[str, int]:
    return dict(json.loads((store / "manifest.json").read_text())["runs"][run_id]["rows"])


@dataclass
class Tally:
    inputs: int = 0
    ingested: int = 0
    refused: int = 0
    preserving_refused: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    known: list[str] = field(default_factory=list)
    max_rss_mb: float = 0.0
    max_wall_s: float = 0.0
    seeds: int = 0
    by_mutator: dict[str, list[int]] = field(default_factory=dict)  # name -> [tried, ingested, refused]


TALLY = Tally()


@pytest.fixture(scope="module", autouse=True)
def print_totals(request: pytest.FixtureRequest) -> Any:
    yield
    if not TALLY.inputs:
        return
    lines = [
        f"fuzz: {TALLY.inputs} inputs tried over {TALLY.seeds} seeds (TRACEQL_FUZZ_SEED={FUZZ_SEED}, "
        f"{PER_SEED}/seed, + hypothesis and special files): {TALLY.ingested} ingested, {TALLY.refused} refused "
        f"with one line, {len(TALLY.known)} known bugs (xfail), {len(TALLY.failures)} new failures; "
        f"peak RSS {TALLY.max_rss_mb:.0f} MB, slowest input {TALLY.max_wall_s:.1f} s",
        "fuzz by mutator (tried/ingested/refused): "
        + ", ".join(f"{k} {v[0]}/{v[1]}/{v[2]}" for k, v in sorted(TALLY.by_mutator.items())),
    ]
    if TALLY.preserving_refused:
        lines.append(
            f"fuzz: value-preserving variants refused ({len(TALLY.preserving_refused)}): "
            + "; ".join(TALLY.preserving_refused[:8])
        )
    # print past pytest's output capture, so the counts show in every run (not only on failure)
    capman = request.config.pluginmanager.getplugin("capturemanager")
    tr = request.config.pluginmanager.getplugin("terminalreporter")
    if capman is None or tr is None:
        return
    with capman.global_and_fixture_disabled():
        tr.write_line("")
        for line in lines:
            tr.write_line(line)


def check_outcome(o: Outcome, carrier_root: Path, what: str) -> list[str]:
    """Problems with one CLI run (empty list = fine)."""
    problems = []
    if o.killed:
        problems.append(f"killed: {o.killed} after {o.wall_s:.1f}s, peak RSS {o.rss_mb:.0f} MB")
        return problems
    if o.code not in (0, 1):
        problems.append(f"exit code {o.code}")
    if "Traceback" in o.err or "Traceback" in o.out:
        problems.append("traceback: " + o.err[-1500:])
        return problems
    lines = [ln for ln in o.err.splitlines() if ln.strip()]
    odd = [ln for ln in lines if not ln.startswith(LINE_KINDS)]
    if odd:
        problems.append(f"stderr lines of unknown kind: {[ln[:200] for ln in odd[:3]]}")
    errors = [ln for ln in lines if ln.startswith("error: ")]
    if o.code == 1:
        if len(errors) != 1:
            problems.append(f"expected exactly one error line, got {len(errors)}: {o.err[-800:]!r}")
        elif str(carrier_root) not in errors[0] and carrier_root.name not in errors[0]:
            problems.append(f"the error does not name the file: {errors[0][:300]!r}")
        elif "internal error" in errors[0]:
            problems.append(f"internal error: {errors[0][:400]}")
    elif o.code == 0 and errors:
        problems.append(f"exit 0 with an error line: {errors[0][:300]}")
    return problems


def known_bug(seed_id: str, mut: str) -> str | None:
    for sg, mg, reason in KNOWN_BUGS:
        if fnmatch.fnmatch(seed_id, sg) and fnmatch.fnmatch(mut, mg):
            return reason
    return None


_TEMPLATE: list[Path] = []


def base_store(path: Path) -> Path:
    """A store that already holds a run, so "store unchanged on failure" means something (copied from a
    template made once: writing a run costs ~0.2 s, copying it ~5 ms)."""
    from traceql.rank_writer import RankWriter
    from traceql.store import Store

    if not _TEMPLATE:
        import tempfile

        tpl = Path(tempfile.mkdtemp(prefix="traceql_fuzz_tpl_")) / "store"
        st = Store(tpl)
        staging = st.new_staging()
        w = RankWriter(staging, "base", 0)
        w.write("kernels", {"name": ["k"], "ts_ns": [1_736_408_883_000_000_000], "dur_ns": [1000]})
        w.close()
        st.commit(
            staging,
            "base",
            {
                "source": "t",
                "format": "canonical",
                "ranks": [0],
                "ranks_count": 1,
                "rows": w.rows,
                "files": w.files,
            },
        )
        _TEMPLATE.append(tpl)
    shutil.copytree(_TEMPLATE[0], path, symlinks=True)
    return path
