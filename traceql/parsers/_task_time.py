"""task_time CSV (the task scheduler's per-task list) -> kernels expressions, shared by the msprof and torch_npu
text parsers.

msprof writes `mindstudio_profiler_output/task_time_{ts}.csv`; newer torch_npu copies the same rows into
`ASCEND_PROFILER_OUTPUT/task_time.csv` (Ascend/pytorch `torch_npu/profiler/analysis/prof_bean/_task_time_bean.py`:
`TaskTimeBean.headers = list(data.keys())`, i.e. msprof's own columns, verbatim). Columns (MSPROF-DOC
task_time, the form traceql.synth.msprof_writer writes): `Device_id, kernel_name, kernel_type, stream_id,
task_id, task_time(us), task_start(us), task_stop(us)`; times in µs, converted once here.
"""

from __future__ import annotations

from ._csv import CsvFile, comm_task_sql


def task_time_kernel_exprs(csv: CsvFile, device_expr: str) -> dict[str, str]:
    """kernels columns from a task_time CSV of the per-task form (has `kernel_name`)."""
    csv.require("kernel_name", "task_start(us)")
    task_type = csv.txt("kernel_type")
    name = csv.txt("kernel_name")
    return {
        "device_id": device_expr,
        "name": name,
        "task_type": task_type,
        "is_comm": comm_task_sql(task_type, name),
        "stream_id": csv.int_("stream_id"),
        "task_id": csv.int_("task_id"),
        "ts_ns": csv.us_ns("task_start(us)"),
        "dur_ns": f"COALESCE({csv.us_ns('task_time(us)')}, {csv.us_ns('task_stop(us)')} - {csv.us_ns('task_start(us)')})",
    }


__all__ = ["task_time_kernel_exprs"]
