"""Scenario model for synthetic profiler dumps whose answers are known by construction.

A `Scenario` holds one `RankTrace` per rank. A rank holds device compute tasks (`Op`), collectives
(`CommOp`), host->device copies (`Memcpy`), steps (`Step`), extra host ops (`HostOp`) and allocator samples
(`MemorySample`). Every time is an int offset in ns from `Scenario.base_ns` (an absolute Unix-epoch ns), so
the µs text the writers emit ("1736408883000123.456") converts back to the exact same ns.

What "known by construction" means here:
- per-op HBM bytes are the `hbm_read_bytes`/`hbm_write_bytes` you set; the writers encode them as the profiler
  would (Memory group: bandwidth GB/s = bytes / core time in ns; MemoryAccess: KB = bytes / 1024);
- the sampled HBM counters are *derived from the same ops* (`derive_hbm_counters`): the bytes of every task
  are spread uniformly over its [start, end), summed per sampling window, divided by the window length and
  split evenly over the HBM channels. So "HBM utilisation" of a window is exactly the ops' bytes in it;
- the step breakdown (step_trace_time.csv, the Overlap Analysis track) is computed from the op intervals.

Counter time convention: a sample stamped `ts` reports the average over the window [ts, ts + period) (the
canonical `counters` table says "a sample holds until the next one on the same series"). Pass
`stamp="end"` to `derive_hbm_counters` for the other convention (value at ts = average over the window
that *ends* at ts).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..units import GiB as GiB  # re-exported: traceql.synth.MiB and friends
from ..units import KiB as KiB
from ..units import MiB as MiB

BASE_NS = 1_736_408_883_000_000_000  # 2025-01-09, whole second: µs text of offsets stays readable
MODEL_ID_SINGLE_OP = 4294967295  # `Model ID` of an eager (single-op) run

COMPUTE_TASK_TYPES = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "DSA_SQE")
# task types that carry aic_/aiv_ PMU columns in kernel_details.csv (others are N/A there)
PMU_TASK_TYPES = ("AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV")

# collective type (lower case, as communication_matrix.json keys it) -> kernel_details `Type`
HCCL_KERNEL_TYPE = {
    "allreduce": "hcom_allReduce_",
    "allgather": "hcom_allGather_",
    "reducescatter": "hcom_reduceScatter_",
    "broadcast": "hcom_broadcast_",
    "alltoall": "hcom_alltoall_",
    "alltoallv": "hcom_alltoallv_",
    "send": "hcom_send_",
    "receive": "hcom_receive_",
    "reduce": "hcom_reduce_",
}
TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")  # communication.json order
# SDMA in communication.json is not a link of its own: it is the sum of the on-node links (the real dump
# shows SDMA == HCCS when only HCCS carries data). CommOp.transports must not name it.
SDMA_PARTS = ("HCCS", "PCIE", "SIO")


@dataclass
class Op:
    """One device compute task (a kernel_details.csv row and an `Ascend Hardware` X event)."""

    name: str
    op_type: str
    start_ns: int
    dur_ns: int
    task_type: str = "AI_CORE"
    stream: int = 2
    hbm_read_bytes: int = 0
    hbm_write_bytes: int = 0
    ub_read_bytes: int = 0
    ub_write_bytes: int = 0
    l1_read_bytes: int = 0
    l1_write_bytes: int = 0
    l2_read_bytes: int = 0
    l2_write_bytes: int = 0
    l2_read_hits: int | None = None  # L2Cache group: read hits / misses (r0 + r1)
    l2_read_misses: int | None = None
    l2_write_hits: int | None = None
    l2_write_misses: int | None = None
    pipe: dict[str, float] = field(
        default_factory=dict
    )  # mac, scalar, mte1, mte2, mte3, fixpipe, vec, icache_miss
    flops: float = 0.0  # ArithmeticUtilization cube/vector fops
    block_dim: int = 8
    mix_block_dim: int = 0
    input_shapes: tuple[str, ...] = ()
    input_dtypes: tuple[str, ...] = ()
    input_formats: tuple[str, ...] = ()
    output_shapes: tuple[str, ...] = ()
    output_dtypes: tuple[str, ...] = ()
    output_formats: tuple[str, ...] = ()
    core_time_ns: int | None = None  # aicore_time/aiv_time; defaults to dur_ns
    host_op: str | None = None  # name of the host cpu_op that launches it; None -> "aclnn<op_type>"
    op_state: str = "dynamic"
    # assigned by RankTrace.finalize()
    task_id: int = 0
    connection_id: int = 0
    step: int | None = None

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns

    @property
    def core_ns(self) -> int:
        return self.dur_ns if self.core_time_ns is None else self.core_time_ns

    def core_split(self) -> tuple[float, float]:
        """Share of the task's traffic measured on the cube (aic_) and vector (aiv_) cores.

        AI_CORE -> all aic; AI_VECTOR_CORE -> all aiv; MIX_* -> half each. A parser that sums
        `aic_X * aicore_time + aiv_X * aiv_time` gets the op's bytes back."""
        if self.task_type == "AI_CORE":
            return 1.0, 0.0
        if self.task_type == "AI_VECTOR_CORE":
            return 0.0, 1.0
        if self.task_type in ("MIX_AIC", "MIX_AIV"):
            return 0.5, 0.5
        return 0.0, 0.0


