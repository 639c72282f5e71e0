"""The Backchannel plugin for Hermes Agent: `send_to_session` and its siblings inside a Hermes session.

Installed into Hermes's environment with Backchannel itself (`pip install backchannel` there; the entry
point group `hermes_agent.plugins` names it `backchannel`) and enabled with `hermes plugins enable
backchannel`. It registers the tools Backchannel's own agents get, with the same schemas (imported from
`backchannel.agent.tools.messaging`, so they cannot drift), and hands each call to the Backchannel gateway
as the calling Hermes session: there the sender's allowlist, hops, chain and pair budget apply exactly as
for a native agent (the turn in progress on that session is the one the call comes from).

Settings, read from the environment at each call (Hermes loads `$HERMES_HOME/.env` into it):

    BACKCHANNEL_URL       the Backchannel gateway, default http://127.0.0.1:8377
    BACKCHANNEL_API_KEY   its API_SERVER_KEY
    BACKCHANNEL_PROFILE   the Backchannel profile these Hermes sessions belong to (default: Hermes's profile)

Every failure, the gateway's refusals (`not_allowed`, `would_deadlock` …) and an unreachable gateway
alike, is a tool result the model reads (`{"error": {"code", "message"}}`), never an exception in the
Hermes turn. The HTTP client is the standard library's: the handler runs in Hermes's agent thread, and a
blocking call there needs no event loop of ours.

Not done: `@session:` mentions in platform messages (Hermes's `pre_gateway_dispatch` hook) are not
rewritten yet; Hermes's API server does not fire that hook anyway.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from backchannel.agent.tools.messaging import DEFAULT_WAIT, TOOLS

TOOLSET = "backchannel"
HOSTED = ("send_to_session", "send_to_peer", "check_message", "cancel_message", "list_sessions")
DEFAULT_URL = "http://127.0.0.1:8377"
ANSWER_MARGIN = 30.0  # seconds past a send's own wait before the gateway's silence is a timeout
REQUEST_TIMEOUT = 30.0


def _error(code: str, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # never send the key on to somewhere else


_OPENER = urllib.request.build_opener(_NoRedirect, urllib.request.ProxyHandler({}))


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def call(tool: str, args: dict[str, Any], *, session_id: str, profile: str) -> str:
    """One tool call made as Hermes session `session_id` of Backchannel profile `profile`; the result text."""
    base = (os.environ.get("BACKCHANNEL_URL") or DEFAULT_URL).rstrip("/")
    key = os.environ.get("BACKCHANNEL_API_KEY") or ""
    if not key:
        return _error(
            "unavailable", "Backchannel is not set up here: BACKCHANNEL_API_KEY is missing from Hermes's .env"
        )
    if not session_id:
        return _error("unavailable", "Hermes did not say which session is calling; Backchannel needs it")
    url = f"{base}/p/{_quote(profile)}/api/sessions/{_quote(session_id)}/tools/{_quote(tool)}"
    timeout = REQUEST_TIMEOUT
    if tool in ("send_to_session", "send_to_peer"):
        wait = args.get("wait_seconds", DEFAULT_WAIT)
        timeout = (float(wait) if isinstance(wait, int | float) and wait > 0 else 0.0) + ANSWER_MARGIN
    request = urllib.request.Request(
        url,
        data=json.dumps({"arguments": args}).encode(),
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "User-Agent": "backchannel-hermes",
        },
        method="POST",
    )
    try:
        with _OPENER.open(request, timeout=timeout) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return _refused(exc, base)
    except TimeoutError:
        return _error(
            "outcome_unknown",
            f"the Backchannel gateway at {base} did not answer within {timeout:g}s: the message may have been "
            "accepted; do not resend it, ask with check_message or list_sessions later",
        )
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return _error(
            "backchannel_unreachable",
            f"the Backchannel gateway at {base} could not be reached ({reason}); nothing was sent",
        )
    except ValueError:
        return _error("backchannel_error", f"the Backchannel gateway at {base} answered with something not JSON")
    result = body.get("result") if isinstance(body, dict) else None
    if not isinstance(result, dict):
        return _error("backchannel_error", f"the Backchannel gateway at {base} answered without a tool result")
    return json.dumps(result, ensure_ascii=False)


def _refused(exc: urllib.error.HTTPError, base: str) -> str:
    try:
        err = json.loads(exc.read()).get("error")
    except (ValueError, AttributeError, OSError):
        err = None
    if isinstance(err, dict) and err.get("code"):
        return _error(str(err["code"]), str(err.get("message") or f"HTTP {exc.code}"))
    return _error("backchannel_error", f"the Backchannel gateway at {base} answered HTTP {exc.code}")


def _handler(tool: str, default_profile: str) -> Callable[..., str]:
    def handle(args: dict[str, Any], **kw: Any) -> str:
        profile = os.environ.get("BACKCHANNEL_PROFILE") or default_profile
        return call(
            tool, args if isinstance(args, dict) else {}, session_id=str(kw.get("session_id") or ""), profile=profile
        )

    handle.__name__ = f"backchannel_{tool}"
    return handle


def register(ctx: Any) -> None:
    """Hermes's plugin entry: the five messaging tools, in the `backchannel` toolset."""
    profile = str(getattr(ctx, "profile_name", None) or "default")
    for tool in TOOLS:
        spec = tool.spec
        if spec.name not in HOSTED:
            continue
        ctx.register_tool(
            name=spec.name,
            toolset=TOOLSET,
            schema={"name": spec.name, "description": spec.description, "parameters": spec.parameters},
            handler=_handler(spec.name, profile),
            description=spec.description,
            emoji="📨",
        )
