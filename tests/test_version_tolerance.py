"""Version tolerance across profiler releases (formats.md §9), as *cross-version* checks: the same job written in
each release's layout must give the same canonical rows. The parser helpers' own tests check each layout
against real samples; this file checks that the layouts agree with each other, and covers the §9 items no
parser test pins down (profiler_info `_export_type` string vs list, torch_npu MB vs msprof KB for the same
allocation).

Every expected value is computed by hand in a comment from the cells written here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

# One logical job: two kernels. Times in µs with 3 decimals (exact in ns).
#   Add_1    start 1736408883704643.212 us, dur 5.5 us,  wait 0 us,   block 40, mix block 0
#   MatMul_2 start 1736408883704700.000 us, dur 10.25 us, wait 1.5 us, block 24, mix block 12
K1_TS, K2_TS = 1_736_408_883_704_643_212, 1_736_408_883_704_700_000
EXPECTED_KERNELS = [
    # name, ts_ns, dur_ns, wait_ns, block_dim, mix_block_dim, step
    ("Add_1", K1_TS, 5_500, 0, 40, 0, 7),
    ("MatMul_2", K2_TS, 10_250, 1_500, 24, 12, 7),
]


def kernel_details(version: str) -> str:
    """kernel_details.csv of the same two kernels in each release's column set (formats.md §2.1, §9)."""
    tab = "\t" if version != "2023" else ""  # §9.8: trailing TAB on the start time from 2025
    block, mix = (
        ("Block Num", "Mix Block Num") if version == "2026" else ("Block Dim", "Mix Block Dim")
    )  # §9.1
    cols = ["Step Id"]
    if version in ("2025.10", "2026"):
        cols.append("Device_id")  # §9.2: first data column after Step Id in newer torch_npu
    cols += ["Model ID", "Task ID", "Stream ID", "Name", "Type"]
    if version != "2023":
        cols.append("OP State")  # §9.4
    cols += ["Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)", block, mix]
    if version != "2023":
        cols.append("HF32 Eligible")  # §9.4: absent from some 2023 files
    cols += ["Input Shapes", "Output Shapes"]
    rows = [
        {"Name": "Add_1", "Type": "Add", "Accelerator Core": "AI_VECTOR_CORE", "Start Time(us)": f"1736408883704643.212{tab}",
         "Duration(us)": "5.5", "Wait Time(us)": "0", block: "40", mix: "0", "Task ID": "10"},
        {"Name": "MatMul_2", "Type": "MatMulV2", "Accelerator Core": "MIX_AIC", "Start Time(us)": f"1736408883704700.000{tab}",
         "Duration(us)": "10.25", "Wait Time(us)": "1.5", block: "24", mix: "12", "Task ID": "11"},
    ]  # fmt: skip
    common = {"Step Id": "7", "Device_id": "3", "Model ID": "4294967295", "Stream ID": "2", "OP State": "dynamic",
              "HF32 Eligible": "NO", "Input Shapes": '"""8,16"""', "Output Shapes": '"""8,16"""'}  # fmt: skip
    lines = [",".join(cols)]
    for r in rows:
        lines.append(",".join({**common, **r}.get(c, "N/A") for c in cols))
    return "\n".join(lines) + "\n"


def ingest_folder(tmp: Path, files: dict[str, str], name: str) -> Any:
    """Write an *_ascend_pt folder with these ASCEND_PROFILER_OUTPUT files, ingest it, return a connection."""
    from traceql import engine
    from traceql.ingest import ingest

    root = tmp / f"{name}_ascend_pt"
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    for fname, text in files.items():
        if fname.startswith("profiler_info"):
            (root / fname).write_text(text, encoding="utf-8")
        else:
            (out / fname).write_text(text, encoding="utf-8")
    try:
        ingest(root, store=tmp / "store", name=name, workers=1)
    except Exception as e:  # noqa: BLE001
        from traceql.errors import UnknownFormatError

        if isinstance(e, UnknownFormatError):
            pytest.skip(f"no torch_npu text parser registered yet ({e})")
        raise
    return engine.connect(tmp / "store")


