"""One engine per profile, made again when the profile's model settings change, closed with the gateway."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ...home import config
from ...home.profiles import ModelConfig, Profile
from .base import Engine

EngineFactory = Callable[[Profile, Callable[[str], str | None]], Engine]


class EngineCache:
    """Engines by profile name; a turn still using a replaced engine keeps it until the cache closes."""

    def __init__(self, root: Path, factory: EngineFactory) -> None:
        self.root = root
        self._factory = factory
        self._engines: dict[str, tuple[ModelConfig, Engine]] = {}
        self._retired: list[Engine] = []

    def engine(self, profile: Profile) -> Engine:
        cached = self._engines.get(profile.name)
        if cached is None or (cached[0] is not profile.config.model and cached[0] != profile.config.model):
            if cached is not None:
                self._retired.append(cached[1])
            cached = self._engines[profile.name] = (profile.config.model, self._factory(profile, self.secret))
        return cached[1]

    def secret(self, name: str) -> str | None:
        return config.secret_value(self.root, name)

    async def aclose(self) -> None:
        engines = [*(e for _, e in self._engines.values()), *self._retired]
        self._engines.clear()
        self._retired.clear()
        for engine in engines:
            await engine.aclose()
