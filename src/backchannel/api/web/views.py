"""What the pages show, computed from the services' answers: a session's messages as a person reads them,
runs as rows, the ledger filtered by outcome."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ...core.delivery.delivery import Delivered
from ...core.facades import Messages
from ...errors import NotFound
from ...framing import is_human, unframe
from ...messages import Message
from ...outcome import Outcome
from ...records import LedgerEntry, RunState

LEDGER_OUTCOMES = (Outcome.DELIVERED, Outcome.RECEIPT, Outcome.HELD, Outcome.REFUSED, Outcome.FAILED)
WITHIN = {"1h": 3600.0, "24h": 86400.0, "7d": 7 * 86400.0}
LEDGER_SCAN = 2000  # rows read before filtering by outcome
LEDGER_ROWS = 200
RECENT_RUNS = 10


@dataclass(frozen=True)
class ToolUse:
    name: str
    arguments: str
    result: str | None = None


@dataclass
class Item:
    """One message of a session as shown: the person's, another agent's (framed), the agent's reply, a tool's."""

    kind: str  # person | agent | assistant
    text: str
    at: float | None
    run_id: str | None
    origin: str | None = None  # for an agent's message: `session research/…` or `peer spark/…`
    via: str | None = None
    sender: str | None = None
    tools: list[ToolUse] = field(default_factory=list)


async def session_items(messages: list[Message], delivery: Messages) -> list[Item]:
    """The messages in order; a framed message is another agent's only when its run's sender is not the person."""
    senders: dict[str, str | None] = {}

    async def sender_of(run_id: str | None) -> str | None:
        if run_id is None:
            return None
        if run_id not in senders:
            try:
                senders[run_id] = (await delivery.run(run_id)).sender
            except NotFound:  # a run no longer kept: show the words without provenance
                senders[run_id] = None
        return senders[run_id]

    items: list[Item] = []
    pending: dict[str, ToolUse] = {}
    for m in messages:
        if m.role == "user":
            sender = await sender_of(m.run_id)
            framed = unframe(m.content) if sender is not None and not is_human(sender) else None
            if framed is not None:
                items.append(
                    Item("agent", framed.text, m.created_at, m.run_id, framed.origin, framed.via, sender=sender)
                )
            else:
                items.append(Item("person", m.content, m.created_at, m.run_id, sender=sender))
        elif m.role == "assistant":
            item = Item("assistant", m.content, m.created_at, m.run_id)
            for call in m.tool_calls:
                use = ToolUse(call.name, _pretty(call.arguments))
                pending[call.id] = use
                item.tools.append(use)
            items.append(item)
        elif m.role == "tool" and items:
            called = pending.pop(m.tool_call_id, None) if m.tool_call_id else None
            owner = next((i for i in reversed(items) if i.kind == "assistant"), None)
            if owner is not None and called is not None and called in owner.tools:
                owner.tools[owner.tools.index(called)] = ToolUse(called.name, called.arguments, _pretty(m.content))
    return [i for i in items if i.text.strip() or i.tools]


def _pretty(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except (ValueError, TypeError):
        return raw


async def active_runs(delivery: Messages) -> tuple[list[Delivered], list[Delivered]]:
    """The runs queued, running or waiting for their person's answer (oldest first, with their queue positions) and
    the last few that ended."""
    active = await delivery.runs(states=(RunState.QUEUED, RunState.RUNNING, RunState.INPUT_REQUIRED), limit=500)
    active.sort(key=lambda d: d.run.seq)
    ended = [d for d in await delivery.runs(limit=RECENT_RUNS + len(active)) if d.run.state.terminal][:RECENT_RUNS]
    return active, ended


async def ledger_rows(
    delivery: Messages, addresses: list[str], outcome: Outcome | None, since: float | None
) -> tuple[list[LedgerEntry], bool]:
    """The ledger as filtered; True when more rows matched than are shown."""
    rows = await delivery.ledger(*addresses, limit=LEDGER_SCAN if outcome else LEDGER_ROWS + 1, since=since)
    if outcome is not None:
        rows = [r for r in rows if r.outcome is outcome]
    return rows[:LEDGER_ROWS], len(rows) > LEDGER_ROWS
