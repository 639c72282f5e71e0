"""One engine per profile, made again when the profile's model settings change, closed with the gateway."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...home import config
from ...home.profiles import ModelConfig, Profile
from .base import Engine

EngineFactory = Callable[[Profile, Callable[[str], str | None]], Engine]


@dataclass(frozen=True)
class _Made:
    model: ModelConfig  # the settings it was made with
    engine: Engine
    secrets: dict[str, str | None]  # the secrets it read (its key), as they were then


class EngineCache:
    """Engines by profile name, made again when the profile's model settings change or a secret the engine read
    (its key, in .env) does; a turn still using a replaced engine keeps it until the cache closes."""

    def __init__(self, root: Path, factory: EngineFactory) -> None:
        self.root = root
        self._factory = factory
        self._engines: dict[str, _Made] = {}
        self._retired: list[Engine] = []

    def engine(self, profile: Profile) -> Engine:
        made = self._engines.get(profile.name)
        if made is None or not self._current(made, profile.config.model):
            if made is not None:
                self._retired.append(made.engine)
            read: dict[str, str | None] = {}

            def secret(name: str) -> str | None:
                read[name] = self.secret(name)
                return read[name]

            made = self._engines[profile.name] = _Made(profile.config.model, self._factory(profile, secret), read)
        return made.engine

    def _current(self, made: _Made, model: ModelConfig) -> bool:
        if made.model is not model and made.model != model:
            return False
        return all(self.secret(name) == value for name, value in made.secrets.items())

    def secret(self, name: str) -> str | None:
        return config.secret_value(self.root, name)

    async def aclose(self) -> None:
        engines = [*(made.engine for made in self._engines.values()), *self._retired]
        self._engines.clear()
        self._retired.clear()
        for engine in engines:
            await engine.aclose()
