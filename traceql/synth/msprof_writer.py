"""A small, deterministic msprof CLI text export (`PROF_*/mindstudio_profiler_output/`), built from formats.md.

Why synthetic: no real msprof `mindstudio_profiler_output` CSV/JSON sample is public (formats.md §10; the
msinsight copies are 0-byte placeholders), so traceql's msprof text parser is tested against this. Every header
string below is copied from formats.md, which cites where it read it:

| file (mindstudio_profiler_output/)  | header source (formats.md section -> its source tag)                                   |
|-------------------------------------|----------------------------------------------------------------------------------------|
| op_summary_<ts>.csv                 | §2.1 "msprof op_summary base (legacy python exporter, MSPROF-CFG)" with `Device_id`     |
|                                     | prepended, `Block Num`/`Mix Block Num` = the 2026 rename (§0, msprof commit 14417d42);  |
|                                     | `Model Name`/`Infer ID` left out ("not displayed ... in single-operator scenarios",     |
|                                     | MSPROF-DOC); `Context ID` as in kernel_details (§2.1); metric block = §2.2 "Memory"     |
|                                     | group with aic_/aiv_ prefixes (MSPROF-AICM, MSPROF-DOC Table 4; which prefix gets which |
|                                     | column is [I]: both sides get the full list here). Start time carries the trailing TAB  |
|                                     | (§0, MSPROF-OPSUM); shapes hold literal quotes (CSV cell `"32,3,224,224"`, §0).            |
| op_statistic_<ts>.csv               | §6 "op_statistic_*.csv (msprof)" (MSPROF-CFG/DOC)                                       |
| api_statistic_<ts>.csv              | §6 "api_statistic.csv" (`host` in Device_id for host rows, MSPROF-DOC)                  |
| task_time_<ts>.csv                  | §6 "task_time_*.csv" new doc form (MSPROF-DOC)                                          |
| hbm_<ts>.csv                        | §6 "hbm_*.csv / ddr_*.csv" (MSPROF-CFG/DOC)                                             |
| npu_mem_<ts>.csv                    | §6 "npu_mem_*.csv (msprof)" (MSPROF-CFG), values in KB                                  |
| memory_record_<ts>.csv              | §6 "memory_record_*.csv (msprof)", KB not MB (§9 item 9)                                |
| operator_memory_<ts>.csv            | §6 "operator_memory_*.csv (msprof)", KB                                                 |
| npu_module_mem_<ts>.csv             | §6 "npu_module_mem.csv" with msprof's `(KB)`; `-1` = only the release was captured     |
| l2_cache_<ts>.csv                   | §6 "l2_cache.csv" with `Device_id` prepended (msprof)                                   |
| communication_statistic_<ts>.csv    | §5.4 (MSPROF-CFG/DOC)                                                                   |
| msprof_<ts>.json                    | §3: array root, `ts` as a 3-decimal string, `dur` a number; process names `CANN`,        |
|                                     | `Ascend Hardware` (tid = stream), `Communication` (msprof's name for HCCL, MSPROF-DOC), |
|                                     | `Overlap Analysis`, counters `HBM <id>/Read` (`Read(MB/s)`), `LLC <id> Read/Hit Rate`,  |
|                                     | `NPU MEM` `APP/HBM` (`KB`), `AI Core Freq` (`MHz`); flows `HostToDevice<connection_id>`. |

The run: one device (device_0), eager mode (Model ID 4294967295), 3 iterations of 9 tasks (TransData,
MatMulV2, Add, Relu, FlashAttentionScore MIX_AIC, Cast, ReduceSum, an AI_CPU op, an HCCL allReduce),
aic-metrics=Memory, sys-hardware-mem sampled every 5 ms. Numbers come from a seeded RNG: the output is
byte-identical on every call. The aggregate files (op_statistic, communication_statistic, hbm averages,
task_time, l2_cache) are computed from the same task list, so they agree with op_summary and the JSON.
"""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path
from typing import Any

