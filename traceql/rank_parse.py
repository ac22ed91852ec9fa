"""One unit of a dump parsed into a rank's Parquet, and the run record built from the units' results: the pure
function every ingest runs per unit (the local pool in traceql.ingest, a Ray task in traceql.distributed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import BadTraceError, TraceQLError
from .parsers import Unit
from .rank_writer import RankWriter
from .version import __version__


def parse_unit(
    unit: Unit, run_dir: str, run_id: str, rank: int, tag: str, slot: int = -1, size: int = 0
) -> dict[str, Any]:
    """Runs in a worker process: parse one unit into its own Parquet files. Returns rows/files/meta.
    slot/size: where this unit publishes its bytes read (traceql.progress)."""
    from ._arrow_helpers import use_parse_memory_pool
    from .parsers import get
    from .progress import UnitProgress

    use_parse_memory_pool()
    from .fs_errors import store_error
    from .parsers import _numtext

    _numtext.reset()
    writer = RankWriter(Path(run_dir), run_id, rank, tag=tag)
    try:
        with UnitProgress(slot, size):
            meta = get(unit.parser).parse(unit, writer) or {}
        record_unparsed(meta, writer, str(unit.path))
        role = dict(unit.options).get("role")  # set by parsers.detect, relative to the dump the user named
        if rank >= 0 and role:  # a cluster-level unit (rank -1) belongs to no role
            writer.write("run_meta", {"key": ["traceql.role"], "value": [role]})
        writer.close()
    except TraceQLError:
        writer.abort()
        raise
    except Exception as e:
        writer.abort()
        from ._duck import oom_message, resource_exhausted

        # a memory budget, the address space or the thread limit ran out: not a bug, not a bad dump (issues 18, 47)
        if resource_exhausted(e):
            raise TraceQLError(oom_message(str(unit.path), e)) from None
        import csv
        import zlib

        # csv.Error (a stray CR in an unquoted field) and zlib.error (a corrupt .gz's deflate stream) are
        # neither ValueError nor OSError: both came out as `internal error` in the nightly fuzz run (issue 47)
        if not isinstance(
            e,
            (ValueError, KeyError, IndexError, TypeError, OSError, RecursionError, MemoryError, csv.Error)
            + (zlib.error,),
        ):
            raise
        # the store's disk (full, read-only...) is not the dump's fault: say which and what to do
        if (
            isinstance(e, OSError)
            and (se := store_error(e, Path(run_dir).parent.parent, "writing the run")) is not None
        ):
            raise se from e
        # A parser bug or a dump shape we did not foresee: still one clear line naming the file.
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise BadTraceError(
            unit.path, f"could not parse as {unit.parser}: {type(e).__name__}: {first}"
        ) from e
    except BaseException:
        writer.abort()
        raise
    return {"rank": rank, "rows": writer.rows, "files": writer.files, "meta": meta, "parser": unit.parser}


def record_unparsed(meta: dict[str, Any], writer: RankWriter, unit_path: str) -> None:
    """Numeric cells that held text no profiler writes (hex, '1_000', NaN, Arabic-Indic digits...) were stored
    as NULL: warn, and keep them in run_meta, where the `unparsed_numbers` check reports them."""
    from .parsers._numtext import take, take_unreadable

    bad = take(unit_path)
    unreadable = take_unreadable()
    if not bad and not unreadable:
        return
    warnings = meta.setdefault("warnings", [])
    keys, values = [], []
    for path, field, n, example in unreadable:
        warnings.append(f"{path}: {field}: {n} value(s) could not be read, stored as NULL ({example})")
        keys.append(f"traceql.unreadable_values.{Path(path).name}.{field}")
        values.append(json.dumps({"file": path, "field": field, "values": n, "example": example}))
    for path, col, n, line, example in bad:
        where = f"first at line {line}: " if line is not None else "e.g. "
        warnings.append(
            f"{path}: {col if col.startswith('(') else f'column {col!r}'}: {n} {'value' if line is None else 'cell'}(s) not a number, stored as "
            f"NULL ({where}{example!r})"
        )
        keys.append(f"traceql.unparsed_numbers.{Path(path).name}.{col}")
        values.append(
            json.dumps({"file": path, "column": col, "cells": n, "first_line": line, "example": example})
        )
    writer.write("run_meta", {"key": keys, "value": values})


def run_info(path: Path, results: list[dict[str, Any]]) -> dict[str, Any]:
    rows: dict[str, int] = {}
    files: dict[str, list[str]] = {}
    devices = []
    warnings: list[str] = []
    formats = []
    for r in sorted(results, key=lambda r: r["rank"]):
        for t, n in r["rows"].items():
            rows[t] = rows.get(t, 0) + n
        for t, fl in r["files"].items():
            files.setdefault(t, []).extend(fl)
        meta = r["meta"]
        if meta.get("device"):
            devices.append(meta["device"])
        warnings.extend(meta.get("warnings", []))
        formats.append(r["parser"])
    if not any(rows.values()):
        raise BadTraceError(path, "the dump holds no events, kernels or records (empty or header-only files)")
    # rank -1 holds cluster-level rows (msprof-analyze cluster output); a parser may report the real ranks
    ranks_set = {r["rank"] for r in results if r["rank"] >= 0}
    for r in results:
        ranks_set.update(int(x) for x in r["meta"].get("ranks", []) if int(x) >= 0)
    ranks = sorted(ranks_set)
    return {
        "source": str(path.resolve()),
        "format": "+".join(sorted(set(formats))),
        "parser_version": __version__,
        "device": devices[0] if devices else None,
        "ranks": ranks,
        "ranks_count": len(ranks),
        "rows": rows,
        "files": files,
        "warnings": warnings[:50],
        "meta": {str(r["rank"]): r["meta"] for r in results if r["meta"]},
    }
