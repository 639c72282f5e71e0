"""The group-commit rule, in one place: a service's answer leaves only once its writes are committed.

The store commits the writes of busy event-loop iterations together (`Database.group_commits`); a
service method decorated with `commits` returns (or raises) only after every group its writes went
into is on disk, so no caller can tell the outside world about a write that a crash could still lose.
A group whose COMMIT failed (a full disk) fails the call with its StoreError (503), even when the
method itself awaited something after the write and another group has committed since.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from ...store.driver import Db

P = ParamSpec("P")
R = TypeVar("R")


class HasDatabase(Protocol):
    db: Db


S = TypeVar("S", bound=HasDatabase)


def commits(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    @functools.wraps(method)
    async def committed(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.db.tracking() as written:
            try:
                await self.db.writable()  # another process's write lock is waited for off the event loop
                return await method(self, *args, **kwargs)
            finally:
                await self.db.all_durable(written)
                await self.db.durable()

    return committed
