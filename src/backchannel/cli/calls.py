"""A command's requests to this home's gateway: the running one, else the same gateway opened in this process
(`connect.gateway_link`), through the one client; its errors are raised as the project's own."""

from __future__ import annotations

import asyncio
from typing import Any

from ..home import config
from .connect import gateway_link


async def request(
    method: str,
    path: str,
    json: dict[str, Any] | None = None,
    *,
    headers: dict[str, str] | None = None,
    timeout: float | None = None,
) -> tuple[dict[str, Any], str]:
    """The gateway's answer, and which answered (`gateway`, or `local`: none runs; what it queues waits for one).
    `timeout`: seconds for an answer that takes longer than most (else the client's own bound)."""
    async with gateway_link(config.home(), works=False) as link:
        return (await link.client.request(method, path, json=json, headers=headers, timeout=timeout)).body, link.via


def call(
    method: str,
    path: str,
    json: dict[str, Any] | None = None,
    *,
    headers: dict[str, str] | None = None,
    timeout: float | None = None,
) -> dict[str, Any]:
    """The gateway's answer to one request, in an event loop of this command's."""
    return asyncio.run(request(method, path, json, headers=headers, timeout=timeout))[0]
