"""The `memory` tool: add, replace or remove one line of the profile's MEMORY.md or USER.md, within size limits."""

from __future__ import annotations

from typing import Any

from ...outcome import answered
from ..engines.base import ToolSpec
from .base import Tool, ToolContext, ToolFailure, require_str

LIMITS = {"memory": 4000, "user": 2000}  # characters per file
MAX_ENTRY = 500

SPEC = ToolSpec(
    name="memory",
    description="Durable notes, one line each.",
    parameters={
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": ["add", "replace", "remove"],
                "description": "add content; replace old_text's line; remove content's line",
            },
            "target": {
                "type": "string",
                "enum": ["memory", "user"],
                "description": "memory: yours; user: your person's",
            },
            "content": {"type": "string", "description": "a line"},
            "old_text": {"type": "string", "description": "for replace"},
        },
        "required": ["action", "target", "content"],
    },
)


async def handle(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    action = require_str(args, "action")
    target = require_str(args, "target")
    content = " ".join(require_str(args, "content").split())
    if target not in LIMITS:
        raise ToolFailure("invalid_arguments", f"target must be 'memory' or 'user', not {target!r}")
    if action not in ("add", "replace", "remove"):
        raise ToolFailure("invalid_arguments", f"action must be add, replace or remove, not {action!r}")
    old = require_str(args, "old_text") if action == "replace" else ""
    name = "MEMORY.md" if target == "memory" else "USER.md"
    kept: list[str] = []

    def change(text: str) -> str:
        lines = [line for line in text.splitlines() if line.strip()]
        if action == "add":
            _check_entry(content)
            if content in lines:
                raise _Unchanged(len(lines))
            lines.append(content)
        elif action == "replace":
            _check_entry(content)
            lines[_find(lines, old, target)] = content
        else:
            del lines[_find(lines, content, target)]
        new = "\n".join(lines) + ("\n" if lines else "")
        if len(new) > LIMITS[target]:
            raise ToolFailure(
                "memory_full",
                f"{name} would hold {len(new)} characters, over its limit of {LIMITS[target]}: "
                "remove or shorten entries first",
            )
        kept[:] = lines
        return new

    try:
        text = await ctx.memories.change(ctx.profile, "memory" if target == "memory" else "user", change)
    except _Unchanged as same:
        return answered({"ok": True, "target": target, "note": "already remembered", "entries": same.entries})
    return answered({"ok": True, "target": target, "action": action, "entries": len(kept), "chars": len(text)})


class _Unchanged(Exception):
    """An entry remembered already: nothing is written."""

    def __init__(self, entries: int) -> None:
        super().__init__("already remembered")
        self.entries = entries


def _check_entry(content: str) -> None:
    if not content:
        raise ToolFailure("invalid_arguments", "content is empty")
    if len(content) > MAX_ENTRY:
        raise ToolFailure("invalid_arguments", f"an entry holds at most {MAX_ENTRY} characters, got {len(content)}")


def _find(lines: list[str], needle: str, target: str) -> int:
    needle = needle.strip()
    matches = [i for i, line in enumerate(lines) if needle and needle in line]
    if not matches:
        raise ToolFailure("not_found", f"no line in {target} contains {needle!r}")
    if len(matches) > 1:
        raise ToolFailure("ambiguous", f"{len(matches)} lines in {target} contain {needle!r}; be more specific")
    return matches[0]


TOOL = Tool(spec=SPEC, handler=handle)