@pytest.mark.parametrize("version", ["2023", "2025.01", "2025.10", "2026"])
def test_kernel_details_of_every_release_gives_the_same_kernels(tmp_path: Path, version: str) -> None:
    con = ingest_folder(tmp_path, {"kernel_details.csv": kernel_details(version)}, "v")
    got = con.execute(
        "SELECT name, ts_ns, dur_ns, wait_ns, block_dim, mix_block_dim, step FROM kernels ORDER BY ts_ns"
    ).fetchall()
    assert got == EXPECTED_KERNELS
    op_state, device = con.execute(
        "SELECT list(op_state ORDER BY ts_ns), list(device_id ORDER BY ts_ns) FROM kernels"
    ).fetchone()
    assert op_state == ([None, None] if version == "2023" else ["dynamic", "dynamic"])
    # Device_id 3 is the device of the dump when the column exists; older files do not say (null, or the
    # device from profiler_info when a parser fills it: never another number)
    if version in ("2025.10", "2026"):
        assert device == [3, 3]
    else:
        assert set(device) <= {None, 3}
    # the renamed/new columns are not left behind as unknown extras
    extras = (
        con.execute("SELECT list_distinct(flatten(list(map_keys(extra)))) FROM kernels").fetchone()[0] or []
    )
    assert not {"Block Num", "Mix Block Num", "Block Dim", "Mix Block Dim", "Device_id", "OP State"} & set(
        extras
    )


# step_trace_time.csv, µs. Step 7: Computing 8873.756, Comm(Not Overlapped) 101963.203, Overlapped 4028.675,
# Communication 105991.878, Free 25744.05, Stage 136581, Bubble 0, Comm(NO, excl. receive) 101963.203,
# Preparing 17902.5 (2025 only).
STEP_HEADER_2023 = "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,Communication(Not Overlapped and Exclude Receive)"
STEP_ROW_2023 = "7,8873.756,101963.203,4028.675,105991.878,25744.05,136581,0,101963.203"


@pytest.mark.parametrize("version", ["2023", "2025.01", "2025.10"])
def test_step_trace_time_with_and_without_preparing_and_device_id(tmp_path: Path, version: str) -> None:
    header, row = STEP_HEADER_2023, STEP_ROW_2023
    if version != "2023":
        header, row = header + ",Preparing", row + ",17902.5"  # §9.3
    if version == "2025.10":
        header, row = "Device_id," + header, "3," + row  # §9.2
    con = ingest_folder(tmp_path, {"step_trace_time.csv": f"{header}\n{row}\n"}, "s")
    got = con.execute(
        "SELECT step, computing_ns, comm_not_overlapped_ns, overlapped_ns, comm_ns, free_ns, bubble_ns, preparing_ns FROM steps"
    ).fetchall()
    # µs x 1000: 8873756, 101963203, 4028675, 105991878, 25744050, 0, 17902500 (2025) / null (2023)
    assert got == [
        (
            7,
            8_873_756,
            101_963_203,
            4_028_675,
            105_991_878,
            25_744_050,
            0,
            None if version == "2023" else 17_902_500,
        )
    ]


# The same allocator snapshot written by torch_npu (MB = 2^20 bytes, formats.md §6) in its 2023 and 2024+
# layouts, and by msprof (KB = 1024 bytes): 2109.6015625 MB = 2109 x 1048576 + 0.6015625 x 1048576 = 2211446784 +
# 630784 = 2212077568 bytes = 2160232 KB; 4096 MB =
# 4294967296 bytes = 4194304 KB; active (2024+ only) 1024.5 MB = 1074266112 bytes.
MEM_TS_US = "1736408883704643.212"
MEM_TS_NS = 1_736_408_883_704_643_212
MEMORY_RECORDS = {
    "torch_npu_2023": ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Device Type\n"
                       f"PTA,{MEM_TS_US},2109.6015625,4096,NPU:0\n"),
    "torch_npu_2025": ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type\n"
                       f"PTA,{MEM_TS_US},2109.6015625,4096,1024.5,187651234,NPU:0\n"),
    "msprof": ("Device_id,Component,Timestamp(us),Total Allocated(KB),Total Reserved(KB),Device\n"
               f"0,PTA,{MEM_TS_US},2160232,4194304,NPU:0\n"),
}  # fmt: skip


