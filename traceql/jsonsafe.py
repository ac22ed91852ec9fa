"""json_safe: the one conversion of values into what json.dumps(allow_nan=False) accepts.

Float NaN and +/-inf become null (JSON has no such numbers, and a consumer must not read "inf" as text);
dict keys become strings, tuples lists, Decimal a float, dates ISO text, bytes hex, numpy-style scalars
(`.item()`) their Python value, anything else its str(). arrow_maps=True also turns a list of 2-tuples (how
pyarrow's to_pylist returns a MAP value) into an object.
"""

from __future__ import annotations

import datetime
import decimal
import math
from typing import Any


def json_safe(v: Any, *, arrow_maps: bool = False) -> Any:
    """A JSON-safe copy of v (see the module doc)."""
    if isinstance(v, float):  # first: the hot path of an export's event arguments
        return v if math.isfinite(v) else None
    if v is None or isinstance(v, (str, int)):
        return v
    if isinstance(v, dict):
        return {str(k): json_safe(x, arrow_maps=arrow_maps) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        if arrow_maps and isinstance(v, list) and v and isinstance(v[0], tuple) and len(v[0]) == 2:
            return {str(k): json_safe(x, arrow_maps=True) for k, x in v}
        return [json_safe(x, arrow_maps=arrow_maps) for x in v]
    if isinstance(v, decimal.Decimal):
        return json_safe(float(v))
    if isinstance(v, (datetime.date, datetime.datetime, datetime.time)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if hasattr(v, "item"):  # numpy scalars
        return json_safe(v.item(), arrow_maps=arrow_maps)
    return str(v)
