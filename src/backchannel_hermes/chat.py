"""A turn handed to a Hermes session's chat: given to the chat's adapter as an internal event, as Hermes gives its own
background results, so Hermes's gateway runs it as the next turn of that chat and sends its reply there.

Everything here runs on the Hermes gateway's event loop (`on_loop`), where the chat adapters live. Hermes 0.19
and 0.22 both keep one turn at a time per chat (the adapter's guard), but both may merge a message that arrives
while another waits into one (the person's words and ours in one user message): so a turn is handed in only
when the chat has nothing running and nothing waiting, and it then starts at once. What the person types while
it runs waits behind it (or interrupts it, as Hermes's own setting for that chat says).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

IDLE_POLL_SECONDS = 0.2
T = TypeVar("T")


@dataclass(frozen=True)
class Chat:
    """Where a Hermes session's chat is: its adapter, its routing key and the source its messages come from."""

    adapter: Any
    session_key: str
    source: Any


def runner() -> Any | None:
    """The Hermes gateway running in this process, once its event loop runs (None in a CLI, or before)."""
    module = sys.modules.get("gateway.run")
    ref = getattr(module, "_gateway_runner_ref", None) if module is not None else None
    found = ref() if callable(ref) else None
    return found if found is not None and getattr(found, "_gateway_loop", None) is not None else None


def on_loop(gateway: Any, work: Callable[[], Awaitable[T]], *, timeout: float) -> T:
    """Run `work` on the gateway's event loop from another thread; its result."""
    return asyncio.run_coroutine_threadsafe(_call(work), gateway._gateway_loop).result(timeout)


async def _call(work: Callable[[], Awaitable[T]]) -> T:
    return await work()


def find(gateway: Any, session_id: str) -> Chat | None:
    """The chat that drives Hermes session `session_id` (or the session it continues in after a compression);
    None when no live chat adapter does (an API-server session, a terminal's)."""
    store = getattr(gateway, "session_store", None)
    if store is None:
        return None
    ensure = getattr(store, "_ensure_loaded", None)
    if callable(ensure):
        ensure()
    ids = {session_id}
    db = getattr(store, "_db", None)
    tip = getattr(db, "get_compression_tip", None)
    if callable(tip):
        try:
            moved = tip(session_id)
        except Exception:
            moved = None
        if isinstance(moved, str) and moved:
            ids.add(moved)
    entries = getattr(store, "_entries", None) or {}
    for key, entry in list(entries.items()):
        if getattr(entry, "session_id", None) not in ids:
            continue
        origin = getattr(entry, "origin", None)
        platform = getattr(origin, "platform", None)
        adapter = getattr(gateway, "adapters", {}).get(platform) if platform is not None else None
        if adapter is not None:
            return Chat(adapter, key, origin)
    return None


def busy(chat: Chat) -> bool:
    """Whether the chat runs a turn, or has a message waiting for one."""
    return chat.session_key in getattr(chat.adapter, "_active_sessions", {}) or chat.session_key in getattr(
        chat.adapter, "_pending_messages", {}
    )


async def hand_in(chat: Chat, text: str) -> None:
    """Give `text` to the chat as an internal event, once the chat is idle (its turn then starts at once)."""
    from gateway.platforms.base import MessageEvent, MessageType

    while busy(chat):
        await asyncio.sleep(IDLE_POLL_SECONDS)
    event = MessageEvent(text=text, message_type=MessageType.TEXT, source=chat.source, internal=True)
    await chat.adapter.handle_message(event)
