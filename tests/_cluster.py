"""Session fixtures for the cluster tests: a real S3-compatible server (moto's server mode on 127.0.0.1, a
random port) and a real local Ray (2 CPUs, loopback, no dashboard). Each is started once per session (a
Ray start costs seconds) and skipped, with the reason, only where its package is not installed."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    server = pytest.importorskip(
        "moto.server", reason="moto[server] not installed (pip install -e '.[test]')"
    )
    pytest.importorskip("s3fs", reason="s3fs not installed (pip install -e '.[s3]')")
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    srv = server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    url = f"http://{host}:{port}"
    saved = {k: os.environ.get(k) for k in _ENV}
    # the environment, not storage options: Ray workers inherit it, as nodes of a real cluster would have theirs
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=url,
    )
    try:
        yield url
    finally:
        srv.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL")


@pytest.fixture
def s3_root(moto_endpoint: str) -> str:
    """A fresh bucket on the moto server; returns a store URL inside it."""
    import s3fs

    bucket = f"tq-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem().mkdir(bucket)
    return f"s3://{bucket}/traceql"


@pytest.fixture(scope="session")
def ray_local(moto_endpoint: str) -> Iterator[object]:
    ray = pytest.importorskip("ray", reason="ray not installed (pip install -e '.[ray]')")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
