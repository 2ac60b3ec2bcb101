"""JSON text as pi's `JSON.stringify` writes it, so a line of `--mode json` or RPC output is
the bytes pi would print (scripts grep for `"type":"agent_end"`).

That is: no spaces after `,` and `:`, non-ASCII characters as they are, and numbers as
JavaScript prints them: a whole float without `.0` (`0`, not `0.0`), plain decimals from
1e-7 up to 1e21 (`0.00001`, not `1e-05`), and `1e-7` / `1e+21` style exponents beyond.
NaN and infinities, which JSON cannot hold, are `null` as in JavaScript.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

_SEPARATORS = (",", ":")


def dumps(value: Any) -> str:
    prepared, unusual = _prepare(value)
    if not unusual:
        # The common case, at C speed: only whole floats needed changing.
        return json.dumps(prepared, ensure_ascii=False, separators=_SEPARATORS)
    return "".join(_encode(prepared))


def _prepare(value: Any) -> tuple[Any, bool]:
    """`value` with whole floats made ints, and whether a float still needs JavaScript's
    spelling (an exponent, NaN or infinity) that Python's encoder would write otherwise."""
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
            return int(value), False
        return value, not math.isfinite(value) or "e" in repr(value)
    if isinstance(value, dict):
        unusual = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            out[key], odd = _prepare(item)
            unusual |= odd
        return out, unusual
    if isinstance(value, list | tuple):
        items = [_prepare(item) for item in value]
        return [item for item, _ in items], any(odd for _, odd in items)
    return value, False


def js_number(value: float) -> str:
    """A float as JavaScript's `String(n)` spells it."""
    if not math.isfinite(value):
        return "null"
    text = repr(value)
    if "e" not in text:
        return text
    exponent = int(text.partition("e")[2])
    if -7 < exponent < 21:
        return format(Decimal(text), "f")
    mantissa = text.partition("e")[0].removesuffix(".0")
    return f"{mantissa}e{'+' if exponent > 0 else '-'}{abs(exponent)}"


def _encode(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        yield "{"
        for index, (key, item) in enumerate(value.items()):
            yield ("," if index else "") + json.dumps(str(key), ensure_ascii=False) + ":"
            yield from _encode(item)
        yield "}"
    elif isinstance(value, list):
        yield "["
        for index, item in enumerate(value):
            if index:
                yield ","
            yield from _encode(item)
        yield "]"
    elif isinstance(value, float):
        yield js_number(value)
    else:
        yield json.dumps(value, ensure_ascii=False)
