"""The public parser registry: built-ins registered through it in claim order, a registered parser claims a
path (before the built-ins with first=True), a duplicate name or a non-parser is refused, and a built-in module
that fails to import is an error instead of a parser silently skipped. Expected values: by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from traceql import parsers
from traceql.parsers import base


class Toy:
    name = "toy_test"
    description = "claims *.toy files"

    def claim(self, path: Path) -> list[parsers.Unit] | None:
        return [parsers.Unit(self.name, str(path), 0)] if path.suffix == ".toy" else None

    def parse(self, unit: parsers.Unit, out: Any) -> dict[str, Any]:
        return {}


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty registry for the test (the process's own is restored after it)."""
    monkeypatch.setattr(base, "_REGISTRY", {})
    monkeypatch.setattr(base, "_BUILTINS_LOADED", False)


def test_builtins_are_registered_in_claim_order(fresh: None) -> None:
    names = list(parsers.registry())
    # one parser per built-in module at least, in BUILTIN_MODULES order (specific before generic)
    assert names.index("torch_npu_text") < names.index("kineto")
    assert len(names) >= len(base.BUILTIN_MODULES)


def test_a_registered_parser_claims_its_files(fresh: None, tmp_path: Path) -> None:
    toy = parsers.register(Toy())
    assert parsers.get("toy_test") is toy and list(parsers.registry())[-1] == "toy_test"
    f = tmp_path / "a.toy"
    f.write_text("x")
    assert parsers.detect(f) == [parsers.Unit("toy_test", str(f), 0)]
    parsers.register(toy)  # the same parser again: no change
    assert list(parsers.registry()).count("toy_test") == 1


def test_first_puts_a_parser_before_the_builtins(fresh: None) -> None:
    parsers.register(Toy(), first=True)
    assert next(iter(parsers.registry())) == "toy_test"


def test_a_duplicate_name_or_a_non_parser_is_refused(fresh: None) -> None:
    parsers.register(Toy())
    with pytest.raises(ValueError, match="toy_test"):
        parsers.register(Toy())
    with pytest.raises(TypeError, match="not a parser"):
        parsers.register(object())  # type: ignore[arg-type]


def test_a_builtin_that_fails_to_import_is_an_error(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "BUILTIN_MODULES", [*base.BUILTIN_MODULES, "traceql.parsers.no_such_parser"])
    with pytest.raises(ModuleNotFoundError, match="no_such_parser"):
        parsers.registry()
