"""Helpers every Ascend text-export parser shares (torch_npu's ASCEND_PROFILER_OUTPUT, msprof's
mindstudio_profiler_output and the cluster_analysis_output): unit-exact number parsing, the streaming JSON-object
reader for the communication files, step_trace and op/api statistic column maps, HCCL communication and matrix
rows, and the truncated-file check. Formats: ../shared/docs/formats.md section 1.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadTraceError
from ._csv import CsvFile
from ._units import dec_to_ns, to_float

if TYPE_CHECKING:  # pragma: no cover
    from ..rank_writer import RankWriter

HCCL_MB = 1_000_000  # communication*.json "MB" (decimal, see module doc)


# ---------------------------------------------------------------------------------------------------------
# small helpers shared with parsers.cluster
# ---------------------------------------------------------------------------------------------------------
def exact(value: object, scale: int) -> int | None:
    """A decimal number (JSON Decimal, int or text) x an integer scale, exactly, as int (ms -> ns, MB -> B).

    Decimals and ints (what read_json gives) are converted directly; text goes through dec_to_ns (N/A, TABs).
    Same result as dec_to_ns for every input: the fast paths only skip its str() round trip, which made the
    communication(_matrix).json parse ~3x slower (a 17 MB matrix file is ~430k values).
    """
    if type(value) is Decimal:
        if not value.is_finite():
            return None
        v = int((value * scale).to_integral_value())
    elif type(value) is int:
        v = value * scale
    else:
        return dec_to_ns(value, scale)
    return v if abs(v) < 2**63 else None


def gbps(value: object) -> float | None:
    """GB/s (decimal, 10^9 B/s) -> bytes/s, through the exact decimal so 16.9369 becomes 16936900000.0."""
    b = exact(value, 10**9)
    return None if b is None else float(b)


def read_json(path: Path, expected: str) -> Any:
    """Whole JSON file with exact decimals (Decimal, not float), or BadTraceError saying what was expected."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as e:
        raise _cannot_read(path, e) from e
    if not raw.strip():
        raise BadTraceError(path, f"empty file; expected {expected}")
    try:
        return json.loads(raw.decode("utf-8-sig"), parse_float=Decimal)
    except UnicodeDecodeError as e:
        raise BadTraceError(
            path, f"not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}); expected {expected}"
        ) from e
    except ValueError as e:
        raise BadTraceError(path, f"invalid JSON ({e}); expected {expected}") from e
    except RecursionError:
        raise _too_deep(path, expected) from None


def _cannot_read(path: Path, e: OSError) -> BadTraceError:
    return BadTraceError(path, f"cannot read file: {e.strerror or e}")


def _too_deep(path: Path, expected: str) -> BadTraceError:
    return BadTraceError(path, f"JSON nested too deeply to be a profiler file; expected {expected}")


_READ_CHARS = 4 << 20  # text decoded per read while streaming a JSON object's entries

_NEED_MORE = (
    "Unterminated string",
    "Expecting value",
    "Expecting ',' delimiter",
    "Expecting ':' delimiter",
    "Expecting property name",
)
_WANT_KEY = "Expecting property name enclosed in double quotes"


