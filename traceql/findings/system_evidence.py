"""Evidence from the msprof system tables (docs/formats.md Part C) that the verdict cites beside the step split:
the links (NETDEV_STATS PFC pause frames inside communication: a congested link pauses its senders, a late peer
does not) and the host (host_sys CPU usage: one saturated CPU behind an idle device). Pure functions of the
context's reads; absent tables give None and nothing is said."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..rows import HostUsageRow, LinkCongestionRow
from .context import Read

if TYPE_CHECKING:  # pragma: no cover
    from .context import Context

LINKS = Read("link_congestion", LinkCongestionRow)
HOST = Read("host_usage", HostUsageRow)


def links(ctx: Context) -> dict[str, Any] | None:
    """{"congestion_seen", "ranks" (with PFC inside communication), "checked_ranks", "grade"} or None."""
    rows = ctx.read(LINKS)
    if not rows:
        return None
    seen = sorted(rank for r in rows if r["congestion_seen"] and (rank := r["rank"]) is not None)
    return {
        "congestion_seen": bool(seen),
        "ranks": seen,
        "checked_ranks": sorted(rank for r in rows if (rank := r["rank"]) is not None),
        "grade": "sampled",
        "detail": "NETDEV_STATS samples: PFC pause frames inside the rank's communication ops",
    }


def links_text(lk: dict[str, Any]) -> str:
    if lk["congestion_seen"]:
        ranks = ", ".join(map(str, lk["ranks"]))
        return f"links: PFC pause frames inside communication on rank(s) {ranks} (NETDEV_STATS): a congested link"
    return (
        "links: no PFC pause frames inside communication on any of "
        f"{len(lk['checked_ranks'])} rank(s) (NETDEV_STATS): the waiting is for peers, not a congested link"
    )


def host(ctx: Context) -> dict[str, Any] | None:
    """The busiest host CPU over the ranks (host_usage), or None without host_sys CPU samples."""
    # every row names its rank (the query groups by it); the tests on rank only narrow its type
    cpu = [
        (busiest, rank, r)
        for r in ctx.read(HOST)
        if r["resource"] == "Host CPU"
        and (busiest := r["busiest_mean"]) is not None
        and (rank := r["rank"]) is not None
    ]
    if not cpu:
        return None
    _busiest, _rank, top = max(cpu, key=lambda c: (c[0], -c[1]))
    return {
        "rank": top["rank"],
        "busiest_cpu": top["busiest_channel"],
        "busiest_mean_usage": top["busiest_mean"],
        "mean_usage": top["mean_usage"],
        "grade": "sampled",
        "detail": "host_sys CPU_USAGE samples",
    }


def host_text(h: dict[str, Any]) -> str:
    return (
        f"host: CPU {h['busiest_cpu']} of rank {h['rank']} busy {h['busiest_mean_usage']:.0%} on average "
        f"(all CPUs {h['mean_usage'] or 0:.0%}; host_sys samples)"
    )