FILE_TS = "20250109074803"
PROF_NAME = f"PROF_000001_{FILE_TS}123_KQJCLMBAEFNOPRSTU"
DEVICE_ID = 0
SINGLE_OP_MODEL_ID = "4294967295"
T0_NS = 1736408883704643212  # first task start, ns since epoch (the real level1 sample's first kernel)
AICORE_MHZ = 1800
SAMPLE_PERIOD_NS = 5_000_000

MEMORY_METRICS = [
    "ub_read_bw(GB/s)", "ub_write_bw(GB/s)", "l1_read_bw(GB/s)", "l1_write_bw(GB/s)",
    "l2_read_bw(GB/s)", "l2_write_bw(GB/s)", "main_mem_read_bw(GB/s)", "main_mem_write_bw(GB/s)",
]  # fmt: skip
PMU_COLUMNS = (
    ["aicore_time(us)", "aic_total_cycles"]
    + [f"aic_{m}" for m in MEMORY_METRICS]
    + ["aiv_time(us)", "aiv_total_cycles"]
    + [f"aiv_{m}" for m in MEMORY_METRICS]
)
OP_SUMMARY_BASE = [
    "Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type", "OP State", "Task Type",
    "Task Start Time(us)", "Task Duration(us)", "Task Wait Time(us)", "Block Num", "Mix Block Num",
    "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
    "Output Formats", "Context ID",
]  # fmt: skip

# name, op type, task type, block, mix block, duration range (µs), in shapes, in dtypes, in formats, out...
_OPS: list[tuple[Any, ...]] = [
    ("trans_TransData_0", "TransData", "AI_VECTOR_CORE", 32, 0, (40, 60), '"32,3,224,224"', "FLOAT", "NCHW", '"32,1,224,224,8"', "FLOAT", "NC1HWC0"),
    ("aclnnMm_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE", 24, 0, (300, 420), '"1024,4096;4096,4096"', "FLOAT16;FLOAT16", "ND;ND", '"1024,4096"', "FLOAT16", "ND"),
    ("aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", 40, 0, (20, 35), '"1024,4096;4096"', "FLOAT16;FLOAT16", "ND;ND", '"1024,4096"', "FLOAT16", "ND"),
    ("aclnnInplaceRelu_Relu_Relu", "Relu", "AI_VECTOR_CORE", 40, 0, (12, 20), '"1024,4096"', "FLOAT16", "ND", '"1024,4096"', "FLOAT16", "ND"),
    ("aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore", "FlashAttentionScore", "MIX_AIC", 24, 48, (600, 800), '"8,1024,32,128;8,1024,32,128;8,1024,32,128"', "FLOAT16;FLOAT16;FLOAT16", "ND;ND;ND", '"8,1024,32,128"', "FLOAT16", "ND"),
    ("aclnnCast_CastAiCore_Cast", "Cast", "AI_VECTOR_CORE", 40, 0, (25, 40), '"1024,4096"', "FLOAT16", "ND", '"1024,4096"', "FLOAT", "ND"),
    ("aclnnReduceSum_ReduceSumAiCore_ReduceSum", "ReduceSum", "AI_VECTOR_CORE", 48, 0, (30, 50), '"1024,4096"', "FLOAT", "ND", '"1024"', "FLOAT", "ND"),
    ("DropOutGenMask", "DropOutGenMask", "AI_CPU", 0, 0, (80, 120), '"2;"', "INT64;FLOAT16", "ND;ND", '"524288"', "UINT8", "ND"),
    ("hcom_allReduce__586_0_1", "hcom_allReduce_", "HCCL", 0, 0, (4000, 6000), "N/A", "N/A", "N/A", "N/A", "N/A", "N/A"),
]  # fmt: skip
ITERATIONS = 3


def _us(ns: int) -> str:
    """ns -> µs text with 3 decimals, exactly (no float)."""
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def _f3(x: float) -> str:
    return f"{x:.3f}"


def _bw(rng: random.Random, lo: float, hi: float) -> float:
    return round(rng.uniform(lo, hi), 3)


