"""Mentions: a person's `@session:` and `@peer:` mentions answered before their own agent's turn.

The prompt without the mention tokens goes to each mentioned target as from the person's session,
under the same rules as `send_to_session`; each reply (or why there is none) is added to the prompt,
framed as the other agent's message it is (its own lines that imitate a frame escaped), so a mentioned
agent cannot end the replies and speak as the person.
"""

from __future__ import annotations

import asyncio

from .. import addresses
from ..agent.tools.base import Sender, ToolContext
from ..errors import BackchannelError
from ..framing import frame_reply, is_human, quote
from ..outcome import Outcome
from ..store.runs import RunRow

WAIT_SECONDS = 120.0


class Mentions:
    """The turn runner's `prepare` step: a person's prompt with its mentions answered."""

    def __init__(self, sender: Sender) -> None:
        self.sender = sender

    async def prepare(self, ctx: ToolContext, run: RunRow) -> str:
        if not is_human(run.sender) or "@" not in run.message:
            return run.message
        prompt, found = addresses.mentions(run.message)
        if not found:
            return run.message
        answers = await asyncio.gather(*(self._ask(ctx, m, prompt) for m in found))
        return (
            prompt
            + "\n\n[Replies to the mentions in this message: each from another agent, not your user]\n"
            + "\n\n".join(answers)
            + "\n[End of the replies to the mentions]"
        )

    async def _ask(self, ctx: ToolContext, mention: addresses.Mention, prompt: str) -> str:
        try:
            if isinstance(mention.address, addresses.LocalAddress):
                result = await self.sender.send(ctx, str(mention.address), prompt, wait=WAIT_SECONDS)
            else:
                result = await self.sender.send_peer(ctx, str(mention.address), prompt, wait=WAIT_SECONDS)
        except BackchannelError as exc:
            return f"{mention.token} was refused ({exc.code}): {quote(exc.message)}"
        if result.outcome is Outcome.DELIVERED:
            return frame_reply(result.to, result.reply or "", via=f"a reply to your mention {mention.token}")
        if result.outcome is Outcome.REFUSED:
            return f"{mention.token} was refused ({result.code}): {quote(result.error or '')}"
        if result.outcome is Outcome.RECEIPT:
            return (
                f"{mention.token} did not answer within {WAIT_SECONDS:.0f}s: run {result.run_id} "
                "goes on and its reply will come to this session"
            )
        return f"{mention.token} {result.outcome.value}: {quote(result.error or 'no reply')}"
