"""The tools an agent may call: memory, and the messaging tools (through the turn's Sender)."""

from __future__ import annotations

from .base import Tool
from .memory import TOOL as MEMORY
from .messaging import TOOLS as MESSAGING

__all__ = ["TOOLBOX", "Tool"]

TOOLBOX: dict[str, Tool] = {tool.name: tool for tool in (MEMORY, *MESSAGING)}