def _side_metrics(rng: random.Random, kind: str, time_us: float, block: int) -> dict[str, str]:
    """One core side's Memory-group values. kind: 'cube' (has L1), 'vector' (has UB) or 'off' (zeros)."""
    if kind == "off":
        return {"time": "0.0", "cycles": "0", **dict.fromkeys(MEMORY_METRICS, "0")}
    vals = {
        "ub_read_bw(GB/s)": _bw(rng, 400, 1600) if kind == "vector" else 0.0,
        "ub_write_bw(GB/s)": _bw(rng, 300, 1200) if kind == "vector" else 0.0,
        "l1_read_bw(GB/s)": _bw(rng, 1000, 2000) if kind == "cube" else 0.0,
        "l1_write_bw(GB/s)": _bw(rng, 500, 900) if kind == "cube" else 0.0,
        "l2_read_bw(GB/s)": _bw(rng, 200, 1500),
        "l2_write_bw(GB/s)": _bw(rng, 100, 700),
        "main_mem_read_bw(GB/s)": _bw(rng, 100, 1200),
        "main_mem_write_bw(GB/s)": _bw(rng, 50, 700),
    }
    out = {m: ("0" if v == 0 else _f3(v)) for m, v in vals.items()}
    out["time"] = _f3(time_us)
    out["cycles"] = str(round(time_us * AICORE_MHZ * max(block, 1)))
    return out


def _tasks(rng: random.Random) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = []
    t = T0_NS
    task_id = 11051
    cid = 953
    prev_end: dict[str, int] = {}
    for it in range(ITERATIONS):
        for name, op_type, task_type, block, mix, (dlo, dhi), ish, idt, ifm, osh, odt, ofm in _OPS:
            dur = rng.randint(dlo * 1000, dhi * 1000)
            is_hccl = task_type == "HCCL"
            stream = "N/A" if is_hccl else "2"
            # host launch gap before each task; the step boundary (after the allReduce) is a longer host gap
            t += (
                rng.randint(2_000, 9_000)
                if name != "trans_TransData_0" or it == 0
                else rng.randint(1_500_000, 2_500_000)
            )
            wait = t - prev_end[stream] if stream in prev_end else 0
            task = {
                "name": name, "op_type": op_type, "task_type": task_type, "block": block, "mix": mix,
                "start": t, "dur": dur, "wait": wait, "stream": stream,
                "task_id": "N/A" if is_hccl else str(task_id), "cid": cid, "iteration": it,
                "shapes": (ish, idt, ifm, osh, odt, ofm),
            }  # fmt: skip
            dur_us = dur / 1000
            if task_type in ("AI_CPU", "HCCL"):
                task["pmu"] = None
            else:
                cube = "cube" if task_type in ("AI_CORE", "MIX_AIC") else "off"
                vec = "vector" if task_type in ("AI_VECTOR_CORE", "MIX_AIC") else "off"
                task["pmu"] = {
                    "aic": _side_metrics(rng, cube, round(dur_us * rng.uniform(0.9, 0.98), 3), block),
                    "aiv": _side_metrics(rng, vec, round(dur_us * rng.uniform(0.85, 0.97), 3), mix or block),
                }
                task["l2_hit"] = None if rng.random() < 0.25 else round(rng.uniform(0.55, 0.98), 6)
                task["l2_victim"] = round(rng.uniform(0.0, 0.2), 6)
            tasks.append(task)
            prev_end[stream] = t + dur
            t += dur
            if not is_hccl:
                task_id += 1
            cid += 1
    return tasks