@dataclass
class Link:
    """One src->dst entry of communication_matrix.json."""

    src: int
    dst: int
    transport: str  # LOCAL, HCCS, PCIE, RDMA, SIO
    bytes: int
    transit_ns: int


@dataclass
class CommOp:
    """One collective (HCCL op): kernel_details HCCL row, HCCL track, communication*.json entries.

    Time split as msprof-analyze defines it: elapse = transit + wait + idle, sync is part of wait."""

    name: str  # e.g. hcom_allReduce__586_0_1
    start_ns: int
    dur_ns: int
    op_type: str = "allreduce"
    group: str = "17522688603477080586"
    kind: str = "collective"  # or "p2p"
    transit_ns: int = 0
    wait_ns: int = 0
    sync_ns: int = 0
    transports: dict[str, int] = field(default_factory=dict)  # link type -> bytes (HCCS/RDMA/PCIE/SIO)
    transport_ns: dict[str, int] = field(default_factory=dict)  # link type -> transit ns (default transit_ns)
    links: list[Link] | None = None  # matrix entries; None -> derived from peers
    data_type: str = "FP32"
    alg_type: str = "MESH-RING"
    hbm_read_bytes: int = 0  # counted in the HBM counters when set (collectives do touch HBM)
    hbm_write_bytes: int = 0
    host_op: str | None = None  # None -> "HcclAllreduce"-like name
    connection_id: int = 0
    step: int | None = None

    def __post_init__(self) -> None:
        bad = [t for t in self.transports if t not in ("RDMA", "HCCS", "PCIE", "SIO")]
        if bad:
            raise ValueError(
                f"CommOp {self.name}: transports {bad} not in RDMA/HCCS/PCIE/SIO (SDMA is derived)"
            )
        if self.transit_ns + self.wait_ns > self.dur_ns:
            raise ValueError(
                f"CommOp {self.name}: transit + wait ({self.transit_ns + self.wait_ns}) > dur {self.dur_ns}"
            )
        if self.sync_ns > self.wait_ns:
            raise ValueError(f"CommOp {self.name}: sync_ns > wait_ns (sync is part of wait)")

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns

    @property
    def idle_ns(self) -> int:
        return self.dur_ns - self.transit_ns - self.wait_ns

    @property
    def total_bytes(self) -> int:
        """Bytes over all links (SDMA not counted twice)."""
        return sum(self.transports.values())

    @property
    def kernel_type(self) -> str:
        return HCCL_KERNEL_TYPE.get(self.op_type, f"hcom_{self.op_type}_")

    def link_ns(self, transport: str) -> int:
        return self.transport_ns.get(transport, self.transit_ns)


