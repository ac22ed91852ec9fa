"""The observed-ceiling check worded for findings and the report: when a kernel measurably moved more than the
device preset's peak (PMU bytes, between 1x and 10x the peak), the preset cannot be this device's.

The logic is queries/checks/observed_ceiling_above_preset.sql (also run by `traceql check` and every ingest with
the detected device's preset); here it runs with the peaks the analysis actually used (a --device preset, a
platform_config ini, overrides), so the verdict and the note agree with the numbers beside them.
"""

from __future__ import annotations

from typing import Any

CHECK = "observed_ceiling_above_preset"


def observed_ceiling(con: Any, run_id: str, peaks: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of the check for `run_id` under `peaks` (peak_hbm_bps / peak_l2_bps / peak_ub_bps); [] when no peak
    is known or the check cannot run (it is a diagnosis aid: never an error of its own)."""
    import duckdb

    from . import checks

    if not any(peaks.get(k) for k in ("peak_hbm_bps", "peak_l2_bps", "peak_ub_bps")):
        return []
    chk = next((c for c in checks.load_checks() if c.name == CHECK), None)
    if chk is None:
        return []
    params = {"run_id": run_id, **{k: peaks.get(k) for k in ("peak_hbm_bps", "peak_l2_bps", "peak_ub_bps")}}
    try:
        cur = con.cursor()
        try:
            res = cur.execute(chk.sql, params)
            names = [d[0] for d in res.description]
            return [dict(zip(names, r, strict=True)) for r in res.fetchall()]
        finally:
            cur.close()
    except duckdb.Error:
        return []


def ceiling_note(rows: list[dict[str, Any]]) -> str:
    """One sentence for the peaks note, naming the worst excess; '' when there is none."""
    if not rows:
        return ""
    top = max(rows, key=lambda r: r["times_peak"])
    return (
        f"the device preset is wrong for this device: rank {top['rank']}'s kernel {top['name']} measurably moved "
        f"{top['ceiling_bps'] / 1e12:.3g} TB/s through {top['level']}, {top['times_peak']:.2f}x the preset's peak "
        f"({top['preset_peak_bps'] / 1e12:.3g} TB/s); pass the right --device (or a platform_config ini), since "
        "every utilisation here is a share of that peak"
    )


__all__ = ["CHECK", "ceiling_note", "observed_ceiling"]
