"""The A2A push notification settings of a home (`gateway.a2a` in config.yaml): where receivers may be, and bounds.

    gateway:
      a2a:
        push_allow_private: false      # true: receivers on loopback, private and link-local addresses too
        push_allow_hosts: []           # host names, addresses or networks allowed though they are not public
        push_timeout_seconds: 10       # one POST, connect to answer
        push_max_attempts: 8           # attempts per notification before it is given up
        push_retry_first_seconds: 1    # the wait after the first failure; doubled after each one
        push_retry_max_seconds: 300    # the longest wait between two attempts
        push_max_body_bytes: 1048576   # a notification's body; a longer reply is left for GetTask
        push_max_configs_per_task: 10
        push_max_configs_per_caller: 100   # configs one key holds on tasks whose end is not yet notified

A cloud metadata address (169.254.169.254 and its kin) is never a receiver unless `push_allow_hosts` names
it or a network holding it: `push_allow_private` alone does not open it.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError

LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
HOST_NAME_RE = re.compile(rf"(?=.{{1,253}}\Z){LABEL}(?:\.{LABEL})*")
KEYS = (
    "push_allow_private",
    "push_allow_hosts",
    "push_timeout_seconds",
    "push_max_attempts",
    "push_retry_first_seconds",
    "push_retry_max_seconds",
    "push_max_body_bytes",
    "push_max_configs_per_task",
    "push_max_configs_per_caller",
)
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class PushSettings:
    """Where push notifications may go and how hard they are tried (README "Push notifications")."""

    allow_private: bool = False
    allow_names: frozenset[str] = frozenset()  # host names allowed whatever they resolve to (lower case)
    allow_networks: tuple[Network, ...] = ()  # addresses allowed though not public (a single address: a /32, /128)
    timeout_seconds: float = 10.0
    max_attempts: int = 8
    retry_first_seconds: float = 1.0
    retry_max_seconds: float = 300.0
    max_body_bytes: int = 1_048_576
    max_configs_per_task: int = 10
    max_configs_per_caller: int = 100

    def retry_delay(self, failures: int) -> float:
        """The wait before the next attempt after `failures` failed ones: doubling from the first, capped."""
        return float(min(self.retry_first_seconds * 2 ** max(failures - 1, 0), self.retry_max_seconds))


def parse_push_settings(gateway: dict[str, Any], path: Path) -> PushSettings:
    """`gateway.a2a`'s push keys; a value of the wrong kind is an error naming the key (and the entry)."""
    section = gateway.get("a2a")
    if section is None:
        return PushSettings()
    if not isinstance(section, dict):
        raise ConfigError(f"{str(path)!r}: gateway.a2a must be a mapping")
    defaults = PushSettings()
    allow = section.get("push_allow_private", False)
    if not isinstance(allow, bool):
        raise ConfigError(f"{str(path)!r}: gateway.a2a.push_allow_private must be true or false, got {allow!r}")
    names, networks = _allow_hosts(section.get("push_allow_hosts"), path)
    first = _number(section, "push_retry_first_seconds", defaults.retry_first_seconds, path)
    most = _number(section, "push_retry_max_seconds", defaults.retry_max_seconds, path)
    if most < first:
        raise ConfigError(
            f"{str(path)!r}: gateway.a2a.push_retry_max_seconds ({most:g}) is shorter than "
            f"push_retry_first_seconds ({first:g})"
        )
    return PushSettings(
        allow_private=allow,
        allow_names=names,
        allow_networks=networks,
        timeout_seconds=_number(section, "push_timeout_seconds", defaults.timeout_seconds, path),
        max_attempts=_count(section, "push_max_attempts", defaults.max_attempts, path),
        retry_first_seconds=first,
        retry_max_seconds=most,
        max_body_bytes=_count(section, "push_max_body_bytes", defaults.max_body_bytes, path, least=1024),
        max_configs_per_task=_count(section, "push_max_configs_per_task", defaults.max_configs_per_task, path),
        max_configs_per_caller=_count(section, "push_max_configs_per_caller", defaults.max_configs_per_caller, path),
    )


def _allow_hosts(raw: object, path: Path) -> tuple[frozenset[str], tuple[Network, ...]]:
    if raw is None:
        return frozenset(), ()
    if not isinstance(raw, list):
        raise ConfigError(
            f"{str(path)!r}: gateway.a2a.push_allow_hosts must be a list of host names, addresses or networks"
        )
    names: set[str] = set()
    networks: list[Network] = []
    for index, entry in enumerate(raw):
        where = f"gateway.a2a.push_allow_hosts[{index}]"
        if not isinstance(entry, str) or not entry.strip():
            raise ConfigError(f"{str(path)!r}: {where} must be a host name, an address or a network, got {entry!r}")
        text = entry.strip().lower()
        try:
            networks.append(ipaddress.ip_network(text.strip("[]"), strict=False))
            continue
        except ValueError:
            pass
        if not HOST_NAME_RE.fullmatch(text.rstrip(".")):
            raise ConfigError(
                f"{str(path)!r}: {where}: {entry!r} is neither a host name, an address nor a network "
                "(such as hooks.example.internal, 127.0.0.1 or 10.0.0.0/8)"
            )
        names.add(text.rstrip("."))
    return frozenset(names), tuple(networks)


def _number(section: dict[str, Any], key: str, default: float, path: Path) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or value != value:
        raise ConfigError(f"{str(path)!r}: gateway.a2a.{key} must be a positive number of seconds, got {value!r}")
    return float(value)


def _count(section: dict[str, Any], key: str, default: int, path: Path, *, least: int = 1) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{str(path)!r}: gateway.a2a.{key} must be an integer of at least {least}, got {value!r}")
    return value
