"""The memories of gateways that share a store: kept in the store, so a session answered by any of them remembers
the same (`agent.memories.Memories`; a home of its own keeps them in the profile's files).

Until the store has a text, the profile's file is it (a home moved onto a shared store keeps what it remembered);
the first change writes it into the store. The file is written after each change, as an export."""

from __future__ import annotations

from ..agent.memories import Change, Notes, Target, export
from ..home import files
from ..home.profiles import Profile
from ..store import memories as memorystore
from ..store.driver import Db


class StoreMemories:
    """MEMORY.md and USER.md of every profile, kept in a shared store."""

    def __init__(self, db: Db) -> None:
        self.db = db

    async def notes(self, profile: Profile) -> Notes | None:
        kept = await memorystore.texts(self.db, profile.name)
        return Notes(memory=kept.get("memory", _file(profile, "memory")), user=kept.get("user", _file(profile, "user")))

    async def change(self, profile: Profile, target: Target, change: Change) -> str:
        text = await memorystore.change(
            self.db, profile.name, target, lambda stored: change(_file(profile, target) if stored is None else stored)
        )
        await self.db.durable()
        export(profile, target, text)
        return text


def _file(profile: Profile, target: Target) -> str:
    return files.read_text(profile.memory_path(target), missing_ok=True)
