"""Where a tool call comes from, said with each call so Backchannel binds it to the right turn (or to none).

Hermes gives a tool handler the session id; the turn's own variables (`gateway.session_context`) say which
surface drives it (`api_server`, `weixin` …) and its session key. A turn Backchannel asks of Hermes's API server
carries the session key `backchannel:<profile>/<session>` (the tag), or, asked as a Hermes run, the key Hermes
gives that run's tools (the run's id, which Backchannel knows); a turn Backchannel handed to the chat
pipeline (`handoffs`) is named by its run while it runs. Anything else (the person's own chat turn, another
client of Hermes) is a new exchange of that session's own.
"""

from __future__ import annotations

import threading
from typing import Any

TAG_PREFIX = "backchannel:"  # the engine's `turn_tag`: `backchannel:<profile>/<session id>`
RUN_PREFIX = "run_"  # a Hermes run's id: Hermes (0.21 on) gives a run's tools that id as their session key

_lock = threading.Lock()
_handed: dict[str, str] = {}  # Hermes session id -> the run whose handed-over turn runs in it now


def turn_env(name: str) -> str:
    """One of the variables Hermes binds for the turn at hand (empty outside one, or in a Hermes without them)."""
    try:
        from gateway.session_context import get_session_env
    except ImportError:
        return ""
    try:
        value = get_session_env(name, "")
    except Exception:
        return ""
    return value if isinstance(value, str) else ""


def running(session_id: str, run_id: str | None) -> None:
    """The turn running in `session_id` is the one handed over for `run_id` (None: that turn is over)."""
    with _lock:
        if run_id is None:
            _handed.pop(session_id, None)
        else:
            _handed[session_id] = run_id


def of_call(session_id: str) -> dict[str, Any]:
    """What a call from `session_id` says of where it comes from: `run_id` of a handed-over turn, the `tag` of a
    turn Backchannel asked of the API server (or its Hermes run's id), and the `surface` driving the turn."""
    with _lock:
        run_id = _handed.get(session_id)
    key = turn_env("HERMES_SESSION_KEY")
    return {
        "run_id": run_id,
        "tag": key if key.startswith((TAG_PREFIX, RUN_PREFIX)) else None,
        "surface": turn_env("HERMES_SESSION_PLATFORM") or None,
    }
