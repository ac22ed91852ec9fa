"""The MCP tools as plain functions over a store: each returns its answer's JSON text, capped (answers.fit).

They are thin: the verdict and the findings come from traceql.findings' JSON document (`Report.to_dict()`, the
`traceql findings --format json` document), the comparison from traceql.compare's, rows from the query library
and the SQL sandbox. What they add is the choosing: which fields an agent needs, each number with its grade,
and the cap. Errors are TraceQLErrors with one line; the server turns them into MCP tool errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import QueryError, TraceQLError
from . import answers, legend
from .answers import envelope, fit

#: rows an answer shows unless the agent asks for more, and the most it may ask for
DEFAULT_ROWS = 50
MAX_ROWS = 500


@dataclass
class Tools:
    store: str | None = None
    cap: int = answers.DEFAULT_CAP
    timeout_s: float = 60.0  # a sql statement's or a library query's time limit (0: none)
    memory_limit: str | None = None
    # the findings documents evaluated so far, by run and the run's stored generation (a replaced run is a new
    # key): verdict() then findings() on one run, an agent's usual first two calls, evaluate it once
    _reports: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, repr=False, compare=False)

    def _store(self) -> Any:
        from ..stores import open_store

        return open_store(self.store)

    def _run(self, run: str | None) -> str:
        from ..analysis import resolve_run

        return resolve_run(self._store(), run or None)

    # ---- runs -------------------------------------------------------------------------------------------
    def list_runs(self) -> str:
        st = self._store()
        runs = st.runs() if st.exists() else {}
        rows = [
            {
                "run": rid,
                "format": info.get("format"),
                "ranks": info.get("ranks_count"),
                "device": info.get("device"),
                "rows": sum((info.get("rows") or {}).values()),
                "ingested_at": info.get("ingested_at"),
                "source": info.get("source"),
            }
            for rid, info in sorted(runs.items(), key=lambda kv: str(kv[1].get("ingested_at")), reverse=True)
        ]
        ans = envelope(
            "list_runs",
            store=str(st.root),
            total_runs=len(rows),
            latest=st.latest_run() if rows else None,
            runs=rows,
            next="verdict(run) first; ingest(path) adds a run" if rows else "ingest(path) adds a run",
        )
        return fit(ans, self.cap, ("runs",), "the rest are older runs: `traceql runs --store STORE`")

    def ingest(self, path: str, name: str | None = None, replace: bool = False) -> str:
        from ..dump_fs import is_url
        from ..ingest import ingest
        from ..post_ingest import after_ingest, summary

        if is_url(path):
            # an object-store dump reaches the network: the CLI's `traceql ingest` does that, not the agent
            raise TraceQLError(
                f"{path}: dumps on object storage are ingested with `traceql ingest`, not over MCP"
            )
        notes: list[dict[str, str]] = []
        # the same entry as `traceql ingest`: read-only on the dump, links out of it refused, one atomic commit
        info = ingest(path, store=self.store, name=name or None, replace=replace)
        after_ingest(info, self.store, lambda level, text: notes.append({"level": level, "text": text}))
        ans = envelope(
            "ingest",
            run=info["run_id"],
            summary=summary(info),
            format_detected=info.get("format"),
            ranks=info.get("ranks_count"),
            device=info.get("device"),
            notes=notes,
            next=f"verdict(run={info['run_id']!r})",
        )
        return fit(ans, self.cap, ("notes",), f"`traceql check --run {info['run_id']}` lists every check")

    # ---- verdict and findings -----------------------------------------------------------------------------
    def _report(self, run: str | None) -> dict[str, Any]:
        from .. import findings

        rid = self._run(run)
        info = self._store().run(rid)
        key = (rid, f"{info.get('dir')}|{info.get('ingested_at')}")
        doc = self._reports.get(key)
        if doc is None:
            doc = findings.evaluate(self.store, rid).to_dict()  # the traceql.findings/N document
            while len(self._reports) >= 8:  # a few runs' documents, not every run an agent ever looked at
                self._reports.pop(next(iter(self._reports)))
            self._reports[key] = doc
        return doc

    def verdict(self, run: str | None = None) -> str:
        from .shape import verdict_answer

        doc = self._report(run)
        ans = verdict_answer(doc)
        return fit(ans, self.cap, ("caveats", "numbers"), f"`traceql findings --run {doc['run_id']}`")

    def findings(self, run: str | None = None, limit: int = 10) -> str:
        from .shape import findings_answer

        doc = self._report(run)
        ans = findings_answer(doc, max(1, min(int(limit), 100)))
        return fit(
            ans,
            self.cap,
            ("not_fired", "findings"),
            f"findings(run, limit=...) with a smaller limit, or `traceql findings --run {doc['run_id']} "
            "--format markdown` for every field",
            {"findings": "returned_findings"},
        )

    # ---- rows ---------------------------------------------------------------------------------------------
    def query(
        self,
        name: str,
        run: str | None = None,
        params: dict[str, Any] | None = None,
        limit: int = DEFAULT_ROWS,
    ) -> str:
        from .. import queries
        from ..analysis import Analysis
        from .sandboxed import run_library_query
        from .shape import rows_answer

        spec = queries.get(name)  # QueryError naming the known queries
        rid = self._run(run)
        with Analysis(self.store, rid) as session:  # derived tables prepared, one connection
            given = {str(k): v for k, v in (params or {}).items()}
            table = run_library_query(session, name, given, self.timeout_s)
        lim = _limit(limit)
        ans = rows_answer("query", table, lim, run=rid, query=name, description=spec.description)
        more = (
            f"query(name={name!r}, limit=N) up to {MAX_ROWS}, or sql(...) with WHERE/ORDER BY over the "
            f"library's tables; all rows: `traceql query {name} --run {rid} --format csv`"
        )
        ans["how_to_get_more"] = more if ans["total_rows"] > len(ans["rows"]) else None
        return fit(ans, self.cap, ("rows",), more, {"rows": "returned_rows"})

    def sql(self, statement: str, run: str | None = None, limit: int = DEFAULT_ROWS) -> str:
        from .sandboxed import run_sql
        from .shape import rows_answer

        rid = self._run(run) if run else None
        lim = _limit(limit)
        table, total = run_sql(self._store(), statement, rid, lim, self.timeout_s, self.memory_limit)
        ans = rows_answer("sql", table, lim, run=rid, total=total)
        more = "sql(..., limit=N) up to 500, or aggregate (GROUP BY) / filter (WHERE) in the statement"
        ans["how_to_get_more"] = more if ans["total_rows"] > len(ans["rows"]) else None
        return fit(ans, self.cap, ("rows",), more, {"rows": "returned_rows"})

    # ---- compare and explain ------------------------------------------------------------------------------
    def compare(self, base: str, cand: str) -> str:
        from ..compare import compare
        from .shape import compare_answer

        st = self._store()
        b, c = self._run(base), self._run(cand)
        doc = compare(st, b, c).to_dict()  # the traceql.compare/N document
        ans = compare_answer(doc)
        return fit(
            ans,
            self.cap,
            ("operators_changed", "findings_persisting", "step_parts", "differences"),
            f"`traceql compare {b} {c} --format markdown`",
        )

    def explain(self, term: str | None = None) -> str:
        known = legend.terms()
        if term:
            key = term.strip().lower()
            if key not in known:
                raise TraceQLError(f"unknown term {term!r}; known terms: {', '.join(known)}")
            ans = envelope("explain", terms={key: known[key]})
        else:
            ans = envelope("explain", terms=known)
        return fit(ans, self.cap)


def _limit(limit: int) -> int:
    try:
        n = int(limit)
    except (TypeError, ValueError):
        raise QueryError(f"limit {limit!r}: expected a whole number 1..{MAX_ROWS}") from None
    if not 1 <= n <= MAX_ROWS:
        raise QueryError(f"limit {n}: expected 1..{MAX_ROWS} (aggregate in SQL for more)")
    return n
