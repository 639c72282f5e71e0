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
class Message:
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None  # the tool's name on a tool result
    created_at: float | None = None
    run_id: str | None = None

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
