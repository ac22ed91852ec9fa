"""The checks: each registers itself with the rule it implements and the queries it reads.

    @check("operator_fusion", FUSION)
    def check_operator_fusion(ctx: Context, rule: Rule) -> Finding: ...

The planner (traceql.findings.evaluate) runs every declared read up front, concurrently; a query a check runs
without declaring it still works but is recorded in Report.late_queries (a test keeps that list empty).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .context import COMMON_READS, Read

if TYPE_CHECKING:  # pragma: no cover
    from .context import Context
    from .model import Finding
    from .rules import Rule

CheckFn = Callable[["Context", "Rule"], "Finding"]


@dataclass(frozen=True)
class CheckDef:
    id: str
    fn: CheckFn
    reads: tuple[Read[Any], ...]

    def __call__(self, ctx: Context, rule: Rule) -> Finding:
        return self.fn(ctx, rule)


CHECKS: dict[str, CheckDef] = {}


def check(rule_id: str, *reads: Read[Any]) -> Callable[[CheckFn], CheckFn]:
    """Register the decorated function as the check of rules.<rule_id>, reading `reads` (and the reads every
    finding makes: the step split and the HBM utilisation, for its shares and its grade)."""

    def register(fn: CheckFn) -> CheckFn:
        if rule_id in CHECKS:
            raise ValueError(f"two checks for rule {rule_id!r}")
        CHECKS[rule_id] = CheckDef(rule_id, fn, (*COMMON_READS, *reads))
        return fn

    return register
