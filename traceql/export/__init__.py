"""`traceql export`: a run's timeline with traceql's findings, bandwidth counters and wait attribution on it,
as a Perfetto protobuf trace (.pftrace) or Chrome trace JSON.

    from traceql.export import export
    summary = export(store, "job", "job.pftrace")                              # Perfetto
    summary = export(store, "job", "job.json", fmt="chrome", ranks=[3], steps=(10, 12))

What goes in (one process per rank): the device tasks, host ops, communication ops and flows as the store has
them (_timeline_rows.py), the counters (the dump's own, and traceql's HBM bandwidth from the sampled counters,
per-task PMU bytes and the modeled lower bound on separate tracks, UB bandwidth and L2 hit rate where
measured), the wait-attribution state per rank, and one slice per fired finding over its evidence windows
(_findings.py). Times are moved onto the reference rank's clock by the offsets clock_offsets estimates, where
they exceed the collectives' own skew (traceql.clock_align).

Streaming: every family is one DuckDB statement read in record batches and written as it comes (bounded
memory whatever the run's size); the output is written to a temporary file beside the target and renamed into
place at the end, so a failed export leaves no half file.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from . import _findings, _timeline_rows
from ._lanes import Lanes, lane_name
from ._session import Session, open_session, parse_steps

__all__ = ["export", "parse_steps", "FORMATS"]

FORMATS = ("perfetto", "chrome")
FORMAT_ID = "traceql.export/1"


def _sort_index(track: str) -> int:
    if track.startswith(_timeline_rows.FINDINGS_TRACK):
        return -3
    if track.startswith(_timeline_rows.WAIT_TRACK):
        return -2
    if track.lower().startswith("stream "):
        return 0
    if "Communication" in track:
        return 100
    return 200


def _origin(sess: Session) -> int:
    """The earliest aligned start of anything exported (the Chrome file's baseTimeNanoseconds)."""
    parts = []
    for table in ("kernels", "host_ops", "comm_ops", "counters"):
        parts.append(
            f"SELECT rank, min(ts_ns) AS t FROM {table} WHERE ts_ns IS NOT NULL AND {sess.where()} GROUP BY rank"
        )
    rows = sess.rows(" UNION ALL ".join(parts))
    ts = [int(r["t"]) - sess.shift.get(int(r["rank"]), 0) for r in rows if r["t"] is not None]
    return min(ts) if ts else 0


def _slice_rows(batches: Iterator[Any]) -> Iterator[tuple[dict[str, Any], list[str]]]:
    for b in batches:
        d = b.to_pydict()
        args = [c for c in b.column_names if c not in _timeline_rows.SLICE_BASE]
        for i in range(b.num_rows):
            yield {c: d[c][i] for c in d}, args


def _write_slices(
    w: Any, sess: Session, rows: Iterator[tuple[dict[str, Any], list[str]]], nest: bool = True
) -> int:
    """Rows in (rank, track, start) order -> lanes -> the writer. Returns the slices written."""
    key: tuple[int, str] | None = None
    lanes = Lanes(nest)
    n = 0

    def drain() -> None:
        if key is not None:
            for lane, end in lanes.drain():
                w.end(key[0], lane_name(key[1], lane), end)

    for r, arg_cols in rows:
        rank, track = int(r["rank"]), str(r["track"])
        if (rank, track) != key:
            drain()
            key, lanes = (rank, track), Lanes(nest)
        shift = sess.shift.get(rank, 0)
        ts = int(r["ts_ns"]) - shift
        dur = int(r["dur_ns"] or 0)
        lane, closed = lanes.place(ts, ts + dur)
        for cl, end in closed:
            w.end(rank, lane_name(track, cl), end)
        args = {c: r[c] for c in arg_cols if r[c] is not None}
        args["ts_ns"] = str(r["ts_ns"])  # the store's exact start, on the rank's own clock
        if shift:
            args["clock_offset_ns"] = shift
        w.slice(
            rank,
            lane_name(track, lane),
            _sort_index(track),
            ts,
            dur,
            str(r["name"]),
            str(r["cat"]),
            args,
            r.get("flow_in"),
            r.get("flow_out"),
        )
        n += 1
    drain()
    return n


def _write_counters(w: Any, sess: Session, fam: _timeline_rows.Family) -> int:
    n = 0
    key = "d" if fam.cumulative else "value"
    run_rank: int | None = None
    acc = 0.0
    for b in sess.batches(fam.sql):
        d = b.to_pydict()
        for rank, track, ts, v in zip(d["rank"], d["track"], d["ts_ns"], d[key], strict=True):
            if v is None or v != v or v in (float("inf"), float("-inf")):
                continue
            rank = int(rank)
            if fam.cumulative:
                if rank != run_rank:
                    run_rank, acc = rank, 0.0
                acc += v
                v = round(max(acc, 0.0) * fam.scale, 6)  # float sums leave +-1e-12 residues: 0 is 0
            w.counter(rank, str(track), fam.unit, int(ts) - sess.shift.get(rank, 0), v)
            n += 1
    return n


def _merge_states(
    sess: Session, batches: Iterator[Any], basis: str
) -> Iterator[tuple[dict[str, Any], list[str]]]:
    """Consecutive wait-state segments in the same state -> one slice (shares time-weighted over it)."""
    args = ["step", "segments", "transit_share", "peer_hbm_share", "basis"]
    cur: dict[str, Any] | None = None
    acc: dict[str, float] = {}

    def done(c: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        dur = c["dur_ns"] or 1
        c["transit_share"] = round(acc["tr"] / dur, 4) if acc["comm"] else None
        c["peer_hbm_share"] = round(acc["peer"] / dur, 4) if acc["pw"] else None
        return c, args

    for b in batches:
        d = b.to_pydict()
        for i in range(b.num_rows):
            rank, t0, t1, state = int(d["rank"][i]), int(d["t0"][i]), int(d["t1"][i]), d["state"][i]
            if cur is not None and (
                cur["rank"] != rank or cur["name"] != state or cur["ts_ns"] + cur["dur_ns"] != t0
            ):
                yield done(cur)
                cur = None
            if cur is None:
                cur = {
                    "rank": rank,
                    "track": _timeline_rows.WAIT_TRACK,
                    "ts_ns": t0,
                    "dur_ns": 0,
                    "name": state,
                    "cat": "traceql.wait_state",
                    "flow_in": None,
                    "flow_out": None,
                    "step": d["step"][i],
                    "segments": 0,
                    "basis": basis,
                }
                acc = {"tr": 0.0, "peer": 0.0, "comm": 0, "pw": 0}
            seg = t1 - t0
            cur["dur_ns"] += seg
            cur["segments"] += 1
            if d["n_comm"][i]:
                acc["comm"] = 1
                acc["tr"] += (d["transit_share"][i] or 0.0) * seg
            if d["n_peer_wait"][i]:
                acc["pw"] = 1
                acc["peer"] += (d["peer_hbm_share"][i] or 0.0) * seg
    if cur is not None:
        yield done(cur)


def _write_flows(w: Any, sess: Session) -> int:
    n = 0
    fam = _timeline_rows.flows(sess)
    for b in sess.batches(fam.sql):
        for r in b.to_pylist():
            rank = int(r["rank"])
            sh = sess.shift.get(rank, 0)
            w.flow(
                rank,
                r["id"],
                r["cat"],
                r["name"],
                r["src_track"],
                int(r["src_ts_ns"]) - sh,
                r["dst_track"],
                int(r["dst_ts_ns"]) - sh,
                0,
            )
            n += 1
    return n


def _meta(
    sess: Session, run_id: str, steps: tuple[int, int] | None, origin: int, align: bool
) -> dict[str, Any]:
    """The export's own metadata (the Chrome file's otherData, the Perfetto trace's metadata packet)."""
    return {
        "format": FORMAT_ID,
        "run_id": run_id,
        "ranks": sess.ranks,
        "steps": None if steps is None else f"{steps[0]}-{steps[1]}",
        "origin_ns": str(origin),
        "clock_offsets": [
            {k: (str(v) if k == "offset_ns" else v) for k, v in o.items() if k != "run_id"}
            for o in sess.offsets
        ],
        "clock_alignment": (
            "applied where |offset| > the collectives' own skew (clock_offsets.applied)"
            if align
            else "off (--no-clock-align): every rank on its own clock"
        ),
        "peaks": sess.peaks,
        "peaks_note": sess.peaks_note,
        "slice": "events that start inside the chosen ranks' step windows" if steps else "the whole run",
    }


def _write_ranks(w: Any, sess: Session, fmt: str, sat_threshold: float, counts: dict[str, int]) -> None:
    """Every family of every rank into the writer, adding to counts per family."""
    # rank by rank: each statement's sorts and windows then hold one rank, not the run
    basis = _timeline_rows.wait_basis(sess, sat_threshold)
    for r in sess.ranks:
        sess.only = r
        for fam in (
            _timeline_rows.kernels(sess),
            _timeline_rows.comm_ops(sess),
            _timeline_rows.host_ops(sess),
        ):
            counts[fam.name] = counts.get(fam.name, 0) + _write_slices(
                w, sess, _slice_rows(sess.batches(fam.sql))
            )
        ws = _timeline_rows.wait_state(sess, sat_threshold)
        counts["wait_state"] = counts.get("wait_state", 0) + _write_slices(
            w, sess, _merge_states(sess, sess.batches(ws.sql), basis)
        )
        for fam in _timeline_rows.counter_families(sess):
            counts[fam.name] = counts.get(fam.name, 0) + _write_counters(w, sess, fam)
        if fmt == "chrome":
            counts["flows"] = counts.get("flows", 0) + _write_flows(w, sess)
    sess.only = None


def export(
    store: Any,
    run_id: str,
    output: str | Path | None,
    *,
    fmt: str = "perfetto",
    ranks: list[int] | None = None,
    steps: tuple[int, int] | None = None,
    align: bool = True,
    device: str | None = None,
    peaks: dict[str, float] | None = None,
    with_findings: bool = True,
    sat_threshold: float = 0.8,
    stdout: IO[Any] | None = None,
) -> dict[str, Any]:
    """Write the export; output None = stdout (`stdout` overrides the stream). Returns a summary: what was
    written (counts per family), the clock offsets and which were applied, the peaks used."""
    from ..errors import TraceQLError

    if fmt not in FORMATS:
        raise TraceQLError(f"unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if fmt == "perfetto":
        from .perfetto import protos

        protos()  # a missing package is one clear line before any work
    from ..out_file import check, open_output

    if output is not None:
        check(output)  # a directory or socket at -o: refused before any work
    sess = open_session(store, run_id, ranks=ranks, steps=steps, align=align, device=device, peaks=peaks)
    try:
        counts: dict[str, int] = {}
        origin = _origin(sess)
        meta = _meta(sess, run_id, steps, origin, align)
        with contextlib.ExitStack() as stack:
            if output is None:
                fh_raw: Any = stdout or (sys.stdout.buffer if fmt == "perfetto" else sys.stdout)
                stack.callback(fh_raw.flush)
            else:
                # temp + rename in the target's folder (a FIFO/device written through): see traceql.out_file
                fh_raw = stack.enter_context(open_output(output, binary=fmt == "perfetto"))
            if fmt == "chrome":
                from .chrome import ChromeWriter

                header: dict[str, Any] = {}
                if len(sess.ranks) == 1:
                    header["distributedInfo"] = {"rank": sess.ranks[0]}
                w: Any = ChromeWriter(fh_raw, origin, header)
            else:
                from .perfetto import PerfettoWriter

                w = PerfettoWriter(fh_raw)
            dev = sess.peaks_note
            for r in sess.ranks:
                w.process(r, f"rank {r}", r)
            _write_ranks(w, sess, fmt, sat_threshold, counts)
            if with_findings:
                rows = _findings.finding_slices(sess, store, device, peaks)
                arg_cols = [c for c in (rows[0] if rows else {}) if c not in _timeline_rows.SLICE_BASE]
                counts["findings"] = _write_slices(w, sess, ((r, arg_cols) for r in rows), nest=False)
            meta["counts"] = counts
            meta["device"] = dev
            w.finish(meta)
        return {
            "run_id": run_id,
            "format": fmt,
            "output": None if output is None else str(output),
            "counts": counts,
            "offsets": sess.offsets,
            "applied": dict(sess.shift),
            "peaks_note": sess.peaks_note,
            "ranks": sess.ranks,
            "origin_ns": origin,
        }
    finally:
        sess.close()