@dataclass
class Memcpy:
    """A host->device copy: `MEMCPY_ASYNC` task (PCIE_DMA_SQE) + AscendCL@aclrtMemcpyAsync + aten::copy_."""

    start_ns: int
    dur_ns: int
    bytes: int
    stream: int = 2
    operation: str = "host to device"
    connection_id: int = 0
    task_id: int = 0

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns

    @property
    def hbm_write_bytes(self) -> int:  # an H2D copy writes HBM
        return self.bytes if self.operation == "host to device" else 0

    @property
    def hbm_read_bytes(self) -> int:
        return self.bytes if self.operation == "device to host" else 0


@dataclass
class HostOp:
    """An extra framework-side event on the Python track (cpu_op / python_function)."""

    name: str
    start_ns: int
    dur_ns: int
    cat: str = "cpu_op"
    tid: int | None = None  # None -> the rank's main thread
    input_dims: str | None = None
    input_types: str | None = None
    seq_num: int = -1


@dataclass
class Step:
    """A profiler step: `ProfilerStep#<id>` on the host and a step_trace_time.csv row.

    `breakdown` overrides the computed step_trace_time values (µs floats keyed by column name)."""

    id: int
    start_ns: int
    dur_ns: int
    breakdown: dict[str, float] | None = None

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns


@dataclass
class MemorySample:
    """Allocator totals at a time (memory_record.csv PTA rows, NPU MEM counters)."""

    ts_ns: int
    allocated_bytes: int
    reserved_bytes: int
    active_bytes: int | None = None


@dataclass
class CounterSample:
    ts_ns: int  # offset from base; window [ts, ts + period) with stamp="start"
    read_bps: float  # whole device, bytes/s
    write_bps: float


@dataclass
class CounterSeries:
    """Sampled bandwidth (HBM or LLC) of one rank. Per-channel value = device value / channels."""

    track: str
    period_ns: int
    channels: int
    samples: list[CounterSample]

    def channel_mbps(self, s: CounterSample) -> tuple[float, float]:
        """(read, write) MB/s of one channel, as the `HBM <id>/Read` counter reports it (MB = 1e6 bytes)."""
        return s.read_bps / self.channels / 1e6, s.write_bps / self.channels / 1e6


