"""Tools offered to an agent: a spec for the model, a handler, and the context of the turn calling it.

A handler returns a JSON-able dict. A `ToolFailure` (or a bad argument) becomes an error result
that goes back to the model; any other exception is an infrastructure error for the operator.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...home.profiles import Profile
from ..engines.base import ToolSpec


class ToolFailure(Exception):
    """An error the model should see and can act on: `code` is machine-readable."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ToolContext:
    """Who is calling: the profile and session whose turn runs, and the run it handles."""

    profile: Profile
    session_id: str
    run_id: str
    hops: int = 0
    chain: tuple[str, ...] = ()
    services: Mapping[str, Any] = field(default_factory=dict)


Handler = Callable[[dict[str, Any], ToolContext], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    handler: Handler

    @property
    def name(self) -> str:
        return self.spec.name


def error_result(code: str, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message}})


async def call_tool(
    tools: Mapping[str, Tool], name: str, arguments: dict[str, Any] | str, ctx: ToolContext
) -> tuple[str, bool]:
    """Run one tool call; returns (JSON result text, ok). Tool errors are results, not exceptions."""
    tool = tools.get(name)
    if tool is None:
        return error_result("unknown_tool", f"no tool {name!r}; available: {', '.join(sorted(tools)) or 'none'}"), False
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return error_result("invalid_arguments", f"arguments of {name!r} are not valid JSON: {exc.msg}"), False
        if not isinstance(parsed, dict):
            return error_result("invalid_arguments", f"arguments of {name!r} must be a JSON object"), False
        arguments = parsed
    try:
        result = await tool.handler(arguments, ctx)
    except ToolFailure as exc:
        return error_result(exc.code, exc.message), False
    return json.dumps(result, ensure_ascii=False), True


def require_str(args: Mapping[str, Any], key: str, *, optional: bool = False) -> str:
    value = args.get(key)
    if value is None and optional:
        return ""
    if not isinstance(value, str):
        raise ToolFailure("invalid_arguments", f"argument {key!r} must be a string")
    return value
