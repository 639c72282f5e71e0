"""Paused profiles: a profile whose config.yaml cannot be loaded keeps its queued runs waiting, not failed.

Their senders were told "accepted and queued: do not resend", so a file caught mid-edit must not end
them. The workers ask `check` before each turn; the resume job asks `recheck` until the file is valid
again, then the profile's sessions are handed out anew. A paused run still expires at its TTL.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ...home.profiles import config_error

log = logging.getLogger("backchannel.gateway")


class Pauses:
    """The profiles of one home whose config cannot be loaded now, each with its error (logged once)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._paused: dict[str, str] = {}

    def check(self, profile: str) -> str | None:
        """The profile's config error (it is paused from now on), or None when it can run turns."""
        error = config_error(self.root, profile)
        if error is None:
            if self._paused.pop(profile, None) is not None:
                log.info("profile %s: its config is valid again; its queued runs resume", profile)
            return None
        if self._paused.get(profile) != error:
            log.warning("profile %s paused: %s; its queued runs wait until the file is valid again", profile, error)
        self._paused[profile] = error
        return error

    def recheck(self) -> list[str]:
        """Check every paused profile again; the ones that resumed."""
        return [name for name in list(self._paused) if self.check(name) is None]

    @property
    def paused(self) -> dict[str, str]:
        """Profile name -> why it is paused."""
        return dict(self._paused)
