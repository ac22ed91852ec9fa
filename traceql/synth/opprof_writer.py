"""A synthetic msprof op (OPPROF) collection with known per-block GM bytes (the parsers.opprof tests' answers).

Layout, file names, headers and the trailing comma of every line are those of the real 910B3 collection
(`../shared/real_traces/vllm-project__vllm-ascend/.tmp_remote_patch/msopprof_round4_archive`): OPPROF_<stamp>_<id>/
<op>/<launch>/OpBasicInfo_<stamp17>.csv, Memory_<stamp17>.csv, PipeUtilization_<stamp17>.csv,
L2Cache_<stamp17>.csv, dump/op_basic_info.txt. Only the columns traceql reads carry numbers; the aic_* columns
of a vector kernel are NA, as msprof op writes them.

    from traceql.synth.opprof_writer import OpprofLaunch, write_opprof
    write_opprof("out", "Add_1", [OpprofLaunch(duration_us="24.440489", read_kb=["209.25"] * 40,
                                              write_kb=["211.5"] * 40)], soc="Ascend910B3")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

MEMORY_HEAD = ("block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_main_mem_read_bw(GB/s),aic_main_mem_write_bw(GB/s),"
               "aiv_time(us),aiv_total_cycles,aiv_main_mem_read_bw(GB/s),aiv_main_mem_write_bw(GB/s),aiv_mte2_ratio,"
               "aiv_mte3_ratio,read_main_memory_datas(KB),write_main_memory_datas(KB),")  # fmt: skip
PIPE_HEAD = "block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_cube_ratio,aiv_time(us),aiv_total_cycles,aiv_vec_ratio,aiv_mte2_ratio,aiv_mte3_ratio,aiv_scalar_ratio,"
L2_HEAD = ("block_id,sub_block_id,aic_time(us),aic_total_cycles,aic_write_cache_hit,aic_write_cache_miss_allocate,"
           "aiv_time(us),aiv_total_cycles,aiv_write_cache_hit,aiv_write_cache_miss_allocate,aiv_r0_read_cache_hit,"
           "aiv_r0_read_cache_miss_allocate,aiv_r1_read_cache_hit,aiv_r1_read_cache_miss_allocate,")  # fmt: skip
BASIC_HEAD = (
    "Op Name,Op Type,Task Duration(us),Block Dim,Mix Block Dim,Device Id,Pid,Current Freq,Rated Freq,"
)


@dataclass
class OpprofLaunch:
    duration_us: str  # Task Duration(us) as written (6 decimals in the real file)
    read_kb: list[str]  # per block read_main_memory_datas(KB), as written
    write_kb: list[str]
    vec_ratio: str = "0.500000"
    mte2_ratio: str = "0.400000"
    l2_hits: tuple[int, int] = (
        30,
        10,
    )  # (write hits, r0 read hits) per block; misses 70 / 90 (hand: 40 / 200)
    stamp: str = "20260823205051111"
    extra_dump: dict[str, str] = field(default_factory=dict)


def write_opprof(out: str | Path, op_name: str, launches: list[OpprofLaunch], soc: str = "Ascend910B3",
                 folder: str = "OPPROF_20260823205030_SYNTHETIC") -> Path:  # fmt: skip
    """Write the collection under out/<folder>; returns that folder."""
    root = Path(out) / folder
    for i, ln in enumerate(launches):
        d = root / op_name / str(i)
        (d / "dump").mkdir(parents=True, exist_ok=True)
        blocks = len(ln.read_kb)
        (d / f"OpBasicInfo_{ln.stamp}.csv").write_text(
            f"{BASIC_HEAD}\n{op_name},vector,{ln.duration_us},{blocks},NA,0,4242,1800,1800,\n",
            encoding="utf-8",
        )
        mem = [MEMORY_HEAD] + [
            f"{b},vector0,NA,NA,NA,NA,20.000000,36000,9.5,9.6,{ln.mte2_ratio},0.3,{r},{w},"
            for b, (r, w) in enumerate(zip(ln.read_kb, ln.write_kb, strict=True))
        ]
        (d / f"Memory_{ln.stamp}.csv").write_text("\n".join(mem) + "\n", encoding="utf-8")
        pipe = [PIPE_HEAD] + [
            f"{b},vector0,NA,NA,NA,20.000000,36000,{ln.vec_ratio},{ln.mte2_ratio},0.300000,0.100000,"
            for b in range(blocks)
        ]
        (d / f"PipeUtilization_{ln.stamp}.csv").write_text("\n".join(pipe) + "\n", encoding="utf-8")
        wh, rh = ln.l2_hits
        l2 = [L2_HEAD] + [
            f"{b},vector0,NA,NA,NA,NA,20.000000,36000,{wh},{100 - wh},{rh},{100 - rh},0,0,"
            for b in range(blocks)
        ]
        (d / f"L2Cache_{ln.stamp}.csv").write_text("\n".join(l2) + "\n", encoding="utf-8")
        info = {"Op Name": op_name, "Block Dim": str(blocks), "Run Soc Version": soc, "Device Id": "0",
                "Pid": "4242", **ln.extra_dump}  # fmt: skip
        (d / "dump" / "op_basic_info.txt").write_text(
            "".join(f"{k}={v}\n" for k, v in info.items()), encoding="utf-8"
        )
    return root
