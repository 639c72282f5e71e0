"""A profile's messaging rules changed from the CLI: its config.yaml edited in place, comments and all.

The file is edited in place (`yamledit`: comments, key order and quoting survive) under
`agent.session_messaging`, checked by the same loader the gateway uses (`parse_profile_config`) and replaced
atomically: a refused change leaves the file as it was. The gateway re-reads a profile's config
when it changes on disk, so a running gateway follows the edit at its next use, as after a hand edit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import UsageError
from . import config, yamledit
from .profiles import Profile, load_profile, parse_profile_config, profile_dir

RuleList = Literal["allow", "accept", "hold"]
RULE_LISTS: tuple[RuleList, ...] = ("allow", "accept", "hold")
Budget = Literal[
    "max_hops",
    "pair_budget_per_hour",
    "inbound_budget_per_hour",
    "hold_expiry_seconds",
    "budget.tokens_per_exchange",  # under `session_messaging.budget:` (what its agents may spend)
    "budget.tokens_per_day",
    "budget.usd_per_day",
]


@dataclass(frozen=True)
class Changed:
    """What an edit did: the profile as it loads now, and the patterns that were added or removed."""

    profile: Profile
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


def check_patterns(patterns: Iterable[str]) -> tuple[str, ...]:
    """The patterns as given, each checked as the loader checks it (a usage error names the first bad one)."""
    from .profile_file import pattern_error

    checked = tuple(dict.fromkeys(p.strip() for p in patterns))
    for pattern in checked:
        if (why := pattern_error(pattern)) is not None:
            raise UsageError(why)
    return checked


def edit_list(
    root: Path, name: str, key: RuleList, *, add: Iterable[str] = (), remove: Iterable[str] = (), clear: bool = False
) -> Changed:
    """Add patterns to (or remove them from) `agent.session_messaging.<key>`; `clear` empties it (for `accept`:
    removes it, so any sender that is allowed to may message the profile again)."""
    adding, removing = check_patterns(add), check_patterns(remove)
    load_profile(root, name)  # an unknown profile, or a config that cannot be read now, is refused first

    def change(rules: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        current = rules.get(key)
        had = [str(p) for p in current] if isinstance(current, list) else ([] if current is None else [str(current)])
        missing = [p for p in removing if p not in had]
        if missing:
            listed = ", ".join(had) or "nothing"
            raise UsageError(f"{key} of profile {name!r} has no {missing[0]!r} to remove (it has: {listed})")
        if clear:
            if key == "accept":
                rules.pop(key, None)
            else:
                rules[key] = []
            return (), tuple(had)
        new = [p for p in adding if p not in had]
        kept = [p for p in had if p not in removing]
        if isinstance(current, list):  # edited in place: the list's own comments and style stay
            for pattern in removing:
                while pattern in current:
                    current.remove(pattern)
            current.extend(new)
        else:
            rules[key] = [*kept, *new]
        return tuple(new), tuple(p for p in had if p in removing)

    added, removed = _edit(root, name, change)
    return Changed(load_profile(root, name), added, removed)


def set_budgets(root: Path, name: str, values: dict[Budget, float | None]) -> Changed:
    """Set numbers of `agent.session_messaging` (hops, budgets, the hold expiry, what its agents may spend: `None`
    takes a spending budget out, no limit), checked by the loader. A whole number is written as one (3600, not
    3600.0)."""
    load_profile(root, name)

    def change(rules: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        for key, value in values.items():
            into, leaf = rules, str(key)
            if key.startswith("budget."):
                if not isinstance(rules.get("budget"), dict):
                    rules["budget"] = {}
                into, leaf = rules["budget"], key.removeprefix("budget.")
            if value is None:
                into.pop(leaf, None)
            else:
                into[leaf] = int(value) if float(value).is_integer() else value
        if rules.get("budget") == {}:
            rules.pop("budget")
        return (), ()

    _edit(root, name, change)
    return Changed(load_profile(root, name))


def _edit(root: Path, name: str, change: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    path = profile_dir(root, config.check_name(name)) / "config.yaml"

    def in_rules(data: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        agent = data.setdefault("agent", {})
        if agent.get("session_messaging") is None:
            agent["session_messaging"] = {}
        result: tuple[tuple[str, ...], tuple[str, ...]] = change(agent["session_messaging"])
        return result

    return yamledit.edit(path, in_rules, check=lambda data: parse_profile_config(data, path))
