"""Parsers: profiler dumps -> canonical tables. See base.py for the protocol and the registry."""

from .base import Parser, Unit, detect, get, register, registry

__all__ = ["Parser", "Unit", "detect", "get", "register", "registry"]
