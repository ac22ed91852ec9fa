"""The rules file (traceql/rules.toml): thresholds, messages, suggestions and the optimisation each check maps to."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import TraceQLError
from .model import severity_rank
from .text import render

RULES_PATH = Path(__file__).resolve().parent.parent / "rules.toml"


class Rule:
    """One [rules.<id>] table of rules.toml."""

    def __init__(self, rid: str, data: dict[str, Any], common: dict[str, Any]) -> None:
        self.id = rid
        self.data = data
        self.common = common
        for key in ("step", "title", "optimisation", "query", "suggestion", "messages"):
            if key not in data:
                raise TraceQLError(f"rules.toml: rule {rid} lacks {key!r}")

    def __getitem__(self, key: str) -> Any:
        if key not in self.data:
            raise TraceQLError(f"rules.toml: rule {self.id} lacks {key!r}")
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.data.get("params", {}))

    def message(self, variant: str, values: dict[str, Any]) -> str:
        msgs = self.data["messages"]
        if variant not in msgs:
            raise TraceQLError(f"rules.toml: rule {self.id} has no message {variant!r}")
        return render(msgs[variant], values, f"rules.{self.id}.messages.{variant}")

    def severity(self, share: float | None) -> str:
        """Fixed `severity`, or the ladder (rule's own or the common one) applied to the saving share."""
        sev = self.data.get("severity", "ladder")
        if sev != "ladder":
            severity_rank(sev)
            return str(sev)
        ladder = self.data.get("ladder", self.common["severity"]["ladder"])
        if share is None:
            return str(self.common["severity"].get("unknown", "low"))
        for threshold, level in ladder:
            if share >= threshold:
                return str(level)
        return str(ladder[-1][1])


@lru_cache(maxsize=8)
def _load_rules_cached(path: str, mtime_ns: int, size: int) -> dict[str, Any]:
    try:
        import tomllib  # Python >= 3.11
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef, import-not-found, unused-ignore]
        except ModuleNotFoundError:
            raise TraceQLError(
                "traceql findings needs Python >= 3.11 or the tomli package (pip install tomli)"
            ) from None
    try:
        with open(path, "rb") as fh:
            data: dict[str, Any] = tomllib.load(fh)
            return data
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise TraceQLError(f"{path}: cannot read the findings rules ({e})") from None


def load_rules(path: str | Path | None = None) -> dict[str, Any]:
    """The rules file as a dict (default traceql/rules.toml), validated against the checks this module has."""
    p = Path(path or RULES_PATH)
    try:
        st = p.stat()
    except OSError as e:
        raise TraceQLError(f"{p}: cannot read the findings rules ({e})") from None
    from . import checks as _register_checks  # noqa: F401 - the checks register themselves on import
    from .registry import CHECKS

    data = _load_rules_cached(str(p), st.st_mtime_ns, st.st_size)
    rules = data.get("rules", {})
    missing = [c for c in CHECKS if c not in rules]
    unknown = [r for r in rules if r not in CHECKS]
    if missing or unknown:
        raise TraceQLError(
            f"rules file {path or RULES_PATH}: rules without a check {unknown}, checks without a rule {missing}"
        )
    for rid, r in rules.items():
        Rule(rid, r, data)
    return data
