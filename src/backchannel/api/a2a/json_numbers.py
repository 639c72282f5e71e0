"""JSON numbers as their sender wrote them: protobuf's Struct (a data part, metadata) holds every number as a
double, and the SDK writes it so (`42` comes back `42.0`). Where a Struct's value is a whole number it came
from a JSON integer as far as anyone can tell, and it is written as one again: in what the agent reads and in
every JSON answer (A2A's own fields are strings, enums and integers; only a Struct holds doubles)."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_EXACT = 2**53  # past it a double is no longer exactly the integer it says
# A number token with a fraction of zeros (`42.0`, `-7.00`, `1.0e3` is left as it is): a quick look first.
_WHOLE_FLOAT = re.compile(rb"[0-9]\.0+(?![0-9eE])")


def plain(value: Any) -> Any:
    """`value` with each whole-number float (within `MAX_EXACT`) an int, through lists and objects."""
    if isinstance(value, float) and value.is_integer() and abs(value) < MAX_EXACT:
        return int(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def plain_body(body: bytes) -> bytes:
    """A JSON answer with its whole-number floats written as integers (Starlette's compact form); the same
    bytes when no number token looks like one, or it is no JSON."""
    if not _WHOLE_FLOAT.search(body):
        return body
    try:
        value = json.loads(body)
    except ValueError:
        return body
    return json.dumps(plain(value), ensure_ascii=False, separators=(",", ":")).encode()