@pytest.mark.parametrize("flavour", list(MEMORY_RECORDS))
def test_memory_record_mb_and_kb_give_the_same_bytes(tmp_path: Path, flavour: str) -> None:
    from traceql import engine
    from traceql.ingest import ingest

    text = MEMORY_RECORDS[flavour]
    if flavour == "msprof":
        out = tmp_path / "PROF_000001_20250109074803123_ABCDEFGHIJKLMNOPQ" / "mindstudio_profiler_output"
        out.mkdir(parents=True)
        (out / "memory_record_20250109074803.csv").write_text(text, encoding="utf-8")
        try:
            ingest(out.parent, store=tmp_path / "store", name="m", workers=1)
        except Exception as e:  # noqa: BLE001
            from traceql.errors import UnknownFormatError

            if isinstance(e, UnknownFormatError):
                pytest.skip(f"no msprof text parser claims a PROF_ folder with memory_record only ({e})")
            raise
        con = engine.connect(tmp_path / "store")
    else:
        con = ingest_folder(tmp_path, {"memory_record.csv": text}, "m")
    got = con.execute(
        "SELECT kind, component, ts_ns, allocated_bytes, reserved_bytes, active_bytes FROM memory"
    ).fetchall()
    active = 1_074_266_112 if flavour == "torch_npu_2025" else None
    assert got == [("record", "PTA", MEM_TS_NS, 2_212_077_568, 4_294_967_296, active)]


# profiler_info_{rank}.json: 2025 adds torch_npu_version/cann_version/start_info and makes _export_type a list
# (formats.md §9.7). Both must ingest and land in run_meta with their values.
PROFILER_INFO = {
    "2024": '{"config": {"common_config": {"activities": ["CPU", "NPU"]}, "experimental_config": '
    '{"_profiler_level": "Level1", "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION", "_export_type": "text"}}, '
    '"end_info": {"collectionTimeEnd": "1736408883973810000"}}',
    "2025": '{"config": {"common_config": {"activities": ["CPU", "NPU"]}, "experimental_config": '
    '{"_profiler_level": "Level1", "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION", "_export_type": ["text"]}}, '
    '"torch_npu_version": "2.7.1", "cann_version": "8.3.RC1", '
    '"start_info": {"syscnt_enable": true, "freq": 100.0, "start_cnt": 123456789, "start_monotonic": 987654321}, '
    '"end_info": {"collectionTimeEnd": "1736408883973810000"}}',
}


@pytest.mark.parametrize("version", list(PROFILER_INFO))
def test_profiler_info_old_and_new_shapes(tmp_path: Path, version: str) -> None:
    con = ingest_folder(
        tmp_path,
        {"profiler_info_0.json": PROFILER_INFO[version], "kernel_details.csv": kernel_details("2025.01")},
        "p",
    )
    meta = dict(con.execute("SELECT key, value FROM run_meta").fetchall())
    aic = [v for k, v in meta.items() if k.endswith("_aic_metrics")]
    assert aic == ["ACL_AICORE_PIPE_UTILIZATION"], meta
    export = [v for k, v in meta.items() if k.endswith("_export_type")]
    assert len(export) == 1 and "text" in export[0], meta
    if version == "2025":
        assert any(k.endswith("cann_version") and v == "8.3.RC1" for k, v in meta.items()), meta
        assert any(k.endswith("torch_npu_version") and v == "2.7.1" for k, v in meta.items()), meta
    # the kernels are unaffected by which shape the metadata has
    assert con.execute("SELECT count(*) FROM kernels").fetchone() == (2,)
