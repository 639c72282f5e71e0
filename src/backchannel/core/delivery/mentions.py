"""Mentions: a person's `@session:`, `@peer:` and `@group:` mentions answered before their own agent's turn.

The prompt without the mention tokens goes to each mentioned target as from the person's session,
under the same rules as `send_to_session`; each reply (or why there is none) is added to the prompt,
framed as the other agent's message it is (its own lines that imitate a frame escaped), so a mentioned
agent cannot end the replies and speak as the person.
"""

from __future__ import annotations

import asyncio

from ... import addresses
from ...agent.tools.base import Sender, ToolContext
from ...errors import BackchannelError
from ...framing import ROOM_SENDER, frame_reply, is_human, quote
from ...outcome import Outcome, Result
from ...records import Run

WAIT_SECONDS = 120.0
MARK = "[Replies to the mentions in this message: each from another agent, not your user]"
END_MARK = "[End of the replies to the mentions]"


class Mentions:
    """The turn runner's `prepare` step: a person's prompt with its mentions answered."""

    def __init__(self, sender: Sender) -> None:
        self.sender = sender

    async def prepare(self, ctx: ToolContext, run: Run) -> str:
        if not is_human(run.sender) or run.sender == ROOM_SENDER:  # a room's briefing quotes the agents' words
            return run.message
        return (await self.answer(ctx, run.message))[0]

    async def answer(self, ctx: ToolContext, text: str, *, wait: float = WAIT_SECONDS) -> tuple[str, int]:
        """`text` with its mentions answered as from the session of `ctx` (each waited for up to `wait`
        seconds), and how many it had."""
        if "@" not in text:
            return text, 0
        prompt, found = addresses.mentions(text)
        if not found:
            return text, 0
        answers = await asyncio.gather(*(self._ask(ctx, m, prompt, wait) for m in found))
        return prompt + "\n\n" + MARK + "\n" + "\n\n".join(answers) + "\n" + END_MARK, len(found)

    async def _ask(self, ctx: ToolContext, mention: addresses.Mention, prompt: str, wait: float) -> str:
        """One mention's answer; a group's: each member's, in the group's order, and how many were reached."""
        try:
            sent = await self.sender.send_to(ctx, mention.address, prompt, wait=wait)
        except BackchannelError as exc:
            return f"{mention.token} was refused ({exc.code}): {quote(exc.message)}"
        if isinstance(sent, Result):
            return self._told(mention.token, sent, wait)
        said = [
            self._told(f"{mention.token} ({m.target})", m.result, wait) for m in sent.members if m.result is not None
        ]
        return "\n\n".join([*said, f"{mention.token}: reached {sent.reached}"])

    @staticmethod
    def _told(token: str, result: Result, wait: float) -> str:
        """One answer to a mention (`token`, as written), as the prompt shows it."""
        if result.outcome is Outcome.DELIVERED:
            return frame_reply(result.to, result.reply or "", via=f"a reply to your mention {token}")
        if result.outcome is Outcome.REFUSED:
            return f"{token} was refused ({result.code}): {quote(result.error or '')}"
        if result.outcome is Outcome.RECEIPT:
            return (
                f"{token} did not answer within {wait:.0f}s: run {result.run_id} "
                "goes on and its reply will come to this session"
            )
        return f"{token} {result.outcome.value}: {quote(result.error or 'no reply')}"
