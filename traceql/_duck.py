"""DuckDB compatibility shims (the Arrow fetch API was renamed in DuckDB 2.0)."""

from __future__ import annotations

from typing import Any


def arrow_reader(result: Any, batch_rows: int = 256 * 1024) -> Any:
    """A pyarrow RecordBatchReader over a DuckDB result (connection.execute(...) or relation)."""
    if hasattr(result, "to_arrow_reader"):
        return result.to_arrow_reader(batch_rows)
    return result.fetch_record_batch(batch_rows)


def arrow_table(result: Any) -> Any:
    """A pyarrow Table from a DuckDB result (connection.execute(...) or relation)."""
    if hasattr(result, "to_arrow_table"):
        return result.to_arrow_table()
    t = result.arrow()
    return t.read_all() if hasattr(t, "read_all") else t
