"""Write a Scenario as a real-format torch_npu (Ascend PyTorch Profiler) text dump, one folder per rank.

Layout and shapes follow the Jan-2025 Level1 dump (docs/formats.md §1.1, §2-§6):
`<out>/rank{r}_ascend_pt/{profiler_info_{r}.json, profiler_metadata.json, ASCEND_PROFILER_OUTPUT/...}` with
kernel_details.csv (CRLF, trailing TAB on `Start Time(us)`, shapes as the cell `"32,3"` in CSV quoting), trace_view.json (a
JSON array, string `ts` with 3 decimals, numeric `dur`, M/X/C/s/f events, device pids
`(host_pid << 10) | (sort_index << 5) | device_id` as the real dump has them), step_trace_time.csv,
communication.json, communication_matrix.json, op_statistic.csv and memory_record.csv.

Everything streams: each rank's timeline is rendered once (as a template when scenario.repeat > 1) and
written repetition by repetition, so a multi-GB trace_view.json never sits in memory.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ._kernel_cols import ACL_NAME, AICORE_MHZ, BASE_COLS, l2_hit_rate, metric_header, metric_values
from ._text import Clock, Replay, dur_text, js, num
from .model import SDMA_PARTS, TRANSPORTS, CommOp, Link, Memcpy, Op, RankTrace, Scenario

# process sort indexes of the real dump; the device-side pid is (host_pid << 10) | (index << 5) | device_id
SORT_INDEX = {
    "CANN": 7,
    "Ascend Hardware": 13,
    "AI Core Freq": 14,
    "HCCL": 15,
    "HBM": 17,
    "LLC": 18,
    "NPU MEM": 19,
    "Overlap Analysis": 23,
}
HOST_LEAD_NS = 40_000  # a host cpu_op starts this long before its device task
HOST_DUR_NS = 12_000
CANN_LEAD_NS = 25_000
CANN_DUR_NS = 6_000


@dataclass
class WriteOptions:
    aic_metrics: str = "PipeUtilization"
    block_col: str = "Block Dim"  # or "Block Num" (2026 rename)
    device_id_col: bool = False  # newer torch_npu: Device_id first column
    with_trace_view: bool = True
    host_events: bool = True  # Python cpu_ops, ProfilerStep#N, torch_to_npu flows
    cann_events: bool = True  # CANN Node@launch etc. and HostToDevice flows
    hccl_tasks: bool = True  # per-link HCCL tasks on the Plane threads
    flow_every: int = 1  # emit host events/flows for every n-th task only (benchmark mix tuning)
    llc: bool = True
    l2_cache: bool = False  # also write l2_cache.csv (and echo _l2_cache true)
    metric_decimals: int | None = None  # None: full precision so bytes = bw x time round-trips exactly
    profiler_level: str = "Level1"
    stamp: str = "start"  # HBM sample stamped at window start (schema convention) or end


def pid_of(rt: RankTrace, process: str) -> int:
    return (rt.host_pid << 10) | (SORT_INDEX[process] << 5) | rt.device_id


def write_torch_npu_dump(
    scenario: Scenario,
    out_dir: str | Path,
    *,
    aic_metrics: str = "PipeUtilization",
    block_col: str = "Block Dim",
    device_id_col: bool = False,
    with_trace_view: bool = True,
    repeat: int | None = None,
    rank_dir: str = "rank{rank}_ascend_pt",
    **kw: object,
) -> list[Path]:
    """Write one `<rank_dir>` per rank under out_dir; returns every file written.

    aic_metrics: PipeUtilization | Memory | MemoryAccess | L2Cache | ArithmeticUtilization | MemoryUB |
    ResourceConflictRatio | MemoryL0 | AiCoreNone (echoed in profiler_info as ACL_AICORE_*).
    repeat: override scenario.repeat (number of repetitions of each rank's timeline).
    Other keywords: see WriteOptions."""
    opts = WriteOptions(
        aic_metrics=aic_metrics,
        block_col=block_col,
        device_id_col=device_id_col,
        with_trace_view=with_trace_view,
        **kw,  # type: ignore[arg-type]
    )
    if aic_metrics not in ACL_NAME:
        raise ValueError(f"unknown aic_metrics {aic_metrics!r}; one of {sorted(ACL_NAME)}")
    if block_col not in ("Block Dim", "Block Num"):
        raise ValueError("block_col must be 'Block Dim' or 'Block Num'")
    reps = scenario.repeat if repeat is None else repeat
    scenario.finalize()
    out = Path(out_dir)
    written: list[Path] = []
    for rt in scenario.ranks:
        written += RankWriter(scenario, rt, opts, reps).write(out / rank_dir.format(rank=rt.rank))
    return written


class RankWriter:
    """Renders and writes one rank's folder."""

    def __init__(self, sc: Scenario, rt: RankTrace, opts: WriteOptions, repeat: int) -> None:
        self.sc, self.rt, self.o = sc, rt, opts
        self.repeat = repeat
        template = repeat > 1
        if template and rt.end_ns() > sc.period_ns:
            raise ValueError(
                f"rank {rt.rank}: timeline ends at {rt.end_ns()} ns, past period_ns {sc.period_ns}"
            )
        self.clock = Clock(sc.base_ns, template)
        self.replay = Replay(sc.base_ns, repeat, sc.period_ns, [s.id for s in rt.steps])
        self.span_end = sc.period_ns if template else rt.end_ns()

    # ---- driver ---------------------------------------------------------------------------------------
    def write(self, root: Path) -> list[Path]:
        o, rt = self.o, self.rt
        prof = root / "ASCEND_PROFILER_OUTPUT"
        prof.mkdir(parents=True, exist_ok=True)
        files = [
            self._write_json(root / f"profiler_info_{rt.rank}.json", self.profiler_info()),
            self._write_json(root / "profiler_metadata.json", self.profiler_metadata()),
        ]
        files.append(
            self._write_reps(prof / "kernel_details.csv", self.kernel_header(), self.kernel_rows(), "\r\n")
        )
        if o.with_trace_view:
            files.append(self._write_trace_view(prof / "trace_view.json"))
        if rt.steps:
            files.append(
                self._write_reps(prof / "step_trace_time.csv", self.step_header(), self.step_rows(), "\r\n")
            )
        if rt.comms:
            files.append(self._write_step_json(prof / "communication.json", self.communication_steps()))
            files.append(self._write_step_json(prof / "communication_matrix.json", self.matrix_steps()))
        files.append(self._write_text(prof / "op_statistic.csv", self.op_statistic()))
        if rt.memory:
            files.append(
                self._write_reps(prof / "memory_record.csv", self.memory_header(), self.memory_rows(), "\r\n")
            )
        if o.l2_cache:
            files.append(self._write_text(prof / "l2_cache.csv", self.l2_cache()))
        return files

    def _write_json(self, path: Path, obj: object) -> Path:
        path.write_text(json.dumps(obj, indent=4), encoding="utf-8")
        return path

    def _write_text(self, path: Path, text: str) -> Path:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        return path

    def _write_reps(self, path: Path, header: list[str], template: str, eol: str) -> Path:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(csv_line(header, eol))
            for text in self.replay.all(template):
                fh.write(text)
        return path

    def _write_step_json(self, path: Path, template: str) -> Path:
        """A {"step<N>": {...}, ...} object whose per-repetition body is `template` (no braces)."""
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write("{")
            for k, text in enumerate(self.replay.all(template)):
                if text:
                    fh.write((", " if k else "") + text)
            fh.write("}")
        return path

    # ---- metadata -------------------------------------------------------------------------------------
    def profiler_info(self) -> dict[str, object]:
        o, rt = self.o, self.rt
        end_abs = self.sc.base_ns + (self.repeat - 1) * self.sc.period_ns + self.span_end
        return {
            "config": {
                "common_config": {
                    "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                    "schedule": {
                        "wait": 0,
                        "active": max(1, len(rt.steps) * self.repeat),
                        "warmup": 1,
                        "repeat": 1,
                        "skip_first": 0,
                    },
                    "record_shapes": True,
                    "profile_memory": bool(rt.memory),
                    "with_stack": False,
                    "with_flops": False,
                    "with_modules": False,
                },
                "experimental_config": {
                    "_profiler_level": o.profiler_level,
                    "_aic_metrics": ACL_NAME[o.aic_metrics],
                    "_l2_cache": o.l2_cache,
                    "_msprof_tx": False,
                    "_data_simplification": True,
                    "record_op_args": False,
                    "_export_type": "text",
                    "_op_attr": False,
                    "_gc_detect_threshold": None,
                },
            },
            "start_info": {
                "syscnt_enable": True,
                "freq": 100,
                "start_cnt": 17238197612056 + rt.rank,
                "start_monotonic": 172163581670080,
            },
            "end_info": {"collectionTimeEnd": end_abs, "MonotonicTimeEnd": 172163581670080 + self.span_end},
            "rank_id": rt.rank,
        }

    def profiler_metadata(self) -> dict[str, object]:
        env = dict.fromkeys(
            [
                "ASCEND_GLOBAL_LOG_LEVEL",
                "HCCL_RDMA_TC",
                "HCCL_RDMA_SL",
                "ACLNN_CACHE_LIMIT",
                "HOST_CACHE_CAPACITY",
                "ASCEND_ENHANCE_ENABLE",
                "PYTORCH_NPU_ALLOC_CONF",
                "ASCEND_LAUNCH_BLOCKING",
            ],
            "",
        )
        md: dict[str, object] = {"ENV_VARIABLES": env}
        if self.sc.n_ranks > 1:
            md["parallel_group_info"] = {
                g: {
                    "group_name": "dp" if i else "default_group",
                    "group_rank": ranks.index(self.rt.rank),
                    "global_ranks": ranks,
                }
                for i, (g, ranks) in enumerate(self.sc.groups.items())
                if self.rt.rank in ranks
            }
        return md

    # ---- kernel_details.csv ---------------------------------------------------------------------------
    def kernel_header(self) -> list[str]:
        o = self.o
        head = [c.replace("{block}", o.block_col) for c in BASE_COLS]
        if o.device_id_col:
            head = ["Device_id", *head]
        if self.rt.steps:
            head = ["Step Id", *head]
        return head + metric_header(o.aic_metrics)

    def kernel_rows(self) -> str:
        rt, o, clock = self.rt, self.o, self.clock
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\r\n")
        n_metric = len(metric_header(o.aic_metrics))
        last_end: dict[object, int] = {}
        tasks: list[Op | CommOp] = sorted([*rt.ops, *rt.comms], key=lambda t: t.start_ns)
        for t in tasks:
            key = ("hccl", t.group) if isinstance(t, CommOp) else t.stream
            wait = t.start_ns - last_end[key] if key in last_end else 0
            last_end[key] = max(last_end.get(key, 0), t.end_ns)
            prefix: list[str] = []
            if rt.steps:
                prefix.append(clock.step(t.step) if t.step is not None else "")
            if o.device_id_col:
                prefix.append(str(rt.device_id))
            if isinstance(t, CommOp):
                row = [
                    "4294967295",
                    "N/A",
                    "N/A",
                    t.name,
                    t.kernel_type,
                    "N/A",
                    "HCCL",
                    clock.us(t.start_ns) + "\t",
                    dur_text(t.dur_ns),
                    dur_text(max(wait, 0)),
                    "0",
                ] + ["N/A"] * (9 + n_metric)
            else:
                row = [
                    "4294967295",
                    str(t.task_id),
                    str(t.stream),
                    t.name,
                    t.op_type,
                    t.op_state,
                    t.task_type,
                    clock.us(t.start_ns) + "\t",
                    dur_text(t.dur_ns),
                    dur_text(max(wait, 0)),
                    str(t.block_dim),
                    str(t.mix_block_dim),
                    "NO",
                    _shapes(t.input_shapes),
                    _list(t.input_dtypes),
                    _list(t.input_formats),
                    _shapes(t.output_shapes),
                    _list(t.output_dtypes),
                    _list(t.output_formats),
                    "0" if t.task_type.startswith("MIX") else "N/A",
                    *metric_values(t, o.aic_metrics, o.metric_decimals),
                ]
            w.writerow(prefix + row)
        return buf.getvalue()

    # ---- step_trace_time.csv --------------------------------------------------------------------------
    STEP_COLS = [
        "Computing",
        "Communication(Not Overlapped)",
        "Overlapped",
        "Communication",
        "Free",
        "Stage",
        "Bubble",
        "Communication(Not Overlapped and Exclude Receive)",
        "Preparing",
    ]

    def step_header(self) -> list[str]:
        return (["Device_id"] if self.o.device_id_col else []) + ["Step", *self.STEP_COLS]

    def step_rows(self) -> str:
        lines = []
        for s in self.rt.steps:
            b = self.rt.step_breakdown(s)
            cells = ([str(self.rt.device_id)] if self.o.device_id_col else []) + [self.clock.step(s.id)]
            cells += [num(b[c]) for c in self.STEP_COLS]
            lines.append(csv_line(cells, "\r\n"))
        return "".join(lines)

    # ---- op_statistic.csv (aggregate, LF line ends like the real file) --------------------------------
    def op_statistic(self) -> str:
        agg: dict[tuple[str, str], list[int]] = defaultdict(list)
        for op in self.rt.ops:
            agg[(op.op_type, op.task_type)].append(op.dur_ns)
        grand = sum(sum(v) for v in agg.values()) * self.repeat
        rows = []
        for (op_type, core), durs in agg.items():
            tot = sum(durs) * self.repeat
            cnt = len(durs) * self.repeat
            rows.append(
                (
                    tot,
                    [
                        op_type,
                        core,
                        str(cnt),
                        _us3(tot),
                        _us3(min(durs)),
                        _us3(tot / cnt),
                        _us3(max(durs)),
                        _r3(100 * tot / grand if grand else 0.0),
                    ],
                )
            )
        rows.sort(key=lambda r: -r[0])
        dev = [str(self.rt.device_id)] if self.o.device_id_col else []
        head = (["Device_id"] if self.o.device_id_col else []) + [
            "OP Type",
            "Core Type",
            "Count",
            "Total Time(us)",
            "Min Time(us)",
            "Avg Time(us)",
            "Max Time(us)",
            "Ratio(%)",
        ]
        return csv_line(head, "\n") + "".join(csv_line(dev + r, "\n") for _, r in rows)

    # ---- memory_record.csv ----------------------------------------------------------------------------
    def memory_header(self) -> list[str]:
        return [
            "Component",
            "Timestamp(us)",
            "Total Allocated(MB)",
            "Total Reserved(MB)",
            "Total Active(MB)",
            "Stream Ptr",
            "Device Type",
        ]

    def memory_rows(self) -> str:
        dev = f"NPU:{self.rt.device_id}"
        lines = []
        for m in self.rt.memory:
            ts = self.clock.us(m.ts_ns) + "\t"
            act = m.allocated_bytes if m.active_bytes is None else m.active_bytes
            cells = [_mb(m.allocated_bytes), _mb(m.reserved_bytes), _mb(act), "897357296", dev]
            lines.append(csv_line(["PTA", ts, *cells], "\r\n"))
            lines.append(csv_line(["PTA+GE", ts, *cells], "\r\n"))
            lines.append(
                csv_line(["APP", ts, "", _mb(m.reserved_bytes + 256 * 1024 * 1024), "", "", dev], "\r\n")
            )
        return "".join(lines)

    def l2_cache(self) -> str:
        lines = [csv_line(["Stream Id", "Task Id", "Hit Rate", "Victim Rate", "Op Name"], "\n")]
        for op in self.rt.ops:
            if op.task_type in ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV"):
                hr = l2_hit_rate(op)
                lines.append(
                    csv_line(
                        [
                            str(op.stream),
                            str(op.task_id),
                            "N/A" if hr is None else num(hr, 6),
                            "0.05",
                            op.name,
                        ],
                        "\n",
                    )
                )
        return "".join(lines)

    # ---- communication.json / communication_matrix.json -----------------------------------------------
    def _comms_by_step(self) -> dict[int | None, list[CommOp]]:
        by: dict[int | None, list[CommOp]] = defaultdict(list)
        for c in self.rt.comms:
            by[c.step].append(c)
        return by

    def _step_key(self, sid: int | None) -> str:
        return "step" if sid is None else "step" + self.clock.step(sid)

    def communication_steps(self) -> str:
        parts = []
        for sid, comms in self._comms_by_step().items():
            body: dict[str, object] = {}
            for kind in ("p2p", "collective"):
                ops = [c for c in comms if c.kind == kind]
                d: dict[str, object] = {f"{c.name}@{c.group}": self._comm_op_info(c) for c in ops}
                if ops:
                    d["Total Op Info"] = _total_op_info(ops, self.sc, self.rt.rank)
                body[kind] = d
            parts.append(f"{js(self._step_key(sid))}: {self._dumps_ts(body)}")
        return ", ".join(parts)

    def _dumps_ts(self, obj: object) -> str:
        """json.dumps, then put the exact start-timestamp text where a sentinel string stands."""
        return _TS_SENTINEL.sub(lambda m: self.clock.us(int(m.group(1))), json.dumps(obj))

    def _comm_op_info(self, c: CommOp) -> dict[str, object]:
        info = _time_info(c.dur_ns, c.transit_ns, c.wait_ns, c.sync_ns, c.idle_ns)
        info = {"Start Timestamp(us)": f"@@TS{c.start_ns}@@", **info}
        return {
            "Communication Time Info": info,
            "Communication Bandwidth Info": _bandwidth_info(c, len(self.sc.peers(c.group, self.rt.rank))),
        }

    def matrix_steps(self) -> str:
        parts = []
        for sid, comms in self._comms_by_step().items():
            body: dict[str, object] = {}
            for kind in ("p2p", "collective"):
                d: dict[str, object] = {}
                by_type: dict[tuple[str, str], list[CommOp]] = defaultdict(list)
                for c in comms:
                    if c.kind == kind:
                        by_type[(c.op_type, c.group)].append(c)
                for (op_type, group), ops in by_type.items():
                    ranked = sorted(ops, key=lambda c: -c.dur_ns)
                    picks = {"top1": ranked[0], "middle": ranked[len(ranked) // 2], "bottom1": ranked[-1]}
                    if len(ranked) >= 2:
                        picks["bottom2"] = ranked[-2]
                    if len(ranked) >= 3:
                        picks["bottom3"] = ranked[-3]
                    for label, c in picks.items():
                        d[f"{op_type}-{label}@{group}"] = {
                            f"{ln.src}-{ln.dst}": _link_json(ln, c.name) for ln in self._links(c)
                        }
                    d[f"{op_type}-total@{group}"] = _total_links([ln for c in ops for ln in self._links(c)])
                body[kind] = d
            parts.append(f"{js(self._step_key(sid))}: {json.dumps(body)}")
        return ", ".join(parts)

    def _links(self, c: CommOp) -> list[Link]:
        if c.links is not None:
            return c.links
        peers = self.sc.peers(c.group, self.rt.rank)
        r = self.rt.rank
        out = []
        total = c.total_bytes
        if total:  # local copy into the output buffer, at on-chip speed (~400 GB/s)
            local = total // (len(peers) + 1)
            out.append(Link(r, r, "LOCAL", local, max(1, local * 10 // 4000)))
        for t, nbytes in c.transports.items():
            for i, p in enumerate(peers):
                share = nbytes // len(peers) + (nbytes % len(peers) if i == len(peers) - 1 else 0)
                out.append(Link(r, p, t, share, c.link_ns(t)))
        return out

    # ---- trace_view.json ------------------------------------------------------------------------------
    def _write_trace_view(self, path: Path) -> Path:
        template = self.trace_events()
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write("[")
            fh.write(", ".join(self.meta_events()))
            for text in self.replay.all(template):
                if text:
                    fh.write(", " + text)
            fh.write("]")
        return path

    def meta_events(self) -> list[str]:
        rt = self.rt
        ev: list[str] = []
        hp = rt.host_pid
        ev += [
            _m("process_name", hp, 0, '{"name": "Python"}', host=True),
            _m("process_labels", hp, 0, '{"labels": "CPU"}', host=True),
            _m("process_sort_index", hp, 0, '{"sort_index": 0}', host=True),
        ]
        for tid in (rt.main_tid, rt.launch_tid):
            ev += [
                _m("thread_name", hp, tid, f'{{"name": "Thread {tid}"}}', host=True),
                _m("thread_sort_index", hp, tid, f'{{"sort_index": {tid}}}', host=True),
            ]
        streams = sorted({o.stream for o in rt.ops} | {m.stream for m in rt.memcpys})
        hw = pid_of(rt, "Ascend Hardware")
        ev.append(_m("process_name", hw, 0, '{"name": "Ascend Hardware"}'))
        for s in streams:
            ev += [
                _m("thread_name", hw, s, f'{{"name": "Stream {s}"}}'),
                _m("thread_sort_index", hw, s, f'{{"sort_index": {s}}}'),
            ]
        ev += _labels(hw, SORT_INDEX["Ascend Hardware"], "NPU")
        for proc in ("HBM", "LLC", "NPU MEM"):
            if proc == "LLC" and not self.o.llc:
                continue
            p = pid_of(rt, proc)
            ev += [_m("process_name", p, 0, f'{{"name": "{proc}"}}'), *_labels(p, SORT_INDEX[proc], "NPU")]
        if rt.comms:
            p = pid_of(rt, "HCCL")
            ev.append(_m("process_name", p, 0, '{"name": "HCCL"}'))
            groups = self._groups()
            for gi, _ in enumerate(groups):
                ev += [
                    _m("thread_name", p, gi, f'{{"name": "Group {gi} Communication"}}'),
                    _m("thread_sort_index", p, gi, f'{{"sort_index": {gi}}}'),
                ]
            for k in range(self._planes()):
                tid = len(groups) + k
                ev += [
                    _m("thread_name", p, tid, f'{{"name": "Plane {k}"}}'),
                    _m("thread_sort_index", p, tid, f'{{"sort_index": {tid}}}'),
                ]
            ev += _labels(p, SORT_INDEX["HCCL"], "NPU")
        if self.o.cann_events:
            p = pid_of(rt, "CANN")
            ev.append(_m("process_name", p, 0, '{"name": "CANN"}'))
            for tid in (rt.main_tid, rt.launch_tid):
                ev += [
                    _m("thread_name", p, tid, f'{{"name": "Thread {tid}"}}'),
                    _m("thread_sort_index", p, tid, f'{{"sort_index": {tid}}}'),
                ]
            ev += _labels(p, SORT_INDEX["CANN"], "CPU")
        p = pid_of(rt, "Overlap Analysis")
        ev.append(_m("process_name", p, 0, '{"name": "Overlap Analysis"}'))
        for tid, name in enumerate(["Computing", "Communication", "Communication(Not Overlapped)", "Free"]):
            ev.append(_m("thread_name", p, tid, f'{{"name": "{name}"}}'))
        ev += _labels(p, SORT_INDEX["Overlap Analysis"], "NPU")
        p = pid_of(rt, "AI Core Freq")
        ev += [
            _m("process_name", p, 0, '{"name": "AI Core Freq"}'),
            *_labels(p, SORT_INDEX["AI Core Freq"], "NPU"),
        ]
        return ev

    def _groups(self) -> list[str]:
        seen: list[str] = []
        for c in self.rt.comms:
            if c.group not in seen:
                seen.append(c.group)
        return seen

    def _planes(self) -> int:
        return max([1] + [len(self.sc.peers(c.group, self.rt.rank)) for c in self.rt.comms])

    def trace_events(self) -> str:
        """Every non-metadata event of one repetition, sorted by time, joined by ', '."""
        ev: list[tuple[int, int, str]] = []
        self._host_and_device(ev)
        self._hccl(ev)
        self._counters(ev)
        self._overlap(ev)
        ev.sort(key=lambda e: (e[0], e[1]))
        return ", ".join(e[2] for e in ev)

    def _host_and_device(self, ev: list[tuple[int, int, str]]) -> None:
        if self.o.host_events:
            self._host_steps_and_ops(ev)
        self._device_tasks(ev)

    def _host_steps_and_ops(self, ev: list[tuple[int, int, str]]) -> None:
        """The ProfilerStep#N ranges and the scenario's own host ops, on the host process."""
        rt, ck = self.rt, self.clock
        hp, main = rt.host_pid, rt.main_tid
        for s in rt.steps:
            ev.append(
                (
                    s.start_ns,
                    0,
                    _cpu_op(f"ProfilerStep#{ck.step(s.id)}", hp, main, ck.us(s.start_ns), dur_text(s.dur_ns)),
                )
            )
        for h in rt.host_ops:
            ev.append(
                (
                    h.start_ns,
                    0,
                    _cpu_op(
                        h.name,
                        hp,
                        main if h.tid is None else h.tid,
                        ck.us(h.start_ns),
                        dur_text(h.dur_ns),
                        h.input_dims,
                        h.input_types,
                        h.seq_num,
                        h.cat,
                    ),
                )
            )

    def _device_tasks(self, ev: list[tuple[int, int, str]]) -> None:
        """Every op and memcpy as an Ascend Hardware task, and (every flow_every-th) its host launch and flows."""
        rt, o, ck = self.rt, self.o, self.clock
        hw = pid_of(rt, "Ascend Hardware")
        n = 0
        launched: list[Op | Memcpy] = [*rt.ops, *rt.memcpys]
        for t in sorted(launched, key=lambda t: t.start_ns):
            cid = ck.cid(t.connection_id)
            name, ttype, extra, host_name, cann_name, cann_args = self._task_names(t, cid)
            ts = ck.us(t.start_ns)
            ev.append(
                (
                    t.start_ns,
                    2,
                    (
                        f'{{"name": {js(name)}, "pid": {hw}, "tid": {t.stream}, "ts": "{ts}", "dur": {dur_text(t.dur_ns)}, '
                        f'"args": {{"Model Id": 4294967295, "Task Type": "{ttype}", "Physic Stream Id": {t.stream}, '
                        f'"Task Id": {t.task_id}, "Batch Id": 0, "Subtask Id": 4294967295, "connection_id": {cid}{extra}}}, '
                        f'"ph": "X"}}'
                    ),
                )
            )
            n += 1
            if (n - 1) % o.flow_every:
                continue
            if o.host_events:
                self._host_launch(ev, t, host_name, ts)
            if o.cann_events:
                self._cann_launch(ev, t, cid, cann_name, cann_args, ts)

    def _task_names(self, t: Op | Memcpy, cid: str) -> tuple[str, str, str, str, str, str]:
        """(task name, Task Type, extra args, host op name, CANN event name, CANN args) of one device task."""
        launch = self.rt.launch_tid
        if isinstance(t, Memcpy):
            extra = (
                f', "size(B)": {t.bytes}, "bandwidth(GB/s)": {num(t.bytes / t.dur_ns if t.dur_ns else 0.0)}, '
                f'"operation": {js(t.operation)}'
            )
            cann_args = (
                f'{{"Thread Id": {launch}, "Mode": "ACL_RTS", "level": "acl", "id": "aclrtMemcpyAsync", '
                f'"item_id": "0", "connection_id": {cid}}}'
            )
            return (
                "MEMCPY_ASYNC",
                "PCIE_DMA_SQE",
                extra,
                "aten::copy_",
                "AscendCL@aclrtMemcpyAsync",
                cann_args,
            )
        cann_args = (
            f'{{"Thread Id": {launch}, "Mode": "launch", "level": "node", "id": "0", '
            f'"item_id": {js(t.name)}, "connection_id": {cid}}}'
        )
        return t.name, t.task_type, "", t.host_op or f"aclnn{t.op_type}", "Node@launch", cann_args

    def _host_launch(self, ev: list[tuple[int, int, str]], t: Op | Memcpy, host_name: str, ts: str) -> None:
        """The host cpu_op that launched task t, and its torch_to_npu flow to the task."""
        rt, ck = self.rt, self.clock
        hp, main, hw = rt.host_pid, rt.main_tid, pid_of(rt, "Ascend Hardware")
        h_ts = t.start_ns - HOST_LEAD_NS
        dims, types = _input_dims(t) if isinstance(t, Op) else ("", "")
        ev.append((h_ts, 1, _cpu_op(host_name, hp, main, ck.us(h_ts), dur_text(HOST_DUR_NS), dims, types)))
        fid = ck.ns(t.start_ns)
        ev.append(
            (
                h_ts,
                1,
                f'{{"ph": "s", "bp": "e", "name": "torch_to_npu", "id": {fid}, "pid": {hp}, '
                f'"tid": {main}, "ts": "{ck.us(h_ts)}", "cat": "async_npu"}}',
            )
        )
        ev.append(
            (
                t.start_ns,
                3,
                f'{{"ph": "f", "bp": "e", "name": "torch_to_npu", "id": {fid}, "pid": {hw}, '
                f'"tid": {t.stream}, "ts": "{ts}", "cat": "async_npu"}}',
            )
        )

    def _cann_launch(
        self,
        ev: list[tuple[int, int, str]],
        t: Op | Memcpy,
        cid: str,
        cann_name: str,
        cann_args: str,
        ts: str,
    ) -> None:
        """The CANN launch event of task t and its HostToDevice flow to the task."""
        rt, ck = self.rt, self.clock
        launch, cann, hw = rt.launch_tid, pid_of(rt, "CANN"), pid_of(rt, "Ascend Hardware")
        c_ts = t.start_ns - CANN_LEAD_NS
        ev.append(
            (
                c_ts,
                1,
                f'{{"name": {js(cann_name)}, "pid": {cann}, "tid": {launch}, "ts": "{ck.us(c_ts)}", '
                f'"dur": {dur_text(CANN_DUR_NS)}, "args": {cann_args}, "ph": "X"}}',
            )
        )
        ev.append(
            (
                c_ts,
                1,
                f'{{"name": "HostToDevice{cid}", "ph": "s", "cat": "HostToDevice", "id": "{cid}", '
                f'"pid": {cann}, "tid": {launch}, "ts": "{ck.us(c_ts)}"}}',
            )
        )
        ev.append(
            (
                t.start_ns,
                3,
                f'{{"name": "HostToDevice{cid}", "ph": "f", "id": "{cid}", "ts": "{ts}", '
                f'"cat": "HostToDevice", "pid": {hw}, "tid": {t.stream}, "bp": "e"}}',
            )
        )

    def _hccl(self, ev: list[tuple[int, int, str]]) -> None:
        rt, o, ck = self.rt, self.o, self.clock
        if not rt.comms:
            return
        p = pid_of(rt, "HCCL")
        groups = self._groups()
        hp, main, launch, cann = rt.host_pid, rt.main_tid, rt.launch_tid, pid_of(rt, "CANN")
        for c in rt.comms:
            gtid = groups.index(c.group)
            ts = ck.us(c.start_ns)
            cid = ck.cid(c.connection_id)
            count = c.total_bytes // 4 if c.data_type in ("FP32", "INT32") else c.total_bytes // 2
            ev.append(
                (
                    c.start_ns,
                    2,
                    (
                        f'{{"name": {js(c.name)}, "pid": {p}, "tid": {gtid}, "ts": "{ts}", "dur": {dur_text(c.dur_ns)}, '
                        f'"args": {{"connection_id": {cid}, "model id": 4294967295, "data_type": {js(c.data_type)}, '
                        f'"alg_type": {js(c.alg_type)}, "count": {count}}}, "ph": "X"}}'
                    ),
                )
            )
            if o.host_events:
                h_ts = c.start_ns - HOST_LEAD_NS
                hname = c.host_op or f"Hccl{c.op_type.capitalize()}"
                fid = ck.ns(c.start_ns)
                ev.append((h_ts, 1, _cpu_op(hname, hp, main, ck.us(h_ts), dur_text(HOST_DUR_NS))))
                ev.append(
                    (
                        h_ts,
                        1,
                        f'{{"ph": "s", "bp": "e", "name": "torch_to_npu", "id": {fid}, "pid": {hp}, '
                        f'"tid": {main}, "ts": "{ck.us(h_ts)}", "cat": "async_npu"}}',
                    )
                )
                ev.append(
                    (
                        c.start_ns,
                        3,
                        f'{{"ph": "f", "bp": "e", "name": "torch_to_npu", "id": {fid}, "pid": {p}, '
                        f'"tid": {gtid}, "ts": "{ts}", "cat": "async_npu"}}',
                    )
                )
            if o.cann_events:
                c_ts = c.start_ns - CANN_LEAD_NS
                ev.append(
                    (
                        c_ts,
                        1,
                        f'{{"name": "Hccl@Launch_Ffts", "pid": {cann}, "tid": {launch}, "ts": "{ck.us(c_ts)}", '
                        f'"dur": {dur_text(CANN_DUR_NS)}, "args": {{"Thread Id": {launch}, "Mode": "master", '
                        f'"level": "hccl", "id": "0", "item_id": "Launch_Ffts", "connection_id": {cid}}}, '
                        f'"ph": "X"}}',
                    )
                )
                ev.append(
                    (
                        c_ts,
                        1,
                        f'{{"name": "HostToDevice{cid}", "ph": "s", "cat": "HostToDevice", "id": "{cid}", '
                        f'"pid": {cann}, "tid": {launch}, "ts": "{ck.us(c_ts)}"}}',
                    )
                )
                ev.append(
                    (
                        c.start_ns,
                        3,
                        f'{{"name": "HostToDevice{cid}", "ph": "f", "id": "{cid}", "ts": "{ts}", '
                        f'"cat": "HostToDevice", "pid": {p}, "tid": {gtid}, "bp": "e"}}',
                    )
                )
            if o.hccl_tasks:
                self._hccl_tasks(ev, c, p, len(groups))

    def _hccl_tasks(self, ev: list[tuple[int, int, str]], c: CommOp, pid: int, plane0: int) -> None:
        ck, r = self.clock, self.rt.rank
        peers = self.sc.peers(c.group, r) or [r]
        ctx = 0

        def task(
            tid: int, start: int, dur: int, ttype: str, dst: int, transport: str, size: int, link: str
        ) -> None:
            nonlocal ctx
            bw = size / dur if dur else 0.0
            args = (
                f'{{"notify_id": "{ctx}", "duration estimated(us)": {dur_text(dur)}, "stream id": 4, '
                f'"task id": {c.connection_id % 65536}, "context id": {ctx}, "task type": "{ttype}", '
                f'"src rank": {r}, "dst rank": {dst}, "transport type": "{transport}", "size(Byte)": {size}, '
                f'"data type": "INVALID_TYPE", "link type": "{link}", "bandwidth(GB/s)": {num(bw)}, '
                f'"model id": 4294967295}}'
            )
            ev.append(
                (
                    start,
                    2,
                    f'{{"name": "{ttype}", "pid": {pid}, "tid": {tid}, "ts": "{ck.us(start)}", '
                    f'"dur": {dur_text(dur)}, "args": {args}, "ph": "X"}}',
                )
            )
            ctx += 1

        if c.wait_ns:
            task(plane0, c.start_ns, c.wait_ns, "Notify_Wait", peers[0], "LOCAL", 0, "INVALID_TYPE")
        t0 = c.start_ns + c.wait_ns
        for t, nbytes in c.transports.items():
            for i, p in enumerate(peers):
                share = nbytes // len(peers) + (nbytes % len(peers) if i == len(peers) - 1 else 0)
                if t == "RDMA":
                    task(plane0 + i, t0, c.link_ns(t), "RDMASend", p, "RDMA", share, "ROCE")
                else:
                    task(plane0 + i, t0, c.link_ns(t), "Memcpy", p, "SDMA", share, t)

    def _counters(self, ev: list[tuple[int, int, str]]) -> None:
        rt, sc, ck, o = self.rt, self.sc, self.clock, self.o
        hbm = rt.hbm_counters(
            sc.hbm_period_ns, sc.hbm_channels, start_ns=0, end_ns=self.span_end, stamp=o.stamp
        )
        p = pid_of(rt, "HBM")
        for s in hbm.samples:
            r, w = hbm.channel_mbps(s)
            ts = ck.us(s.ts_ns)
            rtxt, wtxt = num(r), num(w)
            for ch in range(hbm.channels):
                ev.append(
                    (
                        s.ts_ns,
                        4,
                        f'{{"name": "HBM {ch}/Read", "ts": "{ts}", "pid": {p}, "tid": 0, '
                        f'"args": {{"Read(MB/s)": {rtxt}}}, "ph": "C"}}',
                    )
                )
                ev.append(
                    (
                        s.ts_ns,
                        4,
                        f'{{"name": "HBM {ch}/Write", "ts": "{ts}", "pid": {p}, "tid": 0, '
                        f'"args": {{"Write(MB/s)": {wtxt}}}, "ph": "C"}}',
                    )
                )
        if o.llc:
            llc = rt.llc_counters(sc.hbm_period_ns, sc.llc_channels, start_ns=0, end_ns=self.span_end)
            p = pid_of(rt, "LLC")
            hit = num(rt.llc_read_hit_rate)
            for s in llc.samples:
                r, _ = llc.channel_mbps(s)
                ts = ck.us(s.ts_ns)
                for ch in range(llc.channels):
                    ev.append(
                        (
                            s.ts_ns,
                            4,
                            f'{{"name": "LLC {ch} Read/Throughput", "ts": "{ts}", "pid": {p}, "tid": 0, '
                            f'"args": {{"Throughput(MB/s)": {num(r)}}}, "ph": "C"}}',
                        )
                    )
                    ev.append(
                        (
                            s.ts_ns,
                            4,
                            f'{{"name": "LLC {ch} Read/Hit Rate", "ts": "{ts}", "pid": {p}, "tid": 0, '
                            f'"args": {{"Hit Rate(%)": {hit}}}, "ph": "C"}}',
                        )
                    )
        p = pid_of(rt, "NPU MEM")
        for m in rt.memory:
            ts = ck.us(m.ts_ns)
            kb = m.reserved_bytes / 1024
            dev_kb = kb + 256 * 1024
            for name, v in (
                ("APP/DDR", 0.0),
                ("APP/HBM", kb),
                ("APP/Memory", kb),
                ("Device/DDR", 0.0),
                ("Device/HBM", dev_kb),
                ("Device/Memory", dev_kb),
            ):
                ev.append(
                    (
                        m.ts_ns,
                        4,
                        f'{{"name": "{name}", "ts": "{ts}", "pid": {p}, "tid": 0, "args": {{"KB": {num(v)}}}, '
                        f'"ph": "C"}}',
                    )
                )
        p = pid_of(rt, "AI Core Freq")
        ev.append(
            (
                0,
                4,
                f'{{"name": "AI Core Freq", "ts": "{ck.us(0)}", "pid": {p}, "tid": 0, '
                f'"args": {{"MHz": {AICORE_MHZ}}}, "ph": "C"}}',
            )
        )

    def _overlap(self, ev: list[tuple[int, int, str]]) -> None:
        rt, ck = self.rt, self.clock
        p = pid_of(rt, "Overlap Analysis")
        iv = rt.overlap_intervals(0, self.span_end)
        for tid, name in enumerate(["Computing", "Communication", "Communication(Not Overlapped)", "Free"]):
            for s, e in iv[name]:
                ev.append(
                    (
                        s,
                        5,
                        f'{{"name": "{name}", "pid": {p}, "tid": {tid}, "ts": "{ck.us(s)}", '
                        f'"dur": {dur_text(e - s)}, "ph": "X"}}',
                    )
                )


# ---- helpers ----------------------------------------------------------------------------------------------
_TS_SENTINEL = re.compile(r'"@@TS(-?\d+)@@"')


def csv_line(cells: Iterable[str], eol: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator=eol).writerow(list(cells))
    return buf.getvalue()


def _shapes(shapes: tuple[str, ...]) -> str:
    """Shapes cell with literal quotes, e.g. '"32,3,224,224;64"' (csv doubles the quotes)."""
    return '"' + ";".join(shapes) + '"' if shapes else "N/A"


def _list(items: tuple[str, ...]) -> str:
    return ";".join(items) if items else "N/A"


def _input_dims(op: Op) -> tuple[str, str]:
    dims = ";\r\n".join(op.input_shapes)
    types = ";\r\n".join(_torch_dtype(d) for d in op.input_dtypes)
    return dims, types


def _torch_dtype(d: str) -> str:
    return {
        "FLOAT": "float",
        "FLOAT16": "c10::Half",
        "BF16": "c10::BFloat16",
        "INT64": "long int",
        "INT32": "int",
    }.get(d, d.lower())


def _cpu_op(
    name: str,
    pid: int,
    tid: int,
    ts: str,
    dur: str,
    dims: str | None = None,
    types: str | None = None,
    seq: int = -1,
    cat: str = "cpu_op",
) -> str:
    args = f'"Sequence number": {seq}, "Fwd thread id": 0'
    if dims:
        args += f', "Input Dims": {js(dims)}, "Input type": {js(types or "")}'
    return (
        f'{{"ph": "X", "name": {js(name)}, "pid": {pid}, "tid": {tid}, "ts": "{ts}", "dur": {dur}, '
        f'"cat": "{cat}", "args": {{{args}}}}}'
    )


def _m(name: str, pid: int, tid: int, args: str, host: bool = False) -> str:
    if host:  # the Python track's M events put ph first, like the real dump
        return f'{{"ph": "M", "name": "{name}", "pid": {pid}, "tid": {tid}, "args": {args}}}'
    return f'{{"name": "{name}", "pid": {pid}, "tid": {tid}, "args": {args}, "ph": "M"}}'


def _labels(pid: int, sort_index: int, label: str) -> list[str]:
    return [
        _m("process_labels", pid, 0, f'{{"labels": "{label}"}}'),
        _m("process_sort_index", pid, 0, f'{{"sort_index": {sort_index}}}'),
    ]


def _us3(ns: float) -> str:
    return repr(round(ns / 1000, 3))


def _r3(x: float) -> str:
    return repr(round(x, 3))


def _mb(nbytes: int) -> str:
    return repr(nbytes / (1024 * 1024))


def _time_info(dur: int, transit: int, wait: int, sync: int, idle: int) -> dict[str, object]:
    return {
        "Elapse Time(ms)": dur / 1e6,
        "Transit Time(ms)": transit / 1e6,
        "Wait Time(ms)": wait / 1e6,
        "Synchronization Time(ms)": sync / 1e6,
        "Idle Time(ms)": idle / 1e6,
        "Wait Time Ratio": round(wait / (wait + transit), 4) if wait + transit else 0,
        "Synchronization Time Ratio": round(sync / (sync + transit), 4) if sync + transit else 0,
    }


def _bandwidth_info(c: CommOp, n_peers: int) -> dict[str, object]:
    """Per-transport block; MB = 1e6 bytes (the real dump's Size Distribution key 2.064384 is a 2064384 B
    packet), Bandwidth(GB/s) = MB / ms rounded to 4 decimals. SDMA = HCCS + PCIE + SIO."""
    out: dict[str, object] = {}
    n = max(1, n_peers)
    for t in TRANSPORTS:
        if t == "SDMA":
            size = sum(c.transports.get(p, 0) for p in SDMA_PARTS)
            ns = sum(c.link_ns(p) for p in SDMA_PARTS if c.transports.get(p))
            dist: dict[str, list[object]] = {}
            lpr: object = 0
        else:
            size = c.transports.get(t, 0)
            ns = c.link_ns(t) if size else 0
            dist = {repr(size / n / 1e6): [n, ns / 1e6]} if size else {}
            lpr = 0.0 if size else 0
        if size:
            out[t] = {
                "Transit Size(MB)": size / 1e6,
                "Transit Time(ms)": ns / 1e6,
                "Bandwidth(GB/s)": round(size / ns, 4) if ns else 0,
                "Large Packet Ratio": lpr,
                "Size Distribution": dist,
            }
        else:
            out[t] = {
                "Transit Size(MB)": 0,
                "Transit Time(ms)": 0,
                "Bandwidth(GB/s)": 0,
                "Large Packet Ratio": 0,
                "Size Distribution": {},
            }
    return out


def _total_op_info(ops: list[CommOp], sc: Scenario, rank: int) -> dict[str, object]:
    dur = sum(c.dur_ns for c in ops)
    transit = sum(c.transit_ns for c in ops)
    wait = sum(c.wait_ns for c in ops)
    sync = sum(c.sync_ns for c in ops)
    idle = sum(c.idle_ns for c in ops)
    bw: dict[str, object] = {}
    for t in TRANSPORTS:
        size_b, ns = 0, 0
        dist: dict[str, list[float]] = {}
        for c in ops:
            info = _bandwidth_info(c, len(sc.peers(c.group, rank)))[t]
            assert isinstance(info, dict)
            if info["Transit Size(MB)"]:
                size_b += sum(c.transports.get(p, 0) for p in SDMA_PARTS) if t == "SDMA" else c.transports[t]
                ns += (
                    sum(c.link_ns(p) for p in SDMA_PARTS if c.transports.get(p))
                    if t == "SDMA"
                    else c.link_ns(t)
                )
                for k, (cnt, ms) in info["Size Distribution"].items():
                    prev = dist.get(k, [0, 0.0])
                    dist[k] = [prev[0] + cnt, prev[1] + ms]
        bw[t] = (
            {"Transit Time(ms)": ns / 1e6, "Transit Size(MB)": size_b / 1e6, "Size Distribution": dist}
            if size_b
            else {"Transit Time(ms)": 0, "Transit Size(MB)": 0, "Size Distribution": {}}
        )
    return {
        "Communication Time Info": _time_info(dur, transit, wait, sync, idle),
        "Communication Bandwidth Info": bw,
    }


def _link_json(ln: Link, op_name: str) -> dict[str, object]:
    return {
        "Transport Type": ln.transport,
        "Transit Size(MB)": ln.bytes / 1e6,
        "Transit Time(ms)": ln.transit_ns / 1e6,
        "Bandwidth(GB/s)": round(ln.bytes / ln.transit_ns, 4) if ln.transit_ns else 0,
        "Op Name": op_name,
    }


def _total_links(links: list[Link]) -> dict[str, object]:
    acc: dict[str, list[object]] = {}
    for ln in links:
        key = f"{ln.src}-{ln.dst}"
        if key not in acc:
            acc[key] = [ln.transport, 0, 0]
        acc[key][1] = int(acc[key][1]) + ln.bytes  # type: ignore[call-overload]
        acc[key][2] = int(acc[key][2]) + ln.transit_ns  # type: ignore[call-overload]
    out: dict[str, object] = {}
    for key, (t, b, ns) in acc.items():
        assert isinstance(b, int) and isinstance(ns, int)
        out[key] = {
            "Transport Type": t,
            "Transit Size(MB)": b / 1e6,
            "Transit Time(ms)": ns / 1e6,
            "Bandwidth(GB/s)": round(b / ns, 4) if ns else 0,
        }
    return out
