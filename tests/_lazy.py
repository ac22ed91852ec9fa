"""A mapping whose values are computed on first read, for session fixtures that hold one expensive result per
key (findings reports, compare results): a test that reads two keys computes two, not every key."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

V = TypeVar("V")


class Lazy(Mapping[str, V]):
    def __init__(self, keys: Iterable[str], make: Callable[[str], V]) -> None:
        self._keys = list(keys)
        self._make = make
        self._done: dict[str, V] = {}

    def __getitem__(self, key: str) -> V:
        if key not in self._keys:
            raise KeyError(key)
        if key not in self._done:
            self._done[key] = self._make(key)
        return self._done[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)
