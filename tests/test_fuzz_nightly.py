"""The fuzz harness's nightly-size mode (issue 47): TRACEQL_FUZZ_CASES=N runs N mutated inputs per parser
family through the real CLI (tests/_fuzz_harness.py: its seeds, mutators, warm workers and outcome rules), outside
CI. Skipped unless TRACEQL_FUZZ_CASES is set.

    TRACEQL_FUZZ_CASES=10000 nice -n 19 python -m pytest -q tests/test_fuzz_nightly.py -k ascend_text

Per input: exit 0 or 1, no traceback, exit 1 = exactly one `error:` line naming the carrier and the store's
manifest byte-identical, wall time under the harness's limit (a hang is killed and counted), RSS of the worker
under its limit. The value-preserving data comparisons of test_fuzz_mutated.py are left out here (they double the
cost of an input). Knobs:
- TRACEQL_FUZZ_CASES: inputs per family (10000 for the nightly run);
- TRACEQL_FUZZ_BUDGET_S: stop a family after this many seconds (the figures then say how many ran);
- TRACEQL_FUZZ_MAX_SEED_MB: leave out seed files larger than this (default 64: a 1 GB trace_view costs seconds
  per input);
- TRACEQL_FUZZ_REPORT: a JSON file the figures of each family are appended to (one object a line).
Families: the parser that claims a seed's dump, by where the seed comes from (FAMILIES)."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from pathlib import Path

import pytest

from tests._fuzz_harness import (
    FUZZ_SEED,
    MUTATORS,
    SEEDS,
    Pool,
    Seed,
    base_store,
    check_outcome,
    known_bug,
    make_carrier,
)

CASES = int(os.environ.get("TRACEQL_FUZZ_CASES", "0"))
BUDGET_S = float(os.environ.get("TRACEQL_FUZZ_BUDGET_S", "0")) or None
MAX_SEED_MB = float(os.environ.get("TRACEQL_FUZZ_MAX_SEED_MB", "64"))
REPORT = os.environ.get("TRACEQL_FUZZ_REPORT")

# seed id prefix -> parser family (the parser that claims that dump)
FAMILIES: dict[str, tuple[str, ...]] = {
    "ascend_text": ("level1/", "level0/", "rank2023/", "cluster/", "kd2023_arith", "tv_timeline",
                    "sample/torch_npu_2rank/"),
    "ascend_db": ("db_level1/", "msprof_db"),
    "msprof_text": ("sample/msprof/",),
    "kineto": ("kineto_cupti", "kineto_rank0", "sample/kineto_cpu/"),
}  # fmt: skip


def family_seeds(family: str) -> list[Seed]:
    out = []
    for s in SEEDS:
        if not s.id.startswith(FAMILIES[family]):
            continue
        if s.file.stat().st_size > MAX_SEED_MB * 2**20:
            continue
        if any(s.kind in m.kinds for m in MUTATORS):
            out.append(s)
    return out


def _mutate(seed: Seed, i: int, dest: Path) -> tuple[str, str, Path, Path]:
    """(mutator, description, carrier, target) of input i of a seed; a mutator that does not apply falls back
    to truncation (as test_fuzz_mutated does)."""
    rng = random.Random(f"{FUZZ_SEED}:nightly:{seed.id}:{i}")
    ms = [m for m in MUTATORS if seed.kind in m.kinds]
    m = rng.choice(ms)
    carrier, target = make_carrier(seed, dest)
    try:
        desc = m.fn(rng, target)
    except (ValueError, UnicodeDecodeError, sqlite3.Error, OSError, EOFError):
        desc = None
    if desc is None:
        m = next(mm for mm in MUTATORS if mm.name == "truncate")
        carrier, target = make_carrier(seed, dest / "b")
        desc = m.fn(rng, target) or "truncate"
    return m.name, desc, carrier, target


@pytest.mark.skipif(not CASES, reason="nightly size: set TRACEQL_FUZZ_CASES=10000 (outside CI)")
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_nightly_family(family: str, tmp_path: Path) -> None:
    import shutil

    seeds = family_seeds(family)
    if not seeds:
        pytest.skip(f"no seed of family {family} on this machine (../shared/real_traces absent?)")
    workers = max(1, min(4, os.cpu_count() or 2))
    (tmp_path / "workers").mkdir()
    pool = Pool(tmp_path / "workers", workers)
    fig = {"family": family, "seeds": len(seeds), "cases": 0, "ingested": 0, "refused": 0, "tracebacks": 0,
           "hangs": 0, "memory_kills": 0, "other_failures": 0, "known": 0, "peak_rss_mb": 0.0,
           "slowest_s": 0.0, "wall_s": 0.0, "budget_stop": False}  # fmt: skip
    problems: list[str] = []
    t0 = time.monotonic()
    i = 0
    try:
        while fig["cases"] < CASES:
            if BUDGET_S is not None and time.monotonic() - t0 > BUDGET_S:
                fig["budget_stop"] = True
                break
            batch = []
            for _ in range(workers * 4):
                if fig["cases"] + len(batch) >= CASES:
                    break
                seed = seeds[i % len(seeds)]
                d = tmp_path / f"c{i}"
                name, desc, carrier, _t = _mutate(seed, i // len(seeds), d)
                store = base_store(d / "store")
                batch.append((seed, name, desc, carrier, store, (store / "manifest.json").read_bytes(), d))
                i += 1
            argvs = [
                ["ingest", str(b[3]), "--store", str(b[4]), "--name", "fz", "-q", "-j", "1", "--no-check"]
                for b in batch
            ]
            for (seed, name, desc, carrier, store, manifest, d), o in zip(
                batch, pool.map(argvs), strict=True
            ):
                fig["cases"] += 1
                fig["peak_rss_mb"] = max(fig["peak_rss_mb"], round(o.rss_mb, 1))
                fig["slowest_s"] = max(fig["slowest_s"], round(o.wall_s, 2))
                found = check_outcome(o, carrier, desc)
                if o.killed == "timeout":
                    fig["hangs"] += 1
                elif o.killed:
                    fig["memory_kills"] += 1
                elif "Traceback" in o.err or "Traceback" in o.out:
                    fig["tracebacks"] += 1
                elif not found and o.code == 1:
                    fig["refused"] += 1
                    if (store / "manifest.json").read_bytes() != manifest:
                        found.append("exit 1 but the store's manifest changed")
                elif not found and o.code == 0:
                    fig["ingested"] += 1
                if found:
                    msg = f"{seed.id} / {name} ({desc}): {' | '.join(found)[:600]}"
                    if known_bug(seed.id, name):
                        fig["known"] += 1
                    else:
                        if not o.killed and "Traceback" not in o.err + o.out:
                            fig["other_failures"] += 1
                        problems.append(msg)
                shutil.rmtree(d, ignore_errors=True)  # 10,000 carriers and stores would fill the disk
    finally:
        pool.close()
        fig["wall_s"] = round(time.monotonic() - t0, 1)
        line = json.dumps(fig)
        print(f"\nfuzz nightly: {line}")
        if REPORT:
            with open(REPORT, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
    assert not problems, f"{len(problems)} failing inputs:\n" + "\n".join(problems[:20])