@dataclass
class RankTrace:
    rank: int
    device_id: int
    host_pid: int
    ops: list[Op] = field(default_factory=list)
    comms: list[CommOp] = field(default_factory=list)
    memcpys: list[Memcpy] = field(default_factory=list)
    host_ops: list[HostOp] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    memory: list[MemorySample] = field(default_factory=list)
    llc_read_hit_rate: float = 0.85
    _cursor: dict[int, int] = field(default_factory=dict, repr=False)

    @property
    def main_tid(self) -> int:
        return self.host_pid

    @property
    def launch_tid(self) -> int:  # the task-queue (dequeue) thread that calls CANN
        return self.host_pid + 3198

    # ---- building -------------------------------------------------------------------------------------
    def add_op(
        self,
        name: str,
        op_type: str,
        *,
        start_ns: int | None = None,
        dur_ns: int,
        gap_ns: int = 2_000,
        **kw: object,
    ) -> Op:
        """Add a compute task. start_ns=None places it `gap_ns` after the previous task on its stream."""
        stream = int(kw.get("stream", 2))  # type: ignore[call-overload]
        if start_ns is None:
            start_ns = self._cursor.get(stream, 0) + gap_ns
        op = Op(name=name, op_type=op_type, start_ns=start_ns, dur_ns=dur_ns, **kw)  # type: ignore[arg-type]
        self._cursor[stream] = max(self._cursor.get(stream, 0), op.end_ns)
        self.ops.append(op)
        return op

    def add_comm(
        self, name: str, *, start_ns: int | None = None, dur_ns: int, gap_ns: int = 2_000, **kw: object
    ) -> CommOp:
        """Add a collective; start_ns=None places it after the last compute task on stream 2."""
        if start_ns is None:
            start_ns = self._cursor.get(2, 0) + gap_ns
        c = CommOp(name=name, start_ns=start_ns, dur_ns=dur_ns, **kw)  # type: ignore[arg-type]
        self.comms.append(c)
        self._cursor[2] = max(self._cursor.get(2, 0), c.end_ns)
        return c

    def add_memcpy(
        self,
        *,
        start_ns: int | None = None,
        dur_ns: int,
        nbytes: int,
        stream: int = 2,
        operation: str = "host to device",
        gap_ns: int = 2_000,
    ) -> Memcpy:
        if start_ns is None:
            start_ns = self._cursor.get(stream, 0) + gap_ns
        m = Memcpy(start_ns=start_ns, dur_ns=dur_ns, bytes=nbytes, stream=stream, operation=operation)
        self.memcpys.append(m)
        self._cursor[stream] = max(self._cursor.get(stream, 0), m.end_ns)
        return m

    def add_step(
        self, step_id: int, *, start_ns: int, dur_ns: int, breakdown: dict[str, float] | None = None
    ) -> Step:
        s = Step(step_id, start_ns, dur_ns, breakdown)
        self.steps.append(s)
        return s

    def add_host_op(self, name: str, *, start_ns: int, dur_ns: int, **kw: object) -> HostOp:
        h = HostOp(name=name, start_ns=start_ns, dur_ns=dur_ns, **kw)  # type: ignore[arg-type]
        self.host_ops.append(h)
        return h

    def add_memory_sample(
        self, ts_ns: int, allocated_bytes: int, reserved_bytes: int, active_bytes: int | None = None
    ) -> MemorySample:
        m = MemorySample(ts_ns, allocated_bytes, reserved_bytes, active_bytes)
        self.memory.append(m)
        return m

    def cursor(self, stream: int = 2) -> int:
        """End of the last task placed on `stream` (ns offset)."""
        return self._cursor.get(stream, 0)

    # ---- derived --------------------------------------------------------------------------------------
    def finalize(self, first_task_id: int = 11000, first_connection_id: int = 1000) -> None:
        """Sort everything by time and assign task ids, connection ids and step ids (idempotent)."""
        self.ops.sort(key=lambda o: (o.start_ns, o.stream))
        self.comms.sort(key=lambda c: c.start_ns)
        self.memcpys.sort(key=lambda m: m.start_ns)
        self.steps.sort(key=lambda s: s.start_ns)
        self.memory.sort(key=lambda m: m.ts_ns)
        tasks: list[Op | Memcpy | CommOp] = sorted(
            [*self.ops, *self.memcpys, *self.comms], key=lambda t: t.start_ns
        )
        tid = first_task_id
        for i, t in enumerate(tasks):
            t.connection_id = first_connection_id + i
            if not isinstance(t, CommOp):
                t.task_id = tid
                tid += 1
        stepped: list[Op | CommOp] = [*self.ops, *self.comms]
        for t in stepped:
            t.step = self.step_of(t.start_ns)

    def step_of(self, ts_ns: int) -> int | None:
        for s in self.steps:
            if s.start_ns <= ts_ns < s.end_ns:
                return s.id
        return None

    def end_ns(self) -> int:
        ends = [0]
        ends += (
            [o.end_ns for o in self.ops] + [c.end_ns for c in self.comms] + [m.end_ns for m in self.memcpys]
        )
        ends += [s.end_ns for s in self.steps] + [h.start_ns + h.dur_ns for h in self.host_ops]
        ends += [m.ts_ns for m in self.memory]
        return max(ends)

    def start_ns(self) -> int:
        starts = (
            [o.start_ns for o in self.ops]
            + [c.start_ns for c in self.comms]
            + [m.start_ns for m in self.memcpys]
        )
        starts += [s.start_ns for s in self.steps] + [h.start_ns for h in self.host_ops]
        return min(starts) if starts else 0

    def hbm_tasks(self) -> Iterator[tuple[int, int, int, int]]:
        """(start, dur, read_bytes, write_bytes) of every task that moves HBM bytes."""
        movers: list[Op | Memcpy | CommOp] = [*self.ops, *self.memcpys, *self.comms]
        for t in movers:
            r, w = t.hbm_read_bytes, t.hbm_write_bytes
            if r or w:
                yield t.start_ns, t.dur_ns, r, w

    def total_hbm_bytes(self) -> tuple[int, int]:
        """(read, write) bytes over all tasks (ops + copies + collectives)."""
        r = w = 0
        for _, _, rb, wb in self.hbm_tasks():
            r += rb
            w += wb
        return r, w

    def hbm_counters(
        self,
        period_ns: int,
        channels: int = 4,
        *,
        start_ns: int = 0,
        end_ns: int | None = None,
        stamp: str = "start",
    ) -> CounterSeries:
        return derive_hbm_counters(
            self.hbm_tasks(),
            period_ns,
            channels,
            start_ns=start_ns,
            end_ns=self.end_ns() if end_ns is None else end_ns,
            stamp=stamp,
        )

    def llc_counters(
        self, period_ns: int, channels: int = 2, *, start_ns: int = 0, end_ns: int | None = None
    ) -> CounterSeries:
        """LLC read/write throughput from the ops' l2 bytes (same spreading rule as HBM)."""
        tasks = (
            (o.start_ns, o.dur_ns, o.l2_read_bytes, o.l2_write_bytes)
            for o in self.ops
            if o.l2_read_bytes or o.l2_write_bytes
        )
        return derive_hbm_counters(
            tasks,
            period_ns,
            channels,
            start_ns=start_ns,
            end_ns=self.end_ns() if end_ns is None else end_ns,
            track="LLC",
        )

    def step_breakdown(self, step: Step) -> dict[str, float]:
        """step_trace_time.csv values (µs) computed from the op intervals inside the step window.

        Computing = union of compute-task time (kernel_details tasks; H2D copies are not computing);
        Communication = union of collective time; Overlapped = their
        intersection; Communication(Not Overlapped) = Communication - Overlapped; Preparing = step start to
        the first device task; Free = the rest of the step after Preparing; Stage = step - Preparing
        (no receive ops, so Bubble = 0)."""
        if step.breakdown is not None:
            return dict(step.breakdown)
        lo, hi = step.start_ns, step.end_ns
        comp = _clip([(o.start_ns, o.end_ns) for o in self.ops], lo, hi)
        comm = _clip([(c.start_ns, c.end_ns) for c in self.comms], lo, hi)
        comp_u, comm_u = union(comp), union(comm)
        computing = total(comp_u)
        communication = total(comm_u)
        overlapped = total(intersect(comp_u, comm_u))
        not_ov = communication - overlapped
        firsts = [a for a, _ in comp_u + comm_u]
        preparing = (min(firsts) - lo) if firsts else 0
        free = (hi - lo) - preparing - computing - not_ov
        us = 1000.0
        return {
            "Computing": computing / us,
            "Communication(Not Overlapped)": not_ov / us,
            "Overlapped": overlapped / us,
            "Communication": communication / us,
            "Free": free / us,
            "Stage": (hi - lo - preparing) / us,
            "Bubble": 0.0,
            "Communication(Not Overlapped and Exclude Receive)": not_ov / us,
            "Preparing": preparing / us,
        }

    def overlap_intervals(self, lo: int, hi: int) -> dict[str, list[tuple[int, int]]]:
        """Intervals of the Overlap Analysis track inside [lo, hi): Computing, Communication,
        Communication(Not Overlapped), Free (gaps between the first and last device activity)."""
        comp = union(_clip([(o.start_ns, o.end_ns) for o in self.ops], lo, hi))
        comm = union(_clip([(c.start_ns, c.end_ns) for c in self.comms], lo, hi))
        not_ov = subtract(comm, comp)
        busy = union(comp + comm)
        free = []
        for (_, e), (s, _) in zip(busy, busy[1:], strict=False):
            if s > e:
                free.append((e, s))
        return {
            "Computing": comp,
            "Communication": comm,
            "Communication(Not Overlapped)": not_ov,
            "Free": free,
        }


