"""The HTML report in a real headless browser (Debian's chromium), network off.

Driven through the Chrome DevTools Protocol over --remote-debugging-pipe (fd 3/4, NUL-separated JSON), so no
extra dependency: the page must load with every network request refused, every chart must render an SVG with
data marks, no console error/warning and no uncaught exception may occur, text from the dump (an operator named
`<img src=x onerror=alert(1)>`, one named `</script><script>alert(1)</script>`) must show as text (in the page,
in SVG labels and in a hover tooltip) and never run. A full-page screenshot is saved to tests/_artifacts/ for
people to look at.

Skips (with the reason) when no chromium binary is found; .ci/run installs Debian's chromium when it can.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from _canon import MS, build_store

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parent / "_artifacts"
XSS_IMG = "<img src=x onerror=alert(1)>"
XSS_SCRIPT = "</script><script>alert(1)</script>"


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        "no chromium binary found (install Debian's chromium: apt-get install chromium; .ci/run does it)"
    )


class Browser:
    """A headless chromium page driven over the DevTools pipe (fd 3: commands in, fd 4: replies/events out)."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()

        def child_fds() -> None:  # the protocol's fixed descriptors in the child
            import fcntl

            # move both ends above 4 first, so placing one on 3 or 4 cannot clobber the other
            r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)

        args = [
            binary,
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--mute-audio",
            "--hide-scrollbars",
            # network off: every host resolves to nothing and any proxy use goes to a closed port
            "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={profile}",
            "about:blank",
        ]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=child_fds,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    # protocol ---------------------------------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from chromium")
            ready, _, _ = select.select([self._r], [], [], left)
            if ready:
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def send(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 30, page: bool = True
    ) -> Any:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if page and self.session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def pump(self, seconds: float) -> None:
        """Collect events for a while."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._read_message(deadline))
        except TimeoutError:
            pass

    def eval(self, expression: str, timeout: float = 30) -> Any:
        r = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            timeout=timeout,
        )
        if "exceptionDetails" in r:
            raise RuntimeError(f"page error: {r['exceptionDetails']}")
        return r["result"].get("value")

    def open_page(self) -> None:
        targets = self.send("Target.getTargets", page=False)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}, page=False
        )["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send(
            "Network.emulateNetworkConditions",
            {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
        )
        # record any alert() call the page makes (it must make none) before the page's own scripts run
        self.send(
            "Page.addScriptToEvaluateOnNewDocument",
            {
                "source": "window.__alerts = []; window.alert = function (m) { window.__alerts.push(String(m)); };"
            },
        )
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):  # the browser may already be gone
            self.send("Browser.close", page=False, timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)

    # what the page did ------------------------------------------------------------------------------------
    def requests(self) -> list[str]:
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def problems(self) -> list[str]:
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(
                    f"console.{p['type']}: "
                    + " ".join(str(a.get("value", a.get("description"))) for a in p["args"])
                )
            elif m == "Runtime.exceptionThrown":
                out.append(
                    f"exception: {p['exceptionDetails'].get('exception', {}).get('description') or p['exceptionDetails']}"
                )
            elif m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                out.append(f"log {p['entry']['level']}: {p['entry']['text']} {p['entry'].get('url', '')}")
        return out


# ---- fixtures -----------------------------------------------------------------------------------------------
def _hostile_store(root: Path) -> Path:
    """Two ranks whose operators carry hostile names, with HBM bytes, a layout conversion, steps and an
    all-reduce, so every chart has data (values are not asserted here: this test is about the page)."""
    ranks = {}
    for rank in (0, 1):
        kernels = []
        t = 0
        for step in (1, 2):
            for name, op_type, dur in (
                (XSS_IMG, XSS_IMG, 2 * MS),
                (XSS_SCRIPT, "MatMulV2", 3 * MS),
                ("trans_TransData_0", "TransData", MS),
            ):
                kernels.append(
                    {
                        "name": name,
                        "op_type": op_type,
                        "ts_ns": t,
                        "dur_ns": dur,
                        "step": step,
                        "task_type": "AI_CORE",
                        "is_comm": False,
                        "hbm_read_bytes": 1_000_000_000,
                        "hbm_write_bytes": 500_000_000,
                        "input_shapes": "64,128;128,256" if op_type == "MatMulV2" else "8,3,4,4",
                        "input_dtypes": "FLOAT16",
                        "output_shapes": "64,256" if op_type == "MatMulV2" else "8,1,4,4,16",
                        "output_dtypes": "FLOAT16",
                        "input_formats": "NCHW",
                        "output_formats": "NC1HWC0",
                    }
                )
                t += dur
            kernels.append(
                {
                    "name": "hcom_allReduce__1",
                    "op_type": "hcom_allReduce_",
                    "ts_ns": t,
                    "dur_ns": 2 * MS,
                    "is_comm": True,
                    "task_type": "HCCL",
                    "step": step,
                }
            )
            t += 3 * MS
        ranks[rank] = {
            "kernels": kernels,
            "comm_ops": [
                {
                    "name": "hcom_allReduce__1",
                    "op_type": "allreduce",
                    "group_name": "g",
                    "kind": "collective",
                    "ts_ns": k["ts_ns"],
                    "dur_ns": k["dur_ns"],
                    "transit_ns": MS // 2,
                    "step": k["step"],
                    "source": "t",
                }
                for k in kernels
                if k["is_comm"]
            ],
            "steps": [
                {"step": s, "ts_ns": (s - 1) * 11 * MS, "dur_ns": 11 * MS, "source": "t"} for s in (1, 2)
            ],
        }
    build_store(root, "hostile", ranks, device="Ascend910B")
    return root


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    binary = _chromium()
    b = Browser(binary, tmp_path_factory.mktemp("chromium-profile"))
    try:
        b.open_page()
        yield b
    finally:
        b.close()


def _load(b: Browser, html: Path) -> dict[str, Any]:
    """Open a file, wait until every chart settled, return what the charts drew."""
    b.events.clear()
    b.send("Page.navigate", {"url": html.resolve().as_uri()})
    deadline = time.monotonic() + 90
    while (
        b.eval("document.readyState + '|' + (document.body && document.body.getAttribute('data-charts'))")
        != "complete|done"
    ):
        if time.monotonic() > deadline:
            raise AssertionError(f"charts did not finish rendering; first problems: {b.problems()[:5]}")
        b.pump(0.2)
    return b.eval("""(() => {
        const out = {};
        document.querySelectorAll('[data-chart]').forEach(el => {
            const svg = el.querySelector('svg');
            out[el.id] = {chart: el.getAttribute('data-chart'), state: el.getAttribute('data-rendered'),
                          svg: !!svg, marks: svg ? svg.querySelectorAll('g.role-mark > *').length : 0,
                          text: svg ? svg.textContent : ''};
        });
        return out;
    })()""")


def _screenshot(b: Browser, name: str) -> Path:
    size = b.send("Page.getLayoutMetrics")["cssContentSize"]
    shot = b.send(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {
                "x": 0,
                "y": 0,
                "width": size["width"],
                "height": min(size["height"], 16000),
                "scale": 1,
            },
        },
        timeout=60,
    )
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / name
    path.write_bytes(base64.b64decode(shot["data"]))
    print(f"\nscreenshot: {path}")
    return path


def _assert_offline_and_clean(b: Browser) -> None:
    external = [u for u in b.requests() if not u.startswith(("file:", "data:", "blob:", "about:"))]
    assert external == [], f"the page tried the network: {external[:10]}"
    problems = b.problems()
    assert problems == [], f"{len(problems)} console problems, first: {problems[:5]}"
    assert b.eval("window.__alerts") == []


# ---- tests --------------------------------------------------------------------------------------------------
def test_report_renders_offline_with_every_chart(browser: Browser, tmp_path: Path) -> None:
    from traceql.report import write_report

    sample = Path(__file__).resolve().parents[1] / "sample_traces" / "torch_npu_2rank"
    import traceql

    store = tmp_path / "store"
    traceql.ingest(sample, store=store, name="demo")
    html = write_report(tmp_path / "demo.html", store, "demo", device="ascend910b")
    charts = _load(browser, html)
    _screenshot(browser, "report_demo.png")
    _assert_offline_and_clean(browser)

    from traceql.charts import CHARTS

    assert {c["chart"] for c in charts.values()} == set(CHARTS), "every chart appears in the report"
    for anchor, c in charts.items():
        assert c["state"] == "ok" and c["svg"] and c["marks"] > 0, (anchor, c)
    by_chart = {c["chart"]: c for c in charts.values()}
    # The sample is the article's story: 2 ranks x 3 steps with HBM counters. Data-driven mark counts, from the
    # queries' row counts: 2 ranks x 200 bins; 2 ranks x 7 parts; 10 operators x (read, write) + 10 labels.
    assert by_chart["hbm_timeline"]["marks"] >= 2 * 200
    assert by_chart["wait_attribution"]["marks"] >= 2 * 7
    assert by_chart["op_hbm_bytes"]["marks"] >= 10 * 2 + 10
    # the verdict is the first thing on the page
    first_h2 = browser.eval("document.querySelector('main h2').textContent")
    assert "saturates first" in first_h2
    assert "memory-bound" in browser.eval("document.querySelector('.headline').textContent")


def test_hostile_operator_names_stay_text(browser: Browser, tmp_path: Path) -> None:
    from traceql.report import write_report

    store = _hostile_store(tmp_path / "store")
    html = write_report(tmp_path / "hostile.html", store, "hostile", device="ascend910b")
    charts = _load(browser, html)
    _screenshot(browser, "report_hostile.png")
    _assert_offline_and_clean(browser)
    for anchor, c in charts.items():
        assert c["state"] == "ok" and c["svg"] and c["marks"] > 0, (anchor, c)
    # nothing was injected: no <img src=x>, one script per page script (specs JSON, libraries, init)
    assert browser.eval("document.querySelectorAll('img').length") == 0
    assert browser.eval("document.scripts.length") == 3
    # the names are shown as text in chart labels
    op_chart = next(a for a, c in charts.items() if c["chart"] == "op_hbm_bytes")
    assert XSS_IMG in charts[op_chart]["text"] and XSS_SCRIPT in charts[op_chart]["text"]
    # hover the first bar of the operator chart: the tooltip shows the name as text, not markup
    browser.eval(f"document.getElementById('{op_chart}').scrollIntoView()")
    box = browser.eval(f"""(() => {{
        const r = document.querySelector('#{op_chart} g.role-mark > path').getBoundingClientRect();
        return [r.x + r.width / 2, r.y + r.height / 2];
    }})()""")
    for kind in ("mouseMoved",):
        browser.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1]})
    deadline = time.monotonic() + 10
    tip = None
    while time.monotonic() < deadline:
        tip = browser.eval("""(() => { const t = document.getElementById('vg-tooltip-element');
            return t && t.classList.contains('visible') ? {html: t.innerHTML, text: t.textContent,
                   imgs: t.querySelectorAll('img, script').length} : null; })()""")
        if tip:
            break
        browser.pump(0.2)
    assert tip, "hovering a bar shows a tooltip"
    assert tip["imgs"] == 0
    assert XSS_IMG in tip["text"] or XSS_SCRIPT in tip["text"]
    assert "&lt;" in tip["html"]
    _assert_offline_and_clean(browser)


def test_single_chart_html_renders_offline(browser: Browser, tmp_path: Path) -> None:
    from traceql import charts

    store = _hostile_store(tmp_path / "store")
    out = charts.save(
        charts.make("hbm_timeline", store, run_id="hostile", device="ascend910b"), tmp_path / "hbm.html"
    )
    drawn = _load(browser, out)
    _assert_offline_and_clean(browser)
    assert list(drawn.values())[0]["marks"] > 0


# ---- issue 46: every table fits its card at 1400 and 900 px --------------------------------------------------------
# An element overflows when its right edge passes its card's (a finding's article, else its section), except inside
# a horizontal scroll box (.wrap, pre, a display:block table) that itself fits: the reader scrolls inside the card.
_OVERFLOW_JS = """(() => {
    const bad = [];
    const scrollBox = el => { const cs = getComputedStyle(el);
        return (cs.overflowX === 'auto' || cs.overflowX === 'scroll') && el.scrollWidth >= el.clientWidth; };
    document.querySelectorAll('main table, main pre, main .wrap, main .chart, main .headline, main ul, main p').forEach(el => {
        if (el.closest('details:not([open])')) return;            // closed: not on screen
        for (let p = el.parentElement; p && p.tagName !== 'MAIN'; p = p.parentElement) {
            if (scrollBox(p)) return;                              // scrolled inside a box checked on its own
        }
        const card = el.parentElement.closest('article.finding, section');
        if (!card) return;
        const r = el.getBoundingClientRect(), c = card.getBoundingClientRect();
        if (r.right > c.right + 1 || r.left < c.left - 1)
            bad.push(`${el.tagName}.${el.className} in #${card.id}: ${Math.round(r.left)}..${Math.round(r.right)} vs ${Math.round(c.left)}..${Math.round(c.right)}`);
    });
    return bad;
})()"""


def _fits_at(b: Browser, html: Path, width: int, name: str) -> dict[str, Any]:
    b.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        _load(b, html)
        # evidence tables too (not the charts' own action menus, which are <details> as well)
        b.eval(
            "document.querySelectorAll('main details:not(.vega-embed details)').forEach(d => d.open = true)"
        )
        bad = b.eval(_OVERFLOW_JS)
        _screenshot(b, f"{name}_{width}.png")
        headers = b.eval(
            "[...document.querySelectorAll('.finding th[title]')].map(t => [t.textContent, t.title])"
        )
        sci = b.eval(
            r"[...document.querySelectorAll('main td, main .tile .v')].map(e => e.textContent)"
            r".filter(t => /\d\.?\d*e[+-]\d+/.test(t))"
        )
        return {"overflow": bad, "headers": headers, "scientific": sci}
    finally:
        b.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        )


def _check_fit(b: Browser, html: Path, name: str) -> None:
    for width in (1400, 900):
        got = _fits_at(b, html, width, name)
        assert got["overflow"] == [], (width, got["overflow"][:10])
        assert got["scientific"] == [], (width, got["scientific"][:10])
        for text, sql in got["headers"]:  # human headers, the SQL name in the tooltip
            assert "_" not in text and sql, (text, sql)
    legend = b.eval("document.querySelectorAll('#legend table tr').length")
    assert legend > 10, "the legend is in the report"


def test_level1_report_tables_fit_at_1400_and_900(browser: Browser, tmp_path: Path) -> None:
    from conftest import LEVEL1

    if not LEVEL1.exists():
        pytest.skip("real dumps absent")
    import traceql
    from traceql.report import write_report

    traceql.ingest(LEVEL1, store=tmp_path / "store", name="level1")
    html = write_report(tmp_path / "level1.html", tmp_path / "store", "level1")
    _check_fit(browser, html, "report_level1")
    headline = browser.eval("document.querySelector('.headline').textContent")
    assert len(headline) <= 160 and headline.startswith("cannot tell"), headline
    # findings by saving: the first card is level1's biggest saving (free_time, 26 ms/step)
    assert browser.eval("document.querySelector('article.finding').id") == "finding-free_time"


def test_kineto_report_tables_fit_at_1400_and_900(browser: Browser, tmp_path: Path) -> None:
    from conftest import HTA

    alexnet = HTA / "critical_path/alexnet"
    if not alexnet.exists():
        pytest.skip("real dumps absent")
    import traceql
    from traceql.report import write_report

    traceql.ingest(alexnet, store=tmp_path / "store", name="alexnet")
    html = write_report(tmp_path / "alexnet.html", tmp_path / "store", "alexnet")
    _check_fit(browser, html, "report_kineto")
