"""Write tests/slow_ids.txt: the tests that took `--threshold` seconds or more (setup + call + teardown) in a
fast-loop run's `--durations=0` output, so the fast loop (`pytest -m "not slow"`) stays under two minutes on
the 2-core machine. The full suite (CI) still runs them; tests/conftest.py marks every listed id slow.

    python -m pytest -m "not slow" -q -n 2 --dist loadfile --durations=0 -p no:cacheprovider > fast.log
    python tools/slow_tests.py fast.log --threshold 1.0

Ids already listed stay listed (a run of the fast loop no longer sees them); ids of tests that no longer
exist are dropped. Say the machine's load beside the numbers in docs/contributing.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "slow_ids.txt"
LINE = re.compile(r"^\s*([0-9.]+)s (?:call|setup|teardown)\s+(\S+)")


def durations(log: Path) -> dict[str, float]:
    """Seconds per test id (setup + call + teardown) from pytest's --durations output."""
    out: dict[str, float] = {}
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        m = LINE.match(line)
        if m:
            out[m.group(2)] = out.get(m.group(2), 0.0) + float(m.group(1))
    return out


def listed() -> set[str]:
    if not OUT.exists():
        return set()
    return {
        s.strip() for s in OUT.read_text(encoding="utf-8").splitlines() if s.strip() and not s.startswith("#")
    }


def collected() -> set[str]:
    """Every test id pytest collects now (slow ones included)."""
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return {s for s in r.stdout.splitlines() if "::" in s}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", type=Path, help="a fast-loop run's output with --durations=0")
    ap.add_argument("--threshold", type=float, default=1.0, help="seconds (default 1.0)")
    a = ap.parse_args(argv)
    slow = {t for t, s in durations(a.log).items() if s >= a.threshold} | listed()
    slow &= collected()
    head = [
        f"# tests measured at {a.threshold:g} s or more in the fast loop (setup + call + teardown, one worker of",
        "# `pytest -m 'not slow' -n 2 --dist loadfile --durations=0`); tests/conftest.py marks them slow, CI runs",
        f"# them. Written by tools/slow_tests.py on {dt.date.today().isoformat()}; rerun it after a measurement.",
    ]
    OUT.write_text("\n".join(head + sorted(slow)) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(slow)} ids")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
