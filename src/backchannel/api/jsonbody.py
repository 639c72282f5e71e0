"""Untrusted JSON: bounded depth, bounded numbers, and text that is valid Unicode, or a 400 that says which."""

from __future__ import annotations

import json
from typing import Any

from ..errors import UsageError

MAX_DEPTH = 32  # objects and arrays inside each other; no request of the API needs more than 4
MAX_NUMBER_CHARS = 40  # a number's digits as written (an int64 has 19, a double's shortest form at most 24)


def parse(raw: bytes) -> Any:
    """The JSON value of `raw`; every way it is unreadable or out of bounds is a UsageError (code invalid_json)."""
    try:
        value = json.loads(raw, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _bad(f"the request body is not valid JSON: {exc}") from exc
    except RecursionError:
        raise _bad(f"the request body nests objects and arrays deeper than {MAX_DEPTH} levels") from None
    check(value)
    return value


def check(value: Any) -> None:
    """Refuse nesting past MAX_DEPTH and strings (keys too) with lone surrogates, walking without recursion."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, str):
            _text(item, where)
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise _bad(f"the request body nests objects and arrays deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    _text(key, where or "a key")
                    stack.append((child, depth + 1, key if not where else f"{where}.{key}"))
            else:
                stack.extend((child, depth + 1, where) for child in item)


def _text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        field = f"field {where!r}" if where else "the request body"
        raise UsageError(
            f"{field} is not valid text: it holds a lone UTF-16 surrogate (\\ud800-\\udfff)", code="invalid_payload"
        ) from None


def _int(digits: str) -> int:
    if len(digits) > MAX_NUMBER_CHARS:
        raise _bad(f"the request body has a number of {len(digits)} characters; at most {MAX_NUMBER_CHARS} are read")
    return int(digits)


def _float(digits: str) -> float:
    if len(digits) > MAX_NUMBER_CHARS:
        raise _bad(f"the request body has a number of {len(digits)} characters; at most {MAX_NUMBER_CHARS} are read")
    return float(digits)


def _constant(name: str) -> Any:
    raise _bad(f"the request body holds {name}, which is not JSON")


def _bad(message: str) -> UsageError:
    return UsageError(message, code="invalid_json")
