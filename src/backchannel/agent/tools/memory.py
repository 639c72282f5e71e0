"""The `memory` tool: add, replace or remove one line of the profile's MEMORY.md or USER.md, within size limits."""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from ...home import files
from ...home.config import write_atomic
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
    path = ctx.profile.memory_path("memory" if target == "memory" else "user")
    # An unreadable file is the operator's to fix (ConfigError fails the turn), not the model's.
    lines = [line for line in files.read_text(path, missing_ok=True).splitlines() if line.strip()]
    if action == "add":
        _check_entry(content)
        if content in lines:
            return answered({"ok": True, "target": target, "note": "already remembered", "entries": len(lines)})
        lines.append(content)
    elif action == "replace":
        old = require_str(args, "old_text")
        _check_entry(content)
        index = _find(lines, old, target)
        lines[index] = content
    elif action == "remove":
        index = _find(lines, content, target)
        del lines[index]
    else:
        raise ToolFailure("invalid_arguments", f"action must be add, replace or remove, not {action!r}")
    text = "\n".join(lines) + ("\n" if lines else "")
    if len(text) > LIMITS[target]:
        raise ToolFailure(
            "memory_full",
            f"{path.name} would hold {len(text)} characters, over its limit of {LIMITS[target]}: "
            "remove or shorten entries first",
        )
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise ConfigError(f"cannot write {str(path)!r}: {exc.strerror or type(exc).__name__}") from exc
    return answered({"ok": True, "target": target, "action": action, "entries": len(lines), "chars": len(text)})


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
