"""The report's Vega bundle is cached on disk (issue 48: bundling cost ~1.5 of a report's CPU-seconds).

Expected values are structural: how often vl-convert is asked to bundle (counted by a wrapper around the real
function), the cached file's bytes against the freshly bundled text, and the cache's folder."""

from __future__ import annotations

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
    page.js_bundle.cache_clear()
    yield calls
    page.js_bundle.cache_clear()


def test_the_second_process_reads_the_bundle_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[int]
) -> None:
    monkeypatch.setenv("TRACEQL_CACHE_DIR", str(tmp_path / "c"))
    first = page.js_bundle()
    assert len(counted) == 1
    files = list((tmp_path / "c").iterdir())
    assert [f.name.startswith("vega-bundle-") and f.suffix == ".js" for f in files] == [True]
    assert files[0].read_text(encoding="utf-8") == first
    page.js_bundle.cache_clear()  # as a new process would start
    assert page.js_bundle() == first
    assert len(counted) == 1  # read from the file, not bundled again


def test_an_unwritable_or_disabled_cache_still_bundles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[int]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")  # a folder cannot be made under a file, even by root
    monkeypatch.setenv("TRACEQL_CACHE_DIR", str(blocker / "c"))
    assert "vegaEmbed" in page.js_bundle()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # no stray temporary file
    page.js_bundle.cache_clear()
    monkeypatch.setenv("TRACEQL_CACHE_DIR", "")  # off
    assert page.bundle_cache_dir() is None
    assert "vegaEmbed" in page.js_bundle()
    assert len(counted) == 2


def test_the_default_folder_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACEQL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert page.bundle_cache_dir() == tmp_path / "traceql"
