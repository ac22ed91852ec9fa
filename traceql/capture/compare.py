"""Problem vs fix, from two ingested runs: the numbers that tell the article's variants apart.

A stopgap until the findings engine covers these pairs; it reads only canonical tables (host_ops, kernels,
memory) through SQL, so it works on any Kineto/torch_npu run. Counts are per profiled (active) step.

"Operators" are the outermost aten:: ops on each thread (an aten op not inside another aten op): what the
framework dispatched, whatever wrappers (autograd engine, user annotations) sit above them. View/metadata ops
move no data and are left out. "Modeled bytes" of an operator = the sizes of its tensor inputs from the
recorded shapes and dtypes (Kineto records no output shapes; 0-d tensors, i.e. wrapped Python scalars, are
not counted): a lower bound on the memory it touches. "Modeled FLOPs" = 2*M*N*K for matmul-family ops and one
FLOP per input element for every other op (Kineto's chrome trace carries no FLOP counts in torch 2.13).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

# ops that move no tensor data (views, allocation, metadata)
NO_DATA_OPS = {
    "aten::view",
    "aten::_unsafe_view",
    "aten::slice",
    "aten::select",
    "aten::narrow",
    "aten::as_strided",
    "aten::reshape",
    "aten::_reshape_alias",
    "aten::expand",
    "aten::t",
    "aten::transpose",
    "aten::permute",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::detach",
    "aten::detach_",
    "aten::alias",
    "aten::empty",
    "aten::empty_like",
    "aten::empty_strided",
    "aten::resize_",
    "aten::lift_fresh",
    "aten::resolve_conj",
    "aten::resolve_neg",
    "aten::result_type",
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::is_nonzero",
    "aten::set_",
    "aten::split",
    "aten::chunk",
    "aten::unbind",
    "aten::numpy_T",
    "aten::flatten",
}
# conversions that are no-ops when they dispatch nothing below them (x.to(x.dtype), x.contiguous() on contiguous x)
MAYBE_NOOP_OPS = {"aten::to", "aten::contiguous", "aten::type_as"}

# Kineto `Input type` strings -> bytes per element
DTYPE_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "long": 8,
    "int": 4,
    "short int": 2,
    "short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::complex<c10::Half>": 4,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    # torch_npu / ascend spellings
    "FLOAT": 4,
    "FLOAT16": 2,
    "BF16": 2,
    "DT_BF16": 2,
    "INT64": 8,
    "INT32": 4,
    "INT8": 1,
    "UINT8": 1,
    "BOOL": 1,
    "DOUBLE": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
}
CONV_OPS = {
    "aten::conv2d",
    "aten::convolution",
    "aten::_convolution",
    "aten::cudnn_convolution",
    "aten::mkldnn_convolution",
}
COPY_OPS = {"aten::copy_", "aten::clone", "aten::to", "aten::_to_copy"}


def _parse_list(text: Any) -> list[Any]:
    """Input dims/types as the parser stored them: JSON text ("[[1, 512], []]") or `;`-separated ("1,512;")."""
    if text is None:
        return []
    if isinstance(text, list):
        return text
    s = str(text).strip()
    if not s:
        return []
    if s.startswith("["):
        try:
            v = json.loads(s)
            return v if isinstance(v, list) else []
        except ValueError:
            try:
                import ast

                v = ast.literal_eval(s)
                return list(v) if isinstance(v, (list, tuple)) else []
            except (ValueError, SyntaxError):
                return []
    return s.split(";")


def _dims(item: Any) -> list[int] | None:
    if isinstance(item, list):
        if item and isinstance(item[0], list):
            return None  # a TensorList: sizes of several tensors with no per-tensor dtype; not modeled
        try:
            return [int(d) for d in item]
        except (TypeError, ValueError):
            return None
    s = str(item).strip().strip('"')
    if not s:
        return []
    try:
        return [int(d) for d in s.split(",") if d.strip()]
    except ValueError:
        return None


def _tensor_inputs(shapes: Any, dtypes: Any) -> list[tuple[list[int], int]]:
    """(dims, element size) of each tensor input of at least one dimension."""
    out = []
    dims_list, types = _parse_list(shapes), _parse_list(dtypes)
    for i, t in enumerate(types):
        size = DTYPE_BYTES.get(str(t).strip())
        if size is None or i >= len(dims_list):
            continue
        dims = _dims(dims_list[i])
        if dims:  # None: a TensorList; []: a 0-d tensor (a wrapped Python scalar)
            out.append((dims, size))
    return out


def _numel(dims: list[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def input_bytes(shapes: Any, dtypes: Any) -> int:
    """Bytes of the tensor inputs: numel x element size for each input whose type is a tensor dtype."""
    return sum(_numel(d) * size for d, size in _tensor_inputs(shapes, dtypes))


MATMUL_OPS = {"aten::mm", "aten::matmul", "aten::bmm", "aten::addmm", "aten::linear", "aten::baddbmm"}


def modeled_flops(name: str, shapes: Any, dtypes: Any) -> int:
    """2*M*N*K for matmul-family ops (batch dims multiplied in), else one FLOP per element of the first input."""
    ins = [d for d, _ in _tensor_inputs(shapes, dtypes)]
    if not ins:
        return 0
    if name in MATMUL_OPS:
        if name in ("aten::addmm", "aten::baddbmm") and len(ins) >= 3:
            ins = ins[1:]  # (bias, a, b)
        if name == "aten::linear" and len(ins) >= 2:  # input [..., K], weight [N, K]
            a, w = ins[0], ins[1]
            return 2 * _numel(a[:-1]) * a[-1] * (w[0] if len(w) == 2 else 1)
        if len(ins) >= 2 and len(ins[0]) >= 2 and len(ins[1]) >= 2:
            a, b = ins[0], ins[1]
            return 2 * _numel(a[:-1]) * a[-1] * b[-1]
    return _numel(ins[0])


def _extra(extra: Any, key: str) -> Any:
    if extra is None:
        return None
    if isinstance(extra, dict):
        return extra.get(key)
    try:  # DuckDB returns MAP as a list of (key, value) pairs or a dict, by version
        return dict(extra).get(key)
    except (TypeError, ValueError):
        return None


def _outermost_ops(rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Outermost aten ops per (pid, tid), each with has_child; rows are (name, pid, tid, ts, dur, shapes, dtypes, extra).

    One sweep per thread in start order (longer first on ties): an op is inside the op on top of the stack when
    it ends no later; ops that are not are popped, since later ops start later still.
    """
    rows = sorted(rows, key=lambda r: (r[1] or 0, r[2] or 0, r[3], -(r[4] or 0)))
    out: list[dict[str, Any]] = []
    stack: list[dict[str, Any]] = []
    thread = None
    for name, pid, tid, ts, dur, shapes, dtypes, extra in rows:
        if (pid, tid) != thread:
            stack, thread = [], (pid, tid)
        op = {
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": ts,
            "end": ts + (dur or 0),
            "shapes": shapes,
            "dtypes": dtypes,
            "extra": extra,
            "has_child": False,
        }
        while stack and stack[-1]["end"] < op["end"]:
            stack.pop()
        if stack:
            stack[-1]["has_child"] = True
        else:
            out.append(op)
        stack.append(op)
    return out


