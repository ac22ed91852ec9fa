"""open_store picks the store class from the root (a folder: Store; a URL: ObjectStore), and Store refuses a URL
(it would otherwise create a local folder named `s3:`). Expected values: by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from traceql.errors import StoreError
from traceql.store import Store
from traceql.stores import open_store


def test_a_folder_opens_as_a_local_store(tmp_path: Path) -> None:
    st = open_store(tmp_path / "s")
    assert type(st) is Store and st.root == tmp_path / "s"
    assert open_store(f"file://{tmp_path}/s").root == tmp_path / "s"
    assert open_store(st) is st  # a store given is used as it is


def test_a_url_opens_as_an_object_store(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    st = open_store("memory://bucket/store")
    assert type(st).__name__ == "ObjectStore" and str(st.root) == "memory://bucket/store"


def test_the_default_store_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEQL_STORE", str(tmp_path / "env"))
    assert open_store(None).root == tmp_path / "env"
    pytest.importorskip("fsspec")
    monkeypatch.setenv("TRACEQL_STORE", "memory://bucket/env")
    assert type(open_store(None)).__name__ == "ObjectStore"


def test_store_refuses_a_url(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="open_store"):
        Store("s3://bucket/prefix")
    assert not Path("s3:").exists()