def _csv_text(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _op_summary(tasks: list[dict[str, Any]]) -> str:
    rows = []
    for k in tasks:
        ctx = "0" if k["task_type"] == "MIX_AIC" else "N/A"
        row = [
            str(DEVICE_ID), SINGLE_OP_MODEL_ID, k["task_id"], k["stream"], k["name"], k["op_type"],
            "N/A" if k["task_type"] == "HCCL" else "dynamic", k["task_type"],
            _us(k["start"]) + "\t", _us(k["dur"]), _us(k["wait"]), str(k["block"]),
            "N/A" if k["task_type"] == "HCCL" else str(k["mix"]), "N/A" if k["task_type"] == "HCCL" else "NO",
            *k["shapes"], ctx,
        ]  # fmt: skip
        p = k["pmu"]
        if p is None:
            row += ["N/A"] * len(PMU_COLUMNS)
        else:
            for side in ("aic", "aiv"):
                s = p[side]
                row += [s["time"], s["cycles"], *(s[m] for m in MEMORY_METRICS)]
        rows.append(row)
    return _csv_text(OP_SUMMARY_BASE + PMU_COLUMNS, rows)


def _stats_row(durs_ns: list[int], total_all: int) -> list[str]:
    n = len(durs_ns)
    tot = sum(durs_ns)
    return [
        str(n),
        _us(tot),
        _us(min(durs_ns)),
        _us(round(tot / n)),
        _us(max(durs_ns)),
        f"{100 * tot / total_all:.3f}",
    ]


def _op_statistic(tasks: list[dict[str, Any]]) -> str:
    groups: dict[tuple[str, str], list[int]] = {}
    for k in tasks:
        if k["task_type"] != "HCCL":
            groups.setdefault((k["op_type"], k["task_type"]), []).append(k["dur"])
    total = sum(sum(v) for v in groups.values())
    rows = [
        [str(DEVICE_ID), "N/A", op, core, *_stats_row(d, total)]
        for (op, core), d in sorted(groups.items(), key=lambda kv: -sum(kv[1]))
    ]
    header = ["Device_id", "Model Name", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)",
              "Avg Time(us)", "Max Time(us)", "Ratio(%)"]  # fmt: skip
    return _csv_text(header, rows)


def _communication_statistic(tasks: list[dict[str, Any]]) -> str:
    durs = [k["dur"] for k in tasks if k["task_type"] == "HCCL"]
    header = [
        "Device_id",
        "OP Type",
        "Count",
        "Total Time(us)",
        "Min Time(us)",
        "Avg Time(us)",
        "Max Time(us)",
        "Ratio(%)",
    ]
    return _csv_text(header, [[str(DEVICE_ID), "hcom_allReduce_", *_stats_row(durs, sum(durs))]])


def _api_statistic(rng: random.Random, tasks: list[dict[str, Any]]) -> str:
    n_compute = sum(1 for k in tasks if k["task_type"] != "HCCL")
    n_hccl = len(tasks) - n_compute
    apis = [
        ("acl", "aclnnMm", ITERATIONS), ("acl", "aclnnAdd", ITERATIONS), ("acl", "aclrtSynchronizeStream", ITERATIONS),
        ("runtime", "rtKernelLaunch", n_compute), ("node", "launch", n_compute), ("hccl", "HcclAllReduce", n_hccl),
    ]  # fmt: skip
    rows = []
    for level, api, count in apis:
        calls = [rng.randint(3_000, 40_000) for _ in range(count)]
        mean = sum(calls) / count
        var = sum((c / 1000 - mean / 1000) ** 2 for c in calls) / count
        rows.append(
            [
                "host",
                level,
                api,
                _us(sum(calls)),
                str(count),
                _us(round(mean)),
                _us(min(calls)),
                _us(max(calls)),
                f"{var:.3f}",
            ]
        )
    header = [
        "Device_id",
        "Level",
        "API Name",
        "Time(us)",
        "Count",
        "Avg(us)",
        "Min(us)",
        "Max(us)",
        "Variance",
    ]
    return _csv_text(header, rows)


def _task_time(tasks: list[dict[str, Any]]) -> str:
    header = [
        "Device_id",
        "kernel_name",
        "kernel_type",
        "stream_id",
        "task_id",
        "task_time(us)",
        "task_start(us)",
        "task_stop(us)",
    ]
    rows = [
        [
            str(DEVICE_ID),
            k["name"],
            k["task_type"],
            k["stream"],
            k["task_id"],
            _us(k["dur"]),
            _us(k["start"]),
            _us(k["start"] + k["dur"]),
        ]
        for k in tasks
    ]
    return _csv_text(header, rows)


