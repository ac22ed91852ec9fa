"""Issue 47, break 5: a Ray cluster that is unreachable or has lost its nodes ends an ingest in one line naming
the address, within --ray-timeout / TRACEQL_RAY_TIMEOUT, with the store untouched (a dead local node used to
wait 125 s and print `internal error: GetTimeoutError`).

A real dead cluster costs minutes and a Ray start on a shared 2-core machine, so `ray` is replaced by a fake
module that behaves as Ray does in each case: `get(timeout=...)` raises GetTimeoutError when the actor cannot
start (it raises at once for any timeout, so the old 120 s wait shows as the old message, not as a slow test),
`init` to an unreachable address blocks (Ray retries its GCS connection for minutes), `wait` returns nothing
and `nodes()` lists no live node after the node died. The real-Ray path is tests/test_cluster*.py's."""

from __future__ import annotations

import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SAMPLES

DUMP = SAMPLES / "torch_npu_2rank"


class _GetTimeoutError(Exception):
    pass


class _RayError(Exception):
    pass


class _Remote:
    def __init__(self, fake: FakeRay, target: Any) -> None:
        self.fake, self.target = fake, target

    def options(self, **_kw: Any) -> _Remote:
        return self

    def remote(self, *a: Any) -> Any:
        if isinstance(self.target, type):  # an actor: its methods' .remote() give refs
            return types.SimpleNamespace(
                values=types.SimpleNamespace(remote=lambda: "actor-ref"),
                set=types.SimpleNamespace(remote=lambda *_a: None),
            )
        ref = object()
        self.fake.pending.append(ref)
        return ref


class FakeRay(types.ModuleType):
    """The calls traceql.executors.ray makes, in one of three broken states."""

    def __init__(self, state: str) -> None:
        super().__init__("ray")
        self.state = state
        self.pending: list[Any] = []
        self.initialised = False
        self.get_timeouts: list[float | None] = []
        self.exceptions = types.SimpleNamespace(GetTimeoutError=_GetTimeoutError, RayError=_RayError)
        self.released = threading.Event()

    def is_initialized(self) -> bool:
        return self.initialised

    def init(self, address: str | None = None, **_kw: Any) -> None:
        if self.state == "unreachable":
            self.released.wait(
                30
            )  # Ray retries an unreachable GCS for minutes; bounded here for the old code
            raise ConnectionError(f"Failed to connect to GCS at address {address} within 30 seconds")
        self.initialised = True

    def remote(self, *args: Any, **_kw: Any) -> Any:
        if args and callable(args[0]):
            return _Remote(self, args[0])
        return lambda target: _Remote(self, target)

    def get(self, ref: Any, timeout: float | None = None) -> Any:
        self.get_timeouts.append(timeout)
        if ref == "actor-ref":
            if self.state == "dead-node":  # no live node to start the progress actor on
                raise _GetTimeoutError("Get timed out: some object(s) not ready.")
            return [0] * 64
        raise AssertionError("no task ever finishes in these states")

    def wait(self, refs: list[Any], num_returns: int = 1, timeout: float | None = None) -> Any:
        if timeout is None:  # the old code waited forever here: fail the test instead of hanging it
            raise AssertionError("ray.wait without a timeout would wait forever for a lost node")
        time.sleep(min(timeout, 0.05))
        return [], refs

    def nodes(self) -> list[dict[str, Any]]:
        return [{"Alive": False, "Resources": {"memory": 1 << 30}}]

    def cancel(self, _ref: Any, force: bool = False) -> None:
        pass

    def shutdown(self) -> None:
        self.initialised = False


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> FakeRay:
    fake = FakeRay(request.param)
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setenv("TRACEQL_RAY_TIMEOUT", "1")
    yield fake
    fake.released.set()


def _ingest(cli: Any, store: Path, *extra: str) -> tuple[Any, float]:
    if not DUMP.is_dir():
        pytest.skip(f"{DUMP} missing")
    t0 = time.monotonic()
    r = cli("ingest", DUMP, "--store", store, "-q", "--no-check", "--executor", "ray", *extra)
    return r, time.monotonic() - t0


def _one_error(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "internal error" not in err and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("fake_ray", ["dead-node"], indirect=True)
def test_dead_local_node_is_one_line_within_the_timeout(cli: Any, tmp_path: Path, fake_ray: FakeRay) -> None:
    store = tmp_path / "store"
    r, took = _ingest(cli, store)
    assert r.code == 1, r
    line = _one_error(r.err)
    assert "Ray at a local Ray" in line and "within 1 s" in line and "--ray-timeout" in line, line
    assert fake_ray.get_timeouts[0] == 1.0 and took < 30
    assert not (store / "runs").exists() or not any((store / "runs").iterdir())


@pytest.mark.parametrize("fake_ray", ["unreachable"], indirect=True)
def test_unreachable_cluster_is_one_line_naming_the_address(
    cli: Any, tmp_path: Path, fake_ray: FakeRay
) -> None:
    store = tmp_path / "store"
    r, took = _ingest(cli, store, "--address", "10.9.9.9:6379", "--ray-timeout", "2")
    assert r.code == 1, r
    line = _one_error(r.err)
    assert "Ray at 10.9.9.9:6379: no connection within 2 s" in line, line
    assert took < 15, took
    assert not (store / "runs").exists() or not any((store / "runs").iterdir())


@pytest.mark.parametrize("fake_ray", ["lost-node"], indirect=True)
def test_node_lost_while_ranks_are_pending_is_one_line(cli: Any, tmp_path: Path, fake_ray: FakeRay) -> None:
    store = tmp_path / "store"
    r, took = _ingest(cli, store, "--address", "auto")
    assert r.code == 1, r
    line = _one_error(r.err)
    assert "Ray at auto: no live node to run the pending tasks within 1 s" in line, line
    assert took < 30, took
    assert not (store / "runs").exists() or not any((store / "runs").iterdir())


@pytest.mark.parametrize("value", ["0", "-5", "inf", "nan", "1e308"])
def test_ray_timeout_option_is_validated(cli: Any, tmp_path: Path, value: str) -> None:
    r = cli("ingest", DUMP, "--store", tmp_path / "s", "--executor", "ray", "--ray-timeout", value)
    assert r.code == 2 and "--ray-timeout" in r.err and "out of range" in r.err, r
