"""The plugin's settings, read at each use as Hermes resolves secrets for the turn at hand.

Hermes loads `$HERMES_HOME/.env` into the environment before each turn (an edit needs no restart), except on a
gateway that serves several profiles: there a profile's .env is seen only through Hermes's secret scope. So a
setting is asked of the secret scope first, then of the environment.

    BACKCHANNEL_URL       the Backchannel gateway, default http://127.0.0.1:8377
    BACKCHANNEL_API_KEY   the key `backchannel hermes connect` made for this Hermes home (its profile's agent key)
    BACKCHANNEL_PROFILE   the Backchannel profile these Hermes sessions are (default: Hermes's profile)
    BACKCHANNEL_MENTION_WAIT  seconds a platform message waits for its mentions' replies (default 60, at most 120)
    BACKCHANNEL_SEND_OPTIONS  send_to_session's optional arguments offered to the model: `wait_seconds`, `mode`,
                          `deadline`
                          (comma-separated; default none: a small model offered them misuses them)
"""

from __future__ import annotations

import os
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8377"
MENTION_WAIT = 60.0


def setting(name: str, default: str = "") -> str:
    """A setting as the turn at hand sees it: Hermes's secret scope, else the environment, else `default`."""
    try:
        from agent.secret_scope import get_secret  # Hermes's; absent outside Hermes or in an older one
    except ImportError:
        get_secret = None
    if get_secret is not None:
        try:
            value: Any = get_secret(name, None)
        except Exception:  # outside a turn on a gateway serving several profiles: the environment says
            value = None
        if isinstance(value, str) and value:
            return value
    return os.environ.get(name) or default


def base_url() -> str:
    return setting("BACKCHANNEL_URL", DEFAULT_URL).rstrip("/")


def api_key() -> str:
    return setting("BACKCHANNEL_API_KEY")


def profile(default: str) -> str:
    return setting("BACKCHANNEL_PROFILE") or default


def mention_wait() -> float:
    try:
        wait = float(setting("BACKCHANNEL_MENTION_WAIT") or MENTION_WAIT)
    except ValueError:
        return MENTION_WAIT
    return min(wait, 120.0) if wait > 0 else MENTION_WAIT  # Backchannel waits 120 s at most


def send_options() -> frozenset[str]:
    """The optional arguments of the send tools offered to Hermes's models (read once, as the tools are made)."""
    return frozenset(part.strip() for part in setting("BACKCHANNEL_SEND_OPTIONS").split(",") if part.strip())
