"""The tests' one way to wait for something that happens elsewhere (a gateway, a process, a page): read it again
until it holds, or fail saying what never happened and what was last seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    read: Callable[[], T],
    ok: Callable[[T], object] = bool,
    *,
    within: float,
    what: str | Callable[[T], str],
    every: float = 0.05,
) -> T:
    """`read()` again every `every` seconds until `ok` holds of it (by default: it is truthy), and that value;
    after `within` seconds an AssertionError with `what` (a text, or made of the last value read)."""
    deadline = time.monotonic() + within
    while True:
        value = read()
        if ok(value):
            return value
        if time.monotonic() >= deadline:
            said = what(value) if callable(what) else f"{what}; last: {value!r}"
            raise AssertionError(f"not within {within:g}s: {said}")
        time.sleep(every)
