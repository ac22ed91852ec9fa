"""The traceql version (one place: the package, the store manifest and reports read it here)."""

__version__ = "0.1.0"
