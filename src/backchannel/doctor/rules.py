"""Doctor's cross-check of the profiles' messaging rules: a profile whose allow list names another that accepts
none of its sessions can never reach it (`lead` may message `builds`, but `builds` accepts only `research`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

from .. import addresses
from ..home.profiles import Profile
from .report import Check, warn


def crossed(profiles: Mapping[str, Profile]) -> list[Check]:
    """A warning for each pair whose rules contradict each other: the sender allows the target, whose accept list
    takes no session of the sender."""
    found: list[Check] = []
    for sender, theirs in sorted(profiles.items()):
        for target, mine in sorted(profiles.items()):
            accept = mine.config.messaging.accept
            naming = _naming(theirs.config.messaging.allow, target)
            if sender == target or accept is None or naming is None or _naming(accept, sender) is not None:
                continue
            found.append(
                warn(
                    f"rules {sender} -> {target}",
                    f"{sender} may message {target}, but {target} accepts only {', '.join(accept) or 'nobody'}",
                    f"`backchannel profile accept {target} {sender}`, or `backchannel profile allow {sender} --remove"
                    f" '{naming}'`",
                )
            )
    return found


def _naming(patterns: Iterable[str], profile: str) -> str | None:
    """The first local pattern that reaches some session of `profile` (by its profile part), if any."""
    return next((p for p in patterns if not addresses.is_remote(p) and fnmatchcase(profile, addresses.head(p))), None)
