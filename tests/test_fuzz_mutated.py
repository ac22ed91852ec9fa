"""Mutated real dumps through the real CLI (the corpus of tests/_fuzz_harness.py's mutators). Harness: tests/_fuzz_harness.py."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from tests._fuzz_harness import (  # noqa: F401 - pool and print_totals are fixtures
    FUZZ_SEED,
    MUTATORS,
    ONLY,
    PER_SEED,
    SEEDS,
    TALLY,
    Pool,
    Seed,
    base_store,
    check_outcome,
    fingerprint,
    known_bug,
    make_carrier,
    pool,
    print_totals,
    table_counts,
)

# ---------------------------------------------------------------------------------------------------------
# The corpus test


@pytest.mark.skipif(not SEEDS, reason="no seed dumps (../shared/real_traces and sample_traces/ both absent)")
@pytest.mark.parametrize("seed", SEEDS, ids=[s.id for s in SEEDS])
def test_mutated_dump(seed: Seed, tmp_path: Path, pool: Pool) -> None:  # noqa: F811 - the fixture
    TALLY.seeds += 1
    rng = random.Random(f"{FUZZ_SEED}:{seed.id}")
    applicable = [m for m in MUTATORS if seed.kind in m.kinds and (not ONLY or m.name in ONLY)]
    if not applicable:
        pytest.skip(f"no mutator of TRACEQL_FUZZ_MUTATORS applies to a {seed.kind} seed")
    # baseline: the unmutated carrier (run alongside the mutations), for the value-preserving comparisons
    bstore = base_store(tmp_path / "store_base")
    bcarrier, _ = make_carrier(seed, tmp_path / "c_base")

    # choose mutations: cycle through the applicable mutators in a seeded random order
    jobs = []
    order = applicable[:]
    rng.shuffle(order)
    for i in range(PER_SEED):
        if not order:
            break
        m = order[i % len(order)]
        carrier, target = make_carrier(seed, tmp_path / f"c{i}")
        try:
            desc = m.fn(random.Random(f"{FUZZ_SEED}:{seed.id}:{i}"), target)
        except (ValueError, UnicodeDecodeError, sqlite3.Error, OSError, EOFError):
            desc = None
        if desc is None:
            # not applicable (e.g. the file is not valid JSON to begin with): fall back to a byte-level mutator
            m = next(mm for mm in MUTATORS if mm.name == "truncate")
            carrier, target = make_carrier(seed, tmp_path / f"c{i}b")
            desc = m.fn(random.Random(f"{FUZZ_SEED}:{seed.id}:{i}"), target)
        store = base_store(tmp_path / f"store{i}")
        jobs.append((m, desc, carrier, store, (store / "manifest.json").read_bytes()))

    argvs = [
        ["ingest", str(j[2]), "--store", str(j[3]), "--name", "fz", "-q", "-j", "1", "--no-check"]
        for j in jobs
    ]
    b, *outcomes = pool.map(
        [
            [
                "ingest",
                str(bcarrier),
                "--store",
                str(bstore),
                "--name",
                "seed",
                "-q",
                "-j",
                "1",
                "--no-check",
            ],
            *argvs,
        ]
    )
    base_fp = fingerprint(bstore, "seed") if b.code == 0 else None
    base_rows = table_counts(bstore, "seed") if b.code == 0 else None
    problems = [f"[unmutated] {p}" for p in check_outcome(b, bcarrier, "seed")]
    results = [(*j, o) for j, o in zip(jobs, outcomes, strict=True)]

    known: list[str] = []
    for m, desc, carrier, store, manifest, o in results:
        TALLY.inputs += 1
        TALLY.max_rss_mb = max(TALLY.max_rss_mb, o.rss_mb)
        TALLY.max_wall_s = max(TALLY.max_wall_s, o.wall_s)
        stat = TALLY.by_mutator.setdefault(m.name, [0, 0, 0])
        stat[0] += 1
        found = check_outcome(o, carrier, desc)
        if not found and o.code == 0 and m.flagged and "warning:" not in o.err:
            found.append(
                "values no profiler writes were accepted without a warning (silently changed or dropped)"
            )
        if not found and o.code == 1:
            stat[2] += 1
            TALLY.refused += 1
            if (store / "manifest.json").read_bytes() != manifest:
                found.append("exit 1 but the store's manifest changed")
            elif (store / "runs").is_dir() and any(
                p.name.startswith("fz.") for p in (store / "runs").iterdir()
            ):
                found.append("exit 1 but a runs/fz.* generation dir exists")
            if m.preserving and base_fp is not None:
                TALLY.preserving_refused.append(f"{seed.id} {m.name}: {o.err.strip()[-160:]}")
        elif not found and o.code == 0:
            stat[1] += 1
            TALLY.ingested += 1
            try:
                from traceql.checks import run_checks

                broken = [r["name"] for r in run_checks(store, "fz") if r["error"]]
                if broken:
                    found.append(f"checks could not run: {broken}")
                if m.preserving and base_fp is not None:
                    fp = fingerprint(store, "fz")
                    if fp != base_fp:
                        diff = {
                            t: (base_fp.get(t), fp.get(t))
                            for t in set(fp) | set(base_fp)
                            if fp.get(t) != base_fp.get(t)
                        }
                        found.append(f"value-preserving mutation changed the data: {str(diff)[:600]}")
                if m.name == "truncate" and base_rows is not None:
                    grew = {t: n for t, n in table_counts(store, "fz").items() if n > base_rows.get(t, 0)}
                    if grew:
                        found.append(
                            f"truncated input produced more rows than the whole file: {grew} vs {base_rows}"
                        )
            except Exception as e:  # noqa: BLE001 - any failure to read the stored run is a finding
                found.append(f"stored run unreadable: {type(e).__name__}: {e}")
        if found:
            cmd = f"traceql ingest {carrier} --store {store} --name fz -q -j 1 --no-check"
            msg = f"{seed.id} / {m.name} ({desc}): {' | '.join(found)}\n    command: {cmd}"
            reason = known_bug(seed.id, m.name)
            if reason:
                known.append(f"{msg}\n    known: {reason}")
            else:
                problems.append(msg)
    TALLY.known += known
    TALLY.failures += problems
    if problems:
        # keep the carriers of failing inputs for a human to replay (pytest keeps tmp_path of recent runs)
        pytest.fail("\n".join(problems), pytrace=False)
    if known:
        pytest.xfail("\n".join(known))
