"""Unit constants, defined once. Parsers convert a dump's units at their edge with these (traceql.parsers._units);
the store and every layer above hold ns, bytes and bytes/s only.

Binary sizes: the profilers' memory columns (`Size(KB)`, `Total Reserved(MB)`) are KiB / MiB although named
KB / MB (formats.md, msprof and torch_npu docs). Decimal rates: the profilers' GB/s and MB/s are 10^9 / 10^6
bytes/s, and device peaks are quoted in decimal GB/s and TB/s.
"""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
KB = KiB  # a profiler's "KB" column: 1024 bytes
MB = MiB  # a profiler's "MB" memory column: 1024 * 1024 bytes
GB = 10**9  # decimal: bandwidths and device peaks
TB = 10**12
GB_PER_S = 1e9  # profilers report GB/s as 10^9 bytes/s (msprof docs: "GB/s")
MB_PER_S = 1e6  # and MB/s as 10^6 bytes/s
