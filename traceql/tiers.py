"""Tiered ingest for 1,000+ ranks (`traceql ingest --ranks light`): every rank's light tables, full detail only
for the ranks that tell the story.

Light tables (LIGHT): steps, communication (comm_ops, comm_bandwidth, comm_matrix), counters and run_meta:
what the cross-rank analysis (collective matching, waits, skew, the HBM timeline) reads. Detail (kernels,
host ops, flows, memory, L2, op stats) is kept for the ranks `pick` marks from the light tables: in the whole
job and in each communication group, the slowest, the fastest and the median rank by *busy* time per step
(step time minus the time it waited in collectives: in a synchronous job every rank's step time is the
same, the busy time is what differs), plus the ranks asked for (`light+3,17`).

The light pass hands each unit the option ("tables", "light"): the torch_npu text parser then skips the
files that feed only detail tables (kernel_details.csv but its header, memory, L2, op statistics; it still
reads trace_view.json, whose counters and step windows are light), and whatever a parser writes beyond the
light tables is dropped (the other parsers parse in full). The marked ranks are parsed a second time in full
for their detail.
"""

from __future__ import annotations

from typing import Any

from .errors import TraceQLError


def _sql_path_list(paths: list[str]) -> str:
    from ._duck import glob_literal

    return "[" + ", ".join("'" + glob_literal(p).replace("'", "''") + "'" for p in paths) + "]"


LIGHT = frozenset({"steps", "comm_ops", "comm_bandwidth", "comm_matrix", "counters", "run_meta"})


def parse_spec(spec: str | None) -> tuple[bool, list[int]]:
    """`light` or `light+3,17` -> (tiered, extra detail ranks); None/`all` -> (False, [])."""
    if spec is None or spec == "all":
        return False, []
    head, _, extra = spec.partition("+")
    if head != "light":
        raise TraceQLError(f"--ranks {spec!r}: expected 'all', 'light' or 'light+R1,R2' (rank numbers)")
    try:
        ranks = [int(x) for x in extra.split(",") if x.strip()]
    except ValueError as e:
        raise TraceQLError(f"--ranks {spec!r}: the ranks after '+' must be integers, comma separated") from e
    return True, ranks


def pick(con: Any, steps_files: list[str], comm_files: list[str], extra: list[int]) -> dict[str, Any]:
    """The detail ranks and why each was picked, from the light tables (a DuckDB connection that can read the
    files: local paths, or s3:// with the store's filesystem registered)."""
    if not steps_files:
        return {"ranks": sorted(set(extra)), "why": {str(r): ["asked for"] for r in extra}}
    comm = (
        f"SELECT rank, group_name, sum(coalesce(wait_ns, 0)) AS wait_ns FROM read_parquet({_sql_path_list(comm_files)}, union_by_name=true) GROUP BY ALL"
        if comm_files
        else "SELECT NULL::BIGINT AS rank, NULL::VARCHAR AS group_name, NULL::BIGINT AS wait_ns WHERE false"
    )
    rows = con.execute(
        f"""
        WITH s AS (SELECT rank, count(*) AS n, sum(dur_ns) AS step_ns
                   FROM read_parquet({_sql_path_list(steps_files)}, union_by_name=true)
                   WHERE dur_ns IS NOT NULL GROUP BY rank),
             c AS ({comm}),
             w AS (SELECT rank, sum(wait_ns) AS wait_ns FROM c GROUP BY rank),
             busy AS (SELECT s.rank, (s.step_ns - coalesce(w.wait_ns, 0)) / s.n AS busy_ns
                      FROM s LEFT JOIN w USING (rank)),
             groups AS (SELECT 'job' AS g, rank FROM busy
                        UNION SELECT DISTINCT 'group ' || group_name, rank FROM c WHERE group_name IS NOT NULL)
        SELECT g, rank, busy_ns FROM groups JOIN busy USING (rank) ORDER BY g, busy_ns, rank
        """
    ).fetchall()
    by_group: dict[str, list[tuple[int, float]]] = {}
    for g, rank, busy in rows:
        by_group.setdefault(g, []).append((int(rank), float(busy)))
    why: dict[str, list[str]] = {}
    for g, members in sorted(by_group.items()):
        picks = {"fastest": members[0], "slowest": members[-1], "median": members[(len(members) - 1) // 2]}
        for label, (rank, busy) in picks.items():
            why.setdefault(str(rank), []).append(f"{label} in {g} ({busy / 1e6:.3f} ms busy per step)")
    for r in extra:
        why.setdefault(str(r), []).append("asked for")
    return {"ranks": sorted(int(r) for r in why), "why": why}