def json_object_items(path: Path, expected: str, not_object: str) -> Iterator[tuple[str, Any]]:
    """The top-level entries (key, value) of a JSON object file, one at a time, in file order.

    Each value is parsed with the C decoder (exact Decimals, as read_json), but only one entry is in memory
    at a time plus a read buffer: a 68 MB communication_matrix.json took 510 MB as one json.loads. Errors
    are those of read_json (invalid JSON with the char offset, not UTF-8 with the byte offset, too deep);
    a root that is not an object is `not_object`. A key repeated at the top level is read twice (json.loads
    would keep only the last).
    """
    # The per-entry loop and its helpers stay closures over local state (an attribute or a call per character
    # of whitespace costs); what runs once per read, per file or on an error is a function of its own.
    src = _TextSource(path, expected)
    parse = json.JSONDecoder(parse_float=Decimal).raw_decode
    scan = json.decoder.scanstring  # type: ignore[attr-defined]
    buf, pos, base = "", 0, 0  # base: chars dropped before buf[0]

    def fill(grow: bool = False) -> bool:
        """Read more text; grow=True (a value did not fit) doubles the buffer, so a huge value costs O(n)."""
        nonlocal buf, pos, base
        text = src.read(max(_READ_CHARS, len(buf) - pos) if grow else _READ_CHARS)
        if text is None:
            return False
        if pos > _READ_CHARS:  # drop what was consumed
            base += pos
            buf, pos = buf[pos:], 0
        buf += text
        return True

    def skip_ws() -> str:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            if pos < len(buf):
                return buf[pos]
            if not fill():
                return ""

    def invalid(msg: str, at: int) -> BadTraceError:
        return BadTraceError(path, f"invalid JSON ({msg} at char {base + at}); expected {expected}")

    def value(decode: Any) -> tuple[Any, int]:
        """decode(buf, pos), reading more while the value runs past the buffer (fill() may move pos)."""
        while True:
            try:
                got: tuple[Any, int] = decode(buf, pos)
                return got
            except json.JSONDecodeError as e:
                near_end = e.pos >= len(buf) - 4096 or e.msg.startswith("Unterminated string")
                if not (near_end and e.msg.startswith(_NEED_MORE)) or not fill(grow=True):
                    raise invalid(e.msg, e.pos) from None
            except RecursionError:
                raise _too_deep(path, expected) from None

    try:
        first = skip_ws()
        if first != "{":
            raise _not_an_object(path, first, expected, not_object, invalid("Expecting value", pos))
        pos += 1
        sep = skip_ws()
        while sep != "}":
            if sep != '"':
                raise invalid(_WANT_KEY if sep else "unexpected end of file", pos)
            key, pos = value(lambda b, i: scan(b, i + 1))
            if skip_ws() != ":":
                raise invalid("Expecting ':' delimiter", pos)
            pos += 1
            skip_ws()
            item, pos = value(parse)
            yield key, item
            sep = skip_ws()
            if sep == ",":
                pos += 1
                if skip_ws() != '"':
                    raise invalid(_WANT_KEY, pos)
                sep = '"'
            elif sep != "}":
                raise invalid("Expecting ',' delimiter" if sep else "unexpected end of file", pos)
        pos += 1
        if skip_ws() != "":
            raise invalid("Extra data", pos)
    finally:
        src.close()


class _TextSource:
    """A file's text in reads of n bytes, decoded incrementally (utf-8-sig), with read_json's errors."""

    def __init__(self, path: Path, expected: str) -> None:
        import codecs

        try:
            self.fh = open(path, "rb")  # noqa: SIM115 - closed by close(), from the reader's finally
        except OSError as e:
            raise _cannot_read(path, e) from e
        self.path, self.expected = path, expected
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.nbytes, self.eof = 0, False  # bytes read so far; whether the end was read

    def read(self, n: int) -> str | None:
        """The text of the next n bytes ('' while a character is split across reads), None after the end."""
        if self.eof:
            return None
        raw = self.fh.read(n)
        try:
            text: str = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as e:
            at = self.nbytes + e.start - (len(e.object) - len(raw))  # e.object: bytes held back + this read
            raise BadTraceError(
                self.path,
                f"not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {at}); expected {self.expected}",
            ) from None
        self.nbytes += len(raw)
        self.eof = not raw
        return text

    def close(self) -> None:
        self.fh.close()


def _not_an_object(
    path: Path, first: str, expected: str, not_object: str, invalid_value: BadTraceError
) -> BadTraceError:
    """Why a streamed file whose first character is `first` (not '{') is refused, as read_json would say it."""
    if first == "":
        return BadTraceError(path, f"empty file; expected {expected}")
    if first == "[":
        return BadTraceError(path, not_object)
    if path.stat().st_size <= _READ_CHARS:
        read_json(path, expected)  # small: the same message as before for whatever it is
    return invalid_value


def rows_to_columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    return {k: [r.get(k) for r in rows] for k in keys}


def write_rows(out: RankWriter, table: str, rows: list[dict[str, Any]]) -> int:
    if rows:
        out.write(table, rows_to_columns(rows))
    return len(rows)


def step_number(key: object) -> int | None:
    """'step50' -> 50, 'step' / '' -> None, 7 -> 7."""
    m = re.search(r"(\d+)\s*$", str(key))
    return int(m.group(1)) if m else None


def split_op_key(key: str) -> tuple[str, str | None]:
    """'hcom_allReduce__586_0_1@17522688603477080586' -> (name, group); 'Total Op Info' -> (key, None)."""
    name, sep, group = key.partition("@")
    return name, (group if sep else None)


def hccl_op_type(name: str) -> str | None:
    """Collective type from an HCCL op name: hcom_allReduce__586_0_1 -> allreduce, hcom_send__822_0 -> send."""
    base = re.sub(r"^hcom_?", "", name, flags=re.IGNORECASE)
    m = re.match(r"[A-Za-z0-9]+", base)
    return m.group(0).lower() if m else None


