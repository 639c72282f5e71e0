"""The A2A push notification settings of a home (`gateway.a2a` in config.yaml): where receivers may be, and bounds.

    gateway:
      a2a:
        push_allow_private: false      # true: receivers on loopback, private and link-local addresses too
        push_allow_hosts: []           # host names, addresses or networks allowed though they are not public
        push_connect_timeout_seconds: 3   # reaching a receiver: its connection made
        push_timeout_seconds: 5        # one POST, connect to answer
        push_max_attempts: 8           # attempts per notification before it is given up
        push_retry_first_seconds: 1    # the wait after the first failure; doubled after each one
        push_retry_max_seconds: 300    # the longest wait between two attempts
        push_max_body_bytes: 1048576   # a notification's body; a longer reply is left for GetTask
        push_max_configs_per_task: 10
        push_max_configs_per_caller: 100   # configs one key holds on tasks whose end is not yet notified
        push_slots: 16                 # POSTs to peer keys' receivers at once, shared fairly between the keys
        push_slots_per_key: 4          # the most of those one peer key's receivers hold
        push_person_slots: 4           # POSTs to the person's receivers at once: theirs alone

A cloud metadata address (169.254.169.254 and its kin) is never a receiver unless `push_allow_hosts` names
it or a network holding it: `push_allow_private` alone does not open it.
"""

from __future__ import annotations

import ipaddress
import re
from functools import cached_property
from typing import Annotated

from pydantic import BeforeValidator, Field, model_validator

from .values import Flag, Frozen, KeyProblem, Kind, PositiveCount, Seconds, at_least

LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
HOST_NAME_RE = re.compile(rf"(?=.{{1,253}}\Z){LABEL}(?:\.{LABEL})*")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _host(entry: object) -> str:
    """One entry of `push_allow_hosts`, in lower case: a host name, an address or a network."""
    if not isinstance(entry, str) or not entry.strip():
        raise ValueError(f"must be a host name, an address or a network, got {entry!r}")
    text = entry.strip().lower()
    try:
        ipaddress.ip_network(text.strip("[]"), strict=False)
        return text
    except ValueError:
        pass
    if not HOST_NAME_RE.fullmatch(text.rstrip(".")):
        raise ValueError(
            f"{entry!r} is neither a host name, an address nor a network "
            "(such as hooks.example.internal, 127.0.0.1 or 10.0.0.0/8)"
        )
    return text.rstrip(".")


def _host_list(raw: object) -> object:
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise ValueError("must be a list of host names, addresses or networks")
    return raw


Host = Annotated[str, BeforeValidator(_host)]
BodyBytes = Annotated[int, at_least(1024), Kind("integer of at least 1024")]


class PushSettings(Frozen):
    """Where push notifications may go and how hard they are tried (docs/a2a.md, "Push notifications"):
    the `gateway.a2a:` section of the home's config.yaml."""

    allow_private: Flag = Field(
        False,
        alias="push_allow_private",
        description="true: receivers on loopback, private and link-local addresses too",
    )
    allow_hosts: Annotated[tuple[Host, ...], BeforeValidator(_host_list), Kind("list of hosts")] = Field(
        (), alias="push_allow_hosts", description="host names, addresses or networks allowed though they are not public"
    )
    connect_timeout_seconds: Seconds = Field(
        3.0,
        alias="push_connect_timeout_seconds",
        description="reaching a receiver: its connection made (within push_timeout_seconds)",
    )
    timeout_seconds: Seconds = Field(5.0, alias="push_timeout_seconds", description="one POST, connect to answer")
    max_attempts: PositiveCount = Field(
        8, alias="push_max_attempts", description="attempts per notification before it is given up"
    )
    retry_first_seconds: Seconds = Field(
        1.0, alias="push_retry_first_seconds", description="the wait after the first failure; doubled after each one"
    )
    retry_max_seconds: Seconds = Field(
        300.0, alias="push_retry_max_seconds", description="the longest wait between two attempts"
    )
    max_body_bytes: BodyBytes = Field(
        1_048_576, alias="push_max_body_bytes", description="a notification's body; a longer reply is left for GetTask"
    )
    max_configs_per_task: PositiveCount = Field(
        10, alias="push_max_configs_per_task", description="push configs one task may hold"
    )
    max_configs_per_caller: PositiveCount = Field(
        100,
        alias="push_max_configs_per_caller",
        description="configs one key holds on tasks whose end is not yet notified",
    )
    slots: PositiveCount = Field(
        16,
        alias="push_slots",
        description="POSTs to peer keys' receivers in flight at once, shared fairly between the keys owed some",
    )
    slots_per_key: PositiveCount = Field(
        4, alias="push_slots_per_key", description="the most POSTs one peer key's receivers hold at once"
    )
    person_slots: PositiveCount = Field(
        4,
        alias="push_person_slots",
        description="POSTs to the person's receivers in flight at once: slots of their own, never a peer's",
    )

    @model_validator(mode="after")
    def _retries_grow(self) -> PushSettings:
        if self.retry_max_seconds < self.retry_first_seconds:
            raise KeyProblem(
                "push_retry_max_seconds",
                f"({self.retry_max_seconds:g}) is shorter than push_retry_first_seconds ({self.retry_first_seconds:g})",
            )
        return self

    @cached_property
    def allow_names(self) -> frozenset[str]:
        """Host names allowed whatever they resolve to (lower case)."""
        return frozenset(h for h in self.allow_hosts if not _network(h))

    @cached_property
    def allow_networks(self) -> tuple[Network, ...]:
        """Addresses allowed though not public (a single address: a /32, /128)."""
        return tuple(n for h in self.allow_hosts if (n := _network(h)) is not None)

    def retry_delay(self, failures: int) -> float:
        """The wait before the next attempt after `failures` failed ones: doubling from the first, capped."""
        return float(min(self.retry_first_seconds * 2 ** max(failures - 1, 0), self.retry_max_seconds))


def _network(host: str) -> Network | None:
    try:
        return ipaddress.ip_network(host.strip("[]"), strict=False)
    except ValueError:
        return None
