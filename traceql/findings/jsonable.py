"""JSON-safe values for findings: NaN/inf and numpy-ish scalars turned into what json.dumps accepts."""

from __future__ import annotations

import math
from typing import Any


def clean(v: Any) -> Any:
    """JSON-safe copy: NaN/inf -> None, tuples -> lists, numpy-ish scalars -> Python."""
    if isinstance(v, dict):
        return {str(k): clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    if isinstance(v, float):
        return None if math.isnan(v) or math.isinf(v) else v
    if isinstance(v, (str, int, bool)) or v is None:
        return v
    if hasattr(v, "item"):
        return clean(v.item())
    return str(v)
