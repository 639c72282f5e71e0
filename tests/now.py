"""`now(call)`: a store call run to its end here and now, outside any event loop or inside one.

The store's functions are async; on SQLite they never suspend (their statements run at once on the home's
connection), so a test that reads or writes a state.db directly runs them synchronously. A call that
suspends (it would need a loop) fails this helper instead of hanging."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def now(call: Coroutine[Any, Any, T]) -> T:
    try:
        call.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    call.close()
    raise AssertionError("a SQLite store call suspended: run it in an event loop")
