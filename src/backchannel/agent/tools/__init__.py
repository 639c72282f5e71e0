"""The tools an agent may call: memory, and the messaging tools (through the turn's Sender); ASKING, the tools that
only a turn of Backchannel's own runs (`ask_person`: it ends the turn), offered beside them to its own agents."""

from __future__ import annotations

from .asking import TOOL as ASK_PERSON
from .base import Tool
from .memory import TOOL as MEMORY
from .messaging import TOOLS as MESSAGING

__all__ = ["ASKING", "TOOLBOX", "Tool"]

TOOLBOX: dict[str, Tool] = {tool.name: tool for tool in (MEMORY, *MESSAGING)}
ASKING: dict[str, Tool] = {ASK_PERSON.name: ASK_PERSON}
