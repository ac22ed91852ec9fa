"""The report's Vega bundle is kept in the store between processes (issue 48: bundling cost ~1.5 of a
report's CPU-seconds), and nowhere else: traceql writes only into the store and the output the user named.

Expected values are structural: how often vl-convert is asked to bundle (counted by a wrapper around the real
function), the kept file's bytes against the freshly bundled text, and where the file is."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from traceql.report import page


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    import vl_convert as vlc

    calls: list[int] = []
    real = vlc.javascript_bundle

    def counting(*a: Any, **k: Any) -> str:
        calls.append(1)
        return str(real(*a, **k))

    monkeypatch.setattr(vlc, "javascript_bundle", counting)
    page.forget_bundle()
    yield calls
    page.forget_bundle()


def test_the_second_process_reads_the_bundle_from_the_store(tmp_path: Path, counted: list[int]) -> None:
    (tmp_path / "st").mkdir()  # an empty folder is an empty store
    cache = page.bundle_cache_dir(tmp_path / "st")
    assert cache is not None
    assert cache == tmp_path / "st" / ".cache"
    first = page.js_bundle(cache)
    assert len(counted) == 1
    files = list(cache.iterdir())
    assert [f.name.startswith("vega-bundle-") and f.suffix == ".js" for f in files] == [True]
    assert files[0].read_text(encoding="utf-8") == first
    page.forget_bundle()  # as a new process would start
    assert page.js_bundle(cache) == first
    assert len(counted) == 1  # read from the file, not bundled again
    assert page.js_bundle(None) == first and page.js_bundle(tmp_path / "other") == first
    assert len(counted) == 1  # once this process has it, any store gets it without bundling


def test_no_cache_bundles_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[int]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert "vegaEmbed" in page.js_bundle(None)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no user cache folder, no stray file
    monkeypatch.setenv("TRACEQL_BUNDLE_CACHE", "0")
    assert page.bundle_cache_dir(tmp_path / "st") is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_store_keeps_no_cache(tmp_path: Path) -> None:
    (tmp_path / "st").mkdir()
    (tmp_path / "st").chmod(0o555)
    try:
        assert page.bundle_cache_dir(tmp_path / "st") is None
    finally:
        (tmp_path / "st").chmod(0o755)
