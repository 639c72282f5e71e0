"""This home's gateway in this process, for a command when none runs: built by its composition root
(`core.gateway`), and reached through its own HTTP app with no socket between (`GatewayClient.in_process`), so a
command says the same requests and reads the same answers whether a gateway runs or not."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

from ..api.app import create_app
from ..api.context import Context
from ..core.gateway import Gateway, running
from ..net.local import GatewayClient

LOCAL_GRACE = 0.5


@contextlib.asynccontextmanager
async def _opened(root: Path) -> AsyncIterator[Gateway]:
    """This home's gateway, not started: for reading and creating sessions, the ledger, and peers."""
    gateway = Gateway(root)
    try:
        await gateway.open()
        yield gateway
    finally:
        await gateway.aclose()


@contextlib.asynccontextmanager
async def in_process_client(root: Path, *, works: bool = True, every: bool = False) -> AsyncIterator[GatewayClient]:
    """A client of this home's gateway built in this process. `works`: started, it works the sessions of the runs
    the command sends or follows (with `every`, every session of the home, as `backchannel mcp` does while it
    serves) until the command is done (a turn still running then is cut and runs again on the next start); else
    only opened, for what reads and changes the store (a run it queues waits for a gateway). Its key is made for
    this command alone: nothing else reaches this gateway."""
    key = secrets.token_urlsafe(32)
    scope: dict[str, object] = {} if every else {"scope": set()}  # no scope: the whole home
    gateway_of = running(root, grace=LOCAL_GRACE, **scope) if works else _opened(root)
    async with gateway_of as gateway:
        app = create_app(Context(gateway=gateway, api_key=key), web_view=False)
        client = GatewayClient.in_process(app, key)
        try:
            yield client
        finally:
            await client.aclose()