def _size_distribution(dist: Any) -> dict[str, float] | None:
    """{"2.064384": [12, 1.578]} (packet MB -> [count, ms]) -> {"2064384": 12.0} (packet bytes -> count)."""
    if not isinstance(dist, dict):
        return None
    out: dict[str, float] = {}
    for size_mb, val in dist.items():
        size_b = exact(size_mb, HCCL_MB)
        count = to_float(val[0] if isinstance(val, list) and val else val)
        if size_b is not None and count is not None:
            out[str(size_b)] = count
    return out


# transports whose sizes SDMA already sums (msprof-analyze CommunicationParser: "SDMA = PCIE + HCCS + SIO")
_SDMA_PARTS = {"HCCS", "PCIE", "SIO"}


def comm_rows(
    op_key: str, op: Any, *, path: Path, step: int | None, kind: str, source: str
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """One communication.json op entry -> (comm_ops row or None for 'Total Op Info', comm_bandwidth rows).

    bytes = sum of the transports' Transit Size, counting SDMA *instead of* HCCS/PCIE/SIO because SDMA is
    their sum (otherwise intra-node traffic would be counted twice). All-zero transport entries (every op
    lists every transport) are not written to comm_bandwidth.
    """
    if not isinstance(op, dict):
        raise BadTraceError(
            path, f"op {op_key!r}: expected an object with 'Communication Time Info', got {type(op).__name__}"
        )
    name, group = split_op_key(op_key)
    tinfo = op.get("Communication Time Info") or {}
    binfo = op.get("Communication Bandwidth Info") or {}
    if not isinstance(tinfo, dict) or not isinstance(binfo, dict):
        raise BadTraceError(
            path, f"op {op_key!r}: 'Communication Time Info'/'Communication Bandwidth Info' must be objects"
        )
    bw_rows: list[dict[str, Any]] = []
    total_bytes: int | None = None
    has_sdma = "SDMA" in binfo
    for transport, t in binfo.items():
        if not isinstance(t, dict):
            raise BadTraceError(path, f"op {op_key!r} transport {transport!r}: expected an object")
        size_b = exact(t.get("Transit Size(MB)"), HCCL_MB)
        if size_b is not None and not (has_sdma and transport in _SDMA_PARTS):
            total_bytes = (total_bytes or 0) + size_b
        transit_ns = exact(t.get("Transit Time(ms)"), 1_000_000)
        dist = _size_distribution(t.get("Size Distribution"))
        if not size_b and not transit_ns and not dist:
            continue
        bw_rows.append(
            {
                "step": step,
                "name": name,
                "group_name": group,
                "transport": transport,
                "bytes": size_b,
                "transit_ns": transit_ns,
                "bandwidth_bps": gbps(t.get("Bandwidth(GB/s)")),
                "large_packet_ratio": to_float(t.get("Large Packet Ratio")),
                "packet_sizes": dist,
            }
        )
    if name == "Total Op Info":
        return None, bw_rows
    op_row = {
        "step": step,
        "name": name,
        "op_type": hccl_op_type(name),
        "group_name": group,
        "kind": kind,
        "ts_ns": exact(tinfo.get("Start Timestamp(us)"), 1000),
        "dur_ns": exact(tinfo.get("Elapse Time(ms)"), 1_000_000),
        "transit_ns": exact(tinfo.get("Transit Time(ms)"), 1_000_000),
        "wait_ns": exact(tinfo.get("Wait Time(ms)"), 1_000_000),
        "sync_ns": exact(tinfo.get("Synchronization Time(ms)"), 1_000_000),
        "idle_ns": exact(tinfo.get("Idle Time(ms)"), 1_000_000),
        "bytes": total_bytes,
        "source": source,
    }
    return op_row, bw_rows


_LINK = re.compile(r"\s*(-?\d+)\s*-\s*(-?\d+)\s*")  # a comm_matrix link key: 'src-dst'

_SUMMARY_KEY = re.compile(r"^[a-z0-9_]+-(top\d*|middle\d*|bottom\d*|total)$")


def matrix_rows(op_key: str, links: Any, *, path: Path, step: int | None) -> list[dict[str, Any]]:
    """One communication_matrix.json op (or op-summary) entry -> comm_matrix rows, one per 'src-dst' link."""
    if not isinstance(links, dict):
        raise BadTraceError(path, f"op {op_key!r}: expected an object of 'src-dst' links")
    name, group = split_op_key(op_key)
    # summary keys (allreduce-top1) name their op in each link's "Op Name"; plain op keys are the op itself
    default_op = None if (_SUMMARY_KEY.match(name) or name == "Total Op Info") else name
    rows = []
    for link, v in links.items():
        m = _LINK.fullmatch(str(link))
        if not m or not isinstance(v, dict):
            raise BadTraceError(path, f"op {op_key!r}: link {link!r} is not 'src-dst' -> object")
        rows.append(
            {
                "step": step,
                "name": name,
                "op_name": v.get("Op Name") or default_op,
                "group_name": group,
                "src_rank": int(m.group(1)),
                "dst_rank": int(m.group(2)),
                "transport": v.get("Transport Type"),
                "bytes": exact(v.get("Transit Size(MB)"), HCCL_MB),
                "transit_ns": exact(v.get("Transit Time(ms)"), 1_000_000),
                "bandwidth_bps": gbps(v.get("Bandwidth(GB/s)")),
            }
        )
    return rows


def flatten(obj: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Nested JSON -> (dotted key, text value). Lists and scalars become JSON text (strings stay bare)."""
    if isinstance(obj, dict):
        if not obj and prefix:
            yield prefix, "{}"
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, str):
        yield prefix, obj
    else:
        yield prefix, json.dumps(obj, default=str)


# step_trace_time.csv / cluster_step_trace_time.csv breakdown columns (formats.md §4)
STEP_COLUMNS = {
    "computing_ns": "Computing",
    "comm_not_overlapped_ns": "Communication(Not Overlapped)",
    "overlapped_ns": "Overlapped",
    "comm_ns": "Communication",
    "free_ns": "Free",
    "stage_ns": "Stage",
    "bubble_ns": "Bubble",
    "comm_not_overlapped_excl_recv_ns": "Communication(Not Overlapped and Exclude Receive)",
    "preparing_ns": "Preparing",
}


def step_exprs(csv: CsvFile) -> dict[str, str]:
    exprs = {"step": csv.int_("Step")}
    for canon, col in STEP_COLUMNS.items():
        exprs[canon] = csv.us_ns(col)
    return exprs


def step_dur(row: dict[str, Any]) -> int | None:
    parts = [row.get("computing_ns"), row.get("comm_not_overlapped_ns"), row.get("free_ns")]
    return None if any(p is None for p in parts) else sum(parts)  # type: ignore[arg-type]


class SerialCsv(CsvFile):
    """CsvFile read single-threaded: DuckDB's parallel scanner rejects quoted newlines (operator_details'
    multi-line Call Stack cells) together with null_padding."""

    def from_clause(self, only: Path | None = None) -> str:
        return super().from_clause(only).replace("null_padding=true", "null_padding=true, parallel=false")


def select_rows(csv: CsvFile, exprs: dict[str, str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for batch in csv.select(exprs):
        rows.extend(batch.to_pylist())
    return rows


def write_select(
    out: RankWriter, table: str, csv: CsvFile, exprs: dict[str, str], apart_by: str | None = None
) -> int:
    """Write the select's rows to `table`; apart_by: see RankWriter.write (per-task CSVs: "stream_id")."""
    n = 0
    for batch in csv.select(exprs):
        if batch.num_rows:
            out.write(table, batch, apart_by=apart_by)
            n += batch.num_rows
    return n


# ---------------------------------------------------------------------------------------------------------
# truncation: checked on the last bytes of every file before anything is parsed
# ---------------------------------------------------------------------------------------------------------
_WS = b" \t\r\n\x00"

_CLOSER = {b"[": (b"]", "array"), b"{": (b"}", "object")}

_SMALL_JSON = 1 << 20  # JSON files parsed in milliseconds anyway: their parser's own message is more precise


def _last_row_complete(head: bytes, tail: bytes) -> bool:
    """True when the unterminated last row of a CSV has as many fields as its header (it was written whole; a
    row cut mid-write ends short of the header's field count). A cut inside the last field cannot be told apart
    from a whole one: torch_npu/msprof end every row with a line break, so this only admits RFC 4180 files."""
    import csv
    import io

    if b"\n" not in head or b"\n" not in tail:
        return False
    header_line = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    last_line = tail.rsplit(b"\n", 1)[1].decode("utf-8", "replace")
    try:
        header = next(csv.reader(io.StringIO(header_line)), [])
        last = next(csv.reader(io.StringIO(last_line), strict=True), [])
    except csv.Error:  # an unclosed quote: the row was cut inside a quoted field
        return False
    return len(header) > 1 and len(last) == len(header) and last_line.count('"') % 2 == 0


def check_complete(paths: list[Path]) -> list[str]:
    """BadTraceError for the first file that was cut off mid-write, naming the byte offset where it stops; the
    warnings for CSVs accepted without a final line break.

    A profiler killed while writing leaves a JSON file that does not close its root, or a CSV whose last row
    has no line break (every torch_npu/msprof CSV ends each row with one). Checked on the first and last bytes
    of each file before any parsing, so a cut multi-GB dump fails in milliseconds instead of after minutes of
    parsing (or, for a CSV, instead of silently storing a half-written last row whose numbers are cut short).
    Empty, gzip and non-UTF-8 files, and JSON under 1 MiB, are left to the parsers, which report those.
    A CSV whose unterminated last row has all the header's fields is accepted (RFC 4180 allows it) with a
    warning: a cut inside that row's last field would look the same.
    """
    warnings: list[str] = []
    for path in paths:
        suffix = path.suffix.lower()
        if suffix not in (".csv", ".json"):
            continue
        try:
            size = path.stat().st_size
            with open(path, "rb") as fh:
                head = fh.read(4096)
                fh.seek(max(0, size - 4096))
                tail = fh.read()
        except OSError as e:
            raise BadTraceError(path, f"cannot read file: {e.strerror or e}") from e
        head = head.removeprefix(b"\xef\xbb\xbf").lstrip(_WS)
        if not head or head[:2] == b"\x1f\x8b":
            continue
        if suffix == ".csv":
            # a header alone may lack the line break; RFC 4180 allows the last row to lack one too, so an
            # unterminated last row is cut off only when it has fewer fields than the header
            if not tail.endswith(b"\n") and (b"\n" in head or size > 4096):
                if not _last_row_complete(head, tail):
                    raise BadTraceError(
                        path,
                        f"truncated CSV: the file ends at byte {size} in the middle of a row (no line break after "
                        "the last row); the profiler was probably killed mid-write",
                    )
                warnings.append(
                    f"{path}: no line break after the last row; read as complete (it has every "
                    "column), but if the profiler was killed mid-write its last value may be cut short"
                )
            continue
        closer = _CLOSER.get(head[:1])
        if closer is None or size < _SMALL_JSON:
            continue  # not JSON at all, or small: the parser says what it expected, with the char offset
        end = tail.rstrip(_WS)
        if not end.endswith(closer[0]):
            last = end[-1:].decode("latin-1")
            raise BadTraceError(
                path,
                f"truncated JSON: the file ends at byte {size} without the closing {closer[0].decode()!r} of its "
                f"top-level {closer[1]} (last character {last!r}); the profiler was probably killed mid-write",
            )
    return warnings


def op_statistic_exprs(csv: CsvFile) -> dict[str, str]:
    """op_statistic.csv (torch_npu) / op_statistic_*.csv (msprof, adds Model Name) -> op_stats."""
    csv.require("OP Type", "Count")
    return {
        "source": "'op_statistic'",
        "name": csv.txt("OP Type"),
        "core_type": csv.txt("Core Type"),
        "count": csv.int_("Count"),
        "total_ns": csv.us_ns("Total Time(us)"),
        "min_ns": csv.us_ns("Min Time(us)"),
        "avg_ns": csv.us_ns("Avg Time(us)"),
        "max_ns": csv.us_ns("Max Time(us)"),
        "ratio": csv.ratio_pct("Ratio(%)"),
        "extra": csv.text_map(["Device_id", "Model Name"]),
    }


def api_statistic_exprs(csv: CsvFile) -> dict[str, str]:
    """api_statistic.csv (torch_npu and msprof; msprof writes `host` in Device_id for host rows) -> op_stats."""
    csv.require("API Name", "Count")
    return {
        "source": "'api_statistic'",
        "name": csv.txt("API Name"),
        "core_type": csv.txt("Level"),
        "count": csv.int_("Count"),
        "total_ns": csv.us_ns("Time(us)"),
        "min_ns": csv.us_ns("Min(us)"),
        "avg_ns": csv.us_ns("Avg(us)"),
        "max_ns": csv.us_ns("Max(us)"),
        # Variance is in µs² (kept verbatim)
        "extra": csv.text_map(["Variance", "Device_id"]),
    }
