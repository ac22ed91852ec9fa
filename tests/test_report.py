"""The HTML report without a browser: one self-contained file (libraries inlined, no URL to fetch, a CSP that
allows no network and only the page's own scripts), sections in the article's order, every chart present,
dump text escaped (HTML and the JSON chart specs), size on a larger 8-rank run, and the `traceql report` CLI.
The browser checks (rendering, console, tooltips) are in test_report_browser.py."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pytest
from _canon import MS, build_store

from traceql import charts
from traceql.errors import TraceQLError
from traceql.report import page, write_report
from traceql.report import render as rr

ROOT = Path(__file__).resolve().parents[1]
XSS_IMG = "<img src=x onerror=alert(1)>"
XSS_SCRIPT = "</script><script>alert(1)</script>"
_SCRIPT = re.compile(r"<script(?P<attrs>[^>]*)>(?P<body>.*?)</script>", re.S | re.I)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, sample_store: Path) -> tuple[Path, str]:
    d = tmp_path_factory.mktemp("report")
    store = sample_store  # the session's shared ingest of the sample (conftest)
    html = write_report(d / "demo.html", store, "demo", device="ascend910b").read_text(encoding="utf-8")
    return store, html


def _specs(html: str) -> dict:
    m = re.search(r'<script id="traceql-specs" type="application/json">(.*?)</script>', html, re.S)
    assert m
    return json.loads(m.group(1))


# ---- self-contained and offline ---------------------------------------------------------------------------------
def test_one_file_with_the_libraries_inlined(demo: tuple[Path, str]) -> None:
    _, html = demo
    scripts = list(_SCRIPT.finditer(html))
    assert len(scripts) == 3 and html.lower().count("<script") == 3 and html.lower().count("</script") == 3
    assert 'id="traceql-specs" type="application/json"' in scripts[0].group("attrs")
    assert "window.vegaEmbed=" in scripts[1].group("body") and len(scripts[1].group("body")) > 500_000
    assert "vegaEmbed(el, spec" in scripts[2].group("body")
    # the markup loads nothing: no src at all, no href/url() to a host, no <link>, <iframe>, <object>
    # (the libraries' code is checked in the browser: no request leaves the page)
    markup = _SCRIPT.sub("", html)
    assert not re.search(r"""(?:href|action|data|poster)\s*=\s*["']?\s*(?:https?:)?//""", markup, re.I)
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", markup, re.I)
    for tag in ("<link", "<iframe", "<object", "<embed", "<img", " src="):
        assert tag not in markup.lower(), tag


def test_csp_allows_no_network_and_only_the_pages_scripts(demo: tuple[Path, str]) -> None:
    _, html = demo
    import html as htmlmod

    csp = htmlmod.unescape(
        re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html).group(1)
    )
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    assert directives["default-src"] == ["'none'"]
    assert "connect-src" not in directives  # falls back to default-src 'none': no fetch/XHR/websocket
    assert "'unsafe-inline'" not in directives["script-src"]
    # the hashes in the CSP are those of the two executable scripts, computed here independently
    want = set()
    for m in _SCRIPT.finditer(html):
        if "application/json" in m.group("attrs"):
            continue
        digest = base64.b64encode(hashlib.sha256(m.group("body").encode("utf-8")).digest()).decode()
        want.add(f"'sha256-{digest}'")
    assert len(want) == 2 and want <= set(directives["script-src"])
    assert html.index("Content-Security-Policy") < html.index("<script")


# ---- content ------------------------------------------------------------------------------------------------
def test_sections_follow_the_checklist(demo: tuple[Path, str]) -> None:
    _, html = demo
    order = [html.index(f'<section id="{s}">') for s in ("verdict", "findings", "ranks", "operators", "run")]
    assert order == sorted(order)
    # verdict first, with the number: the sample is the article's story (rank 1 HBM-saturated, rank 0 waits)
    verdict = html[order[0] : order[1]]
    assert "memory-bound: rank 1 computes at 81% of peak HBM bandwidth" in verdict
    assert 'data-chart="wait_attribution"' in verdict
    # fired findings, each with its reproduce command
    assert 'id="finding-bandwidth_bound"' in html and 'id="finding-comm_waits_on_memory"' in html
    assert "traceql query hbm_utilization --run demo" in html
    # run metadata: source, device, peaks, version
    meta = html[order[4] :]
    for text in ("torch_npu_2rank", "ascend910b", "1,600.0 GB/s", "traceql version", "0.1.0", "vega-lite"):
        assert text in meta, text


def test_every_chart_is_in_the_report_once(demo: tuple[Path, str]) -> None:
    _, html = demo
    specs = _specs(html)
    assert set(specs) == set(charts.CHARTS)
    containers = re.findall(r'<div class="chart" id="([^"]+)" data-chart="([^"]+)"></div>', html)
    assert {c for _, c in containers} == set(charts.CHARTS)
    assert len({a for a, _ in containers}) == len(containers), "unique anchors"
    for name in charts.CHARTS:
        for q in charts.get(name).queries:
            assert f"traceql query {q} --run demo" in html  # how to reproduce each chart


def test_size_of_the_sample_report(demo: tuple[Path, str]) -> None:
    _, html = demo
    bundle = len(page.js_bundle().encode())
    assert len(html.encode()) < bundle + 400_000  # data of 10 charts on 2 ranks stays small


# ---- escaping ---------------------------------------------------------------------------------------------------
def test_script_json_cannot_close_the_element() -> None:
    value = {"a": XSS_SCRIPT, "b": "<!-- x -->", "c": "a&b", "d": "line\u2028sep\u2029", "e": "</SCRIPT >"}
    text = rr.script_json(value)
    assert (
        "<" not in text
        and ">" not in text
        and "&" not in text
        and "\u2028" not in text
        and "\u2029" not in text
    )
    assert json.loads(text) == value