def _l2_cache(tasks: list[dict[str, Any]]) -> str:
    header = ["Device_id", "Stream Id", "Task Id", "Hit Rate", "Victim Rate", "Op Name"]
    rows = [
        [
            str(DEVICE_ID),
            k["stream"],
            k["task_id"],
            "N/A" if k["l2_hit"] is None else f"{k['l2_hit']:.6f}",
            f"{k['l2_victim']:.6f}",
            k["name"],
        ]
        for k in tasks
        if k["pmu"] is not None
    ]
    return _csv_text(header, rows)


def _sample_times(tasks: list[dict[str, Any]]) -> list[int]:
    start = tasks[0]["start"] - 3_000_000
    end = tasks[-1]["start"] + tasks[-1]["dur"] + 3_000_000
    return list(range(start, end, SAMPLE_PERIOD_NS))


def _hardware_series(rng: random.Random, times: list[int]) -> dict[str, Any]:
    """HBM read/write (MB/s) per HBM id, LLC read throughput/hit rate, NPU memory (KB) per sample time."""
    hbm = {
        hid: [(_f3(rng.uniform(20_000, 380_000)), _f3(rng.uniform(10_000, 250_000))) for _ in times]
        for hid in (0, 1)
    }
    llc = [(_f3(rng.uniform(1_000, 90_000)), round(rng.uniform(0.3, 0.95), 3)) for _ in times]
    npu_mem = []
    app_hbm = 2_160_232
    for i, _ in enumerate(times):
        app_hbm += 2048 * i  # grows by 2 MiB steps
        dev_hbm = app_hbm + 1_572_864
        npu_mem.append({"app": (0, app_hbm), "device": (0, dev_hbm)})
    return {"hbm": hbm, "llc": llc, "npu_mem": npu_mem}


def _hbm_csv(series: dict[str, Any]) -> str:
    rows = []
    for hid, vals in series["hbm"].items():
        reads = [float(r) for r, _ in vals]
        writes = [float(w) for _, w in vals]
        rows.append([str(DEVICE_ID), str(hid), _f3(sum(reads) / len(reads)), _f3(sum(writes) / len(writes))])
    return _csv_text(["Device_id", "Metric", "Read(MB/s)", "Write(MB/s)"], rows)


def _npu_mem_csv(times: list[int], series: dict[str, Any]) -> str:
    rows = []
    for t, snap in zip(times, series["npu_mem"], strict=True):
        for event in ("app", "device"):
            ddr, hbm = snap[event]
            rows.append([str(DEVICE_ID), event, str(ddr), str(hbm), str(ddr + hbm), _us(t)])
    return _csv_text(["Device_id", "event", "ddr(KB)", "hbm(KB)", "memory(KB)", "timestamp(us)"], rows)


def _memory_record(tasks: list[dict[str, Any]]) -> str:
    t0 = tasks[0]["start"] - 2_000_000
    rows = [
        [str(DEVICE_ID), "APP", _us(t0), "2048", "4096", "NPU:0"],
        [str(DEVICE_ID), "GE", _us(t0 + 10_000), "1024", "2048", "NPU:0"],
        [str(DEVICE_ID), "APP", _us(t0 + 5_000_000), "1050624", "2097152", "NPU:0"],
        [str(DEVICE_ID), "GE", _us(t0 + 5_010_000), "512", "2048", "NPU:0"],
        [str(DEVICE_ID), "APP", _us(t0 + 12_000_000), "8392704", "12582912", "NPU:0"],
    ]
    header = [
        "Device_id",
        "Component",
        "Timestamp(us)",
        "Total Allocated(KB)",
        "Total Reserved(KB)",
        "Device",
    ]
    return _csv_text(header, rows)


