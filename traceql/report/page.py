"""The report's page machinery: templates, the inlined Vega bundle, safe JSON in script elements, and one chart as
a self-contained page (used by `traceql chart -o x.html` and by the report).

Safe embedding: chart specs go into <script type="application/json"> with `<`, `>`, `&`, U+2028 and U+2029
written as \\u escapes, so no value can close the script element; the page's CSP pins its own scripts' hashes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..numbers import human_number

TEMPLATES = Path(__file__).with_name("templates")

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JSON_ESCAPE_RE = re.compile("[<>&\u2028\u2029]")


# ---- safe embedding -----------------------------------------------------------------------------------------
def script_json(obj: Any) -> str:
    """JSON for a <script type="application/json"> element: `</script>`, `<!--` and JS line separators in any
    string are written as \\u escapes, so the data cannot end the element or start markup."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return _JSON_ESCAPE_RE.sub(lambda m: _JSON_ESCAPES[m.group(0)], text)


def _safe_script(js: str) -> str:
    """JavaScript for an inline <script>: it must not contain `</script` or `<!--` (which change how the HTML
    parser reads script text). The vl-convert bundle has neither; escape them anyway if a version adds one
    (`<\\/` and `\\x3C!--` only occur inside strings/regexes in minified code, where they mean the same)."""
    js = re.sub(r"</(script)", r"<\\/\1", js, flags=re.I)
    return js.replace("<!--", "\\x3C!--")


# the snippet puts the three libraries on window (what vl-convert's default snippet does)
_SNIPPET = "window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;"
_KEPT: dict[str, str] = {}  # the bundle by _bundle_key(), once this process has it


def js_bundle(cache_dir: Path | None = None) -> str:
    """Vega + Vega-Lite + vega-embed as one script, from vl-convert-python (no network, no vendored copy).

    Bundling costs ~1.5 CPU-s, the same result every time for one vl-convert version: a process bundles it at
    most once, and a report keeps it in its store (`bundle_cache_dir`: traceql writes nowhere but the store and
    the output named), where later processes read it. cache_dir None: nothing read or written on disk."""
    key = _bundle_key()
    if key in _KEPT:
        return _KEPT[key]
    path = cache_dir / f"vega-bundle-{key}.js" if cache_dir is not None else None
    js = _read_cache(path) if path is not None else None
    if js is None:
        import vl_convert as vlc

        js = _safe_script(vlc.javascript_bundle(_SNIPPET, vl_version=vl_version()))
        if path is not None:
            from ..store import write_cache_file

            write_cache_file(path, lambda tmp: tmp.write_text(js, encoding="utf-8"))
    _KEPT[key] = js
    return js


def forget_bundle() -> None:
    """Drop this process's bundle (tests: as a new process would start)."""
    _KEPT.clear()


@lru_cache(maxsize=1)
def _bundle_key() -> str:
    spec = f"{_dist_version('vl-convert-python')}|{vl_version()}|{_SNIPPET}"
    return hashlib.sha256(spec.encode()).hexdigest()[:20]


def _read_cache(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8") or None
    except (OSError, UnicodeDecodeError):
        return None  # not kept yet (or unreadable): bundle it


def bundle_cache_dir(store: Any) -> Path | None:
    """Where a report on `store` keeps the Vega bundle: the local store's `.cache/` folder (the store is
    traceql's own; a symlinked one is refused like its other folders). None, and no cache, for an object
    store, a store that cannot be opened or written, or TRACEQL_BUNDLE_CACHE=0."""
    from ..errors import TraceQLError
    from ..store import cache_folder
    from ..stores import open_store

    try:
        return cache_folder(open_store(store), "TRACEQL_BUNDLE_CACHE")
    except (TraceQLError, OSError):
        return None


def bundle_versions() -> dict[str, str]:
    import vl_convert as vlc

    return {
        "vega": vlc.get_vega_version(),
        "vega-lite": vl_version() or max(vlc.get_vegalite_versions()),
        "vega-embed": vlc.get_vega_embed_version(),
        "vl-convert-python": _dist_version("vl-convert-python"),
    }


def _dist_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def _env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,  # every {{ value }} is HTML-escaped; only script_json/js_bundle output is marked safe
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = fmt_value
    return env


def render_page(template: str, cache_dir: Path | None = None, **ctx: Any) -> str:
    """Render a page with the inlined libraries, the chart specs and the CSP pinning the two scripts.
    cache_dir: where the bundle is kept between processes (bundle_cache_dir), None to bundle it."""
    from markupsafe import Markup

    init = (TEMPLATES / "init.js").read_text(encoding="utf-8")
    bundle = js_bundle(cache_dir)
    csp = (
        "default-src 'none'; img-src data: blob:; style-src 'unsafe-inline'; "
        f"script-src {_sha256(bundle)} {_sha256(init)} 'unsafe-eval'; base-uri 'none'; form-action 'none'"
    )
    html: str = (
        _env().get_template(template).render(csp=csp, vega_js=Markup(bundle), init_js=Markup(init), **ctx)
    )
    return html


def chart_html(spec: dict[str, Any], title: str, cache_dir: Path | None = None) -> str:
    """One chart as a self-contained HTML page (`traceql chart NAME -o chart.html`)."""
    from markupsafe import Markup

    from ..version import __version__

    return render_page(
        "chart.html.j2",
        cache_dir,
        title=title,
        specs_json=Markup(script_json({"chart": spec})),
        version=__version__,
        libs=bundle_versions(),
    )


# ---- value formatting (display only) -------------------------------------------------------------------------
_SHARE_KEYS = ("share", "utilization", "util", "fraction", "frac", "ratio", "rate", "efficiency", "headroom")


def fmt_value(v: Any, key: str = "") -> str:
    """A number for people, by its key's unit convention (findings.py: _ns ns, _bytes bytes, _bps bytes/s,
    shares and utilisations 0..1)."""
    k = key.lower()
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, dict):
        return ", ".join(f"{kk}: {fmt_value(vv, key)}" for kk, vv in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt_value(x, key) for x in v)
    if isinstance(v, (int, float)):
        if k.endswith("_ns") or "_ns_" in k:
            return f"{v / 1e6:,.3f} ms"
        if k.endswith("_bps"):
            return f"{v / 1e9:,.1f} GB/s"
        if k == "bytes" or k.endswith("_bytes") or "bytes_" in k:
            return _size(float(v))
        if k.endswith("_ms") or "_ms_" in k:
            return f"{v:,.3f} ms"
        if any(s in k for s in _SHARE_KEYS) and isinstance(v, float) and -0.001 <= v <= 10:
            return f"{100 * v:.1f}%"
        if isinstance(v, float):
            return human_number(v)
        return f"{v:,}"
    return str(v)


def _size(b: float) -> str:
    for unit, f in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(b) >= f:
            return f"{human_number(b / f)} {unit}"
    return f"{b:,.0f} B"


def vl_version() -> str | None:
    """The Vega-Lite version vl-convert should use: Altair's major.minor when vl-convert bundles it."""
    import altair as alt
    import vl_convert as vlc

    want = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    return want if want in vlc.get_vegalite_versions() else None
