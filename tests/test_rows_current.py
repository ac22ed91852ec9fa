"""traceql/rows.py is what tools/gen_rows.py writes from the SQL headers today (else: python tools/gen_rows.py),
and its TypedDicts hold exactly each header's columns. Expected values: the `-- column:` lines, read here with
a plain regex (not traceql's header parser)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from traceql import rows

ROOT = Path(__file__).resolve().parents[1]


def _gen_rows():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_rows", ROOT / "tools" / "gen_rows.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_committed_rows_module_is_current() -> None:
    want = _gen_rows().render()
    got = (ROOT / "traceql" / "rows.py").read_text(encoding="utf-8")
    assert got == want, "traceql/rows.py is not current: run python tools/gen_rows.py and commit it"


def _columns(path: Path) -> list[str]:
    return re.findall(r"^--\s*column:\s*(\w+)", path.read_text(encoding="utf-8"), flags=re.M)


def test_every_query_and_derived_table_has_its_columns() -> None:
    for folder, table in (("queries", rows.QUERY_ROWS), ("queries/derived", rows.DERIVED_ROWS)):
        files = {p.stem: p for p in (ROOT / folder).glob("*.sql") if not p.name.startswith("_")}
        assert set(table) == set(files), folder
        for name, td in table.items():
            assert list(td.__annotations__) == _columns(files[name]), name