def _operator_memory(tasks: list[dict[str, Any]]) -> str:
    header = ["Device_id", "Name", "Size(KB)", "Allocation Time(us)", "Duration(us)", "Allocation Total Allocated(KB)",
              "Allocation Total Reserved(KB)", "Release Total Allocated(KB)", "Release Total Reserved(KB)", "Device"]  # fmt: skip
    rows = []
    allocated = 1_048_576
    for k in tasks[:9]:
        if k["task_type"] == "HCCL":
            continue
        size = 16384 if k["op_type"] == "MatMulV2" else 8192
        allocated += size
        life = k["dur"] + 150_000
        rows.append([str(DEVICE_ID), k["name"], str(size), _us(k["start"] - 20_000), _us(life), str(allocated),
                     "2097152", str(allocated - size), "2097152", "NPU:0"])  # fmt: skip
    # an event whose allocation fell before the window: negative size, no duration/release (formats.md §6)
    rows.append(
        [
            str(DEVICE_ID),
            "aclnnCast_CastAiCore_Cast",
            "-4096",
            _us(tasks[0]["start"] - 900_000),
            "",
            "1048576",
            "2097152",
            "",
            "",
            "NPU:0",
        ]
    )
    return _csv_text(header, rows)


def _npu_module_mem(tasks: list[dict[str, Any]]) -> str:
    t0 = tasks[0]["start"] - 2_500_000
    rows = []
    for i, (comp, kb) in enumerate(
        [("SLOG", "0"), ("APP", "2048"), ("HCCL", "262144"), ("RUNTIME", "524288"), ("IDEDD", "-1")]
    ):
        rows.append([str(DEVICE_ID), comp, _us(t0 + i * 1000), kb, "NPU:0"])
    return _csv_text(["Device_id", "Component", "Timestamp(us)", "Total Reserved(KB)", "Device"], rows)


# ---- msprof_<ts>.json (chrome trace) -------------------------------------------------------------------
PID_CANN, PID_HW, PID_COMM, PID_FREQ = 3170820320, 3170820512, 3170820576, 3170820544
PID_HBM, PID_LLC, PID_NPU_MEM, PID_OVERLAP = 3170820640, 3170820672, 3170820704, 3170820832
HOST_TID = 3096504


