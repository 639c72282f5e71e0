"""The group-commit rule, in one place: a service's answer leaves only once its writes are committed.

The store commits the writes of busy event-loop iterations together (`Database.group_commits`); a
service method decorated with `commits` returns (or raises) only after `db.durable()`, so no caller
can tell the outside world about a write that a crash could still lose.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from ..store.db import Database

P = ParamSpec("P")
R = TypeVar("R")


class HasDatabase(Protocol):
    db: Database


S = TypeVar("S", bound=HasDatabase)


def commits(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    @functools.wraps(method)
    async def committed(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(self, *args, **kwargs)
        finally:
            await self.db.durable()

    return committed