@dataclass
class Scenario:
    """All ranks of one synthetic job.

    repeat/period_ns: the writers emit the rank timelines `repeat` times, shifted by `period_ns` each time,
    with step ids advanced by the number of steps per repetition. For repeat > 1, period_ns must be a whole
    number of seconds and every event of a rank must lie within one wall-clock second (the writers render a
    repetition once and replay it by text substitution: that is what makes GB-sized dumps fast).
    """

    n_ranks: int = 1
    base_ns: int = BASE_NS
    hbm_period_ns: int = 1_000_000
    hbm_channels: int = 4
    llc_channels: int = 2
    repeat: int = 1
    period_ns: int = 1_000_000_000
    groups: dict[str, list[int]] = field(default_factory=dict)  # group name/hash -> global ranks
    ranks: list[RankTrace] = field(default_factory=list)
    host_pid_base: int = 3096504

    def __post_init__(self) -> None:
        if not self.ranks:
            self.ranks = [
                RankTrace(rank=r, device_id=r, host_pid=self.host_pid_base + 2 * r)
                for r in range(self.n_ranks)
            ]
        if not self.groups:
            self.groups = {"17522688603477080586": list(range(self.n_ranks))}

    def rank(self, r: int) -> RankTrace:
        return self.ranks[r]

    def finalize(self) -> None:
        for rt in self.ranks:
            rt.finalize()

    def peers(self, group: str, rank: int) -> list[int]:
        return [r for r in self.groups.get(group, list(range(self.n_ranks))) if r != rank]

    def hbm_counters(self, rank: int, *, stamp: str = "start") -> CounterSeries:
        """The HBM series the writer emits for `rank` (one repetition)."""
        rt = self.ranks[rank]
        end = self.period_ns if self.repeat > 1 else _ceil_to(rt.end_ns(), self.hbm_period_ns)
        return rt.hbm_counters(self.hbm_period_ns, self.hbm_channels, start_ns=0, end_ns=end, stamp=stamp)


