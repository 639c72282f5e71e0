"""The one message type that crosses every layer: store, turns, engines and the API convert at their edges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
MAX_MESSAGE_CHARS = 65_536  # the longest message a sender may send


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as models send it

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class Attachment:
    """A file a message came with, kept with its run: its bytes (`content`), or only where it is (`url`, which
    Backchannel never fetches). The agent is told its name and media type."""

    name: str | None
    media_type: str | None
    content: bytes | None = None
    url: str | None = None

    @property
    def size(self) -> int:
        return len(self.content or b"")


@dataclass(frozen=True)
class Usage:
    """Tokens a model call read and wrote, as its engine reports them (echo: words); added up over a turn."""

    tokens_in: int = 0
    tokens_out: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.tokens_in + other.tokens_in, self.tokens_out + other.tokens_out)

    @property
    def total(self) -> int:
        return self.tokens_in + self.tokens_out

    @classmethod
    def of(cls, reported: Any) -> Usage | None:
        """A model server's `usage` object (OpenAI's prompt/completion tokens, or input/output tokens), else None."""
        if not isinstance(reported, dict):
            return None
        read = reported.get("prompt_tokens", reported.get("input_tokens"))
        wrote = reported.get("completion_tokens", reported.get("output_tokens"))
        counts = [n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None for n in (read, wrote)]
        if counts[0] is None and counts[1] is None:
            return None
        return cls(counts[0] or 0, counts[1] or 0)


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # the tool's name on a tool result
    created_at: float | None = None
    run_id: str | None = None
    usage: Usage | None = None  # an assistant message: what the model call that made it read and wrote

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [tc.to_dict() for tc in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        if self.created_at is not None:
            out["created_at"] = self.created_at
        if self.run_id is not None:
            out["run_id"] = self.run_id
        return out
