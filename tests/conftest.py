"""Shared test fixtures: paths to real dumps (skip loudly when ../shared is absent) and a CLI runner."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "real_traces"
SAMPLES = ROOT / "sample_traces"
MSI = SHARED / "Ascend__msinsight"
LEVEL1 = MSI / "test/data/pytorch/text/level1"
LEVEL0 = MSI / "test/data/pytorch/text/level0"
DB_LEVEL1 = MSI / "test/data/pytorch/db/level1"
HTA = SHARED / "facebookresearch__HolisticTraceAnalysis/tests/data"

# the cluster tests' session fixtures (a moto S3 server, a local Ray): tests/_cluster.py
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cluster import moto_endpoint, ray_local, s3_root  # noqa: E402,F401


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="tests/test_golden.py writes tests/golden/ from the current outputs instead of comparing",
    )


def write_two_kernel_run(store: Path, run: str = "r") -> Path:
    """A store holding one run of two kernels (a and b), written through the store's own writer and commit."""
    from traceql.rank_writer import RankWriter
    from traceql.store import Store

    s = Store(store)
    staging = s.new_staging()
    w = RankWriter(staging, run, 0)
    w.write("kernels", {"name": ["a", "b"], "ts_ns": [1, 2], "dur_ns": [10, 20]})
    w.close()
    s.commit(
        staging,
        run,
        {
            "source": "t",
            "format": "canonical",
            "ranks": [0],
            "ranks_count": 1,
            "rows": w.rows,
            "files": w.files,
        },
    )
    return store


def real(path: Path) -> Path:
    """A real dump under ../shared/real_traces, or skip the test saying which file is missing."""
    if not path.exists():
        pytest.skip(f"real trace not available: {path} (../shared/real_traces is absent on this machine)")
    return path


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"CliResult(code={self.code}, out={self.out[-2000:]!r}, err={self.err[-2000:]!r})"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Run `traceql ARGS...` in-process through the real entry point (error boundary included)."""
    from traceql.cli import main

    def run(*args: str) -> CliResult:
        monkeypatch.setattr(sys, "argv", ["traceql", *map(str, args)])
        capsys.readouterr()
        code = 0
        try:
            main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        cap = capsys.readouterr()
        return CliResult(code, cap.out, cap.err)

    return run
