"""Shell completion: what Tab offers for profiles, peers, sessions, addresses and runs.

A completer runs on every Tab press, so it only reads: the profile folders, the peers of config.yaml and
state.db opened read-only (core.lookups, loaded on the first Tab that reads the store, not by each command's
start); it never initialises a home, starts a gateway or writes a file.
A home it cannot read completes nothing: an error here would print a traceback into the person's shell.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import click
from click.shell_completion import CompletionItem

from ..addresses import is_remote, remote
from ..home import config, profiles

Completer = Callable[[click.Context, click.Parameter, str], list[CompletionItem]]


def _completer(candidates: Callable[[str], Iterable[str]]) -> Completer:
    """A click `shell_complete` callback offering the candidates that start with what was typed."""

    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        try:
            return [CompletionItem(c) for c in candidates(incomplete) if c.startswith(incomplete)]
        except Exception:  # a broken home completes nothing; the command itself will say what is wrong
            return []

    return complete


def _profile_names(incomplete: str = "") -> list[str]:
    return profiles.list_profiles(config.home())


def _peer_names(incomplete: str = "") -> list[str]:
    return sorted(config.load_gateway_config(config.home()).peers)


def _session_ids(incomplete: str) -> list[str]:
    from ..core import lookups

    return lookups.session_ids(config.home(), prefix=incomplete)


def _room_names(incomplete: str) -> list[str]:
    from ..core import lookups

    return lookups.room_names(config.home(), prefix=incomplete)


def _run_ids(incomplete: str) -> list[str]:
    from ..core import lookups

    return lookups.run_ids(config.home(), prefix=incomplete)


def _addresses(incomplete: str) -> list[str]:
    """A local address as `send` takes it: a profile, `profile/` then that profile's sessions, or `peer:NAME`."""
    if is_remote(incomplete):
        return [remote(name) for name in _peer_names()]
    if "/" in incomplete:
        name, _, rest = incomplete.partition("/")
        return _session_ids_of(name, rest)
    names = _profile_names()
    found = [*names, *(f"{n}/" for n in names), *(remote(name) for name in _peer_names())]
    if incomplete[:1].isdigit():  # a bare session id
        found += _session_ids(incomplete)
    return found


def _sessions(incomplete: str) -> list[str]:
    """A session in any local form: a session id, a profile (its Bot Chat), or `profile/` then its sessions."""
    if "/" in incomplete:
        name, _, rest = incomplete.partition("/")
        return _session_ids_of(name, rest)
    return [*_profile_names(), *_session_ids(incomplete)]


def _session_ids_of(profile: str, prefix: str) -> list[str]:
    from ..core import lookups

    return [f"{profile}/{sid}" for sid in lookups.session_ids(config.home(), prefix=prefix, profile=profile)]


profile_names = _completer(_profile_names)
sessions = _completer(_sessions)
peer_names = _completer(_peer_names)
session_ids = _completer(_session_ids)
run_ids = _completer(_run_ids)
rooms = _completer(_room_names)
addresses = _completer(_addresses)