# ---- counters ---------------------------------------------------------------------------------------------
def derive_hbm_counters(
    tasks: Iterable[tuple[int, int, int, int]],
    period_ns: int,
    channels: int = 4,
    *,
    start_ns: int = 0,
    end_ns: int,
    stamp: str = "start",
    track: str = "HBM",
) -> CounterSeries:
    """Bandwidth samples that agree with per-task bytes.

    tasks: (start_ns, dur_ns, read_bytes, write_bytes). Each task's bytes are spread uniformly over
    [start, start + dur); window k = [start_ns + k*period, start_ns + (k+1)*period) gets the share that falls
    in it; the sample value is bytes / period (bytes/s, whole device). stamp="start" stamps the sample at
    the window start, "end" at the window end. Zero-duration tasks put all their bytes in their window.
    Example: one task reading 4 MiB and writing 4 MiB over exactly one 1 ms window -> read_bps =
    4194304 / 1e-3 = 4.194304e9 B/s; the `HBM <id>/Read` counter of 4 channels shows 1048.576 MB/s."""
    if period_ns <= 0:
        raise ValueError("period_ns must be > 0")
    if stamp not in ("start", "end"):
        raise ValueError("stamp must be 'start' or 'end'")
    n = max(0, -(-(end_ns - start_ns) // period_ns))
    rd = [0.0] * n
    wr = [0.0] * n
    for s, d, r, w in tasks:
        if d <= 0:
            k = (s - start_ns) // period_ns
            if 0 <= k < n:
                rd[k] += r
                wr[k] += w
            continue
        e = s + d
        k0 = max(0, (s - start_ns) // period_ns)
        k1 = min(n - 1, (e - 1 - start_ns) // period_ns)
        for k in range(k0, k1 + 1):
            lo = max(s, start_ns + k * period_ns)
            hi = min(e, start_ns + (k + 1) * period_ns)
            if hi > lo:
                f = (hi - lo) / d
                rd[k] += r * f
                wr[k] += w * f
    per_s = 1e9 / period_ns
    shift = 0 if stamp == "start" else period_ns
    samples = [
        CounterSample(start_ns + k * period_ns + shift, rd[k] * per_s, wr[k] * per_s) for k in range(n)
    ]
    return CounterSeries(track, period_ns, channels, samples)


# ---- interval helpers -------------------------------------------------------------------------------------
def union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(i for i in iv if i[1] > i[0]):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def total(iv: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in iv)


def intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Intersection of two unions (sorted, disjoint)."""
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """a minus b (both unions)."""
    out = []
    for s, e in a:
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return out


def _clip(iv: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    return [(max(s, lo), min(e, hi)) for s, e in iv if min(e, hi) > max(s, lo)]


def _ceil_to(x: int, p: int) -> int:
    return -(-x // p) * p
