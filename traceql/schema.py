"""Canonical tables: the column names users type in SQL, their Arrow types and one-line docs.

This module is the single source for `traceql schema`, for the store writer (which conforms every batch a
parser yields to these schemas) and for the documentation. Conventions: times are int64 nanoseconds on one
clock per run (`ts_ns`, `dur_ns`), sizes int64 bytes, bandwidths float64 bytes/s, ratios 0..1. Every table
has `run_id` and `rank`. Columns a parser has no value for are null; columns the profiler wrote that have no
canonical home go into `extra` (string map) so nothing is dropped, and raw per-task PMU metrics go into
`metrics` (name as the profiler wrote it, unit in the name, value as written).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # a DuckDB type name; also mapped to Arrow below
    doc: str


def _c(name: str, type_: str, doc: str) -> Column:
    return Column(name, type_, doc)


_KEYS = [
    _c("run_id", "VARCHAR", "run name given at ingest (--name) or derived from the dump path"),
    _c("rank", "INTEGER", "global rank of the process/device that wrote the dump (0 for single-card)"),
]

TABLES: dict[str, tuple[str, list[Column]]] = {
    "kernels": (
        "Device tasks: AI Core/AI Vector/AI CPU/MIX/HCCL tasks on Ascend, CUDA kernels/memcpy/memset on GPU.",
        _KEYS
        + [
            _c("device_id", "INTEGER", "device (NPU/GPU) id as the profiler wrote it"),
            _c(
                "step",
                "BIGINT",
                "profiler step id (kernel_details `Step Id`, or the step window the task falls in)",
            ),
            _c(
                "name",
                "VARCHAR",
                "task/kernel name (kernel_details `Name`, op_summary `Op Name`, CUDA kernel name)",
            ),
            _c(
                "op_type",
                "VARCHAR",
                "operator type (`Type`/`OP Type`, e.g. MatMulV2, TransData); kernel category on GPU",
            ),
            _c(
                "task_type",
                "VARCHAR",
                "core/task type (`Accelerator Core`/`Task Type`: AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX_AIC, HCCL; kernel/memcpy/memset on GPU)",
            ),
            _c("is_comm", "BOOLEAN", "true for communication tasks (HCCL/NCCL)"),
            _c("stream_id", "BIGINT", "stream id"),
            _c("task_id", "BIGINT", "task id (Ascend) "),
            _c("model_id", "BIGINT", "model id (4294967295 = single-op/eager)"),
            _c("context_id", "VARCHAR", "context id (MIX/FFTS sub-tasks)"),
            _c(
                "connection_id",
                "BIGINT",
                "id joining the task to its host launch (Ascend connection_id, CUDA correlation)",
            ),
            _c("ts_ns", "BIGINT", "start time, ns since Unix epoch (device clock converted by the profiler)"),
            _c("dur_ns", "BIGINT", "duration, ns"),
            _c("wait_ns", "BIGINT", "wait time before the task on its stream, ns (`Wait Time(us)`)"),
            _c("block_dim", "BIGINT", "`Block Dim` / `Block Num` (cores used); CUDA grid size product"),
            _c("mix_block_dim", "BIGINT", "`Mix Block Dim` / `Mix Block Num`"),
            _c("op_state", "VARCHAR", "`OP State`: dynamic/static"),
            _c(
                "input_shapes",
                "VARCHAR",
                "input shapes, `;` between inputs, quotes stripped (e.g. 32,3,224,224;64)",
            ),
            _c("input_dtypes", "VARCHAR", "input data types, `;` separated"),
            _c("input_formats", "VARCHAR", "input formats, `;` separated (NCHW, NC1HWC0, FRACTAL_Z, ND...)"),
            _c("output_shapes", "VARCHAR", "output shapes, `;` separated"),
            _c("output_dtypes", "VARCHAR", "output data types, `;` separated"),
            _c("output_formats", "VARCHAR", "output formats, `;` separated"),
            _c(
                "hbm_read_bytes",
                "BIGINT",
                "main-memory (HBM/GM) bytes read, measured per task: MemoryAccess `read_main_memory_datas(KB)` or Memory `main_mem_read_bw(GB/s)` x core time; null when not measured",
            ),
            _c(
                "hbm_write_bytes",
                "BIGINT",
                "main-memory bytes written, measured per task (see hbm_read_bytes)",
            ),
            _c(
                "ub_read_bytes", "BIGINT", "Unified Buffer bytes read (Memory/MemoryUB bandwidth x core time)"
            ),
            _c("ub_write_bytes", "BIGINT", "Unified Buffer bytes written"),
            _c("l2_read_bytes", "BIGINT", "L2 bytes read (Memory `l2_read_bw` x core time)"),
            _c("l2_write_bytes", "BIGINT", "L2 bytes written"),
            _c(
                "l2_hit_rate",
                "DOUBLE",
                "L2 hit rate 0..1 (L2Cache hits/(hits+miss_allocate), or l2_cache.csv Hit Rate)",
            ),
            _c("aicore_time_ns", "BIGINT", "cube core busy time (`aicore_time(us)`)"),
            _c("aiv_time_ns", "BIGINT", "vector core busy time (`aiv_time(us)`)"),
            _c("mac_ratio", "DOUBLE", "cube (MAC) pipe busy ratio 0..1 (PipeUtilization)"),
            _c("vec_ratio", "DOUBLE", "vector pipe busy ratio 0..1"),
            _c("scalar_ratio", "DOUBLE", "scalar pipe busy ratio 0..1 (max of aic/aiv)"),
            _c(
                "mte2_ratio",
                "DOUBLE",
                "MTE2 (GM->L1/UB load) pipe busy ratio 0..1 (max of aic/aiv): the memory-bound signal",
            ),
            _c("mte3_ratio", "DOUBLE", "MTE3 (UB->GM store) pipe busy ratio 0..1"),
            _c(
                "flops",
                "DOUBLE",
                "floating-point operations (ArithmeticUtilization cube_fops + vector_fops), when measured",
            ),
            _c(
                "metrics",
                "MAP(VARCHAR, DOUBLE)",
                "every numeric PMU column as the profiler wrote it (name keeps its unit)",
            ),
            _c("extra", "MAP(VARCHAR, VARCHAR)", "profiler columns/args with no canonical column, verbatim"),
        ],
    ),
    "host_ops": (
        "Host-side events: framework ops (cpu_op), Python functions, CANN/CUDA runtime API calls, enqueue/dequeue, user annotations.",
        _KEYS
        + [
            _c("name", "VARCHAR", "event name (aten::add, AscendCL@aclrtMemcpyAsync, cudaLaunchKernel...)"),
            _c(
                "cat",
                "VARCHAR",
                "category (cpu_op, python_function, cann, cuda_runtime, enqueue, dequeue, user_annotation...)",
            ),
            _c("level", "VARCHAR", "CANN API level (acl, runtime, node, hccl, model) when known"),
            _c("pid", "BIGINT", "process id"),
            _c("tid", "BIGINT", "thread id"),
            _c("ts_ns", "BIGINT", "start, ns since Unix epoch"),
            _c("dur_ns", "BIGINT", "duration, ns"),
            _c(
                "correlation_id",
                "BIGINT",
                "id linking to device tasks (connection_id / correlation / External id)",
            ),
            _c("seq_num", "BIGINT", "autograd sequence number (fwd/bwd pairing)"),
            _c("input_shapes", "VARCHAR", "input dims as written"),
            _c("input_dtypes", "VARCHAR", "input types as written"),
            _c("extra", "MAP(VARCHAR, VARCHAR)", "remaining args, verbatim"),
        ],
    ),
    "flows": (
        "Flow links (host op -> device task, enqueue -> dequeue, fwd -> bwd).",
        _KEYS
        + [
            _c("cat", "VARCHAR", "flow category (async_npu, async_task_queue, fwdbwd, HostToDevice, ac2g)"),
            _c("name", "VARCHAR", "flow name"),
            _c("flow_id", "VARCHAR", "flow id as written (string: ids exceed int64 in some dumps)"),
            _c("src_pid", "BIGINT", "source process"),
            _c("src_tid", "BIGINT", "source thread/stream"),
            _c("src_ts_ns", "BIGINT", "source timestamp, ns"),
            _c("dst_pid", "BIGINT", "destination process"),
            _c("dst_tid", "BIGINT", "destination thread/stream"),
            _c("dst_ts_ns", "BIGINT", "destination timestamp, ns"),
        ],
    ),
    "counters": (
        "Sampled time series: HBM/LLC/DDR bandwidth, NPU memory, AI Core frequency, QoS, Acc PMU, PCIe/HCCS, NIC/RoCE "
        "port statistics (track NETDEV: PFC pause frames, MAC/NIC bandwidth), host CPU/memory/disk/network usage "
        "(tracks Host CPU, Host Memory, Host Disk, Host Network), GPU metrics (nsys GPU_METRICS)...",
        _KEYS
        + [
            _c(
                "track",
                "VARCHAR",
                "counter group as the profiler names its track (HBM, LLC, NPU MEM, AI Core Freq...)",
            ),
            _c("channel", "VARCHAR", "unit within the track (HBM id, LLC id, APP/Device...) or '' "),
            _c(
                "metric",
                "VARCHAR",
                "what is measured: read_bw, write_bw, hit_rate, throughput, used, freq, value...",
            ),
            _c("unit", "VARCHAR", "unit of value after conversion: bytes/s, bytes, ratio, MHz, level"),
            _c("name", "VARCHAR", "raw counter name as written (e.g. `HBM 0/Read`)"),
            _c(
                "ts_ns",
                "BIGINT",
                "sample timestamp, ns; a sample holds until the next one on the same series",
            ),
            _c("value", "DOUBLE", "sample value in `unit`"),
        ],
    ),
    "comm_ops": (
        "Collective/p2p communication operators (HCCL/NCCL) with the profiler's time split.",
        _KEYS
        + [
            _c("step", "BIGINT", "step id (from the communication.json step key or the step window)"),
            _c("name", "VARCHAR", "op name, e.g. hcom_allReduce__586_0_1"),
            _c("op_type", "VARCHAR", "collective type (allreduce, broadcast, allgather...), lower case"),
            _c("group_name", "VARCHAR", "communication group name/hash"),
            _c("kind", "VARCHAR", "collective or p2p"),
            _c("ts_ns", "BIGINT", "start, ns since Unix epoch"),
            _c("dur_ns", "BIGINT", "elapse time, ns"),
            _c("transit_ns", "BIGINT", "time moving data, ns"),
            _c("wait_ns", "BIGINT", "time waiting for peers (includes synchronization), ns"),
            _c("sync_ns", "BIGINT", "synchronization time, ns"),
            _c("idle_ns", "BIGINT", "idle time inside the op, ns"),
            _c("bytes", "BIGINT", "bytes moved over all transports"),
            _c(
                "data_type",
                "VARCHAR",
                "element type of the op's buffer (db COMMUNICATION_OP.dataType: FP16, BFP16...)",
            ),
            _c(
                "data_bytes",
                "BIGINT",
                "the op's buffer size, count x element size (the S of bus-bandwidth formulas); null when the "
                "profiler marks the type or count invalid (RESERVED/N/A/INVALID_TYPE, count <= 0 or UINT32 max)",
            ),
            _c(
                "rank_size",
                "INTEGER",
                "ranks in the op's communicator (db COMMUNICATION_OP.rankSize), null when not recorded",
            ),
            _c("source", "VARCHAR", "which file/table the row came from"),
        ],
    ),
    "comm_bandwidth": (
        "Per communication op and transport: size, transit time and bandwidth (communication.json / CommAnalyzerBandwidth).",
        _KEYS
        + [
            _c("step", "BIGINT", "step id"),
            _c("name", "VARCHAR", "op name, or 'Total Op Info' for the per-step aggregate"),
            _c("group_name", "VARCHAR", "communication group"),
            _c("transport", "VARCHAR", "RDMA, HCCS, PCIE, SDMA, SIO"),
            _c("bytes", "BIGINT", "transit size, bytes"),
            _c("transit_ns", "BIGINT", "transit time, ns"),
            _c("bandwidth_bps", "DOUBLE", "achieved bandwidth, bytes/s"),
            _c("large_packet_ratio", "DOUBLE", "share of large packets 0..1"),
            _c("packet_sizes", "MAP(VARCHAR, DOUBLE)", "size distribution: packet size (bytes) -> count"),
            _c("source", "VARCHAR", "which file/table the row came from"),
        ],
    ),
    "comm_matrix": (
        "Point-to-point traffic between ranks (communication_matrix.json / CommAnalyzerMatrix).",
        _KEYS
        + [
            _c("step", "BIGINT", "step id"),
            _c("name", "VARCHAR", "op or op-summary key (e.g. allreduce-top1@group)"),
            _c("op_name", "VARCHAR", "HCCL op name"),
            _c("group_name", "VARCHAR", "communication group"),
            _c("src_rank", "INTEGER", "source rank"),
            _c("dst_rank", "INTEGER", "destination rank"),
            _c("transport", "VARCHAR", "LOCAL, HCCS, PCIE, RDMA, SDMA, SIO"),
            _c("bytes", "BIGINT", "transit size, bytes"),
            _c("transit_ns", "BIGINT", "transit time, ns"),
            _c("bandwidth_bps", "DOUBLE", "bandwidth, bytes/s"),
            _c("source", "VARCHAR", "which file/table the row came from"),
        ],
    ),
    "steps": (
        "Per-step intervals and the profiler's step breakdown (step_trace_time.csv / StepTraceTime).",
        _KEYS
        + [
            _c("step", "BIGINT", "step id (null when no schedule was used)"),
            _c("ts_ns", "BIGINT", "step start, ns (from ProfilerStep#N / STEP_TIME), null if unknown"),
            _c(
                "dur_ns", "BIGINT", "step wall time, ns (interval, or computing + comm not overlapped + free)"
            ),
            _c("computing_ns", "BIGINT", "`Computing`: device compute time"),
            _c("comm_not_overlapped_ns", "BIGINT", "`Communication(Not Overlapped)`"),
            _c("overlapped_ns", "BIGINT", "`Overlapped`: compute overlapping communication"),
            _c("comm_ns", "BIGINT", "`Communication`"),
            _c("free_ns", "BIGINT", "`Free`: device idle"),
            _c("stage_ns", "BIGINT", "`Stage`"),
            _c("bubble_ns", "BIGINT", "`Bubble`: receive time (pipeline bubbles)"),
            _c(
                "comm_not_overlapped_excl_recv_ns",
                "BIGINT",
                "`Communication(Not Overlapped and Exclude Receive)`",
            ),
            _c("preparing_ns", "BIGINT", "`Preparing`: step start to first device op"),
            _c("source", "VARCHAR", "file/table the row came from"),
        ],
    ),
    "overlap": (
        "The profiler's own step split as intervals (msprof/torch_npu db OVERLAP_ANALYSIS): Computing, Communication, Communication(Not Overlapped), Free.",
        _KEYS
        + [
            _c(
                "step",
                "BIGINT",
                "step id (the STEP_TIME window holding the interval start), null without steps",
            ),
            _c("device_id", "INTEGER", "device id as written"),
            _c(
                "type",
                "VARCHAR",
                "Computing | Communication | Communication(Not Overlapped) | Free (the db's type 0..3, see parsers._db_tables)",
            ),
            _c("ts_ns", "BIGINT", "interval start, ns since Unix epoch"),
            _c("dur_ns", "BIGINT", "interval length, ns"),
            _c("source", "VARCHAR", "which table the row came from (db:OVERLAP_ANALYSIS)"),
        ],
    ),
    "memory": (
        "Memory: allocator records (memory_record), per-operator allocations (operator_memory), module reservations (npu_module_mem), device usage (npu_mem).",
        _KEYS
        + [
            _c("kind", "VARCHAR", "record | op | module | npu_mem"),
            _c(
                "component",
                "VARCHAR",
                "allocator component (PTA, GE, APP...), module name, or operator name for kind=op",
            ),
            _c("device", "VARCHAR", "device as written (NPU:0)"),
            _c("ts_ns", "BIGINT", "timestamp (allocation time for kind=op), ns"),
            _c(
                "size_bytes",
                "BIGINT",
                "allocation size (kind=op; may be negative when only the release was captured)",
            ),
            _c("allocated_bytes", "BIGINT", "total allocated at ts"),
            _c("reserved_bytes", "BIGINT", "total reserved at ts"),
            _c("active_bytes", "BIGINT", "total active at ts"),
            _c("release_ts_ns", "BIGINT", "release time (kind=op), ns"),
            _c("dur_ns", "BIGINT", "lifetime (kind=op), ns"),
            _c("extra", "MAP(VARCHAR, VARCHAR)", "remaining columns, verbatim"),
        ],
    ),
    "l2_cache": (
        "Per-task L2 cache hit/victim rates (l2_cache.csv).",
        _KEYS
        + [
            _c("stream_id", "BIGINT", "stream id"),
            _c("task_id", "BIGINT", "task id"),
            _c("op_name", "VARCHAR", "op name"),
            _c("hit_rate", "DOUBLE", "hit rate 0..1 (null when N/A)"),
            _c("victim_rate", "DOUBLE", "victim rate 0..1"),
        ],
    ),
    "op_stats": (
        "Profiler-side aggregates: op_statistic.csv, api_statistic.csv, operator_details.csv.",
        _KEYS
        + [
            _c("source", "VARCHAR", "op_statistic | api_statistic | operator_details"),
            _c("name", "VARCHAR", "op type, API name or operator name"),
            _c("core_type", "VARCHAR", "core type (op_statistic) or API level (api_statistic)"),
            _c("count", "BIGINT", "calls"),
            _c("total_ns", "BIGINT", "total time (device total for operator_details), ns"),
            _c("min_ns", "BIGINT", "min time, ns"),
            _c("avg_ns", "BIGINT", "mean time, ns"),
            _c("max_ns", "BIGINT", "max time, ns"),
            _c("ratio", "DOUBLE", "share 0..1 (`Ratio(%)`/100)"),
            _c("extra", "MAP(VARCHAR, VARCHAR)", "remaining columns, verbatim"),
        ],
    ),
    "copies": (
        "Device memory copies with their exact size and direction (msprof/torch_npu db MEMCPY_INFO joined to TASK: the MEMCPY_ASYNC tasks).",
        _KEYS
        + [
            _c("device_id", "INTEGER", "device id (TASK.deviceId)"),
            _c("stream_id", "BIGINT", "stream id"),
            _c("task_id", "BIGINT", "task id"),
            _c("connection_id", "BIGINT", "id joining the copy to its host API call (TASK.connectionId)"),
            _c("ts_ns", "BIGINT", "copy start, ns since Unix epoch"),
            _c("dur_ns", "BIGINT", "copy duration, ns"),
            _c("bytes", "BIGINT", "bytes copied (MEMCPY_INFO.size)"),
            _c(
                "direction",
                "VARCHAR",
                "ENUM_MEMCPY_OPERATION name: host to device, device to host, device to device, host to host...",
            ),
            _c("source", "VARCHAR", "which table the row came from (db:MEMCPY_INFO)"),
        ],
    ),
    "pmu_summary": (
        "Sample-mode AI Core PMU totals per core (msprof/torch_npu db SAMPLE_PMU_SUMMARY, --aic-mode=sample-based): no per-task split.",
        _KEYS
        + [
            _c("device_id", "INTEGER", "device id"),
            _c("core_type", "VARCHAR", "AIC or AIV (coreType)"),
            _c("core_id", "BIGINT", "core id"),
            _c("metric", "VARCHAR", "PMU metric name as the profiler wrote it (STRING_IDS(metric))"),
            _c("value", "DOUBLE", "its value, as written"),
            _c("source", "VARCHAR", "which table the row came from (db:SAMPLE_PMU_SUMMARY)"),
        ],
    ),
    "run_meta": (
        "Per-rank metadata: profiler config (profiler_info), env (profiler_metadata), device properties, db META_DATA.",
        _KEYS
        + [
            _c("key", "VARCHAR", "dotted key, e.g. config.experimental_config._aic_metrics"),
            _c("value", "VARCHAR", "value as text (JSON for objects)"),
        ],
    ),
}

# `runs` is a view built from the manifest, documented here so `traceql schema runs` works.
RUNS_COLUMNS = [
    _c("run_id", "VARCHAR", "run name"),
    _c("source", "VARCHAR", "path the run was ingested from"),
    _c(
        "format",
        "VARCHAR",
        "detected format (torch_npu_text, torch_npu_db, msprof_text, msprof_db, kineto...)",
    ),
    _c("parser_version", "VARCHAR", "traceql version that parsed it"),
    _c("device", "VARCHAR", "device name found in the dump (Ascend910B, NVIDIA A100...) or null"),
    _c("ranks", "INTEGER", "number of ranks"),
    _c("ingested_at", "VARCHAR", "ingest time, ISO 8601 UTC"),
    _c("rows", "VARCHAR", "JSON: rows stored per table"),
    _c(
        "derived",
        "BOOLEAN",
        "every derived table of the run (queries/derived: kernel_bytes, step_windows, comm_events, bw_segments, "
        "timeline_base) is stored and current",
    ),
    _c(
        "derived_tables",
        "VARCHAR",
        "comma-separated derived tables stored for the run with today's fingerprint",
    ),
]

TABLE_NAMES = list(TABLES)


def columns(table: str) -> list[Column]:
    if table == "runs":
        return RUNS_COLUMNS
    return TABLES[table][1]


def describe(table: str) -> str:
    if table == "runs":
        return "One row per ingested run (from the store manifest)."
    return TABLES[table][0]


_ARROW_SIMPLE = {
    "VARCHAR": "string",
    "INTEGER": "int32",
    "BIGINT": "int64",
    "DOUBLE": "float64",
    "BOOLEAN": "bool_",
}


def arrow_type(duck_type: str) -> pa.DataType:
    import pyarrow as pa

    if duck_type in _ARROW_SIMPLE:
        return getattr(pa, _ARROW_SIMPLE[duck_type])()
    if duck_type.startswith("MAP("):
        k, v = (t.strip() for t in duck_type[4:-1].split(","))
        return pa.map_(arrow_type(k), arrow_type(v))
    raise ValueError(f"no Arrow type for {duck_type}")


def arrow_schema(table: str) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field(c.name, arrow_type(c.type)) for c in columns(table)])
