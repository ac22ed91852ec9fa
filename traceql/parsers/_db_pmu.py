"""TASK_PMU_INFO (per-task aic-metrics, long format) -> the pivot the kernels query joins, and the typed
kernel columns (hbm/ub/l2 bytes, ratios, core times, flops) derived from the metric names this db holds.

The definitions mirror parsers/_pmu.py (the CSV side: kernel_details.csv / op_summary) so a db export and a
text export of the same job give the same typed columns; the differences are the DB's units (PmuPlan doc).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..units import GB_PER_S
from ._sqlite import lit, q

if TYPE_CHECKING:  # pragma: no cover
    from ._db_tables import DbExport

GIB = 1024**3  # msprof's DB writer turns "(GB/s)" PMU values into bytes/s with 1024^3 (UnifiedPmuProcessor)
PMU_KINDS = {"globalTaskId": "int", "name": "str", "value": "float", "timestampNs": "int"}


def _metric_base(name: str) -> tuple[str, str, str]:
    """'aic_main_mem_read_bw(GB/s)' -> ('aic_', 'main_mem_read_bw', '(GB/s)')."""
    m = re.match(r"^(aic_|aiv_)?([^(]*)(\(.*\))?$", name)
    if not m:
        return "", name, ""
    return m.group(1) or "", m.group(2).lower(), m.group(3) or ""


class PmuPlan:
    """How the typed kernel columns are derived from TASK_PMU_INFO metric names (as this db spells them).

    Definitions (per prefix p in aic_, aiv_, '' — the '' form is older chips without prefixes):
    - core time (ns): p total_time (the DB stores *_time in ns: msprof multiplies the µs values by 1000);
      aicore_time_ns = aic_total_time (or total_time), aiv_time_ns = aiv_total_time.
    - X_ratio (X in mac, vec, scalar, mte2, mte3) = max over p of p X_time / p total_time, falling back to the
      stored p X_ratio (some CANN versions stored truncated integer ratios; the times are exact).
    - bytes from a bandwidth metric = bandwidth x that prefix's core time, summed over p. Bandwidth unit: a
      '(GB/s)' suffix means GB/s; with no suffix msprof either converted GB/s to bytes/s with 1024^3 (values
      > 1e6 across the table) or left GB/s; both are brought back to the profiler's GB/s and multiplied by
      _units.GB_PER_S so db and CSV give the same bytes.
    - hbm bytes: p read/write_main_memory_datas (KB, x1024) when present (MemoryAccess), else
      p main_mem_read/write_bw (Memory). ub: p ub_read/write_bw, else the MemoryUB _mte/_vector/_scalar sum.
      l2: p l2_read/write_bw. l2_hit_rate: hits / (hits + miss_allocate) over the L2Cache counters.
      flops: p cube_fops + p vector_fops.
    """

    PREFIXES = ("aic_", "aiv_", "")

    def __init__(self, names: list[str], bw_max: dict[str, float]) -> None:
        self.by_key: dict[tuple[str, str], str] = {}
        for n in names:
            p, base, _ = _metric_base(n)
            self.by_key.setdefault((p, base), n)
        self.bw_max = bw_max
        self.used: set[str] = set()

    def m(self, p: str, base: str) -> str | None:
        n = self.by_key.get((p, base))
        if n is None:
            return None
        self.used.add(n)
        return q("m:" + n)

    def core_ns(self, p: str, fallback_dur: bool = False) -> str | None:
        """The side's core time in ns; with fallback_dur, the task duration where the time is missing (as the
        CSV parser does when the time cell is N/A)."""
        c = self.m(p, "total_time") or (self.m("", "total_time") if p == "aic_" else None)
        if c is None or not fallback_dur:
            return c
        return f'COALESCE({c}, t."endNs" - t."startNs")'

    def bw_bytes_per_s(self, p: str, base: str) -> str | None:
        col = self.m(p, base)
        if col is None:
            return None
        name = self.by_key[(p, base)]
        unit = _metric_base(name)[2].lower()
        if unit == "(gb/s)" or (not unit and self.bw_max.get(name, 0.0) <= 1e6):
            return f"({col} * {GB_PER_S!r})"
        if unit == "(mb/s)":
            return f"({col} * 1e6)"
        return f"({col} / {float(GIB)!r} * {GB_PER_S!r})"

    def bw_bytes(self, p: str, bases: tuple[str, ...]) -> str | None:
        core = self.core_ns(p, fallback_dur=True)
        if core is None:
            return None
        terms = [t for t in (self.bw_bytes_per_s(p, b) for b in bases) if t]
        if not terms:
            return None
        return f"({_sum(terms)} * {core} / 1e9)"

    def ratio(self, x: str) -> str | None:
        terms = []
        for p in self.PREFIXES:
            t, core = self.m(p, f"{x}_time"), self.core_ns(p)
            stored = self.m(p, f"{x}_ratio") or self.m(p, f"{x}_exe_ratio")
            if t and core:
                calc = f"{t} / NULLIF({core}, 0)"
                terms.append(f"COALESCE({calc}, {stored})" if stored else calc)
            elif stored:
                terms.append(stored)
        return f"greatest({', '.join(terms)})" if terms else None

    def bytes_col(self, direction: str, kind: str) -> str | None:
        terms = []
        for p in self.PREFIXES:
            if kind == "hbm":
                kb = self.m(p, f"{direction}_main_memory_datas")
                t = f"({kb} * 1024.0)" if kb else self.bw_bytes(p, (f"main_mem_{direction}_bw",))
            elif kind == "ub":
                t = self.bw_bytes(p, (f"ub_{direction}_bw",))
                if t is None:
                    parts = tuple(f"ub_{direction}_bw_{s}" for s in ("mte", "mte2", "vector", "scalar"))
                    t = self.bw_bytes(p, parts + (("fixp2ub_write_bw",) if direction == "write" else ()))
            else:  # l2
                t = self.bw_bytes(p, (f"l2_{direction}_bw",))
            if t:
                terms.append(t)
        return f"TRY_CAST(round({_sum(terms)}) AS BIGINT)" if terms else None

    def l2_hit_rate(self) -> str | None:
        hit_names = (
            "write_cache_hit",
            "r0_read_cache_hit",
            "r1_read_cache_hit",
            "read_local_l2_hit",
            "write_local_l2_hit",
        )
        miss_names = ("write_cache_miss_allocate", "r0_read_cache_miss_allocate", "r1_read_cache_miss_allocate",
                      "read_local_l2_miss", "write_local_l2_miss")  # fmt: skip
        hits = [c for p in self.PREFIXES for b in hit_names if (c := self.m(p, b))]
        miss = [c for p in self.PREFIXES for b in miss_names if (c := self.m(p, b))]
        if not hits or not miss:
            return None
        h = _sum(hits)
        return f"({h} / NULLIF({h} + {_sum(miss)}, 0))"

    def flops(self) -> str | None:
        terms = [c for p in self.PREFIXES for b in ("cube_fops", "vector_fops") if (c := self.m(p, b))]
        return _sum(terms) if terms else None

    def typed(self) -> dict[str, str]:
        out: dict[str, str | None] = {
            "aicore_time_ns": (f"TRY_CAST(round({c}) AS BIGINT)" if (c := self.core_ns("aic_")) else None),
            "aiv_time_ns": (f"TRY_CAST(round({c}) AS BIGINT)" if (c := self.core_ns("aiv_")) else None),
            "hbm_read_bytes": self.bytes_col("read", "hbm"),
            "hbm_write_bytes": self.bytes_col("write", "hbm"),
            "ub_read_bytes": self.bytes_col("read", "ub"),
            "ub_write_bytes": self.bytes_col("write", "ub"),
            "l2_read_bytes": self.bytes_col("read", "l2"),
            "l2_write_bytes": self.bytes_col("write", "l2"),
            "l2_hit_rate": self.l2_hit_rate(),
            "mac_ratio": self.ratio("mac"),
            "vec_ratio": self.ratio("vec"),
            "scalar_ratio": self.ratio("scalar"),
            "mte2_ratio": self.ratio("mte2"),
            "mte3_ratio": self.ratio("mte3"),
            "flops": self.flops(),
        }
        return {k: v for k, v in out.items() if v is not None}


def _sum(terms: list[str]) -> str:
    """Sum of nullable terms: NULL only when every term is NULL."""
    if len(terms) == 1:
        return terms[0]
    all_null = " AND ".join(f"{t} IS NULL" for t in terms)
    return f"(CASE WHEN {all_null} THEN NULL ELSE {' + '.join(f'COALESCE({t}, 0)' for t in terms)} END)"


def load_pmu(x: DbExport) -> tuple[bool, PmuPlan | None]:
    """Pivot TASK_PMU_INFO into table pmu(globalTaskId[, timestampNs], metrics MAP, "m:<name>"...).

    The long table is the biggest in an export (tasks x ~30 metrics), so it is loaded with metric *ids* and
    only the few distinct ids are resolved to names (a DuckDB-side string column there cost ~2x the memory).
    """
    if not x.has("TASK_PMU_INFO", "globalTaskId", "name", "value"):
        return False, None
    db = x.db
    by_id = not db._holds_text("TASK_PMU_INFO", "name") and "STRING_IDS" in db.schema
    x.load("TASK_PMU_INFO", dict(PMU_KINDS, name="int") if by_id else PMU_KINDS)
    with_ts = x.has("TASK_PMU_INFO", "timestampNs")
    keys = '"globalTaskId"' + (', "timestampNs"' if with_ts else "")
    ids = [
        r[0]
        for r in x.duck.execute(
            'SELECT DISTINCT "name" FROM "TASK_PMU_INFO" WHERE "name" IS NOT NULL'
        ).fetchall()
    ]
    if by_id:
        names = (
            dict(
                db.rows(
                    f"SELECT id, value FROM STRING_IDS WHERE id IN ({', '.join(str(int(i)) for i in ids)})"
                )
            )
            if ids
            else {}
        )
    else:
        names = {i: i for i in ids}
    x.duck.execute("CREATE OR REPLACE TABLE pmu_names (id VARCHAR, name VARCHAR)")
    if names:
        x.duck.executemany(
            "INSERT INTO pmu_names VALUES (?, ?)", [(str(k), str(v)) for k, v in names.items()]
        )
    x.duck.execute(
        'CREATE OR REPLACE TABLE pmu_long AS SELECT p.* EXCLUDE ("name"), n.name AS "name" '
        'FROM "TASK_PMU_INFO" p JOIN pmu_names n ON n.id = CAST(p."name" AS VARCHAR)'
    )
    x.duck.execute('DROP TABLE "TASK_PMU_INFO"')  # the long table is not needed again: free it
    x._loaded.pop("TASK_PMU_INFO", None)
    bw_max = dict(
        x.duck.execute(
            """SELECT "name", max(abs("value")) FROM pmu_long WHERE "name" LIKE '%bw%' GROUP BY 1"""
        ).fetchall()
    )
    plan = PmuPlan(sorted({str(v) for v in names.values()}), bw_max)
    plan.typed()  # marks the metric columns the typed columns need (plan.used)
    dup = x.scalar(
        f'SELECT count(*) FROM (SELECT {keys}, "name" FROM pmu_long GROUP BY ALL HAVING count(*) > 1)'
    )
    if dup:
        x.warnings.append(
            f"TASK_PMU_INFO: {dup} (task, metric) pairs have several values (globalTaskId reused without timestampNs); "
            "the largest is kept"
        )
    pivots = "".join(
        f', max("value") FILTER (WHERE "name" = {lit(n)}) AS {q("m:" + n)}' for n in sorted(plan.used)
    )
    x.duck.execute(
        f"""CREATE OR REPLACE TABLE pmu AS
        WITH one AS (SELECT {keys}, "name", max("value") AS "value" FROM pmu_long GROUP BY ALL)
        SELECT {keys},
               map_from_entries(list({{'k': "name", 'v': "value"}}) FILTER (WHERE "value" IS NOT NULL)) AS metrics
               {pivots}
        FROM one GROUP BY ALL"""
    )
    x.duck.execute("DROP TABLE pmu_long")
    return with_ts, plan