def _meta(pid: int, name: str, label: str, sort: int, threads: dict[int, str]) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = [
        {"name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}, "ph": "M"},
        {"name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": label}, "ph": "M"},
        {"name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}, "ph": "M"},
    ]
    for tid, tname in threads.items():
        ev.append({"name": "thread_name", "pid": pid, "tid": tid, "args": {"name": tname}, "ph": "M"})
        ev.append(
            {"name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}, "ph": "M"}
        )
    return ev


def _x(
    name: str, pid: int, tid: int, start: int, dur: int, args: dict[str, Any] | None = None
) -> dict[str, Any]:
    e: dict[str, Any] = {"name": name, "pid": pid, "tid": tid, "ts": _us(start), "dur": dur / 1000, "ph": "X"}
    if args is not None:
        e["args"] = args
    return e


def _counter(name: str, pid: int, t: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ts": _us(t), "pid": pid, "tid": 0, "args": args, "ph": "C"}


def _msprof_json(
    rng: random.Random, tasks: list[dict[str, Any]], times: list[int], series: dict[str, Any]
) -> str:
    ev = _msprof_meta()
    prev_end = None
    for k in tasks:
        cid = k["cid"]
        ev += _launch_events(rng, k)
        pid, tid = _device_events(ev, k)
        ev.append(
            {
                "name": f"HostToDevice{cid}",
                "ph": "f",
                "id": str(cid),
                "ts": _us(k["start"]),
                "cat": "HostToDevice",
                "pid": pid,
                "tid": tid,
                "bp": "e",
            }
        )
        if prev_end is not None and k["start"] > prev_end:
            ev.append(_x("Free", PID_OVERLAP, 3, prev_end, k["start"] - prev_end))
        prev_end = k["start"] + k["dur"]
    ev += _counter_events(times, series)
    return json.dumps(ev, separators=(", ", ": "))


def _msprof_meta() -> list[dict[str, Any]]:
    """The process and thread names of every msprof timeline process, in the order msprof writes them."""
    ev: list[dict[str, Any]] = []
    ev += _meta(PID_CANN, "CANN", "CPU", 7, {HOST_TID: f"Thread {HOST_TID}"})
    ev += _meta(PID_HW, "Ascend Hardware", "NPU", 13, {2: "Stream 2"})
    ev += _meta(PID_COMM, "Communication", "NPU", 15, {0: "Group 0 Communication", 1: "Plane 0"})
    ev += _meta(PID_FREQ, "AI Core Freq", "NPU", 14, {})
    ev += _meta(PID_HBM, "HBM", "NPU", 17, {})
    ev += _meta(PID_LLC, "LLC", "NPU", 18, {})
    ev += _meta(PID_NPU_MEM, "NPU MEM", "NPU", 19, {})
    ev += _meta(
        PID_OVERLAP,
        "Overlap Analysis",
        "NPU",
        23,
        {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)", 3: "Free"},
    )
    return ev


def _launch_events(rng: random.Random, k: dict[str, Any]) -> list[dict[str, Any]]:
    """A task's host side: its AscendCL API, the Node@launch inside it and the HostToDevice flow's start.
    Draws two numbers from rng (launch lead, API duration), in that order."""
    cid = k["cid"]
    launch = k["start"] - rng.randint(40_000, 120_000)
    api = "HcclAllReduce" if k["task_type"] == "HCCL" else "aclnn" + k["op_type"]
    acl_dur = rng.randint(8_000, 30_000)
    common = {"Thread Id": HOST_TID, "Mode": "ACL_OP", "item_id": "0"}
    return [
        _x(
            f"AscendCL@{api}",
            PID_CANN,
            HOST_TID,
            launch,
            acl_dur,
            {**common, "level": "acl", "id": api, "connection_id": cid + 100000},
        ),
        _x(
            "Node@launch",
            PID_CANN,
            HOST_TID,
            launch + 2_000,
            acl_dur - 4_000,
            {**common, "level": "node", "id": "launch", "item_id": k["name"], "connection_id": cid},
        ),
        {
            "name": f"HostToDevice{cid}",
            "ph": "s",
            "cat": "HostToDevice",
            "id": str(cid),
            "pid": PID_CANN,
            "tid": HOST_TID,
            "ts": _us(launch + 2_000),
        },
    ]


def _device_events(ev: list[dict[str, Any]], k: dict[str, Any]) -> tuple[int, int]:
    """A task's device side (a collective with its plane tasks, or a compute task) and its overlap slices,
    appended to ev; returns the (pid, tid) its HostToDevice flow ends on."""
    cid = k["cid"]
    if k["task_type"] == "HCCL":
        pid, tid = PID_COMM, 0
        args: dict[str, Any] = {
            "connection_id": cid,
            "model id": int(SINGLE_OP_MODEL_ID),
            "data_type": "FP16",
            "alg_type": "MESH-RING",
            "count": 4194304,
        }
        ev.append(_x(k["name"], pid, tid, k["start"], k["dur"], args))
        # two plane tasks inside the collective (formats.md §3 small-task args)
        for j, (tname, size) in enumerate([("Notify_Wait", 0), ("Memcpy", 8388608)]):
            s = k["start"] + (j + 1) * 100_000
            d = 50_000 if tname == "Notify_Wait" else 1_500_000
            ev.append(_x(tname, PID_COMM, 1, s, d, {
                "notify_id": str(j), "duration estimated(us)": d / 1000, "stream id": 4, "task id": 800 + j,
                "context id": 0, "task type": tname, "src rank": 0, "dst rank": 1 if size else 4294967295,
                "transport type": "SDMA" if size else "LOCAL", "size(Byte)": size, "data type": "FP16",
                "link type": "HCCS" if size else "ON_CHIP", "bandwidth(GB/s)": round(size / d, 4) if size else 0,
                "model id": int(SINGLE_OP_MODEL_ID),
            }))  # fmt: skip
        ev.append(_x("Communication", PID_OVERLAP, 1, k["start"], k["dur"]))
        ev.append(_x("Communication(Not Overlapped)", PID_OVERLAP, 2, k["start"], k["dur"]))
    else:
        args = {"Model Id": int(SINGLE_OP_MODEL_ID), "Task Type": k["task_type"], "Physic Stream Id": int(k["stream"]),
                "Task Id": int(k["task_id"]), "Batch Id": 0, "Subtask Id": 4294967295, "connection_id": cid}  # fmt: skip
        ev.append(_x(k["name"], PID_HW, int(k["stream"]), k["start"], k["dur"], args))
        ev.append(_x("Computing", PID_OVERLAP, 0, k["start"], k["dur"]))
        pid, tid = PID_HW, int(k["stream"])
    return pid, tid


def _counter_events(times: list[int], series: dict[str, Any]) -> list[dict[str, Any]]:
    """The counter samples at each time: AI Core frequency (every 4th), HBM per channel, LLC, NPU memory."""
    ev: list[dict[str, Any]] = []
    for i, t in enumerate(times):
        if i % 4 == 0:
            ev.append(_counter("AI Core Freq", PID_FREQ, t, {"MHz": AICORE_MHZ}))
        for hid, vals in series["hbm"].items():
            r, w = vals[i]
            ev.append(_counter(f"HBM {hid}/Read", PID_HBM, t + 80_000, {"Read(MB/s)": float(r)}))
            ev.append(_counter(f"HBM {hid}/Write", PID_HBM, t + 80_000, {"Write(MB/s)": float(w)}))
        thr, hit = series["llc"][i]
        ev.append(_counter("LLC 0 Read/Throughput", PID_LLC, t + 160_000, {"Throughput(MB/s)": float(thr)}))
        ev.append(_counter("LLC 0 Read/Hit Rate", PID_LLC, t + 160_000, {"Hit Rate(%)": hit}))
        for event, label in (("app", "APP"), ("device", "Device")):
            ddr, hbm = series["npu_mem"][i][event]
            for name, kb in (("DDR", ddr), ("HBM", hbm), ("Memory", ddr + hbm)):
                ev.append(_counter(f"{label}/{name}", PID_NPU_MEM, t, {"KB": float(kb)}))
    return ev


def make_msprof_sample(out_dir: Path) -> Path:
    """Write `<out_dir>/PROF_000001_..._<random>/` (raw dirs empty + mindstudio_profiler_output/); return it."""
    rng = random.Random(20250109)
    prof = Path(out_dir) / PROF_NAME
    mpo = prof / "mindstudio_profiler_output"
    mpo.mkdir(parents=True, exist_ok=True)
    (prof / "host" / "data").mkdir(parents=True, exist_ok=True)
    (prof / f"device_{DEVICE_ID}" / "data").mkdir(parents=True, exist_ok=True)
    tasks = _tasks(rng)
    times = _sample_times(tasks)
    series = _hardware_series(rng, times)
    files = {
        f"op_summary_{FILE_TS}.csv": _op_summary(tasks),
        f"op_statistic_{FILE_TS}.csv": _op_statistic(tasks),
        f"api_statistic_{FILE_TS}.csv": _api_statistic(rng, tasks),
        f"task_time_{FILE_TS}.csv": _task_time(tasks),
        f"hbm_{FILE_TS}.csv": _hbm_csv(series),
        f"npu_mem_{FILE_TS}.csv": _npu_mem_csv(times, series),
        f"memory_record_{FILE_TS}.csv": _memory_record(tasks),
        f"operator_memory_{FILE_TS}.csv": _operator_memory(tasks),
        f"npu_module_mem_{FILE_TS}.csv": _npu_module_mem(tasks),
        f"l2_cache_{FILE_TS}.csv": _l2_cache(tasks),
        f"communication_statistic_{FILE_TS}.csv": _communication_statistic(tasks),
        f"msprof_{FILE_TS}.json": _msprof_json(rng, tasks, times, series),
    }
    for name, text in files.items():
        (mpo / name).write_text(text, encoding="utf-8")
    return prof
