"""The config files' plain values (no model): defaults and the choices some keys take. `home_file` and
`profile_file` declare the files with them; `config` and `profiles` give them out without loading the models."""

from __future__ import annotations

from typing import Literal

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8377
Durability = Literal["normal", "full"]  # gateway.durability: PRAGMA synchronous NORMAL or FULL
DURABILITIES: tuple[Durability, ...] = ("normal", "full")
PEER_TIMEOUT_SECONDS = 30.0  # a peer that accepts and says nothing is given up on after this (outcome unknown)
Dialect = Literal["hermes", "a2a"]
PEER_DIALECTS: tuple[Dialect, ...] = ("hermes", "a2a")

EngineName = Literal["echo", "openai", "hermes"]  # a profile's model.engine
ENGINES: tuple[EngineName, ...] = ("echo", "openai", "hermes")