def data_ops(rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The outermost aten ops that move data: views/metadata and no-op conversions left out."""
    return [
        o
        for o in _outermost_ops(rows)
        if o["name"] not in NO_DATA_OPS and not (o["name"] in MAYBE_NOOP_OPS and not o["has_child"])
    ]


def _overlap_ns(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Total length of the intervals in a that is covered by the union of the intervals in b."""
    merged: list[list[int]] = []
    for s, e in sorted(b):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    total = 0
    for s, e in a:
        for ms, me in merged:
            if me <= s:
                continue
            if ms >= e:
                break
            total += min(e, me) - max(s, ms)
    return total


def run_metrics(con: Any, run: str) -> dict[str, Any]:
    """Per-step operator, byte, FLOP, layout, copy-overlap, memory and kernel numbers for one run."""
    steps = (
        con.execute(
            "SELECT count(*) FROM host_ops WHERE run_id = ? AND name LIKE 'ProfilerStep#%'", [run]
        ).fetchone()[0]
        or 1
    )
    rows = con.execute(
        "SELECT name, pid, tid, ts_ns, dur_ns, input_shapes, input_dtypes, extra FROM host_ops "
        "WHERE run_id = ? AND name LIKE 'aten::%' AND ts_ns IS NOT NULL",
        [run],
    ).fetchall()
    ops = data_ops(rows)
    counts: Counter[str] = Counter(o["name"] for o in ops)
    op_bytes = [input_bytes(o["shapes"], o["dtypes"]) for o in ops]
    flops = sum(modeled_flops(o["name"], o["shapes"], o["dtypes"]) for o in ops)
    dtype_bytes: Counter[str] = Counter()
    for o, b in zip(ops, op_bytes, strict=True):
        types = [t for t in _parse_list(o["dtypes"]) if str(t) in DTYPE_BYTES]
        if types:
            dtype_bytes[str(types[0])] += b
    # layouts: a 4-D conv input is channels-last when its channel stride is 1 (NHWC in memory)
    conv = _outermost_ops([r for r in rows if r[0] in CONV_OPS])  # aten::conv2d, or the op below it
    conv_cl = sum(1 for o in conv if _is_channels_last(o))
    # copies vs compute across threads (the CPU prefetch thread); device streams are under "device"
    compute_ns: Counter[Any] = Counter()
    for o in ops:
        if o["name"] not in COPY_OPS:
            compute_ns[o["tid"]] += o["end"] - o["ts"]
    main_tid = compute_ns.most_common(1)[0][0] if compute_ns else None
    copy_iv = [(o["ts"], o["end"], o["tid"]) for o in ops if o["name"] in COPY_OPS]
    compute_iv = [(o["ts"], o["end"], o["tid"]) for o in ops if o["name"] not in COPY_OPS]
    copy_ns = sum(e - s for s, e, _ in copy_iv)
    overlapped = sum(
        _overlap_ns([(s, e)], [(cs, ce) for cs, ce, ct in compute_iv if ct != t]) for s, e, t in copy_iv
    )
    mem = con.execute(
        "SELECT max(allocated_bytes) - min(allocated_bytes) FROM memory WHERE run_id = ? AND allocated_bytes IS NOT NULL",
        [run],
    ).fetchone()[0]
    total_bytes = sum(op_bytes)
    out = {
        "run": run,
        "steps": steps,
        "ops_per_step": len(ops) / steps,
        "op_counts": dict(counts.most_common(12)),
        "modeled_bytes_per_step": total_bytes / steps,
        "max_op_modeled_bytes": max(op_bytes, default=0),
        # the op size the typical byte moves with: half of all modeled bytes move in ops at most this big
        "median_op_bytes_weighted": _weighted_median(op_bytes),
        "modeled_bytes_by_dtype": {k: v / steps for k, v in dtype_bytes.items()},
        "modeled_flops_per_step": flops / steps,
        "flops_per_modeled_byte": flops / total_bytes if total_bytes else None,
        "conv_ops": len(conv),
        "conv_channels_last": conv_cl,
        "copy_ops_per_step": len(copy_iv) / steps,
        "copy_off_main_thread_ratio": sum(1 for *_, t in copy_iv if t != main_tid) / len(copy_iv)
        if copy_iv
        else None,
        "copy_overlap_ratio": overlapped / copy_ns if copy_ns else None,
        "memory_rise_bytes": int(mem) if mem is not None else None,
        "device": _device_metrics(con, run, steps),
    }
    return out


def _weighted_median(values: list[int]) -> int:
    total = sum(values)
    acc = 0
    for v in sorted(values):
        acc += v
        if 2 * acc >= total:
            return v
    return 0


def _is_channels_last(op: dict[str, Any]) -> bool:
    strides = _parse_list(_extra(op["extra"], "Input Strides"))
    dims = _parse_list(op["shapes"])
    if not strides or not dims:
        return False
    s0, d0 = _dims(strides[0]), _dims(dims[0])
    return bool(s0 and d0 and len(d0) == 4 and len(s0) == 4 and d0[1] > 1 and s0[1] == 1)


def _device_metrics(con: Any, run: str, steps: int) -> dict[str, Any] | None:
    rows = con.execute(
        "SELECT name, task_type, stream_id, ts_ns, dur_ns FROM kernels WHERE run_id = ? AND ts_ns IS NOT NULL",
        [run],
    ).fetchall()
    if not rows:
        return None
    is_copy = [("memcpy" in (str(t) + str(n)).lower()) for n, t, *_ in rows]
    copies = [(r[3], r[3] + (r[4] or 0), r[2]) for r, c in zip(rows, is_copy, strict=True) if c]
    compute = [(r[3], r[3] + (r[4] or 0), r[2]) for r, c in zip(rows, is_copy, strict=True) if not c]
    copy_ns = sum(e - s for s, e, _ in copies)
    overlapped = sum(
        _overlap_ns([(s, e)], [(cs, ce) for cs, ce, st in compute if st != stream]) for s, e, stream in copies
    )
    return {
        "kernels_per_step": len(compute) / steps,
        "kernel_ns_per_step": sum(e - s for s, e, _ in compute) / steps,
        "memcpy_per_step": len(copies) / steps,
        "memcpy_ns_per_step": copy_ns / steps,
        "memcpy_overlap_ratio": overlapped / copy_ns if copy_ns else None,
        "memcpy_kinds": dict(
            Counter(n for (n, *_), c in zip(rows, is_copy, strict=True) if c).most_common(4)
        ),
    }


def compare_variants(store: Any, run_problem: str, run_fix: str) -> dict[str, Any]:
    """Metrics of both runs and fix/problem ratios of the numeric ones."""
    from ..engine import connect

    con = connect(store)
    try:
        p, f = run_metrics(con, run_problem), run_metrics(con, run_fix)
    finally:
        con.close()
    ratios = {}
    for k, v in p.items():
        fv = f.get(k)
        if isinstance(v, (int, float)) and isinstance(fv, (int, float)) and not isinstance(v, bool) and v:
            ratios[k] = fv / v
    return {"problem": p, "fix": f, "fix_over_problem": ratios}
