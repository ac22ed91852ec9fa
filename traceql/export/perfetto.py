"""Perfetto protobuf trace writer (.pftrace), built with the `perfetto` package's TracePacket protos
(perfetto.protos.perfetto.trace.perfetto_trace_pb2; `pip install traceql[export]`), not hand-written bytes.

A Perfetto trace file is a `Trace` message: `repeated TracePacket packet = 1`. Serialised messages concatenate
into one (protobuf merges repeated fields), so packets are written in chunks of FLUSH_PACKETS as small `Trace`
messages: bounded memory, a valid file at every chunk boundary.

Model: one process track per rank (ProcessDescriptor, pid = rank + 1: Perfetto keeps pid 0 for the idle
task), and under it one child track per exported track (TrackDescriptor name, explicit sibling order);
slices are TrackEvent SLICE_BEGIN / SLICE_END pairs with absolute ns timestamps (exact, aligned by the clock
offsets), args as debug annotations, flows as flow_ids (host op) / terminating_flow_ids (device task);
counters are counter tracks (CounterDescriptor with the unit) with double values. All packets are on one
trusted sequence without interned data.
"""

from __future__ import annotations

import hashlib
from typing import IO, Any

FLUSH_PACKETS = 2048
SEQ = 1


def protos() -> Any:
    from ..errors import TraceQLError

    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError as e:
        raise TraceQLError(
            "the .pftrace export needs the perfetto package: pip install 'traceql[export]' "
            "(or use --format chrome)"
        ) from e
    return perfetto_trace_pb2


def flow_uid(fid: str) -> int:
    """A stable 64-bit flow id from the flow's text id (no table of every id kept in memory)."""
    return (
        int.from_bytes(hashlib.blake2b(fid.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")
        or 1
    )


class PerfettoWriter:
    def __init__(self, fh: IO[bytes]) -> None:
        self.pb = protos()
        self.fh = fh
        self.trace = self.pb.Trace()
        self.n = 0
        self.proc: dict[int, int] = {}
        self.tracks: dict[tuple[int, str], int] = {}
        self.next_uuid = 1 << 20
        self.counts = {"slices": 0, "counters": 0, "tracks": 0}
        self.first = True

    def _packet(self) -> Any:
        p = self.trace.packet.add()
        p.trusted_packet_sequence_id = SEQ
        if self.first:
            p.sequence_flags = self.pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            self.first = False
        self.n += 1
        return p

    def _maybe_flush(self) -> None:
        if self.n >= FLUSH_PACKETS:
            self.flush()

    def flush(self) -> None:
        if self.n:
            self.fh.write(self.trace.SerializeToString())
            self.trace = self.pb.Trace()
            self.n = 0

    def process(self, rank: int, name: str, sort_index: int) -> None:
        uuid = 1000 + rank
        self.proc[rank] = uuid
        p = self._packet()
        td = p.track_descriptor
        td.uuid = uuid
        td.process.pid = rank + 1
        td.process.process_name = name
        td.child_ordering = self.pb.TrackDescriptor.EXPLICIT
        self.counts["tracks"] += 1

    def _track(self, rank: int, name: str, sort_index: int, unit: str | None = None) -> int:
        key = (rank, name)
        u = self.tracks.get(key)
        if u is None:
            u = self.next_uuid
            self.next_uuid += 1
            self.tracks[key] = u
            p = self._packet()
            td = p.track_descriptor
            td.uuid = u
            td.parent_uuid = self.proc[rank]
            td.name = name
            td.sibling_order_rank = sort_index
            if unit is not None:
                td.counter.unit_name = unit
            self.counts["tracks"] += 1
        return u

    def slice(
        self,
        rank: int,
        track: str,
        sort_index: int,
        ts: int,
        dur: int,
        name: str,
        cat: str,
        args: dict[str, Any],
        flow_in: list[str] | None,
        flow_out: list[str] | None,
    ) -> None:
        u = self._track(rank, track, sort_index)
        p = self._packet()
        p.timestamp = ts
        ev = p.track_event
        ev.type = self.pb.TrackEvent.TYPE_SLICE_BEGIN
        ev.track_uuid = u
        ev.name = name
        ev.categories.append(cat)
        for k, v in args.items():
            a = ev.debug_annotations.add()
            a.name = k
            if isinstance(v, bool):
                a.bool_value = v
            elif isinstance(v, int):
                if -(1 << 63) <= v < (1 << 63):
                    a.int_value = v
                else:
                    a.string_value = str(v)
            elif isinstance(v, float):
                a.double_value = v
            else:
                a.string_value = str(v)
        if flow_out:
            ev.flow_ids.extend(flow_uid(f) for f in flow_out)
        if flow_in:
            ev.terminating_flow_ids.extend(flow_uid(f) for f in flow_in)
        self.counts["slices"] += 1
        self._maybe_flush()

    def end(self, rank: int, track: str, end_ns: int) -> None:
        p = self._packet()
        p.timestamp = end_ns
        p.track_event.type = self.pb.TrackEvent.TYPE_SLICE_END
        p.track_event.track_uuid = self.tracks[(rank, track)]
        self._maybe_flush()

    def counter(self, rank: int, track: str, unit: str, ts: int, value: float) -> None:
        u = self._track(rank, track, 10_000, unit=unit)
        p = self._packet()
        p.timestamp = ts
        p.track_event.type = self.pb.TrackEvent.TYPE_COUNTER
        p.track_event.track_uuid = u
        p.track_event.double_counter_value = float(value)
        self.counts["counters"] += 1
        self._maybe_flush()

    def flow(self, *args: Any, **kw: Any) -> None:
        """Flows ride on the slices (flow_ids / terminating_flow_ids): nothing separate to write."""

    def finish(self, other: dict[str, Any]) -> None:
        self.flush()