def test_inline_js_is_made_safe_for_a_script_element() -> None:
    assert (
        page._safe_script('x="</script>";y="</SCRIPT";z="<!--"')
        == 'x="<\\/script>";y="<\\/SCRIPT";z="\\x3C!--"'
    )
    bundle = page.js_bundle()
    assert "</script" not in bundle.lower() and "<!--" not in bundle


def _hostile_store(root: Path) -> Path:
    kernels = []
    for i, (name, op_type) in enumerate(((XSS_IMG, XSS_IMG), (XSS_SCRIPT, "TransData"), ("ok", "MatMulV2"))):
        kernels.append(
            {
                "name": name,
                "op_type": op_type,
                "ts_ns": i * 2 * MS,
                "dur_ns": MS,
                "step": 1,
                "task_type": "AI_CORE",
                "is_comm": False,
                "hbm_read_bytes": 10**9,
                "hbm_write_bytes": 10**9,
                "input_formats": XSS_IMG,
                "output_formats": "NC1HWC0",
                "input_shapes": "8,8",
                "input_dtypes": "FLOAT",
                "output_shapes": "8,8",
                "output_dtypes": "FLOAT",
            }
        )
    build_store(root, "hostile", {0: {"kernels": kernels}}, device="Ascend910B")
    return root


def test_dump_text_is_escaped_everywhere(tmp_path: Path) -> None:
    store = _hostile_store(tmp_path / "store")
    html = write_report(tmp_path / "h.html", store, "hostile", device="ascend910b").read_text(
        encoding="utf-8"
    )
    assert XSS_IMG not in html and XSS_SCRIPT not in html and "alert(1)</script>" not in html
    assert "<img" not in _SCRIPT.sub("", html)
    assert html.lower().count("<script") == 3
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # shown as text in the findings' tables
    specs = _specs(html)
    blob = json.dumps(specs)
    assert XSS_IMG in blob and XSS_SCRIPT in blob  # the names reach the charts intact
    body = re.search(r'type="application/json">(.*?)</script>', html, re.S).group(1)
    assert "<" not in body and ">" not in body


# ---- runs without the data some sections need --------------------------------------------------------------------
def test_host_only_run_still_renders(tmp_path: Path) -> None:
    import traceql

    store = tmp_path / "store"
    traceql.ingest(ROOT / "sample_traces" / "kineto_cpu", store=store, name="cpu")
    html = write_report(tmp_path / "cpu.html", store, "cpu").read_text(encoding="utf-8")
    specs = _specs(html)
    assert set(specs) == set(charts.CHARTS)
    assert "No device kernels" in json.dumps(specs["hbm_timeline"])
    assert "no device name in the dump" in html or "HBM peak unknown" in html


def test_report_path_must_be_html(tmp_path: Path) -> None:
    with pytest.raises(TraceQLError, match="give a path ending in .html"):
        write_report(tmp_path / "r.pdf", tmp_path / "store", "x")


def test_report_of_an_8_rank_run_stays_small(tmp_path: Path) -> None:
    """8 ranks x 48 steps of the article scenario (synth.write_cluster, one second of timeline per rank): every
    chart's data is binned or capped in SQL, so the file stays far below 3 MB (the libraries are ~0.9 MB)."""
    import traceql
    from traceql.synth import write_cluster

    write_cluster(tmp_path / "dump", 8, 1, seed=0)
    store = tmp_path / "store"
    traceql.ingest(tmp_path / "dump", store=store, name="c8")
    out = write_report(tmp_path / "c8.html", store, "c8", device="ascend910b")
    size = out.stat().st_size
    print(f"\n8-rank report: {size / 1e6:.2f} MB")
    assert size < 3_000_000
    specs = _specs(out.read_text(encoding="utf-8"))
    rows = {n: sum(len(v) for v in s.get("datasets", {}).values()) for n, s in specs.items()}
    assert rows["hbm_timeline"] <= 8 * 200 + 8 * 100
    assert rows["wait_steps"] <= 8 * 60 + 8


# ---- CLI ------------------------------------------------------------------------------------------------------
def test_cli_report_help(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("report", "--help")
    assert r.code == 0 and "traceql report --run resnet-8card -o resnet.html" in r.out and "offline" in r.out


def test_cli_report_happy_path(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = _hostile_store(tmp_path / "store")
    out = tmp_path / "r.html"
    r = cli("report", "--store", str(store), "--device", "ascend910b", "-o", str(out))  # the only run
    assert r.code == 0, r
    assert f"wrote {out}" in r.err and "opens offline" in r.err
    html = out.read_text(encoding="utf-8")
    assert "traceql report: run <code>hostile</code>" in html and 'data-chart="hbm_timeline"' in html


def test_cli_report_errors(cli, demo: tuple[Path, str], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store, _ = demo
    for args, msg in (
        (["--run", "ghost", "--store", str(store)], "no run 'ghost'"),
        (["--store", str(tmp_path / "absent")], "no traceql store at"),
        (["--run", "demo", "--store", str(store), "--baseline", "nobase"], "no run 'nobase'"),
        (
            ["--run", "demo", "--store", str(store), "-o", str(tmp_path / "r.txt")],
            "give a path ending in .html",
        ),
    ):
        r = cli("report", *args)
        assert r.code == 1, (args, r)
        assert msg in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not list(tmp_path.glob("*.htm*"))
