"""RL runs: the verdict speaks per role (verl actor_update, actor_compute_log_prob, rollout ...) when the run's
ranks came from two or more role folders (queries/roles.sql): each role's ranks, device time and busy share,
and which role holds the device longest. One run verdict would average a training role with a generation
role, which saturate different things.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .context import ROLES

if TYPE_CHECKING:  # pragma: no cover
    from ..rows import RolesRow
    from .context import Context


def of(ctx: Context) -> list[RolesRow] | None:
    rows = ctx.read(ROLES)
    named = [r for r in rows if r["role"] != "(none)"]
    return rows if len(named) >= 2 else None


def text(rows: list[RolesRow]) -> str:
    top = max(rows, key=lambda r: r["kernel_ns"] or 0)
    parts = [
        f"{r['role']} ({r['ranks']} rank(s) {r['rank_list']}): {(r['kernel_ns'] or 0) / 1e6:.2f} ms of device work, "
        f"busy {(r['busy_share'] or 0):.0%} of its span"
        for r in rows
    ]
    return f"per role: {'; '.join(parts)}; the most device time is in {top['role']}"


def attach(ctx: Context, verdict: dict[str, Any]) -> dict[str, Any]:
    rows = of(ctx)
    if not rows:
        return verdict
    return {**verdict, "roles": rows, "headline": f"{verdict.get('headline', '')}; {text(rows)}"}
