"""`ask_person`: a turn asks its person a question and ends there, its run `input_required` until the answer.

The question is saved with the turn's end (one commit); the person's answer, the default at expiry, or a decline
puts the same run back in its session's queue, and its next turn reads the answer as the session's next message.
Offered to Backchannel's own agents (the engines that take tools); other surfaces ask through their own protocol.
"""

from __future__ import annotations

from typing import Any

from ...ids import new_question_id
from ...outcome import answered
from ..engines.base import ToolSpec
from .base import Asked, Tool, ToolContext, ToolFailure, require_str

MAX_QUESTION_CHARS = 2000
MAX_CHOICES = 20
ASKED_NOTE = (
    "Your person is asked. This turn ends now: say nothing more. Their answer comes as the next message of this"
    " session."
)


def _choices(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(c, str) and c.strip() for c in value):
        raise ToolFailure("invalid_arguments", "choices must be a list of non-empty strings")
    if not value or len(value) > MAX_CHOICES:
        raise ToolFailure("invalid_arguments", f"choices: from 1 to {MAX_CHOICES}, or none for a free answer")
    return tuple(c.strip() for c in value)


def _expires_in(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ToolFailure("invalid_arguments", "expires_in must be a number of seconds, more than 0")
    return float(value)


async def _ask(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    question = require_str(args, "question").strip()
    if not question or len(question) > MAX_QUESTION_CHARS:
        raise ToolFailure("invalid_arguments", f"question: from 1 to {MAX_QUESTION_CHARS:,} characters")
    if ctx.asked is not None:
        raise ToolFailure("already_asked", f"this turn asked its person already ({ctx.asked.id}): one question a turn")
    choices = _choices(args.get("choices"))
    default = args.get("default")
    if default is not None and not isinstance(default, str):
        raise ToolFailure("invalid_arguments", "default must be a string")
    if default is not None and choices is not None and default.strip() not in choices:
        raise ToolFailure("invalid_arguments", "default must be one of the choices")
    ctx.asked = Asked(
        new_question_id(),
        question,
        choices,
        default.strip() if default is not None else None,
        _expires_in(args.get("expires_in")),
    )
    return answered({"question_id": ctx.asked.id, "state": "input_required", "note": ASKED_NOTE})


TOOL = Tool(
    ToolSpec(
        "ask_person",
        "Ask your person; this turn ends, the answer comes as your next message.",
        {
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "what to ask"},
                "choices": {"type": "array", "items": {"type": "string"}, "description": "answers to pick from"},
                "default": {"type": "string", "description": "if unanswered at expiry"},
                "expires_in": {"type": "number", "description": "seconds"},
            },
            "required": ["question"],
        },
    ),
    _ask,
)
