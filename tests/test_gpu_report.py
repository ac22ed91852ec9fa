"""A GPU report carries no Ascend panels (UB / L2 chart, UB peak, Ascend-only checks) and its HBM charts say
what is missing instead of drawing empty axes. The trace is traceql.synth.serving's H100 Kineto trace (no
CUPTI counters, so no HBM bytes by construction)."""

from __future__ import annotations

from pathlib import Path

import traceql
from traceql.report.render import build_context
from traceql.synth import serving
from traceql.synth.serving import Phase, sglang_marker


def test_gpu_report_without_ascend_panels(tmp_path: Path) -> None:
    serving.write_serving_trace(tmp_path / "t.json", [Phase(sglang_marker("decode", 4, 4), "decode")] * 3)
    traceql.ingest(tmp_path / "t.json", store=tmp_path / "s", name="r", workers=1)
    c = build_context(tmp_path / "s", "r")
    assert "ub_l2" not in [x["name"] for x in c["op_charts"]]
    assert "ub_l2" not in [x["name"] for x in c["reproduce"]["charts"]]
    assert "UB peak" not in [k for k, _ in c["meta"]]
    assert not {"ub_reuse", "aicore_freq", "aicpu_ops"} & {v["id"] for v in c["silent"]}
    spec = c["specs"]["hbm_timeline"]
    said = " ".join(
        str(v.get("line", "")) for v in spec["data"]["values"]
    )  # the message chart's wrapped lines
    assert "records no HBM (DRAM) bytes per kernel" in said and "dram__bytes_read.sum" in said
