"""Where a profile's memories are kept: MEMORY.md (the agent's own notes) and USER.md (about its person).

A home of its own keeps them in the profile's files (`FileMemories`). Gateways that share a store keep them in
the store (`store.memories.StoreMemories`), so that a session answered by any of them remembers the same; the files
are then an export, written by the gateway that changed them. The memory tool and the system prompt read and
change them only through `Memories`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from ..errors import ConfigError
from ..home import files
from ..home.config import write_atomic
from ..home.profiles import Profile

Target = Literal["memory", "user"]
Change = Callable[[str], str]  # a file's text as it is → as it is to be (raises to change nothing)


@dataclass(frozen=True)
class Notes:
    """A profile's two memory texts, as the system prompt shows them."""

    memory: str
    user: str


class Memories(Protocol):
    """A profile's memories, wherever they are kept."""

    async def notes(self, profile: Profile) -> Notes | None:
        """Both texts; None: read them from the profile's files (where they are kept)."""
        ...

    async def change(self, profile: Profile, target: Target, change: Change) -> str:
        """Apply `change` to one text, with no other change of it between the read and the write; the new text."""
        ...


class FileMemories:
    """The memories in the profile's files (a home's own gateway)."""

    async def notes(self, profile: Profile) -> Notes | None:
        return None

    async def change(self, profile: Profile, target: Target, change: Change) -> str:
        path = profile.memory_path(target)
        text = change(files.read_text(path, missing_ok=True))  # an unreadable file is the operator's (ConfigError)
        export(profile, target, text)
        return text


def export(profile: Profile, target: Target, text: str) -> None:
    """Write one memory text to its file."""
    path = profile.memory_path(target)
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise ConfigError(f"cannot write {str(path)!r}: {exc.strerror or type(exc).__name__}") from exc
