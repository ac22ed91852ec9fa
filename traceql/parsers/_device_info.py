"""Device facts a dump may carry beside its tables: msprof's `info.json` and CANN's `platform_config/<SoC>.ini`.

- `PROF_*/device_{id}/info.json.{id}` (msprof raw-data folder; torch_npu keeps it under `*_ascend_pt/PROF_*/`
  even with data_simplification, which removes only sqlite/summary/timeline and the analyze/output folders:
  Ascend/pytorch `torch_npu/profiler/analysis/_profiling_parser.py`, `simplify_data`). Its `DeviceInfo[0]`
  holds `aic_frequency` (MHz, the rated AI Core clock msprof uses for PMU cycles -> time: msprof
  `analysis/csrc` `CalculationElements.bwFreq` "aic_frequency read from info.json"; unit tests write
  `{"DeviceInfo": [{"hwts_frequency": "1800", "aic_frequency": "1800", "ai_core_num": 20}]}`), `ai_core_num`,
  `hwts_frequency`... -> run_meta `info.DeviceInfo.<key>`.
- CANN's platform description `platform_config/<SoC>.ini` (under the toolkit's `data/platform_config/`; a dump
  or capture folder may carry a copy): sections `[version]` (SoC_version), `[SoCInfo]` (ai_core_cnt,
  cube_core_cnt, vector_core_cnt), `[AICoreSpec]` (cube_freq MHz, cube_m_size/cube_n_size/cube_k_size,
  ub_size, l2 size...), `[AICoreMemoryRates]` (ddr_rate, l2_rate...: bytes per cycle per core). Read the way
  CANN's platform code reads it (`GetPlatformRes("AICoreSpec", "cube_freq")`, `("SoCInfo", "ai_core_cnt")`,
  `("AICoreMemoryRates", "ddr_rate" / "l2_rate")`: the ops' tiling code computes HBM bandwidth as
  freq x cores x ddr_rate, L2 as freq x cores x l2_rate). -> run_meta `platform_config.<Section>.<key>`, plus
  `platform_config.file`. traceql.devices turns these into peaks labelled "platform_config".
Both are optional; an unreadable one is skipped with a warning (they are context, not the dump's data).
"""

from __future__ import annotations

import configparser
import json
from pathlib import Path

from ..errors import BadTraceError
from ._files import read_small

INI_SECTIONS = (
    "version",
    "SoCInfo",
    "AICoreSpec",
    "AICoreMemoryRates",
    "VectorCoreSpec",
    "VectorCoreMemoryRates",
)


def _info_files(root: Path) -> list[Path]:
    pats = ("PROF_*/device_*/info.json*", "device_*/info.json*")
    return sorted({p for pat in pats for p in root.glob(pat) if p.is_file() and not p.name.endswith(".done")})


def _ini_files(root: Path) -> list[Path]:
    pats = ("platform_config/*.ini", "*/platform_config/*.ini", "*/*/platform_config/*.ini")
    return sorted({p for pat in pats for p in root.glob(pat) if p.is_file()})


def device_info_rows(root: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """(run_meta rows, warnings) from the first info.json and the first platform_config ini under `root`."""
    rows: list[tuple[str, str]] = []
    warnings: list[str] = []
    for path in _info_files(root)[:1]:
        try:
            data = json.loads(read_small(path, "msprof info.json").decode("utf-8-sig"))
        except (OSError, ValueError, BadTraceError) as e:
            warnings.append(f"{path}: not read ({e}); expected msprof's device info.json")
            continue
        devs = data.get("DeviceInfo") if isinstance(data, dict) else None
        if isinstance(devs, list) and devs and isinstance(devs[0], dict):
            rows += [
                (f"info.DeviceInfo.{k}", str(v))
                for k, v in devs[0].items()
                if not isinstance(v, (dict, list))
            ]
            rows.append(("info.file", str(path)))
    for path in _ini_files(root)[:1]:
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep the keys' case as CANN writes them
        try:
            parser.read_string(read_small(path, "platform_config ini").decode("utf-8-sig"))
        except (OSError, UnicodeDecodeError, configparser.Error, BadTraceError) as e:
            warnings.append(f"{path}: not read ({e}); expected CANN's platform_config <SoC>.ini")
            continue
        for section in INI_SECTIONS:
            if parser.has_section(section):
                rows += [(f"platform_config.{section}.{k}", v) for k, v in parser.items(section)]
        rows.append(("platform_config.file", str(path)))
    return rows, warnings


__all__ = ["device_info_rows"]
