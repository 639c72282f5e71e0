"""How a profile is shown (`profile show`, and what `profile allow` and its kin print): one dict, one layout."""

from __future__ import annotations

import click

from ..agent import persona
from ..home.profiles import Profile


def describe(p: Profile) -> dict[str, object]:
    m = p.config.model
    sm = p.config.messaging
    return {
        "name": p.name,
        "path": str(p.path),
        "engine": m.engine,
        "model": m.model or None,
        "base_url": m.base_url,
        "api_key_env": m.api_key_env,
        "hermes_profile": m.profile,
        "max_turns": p.config.max_turns,
        "skills": [s.name for s in persona.skills(p)],
        "memory_chars": len(persona.read_text(p.memory_path("memory"))),
        "user_chars": len(persona.read_text(p.memory_path("user"))),
        "session_messaging": {
            "allow": list(sm.allow),
            "accept": list(sm.accept) if sm.accept is not None else None,
            "hold": list(sm.hold),
            "max_hops": sm.max_hops,
            "pair_budget_per_hour": sm.pair_budget_per_hour,
            "inbound_budget_per_hour": sm.inbound_budget_per_hour,
            "hold_expiry_seconds": _number(sm.hold_expiry_seconds),
            "budget": {
                "tokens_per_exchange": sm.budget.tokens_per_exchange,
                "tokens_per_day": sm.budget.tokens_per_day,
                "usd_per_day": sm.budget.usd_per_day,
            },
        },
    }


def _number(value: float) -> float | int:
    """A whole number of seconds as one (86400, not 86400.0)."""
    return int(value) if float(value).is_integer() else value


# What a value that is not there means, where `-` would hide it.
ABSENT = {
    "session_messaging.accept": "any sender that is allowed to (no accept list)",
    **{f"session_messaging.budget.{k}": "no limit" for k in ("tokens_per_exchange", "tokens_per_day", "usd_per_day")},
}


def print_facts(data: dict[str, object]) -> None:
    """`key: value` lines, nested keys dotted (`session_messaging.allow:`), lists joined, nothing as `-`."""
    lines: list[tuple[str, str]] = []

    def add(key: str, value: object) -> None:
        if isinstance(value, dict):
            for sub, inner in value.items():
                add(f"{key}.{sub}", inner)
            return
        if isinstance(value, list | tuple):
            value = ", ".join(map(str, value)) or "-"
        lines.append((key, ABSENT.get(key, "-") if value is None else str(value)))

    for key, value in data.items():
        add(key, value)
    width = max((len(k) for k, _ in lines), default=0) + 2
    for key, value in lines:
        click.echo(f"{key + ':':<{width}}{value}")
