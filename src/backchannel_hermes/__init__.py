"""The Backchannel plugin for Hermes Agent: `send_to_session` and its siblings inside a Hermes session.

Installed into Hermes's environment with Backchannel itself (`pip install` of Backchannel's folder or wheel
there; the entry point group `hermes_agent.plugins` names it `backchannel`) and enabled in a Hermes home by
`backchannel hermes connect`, which writes its settings there too. It registers the tools Backchannel's own
agents get, with the same schemas (imported from `backchannel.agent.tools.messaging`, so they cannot drift), and
hands each call to the Backchannel gateway as the calling Hermes session: there the sender's allowlist, hops, chain
and pair budget apply exactly as for a native agent (the turn in progress on that session is the one the call
comes from).

Settings, read from the environment at each call (Hermes loads `$HERMES_HOME/.env` into it):

    BACKCHANNEL_URL       the Backchannel gateway, default http://127.0.0.1:8377
    BACKCHANNEL_API_KEY   the key `backchannel hermes connect` made for this Hermes home (it acts only as the
                          profile's sessions; the person's API_SERVER_KEY works too, and should not be here)
    BACKCHANNEL_PROFILE   the Backchannel profile these Hermes sessions belong to (default: Hermes's profile)

Every failure, the gateway's refusals (`not_allowed`, `would_deadlock` …) and an unreachable gateway
alike, is a tool result the model reads (`{"result": "refused" | "failed" | "unknown", "error": {"code",
"message"}}`, the outcome computed by `backchannel.outcome` as for every surface), never an exception in
the Hermes turn. The HTTP client is httpx's blocking one (Hermes 0.19 depends on httpx itself, as does
Backchannel), under the one transport's error map (`backchannel.net.http`): the handler runs in Hermes's
agent thread, and a blocking call there needs no event loop of ours.

Mentions: the `pre_gateway_dispatch` hook sees each platform message (Telegram, weixin …) before Hermes's
agent does. A message from an authorized user with `@session:` or `@peer:` mentions goes to the Backchannel
gateway as that chat's Hermes session (`POST …/mentions`), which answers them as Backchannel's own mentions
are; the hook rewrites the text with the replies, marked `[Replies to the mentions in this message: …]`.
Hermes calls its hooks synchronously in its event loop, so its gateway waits for those replies
(`BACKCHANNEL_MENTION_WAIT` seconds at most, default 60). Hermes's API server does not fire this hook;
mentions sent through it (or through Backchannel) are Backchannel's to answer.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from typing import Any

import httpx

from backchannel.addresses import MENTION_RE
from backchannel.agent.tools.messaging import DEFAULT_WAIT, TOOLS
from backchannel.errors import GatewayError
from backchannel.net.http import CONNECT_TIMEOUT, Naming, error_of, json_object, map_httpx_errors, quote, system_tls
from backchannel.outcome import Outcome, error_body, of_http_error

TOOLSET = "backchannel"
HOSTED = ("send_to_session", "send_to_peer", "check_message", "notify_when_idle", "cancel_message", "list_sessions")
DEFAULT_URL = "http://127.0.0.1:8377"
ANSWER_MARGIN = 30.0  # seconds past a send's own wait before the gateway's silence is a timeout
REQUEST_TIMEOUT = 30.0
MENTION_WAIT = 60.0


class _Unanswered(Exception):
    """No answer of the gateway's to hand on: `body` is the tool result that says why, with its outcome."""

    def __init__(self, outcome: Outcome, code: str, message: str) -> None:
        super().__init__(message)
        self.body = error_body(outcome, code, message)


_NOT_SENT = "backchannel_unreachable"
_MAYBE_SENT = "outcome_unknown"


def call(tool: str, args: dict[str, Any], *, session_id: str, profile: str) -> str:
    """One tool call made as Hermes session `session_id` of Backchannel profile `profile`; the result text."""
    timeout = REQUEST_TIMEOUT
    if tool in ("send_to_session", "send_to_peer"):
        wait = args.get("wait_seconds", DEFAULT_WAIT)
        timeout = (float(wait) if isinstance(wait, int | float) and wait > 0 else 0.0) + ANSWER_MARGIN
    try:
        body = _post(
            f"tools/{quote(tool)}", {"arguments": args}, session_id=session_id, profile=profile, timeout=timeout
        )
        result = body.get("result")
        if not isinstance(result, dict):
            raise _Unanswered(
                Outcome.UNKNOWN,
                "backchannel_error",
                f"the Backchannel gateway at {_base()} answered without a tool result: ask with check_message",
            )
    except _Unanswered as exc:
        return json.dumps(exc.body, ensure_ascii=False)
    return json.dumps(result, ensure_ascii=False)


def answer_mentions(text: str, *, session_id: str, profile: str, wait: float = MENTION_WAIT) -> str | None:
    """`text` with its mentions answered through Backchannel as session `session_id`; None when it has none or
    Backchannel could not answer (the text then goes to Hermes's agent as it is, the reason logged by Hermes)."""
    if not MENTION_RE.search(text):
        return None
    try:
        body = _post(
            "mentions",
            {"message": text, "wait_seconds": wait},
            session_id=session_id,
            profile=profile,
            timeout=wait + ANSWER_MARGIN,
        )
    except _Unanswered as exc:
        raise RuntimeError(f"Backchannel did not answer the mentions: {exc}") from None
    rewritten = body.get("message")
    return rewritten if isinstance(rewritten, str) and body.get("mentions") else None


def _base() -> str:
    return (os.environ.get("BACKCHANNEL_URL") or DEFAULT_URL).rstrip("/")


def _post(route: str, payload: dict[str, Any], *, session_id: str, profile: str, timeout: float) -> dict[str, Any]:
    """POST to the session's route on the Backchannel gateway: its JSON object; `_Unanswered` saying why not."""
    base = _base()
    key = os.environ.get("BACKCHANNEL_API_KEY") or ""
    if not key:
        raise _Unanswered(
            Outcome.FAILED,
            "unavailable",
            "Backchannel is not set up here: BACKCHANNEL_API_KEY is missing from Hermes's .env",
        )
    if not session_id:
        raise _Unanswered(
            Outcome.FAILED, "unavailable", "Hermes did not say which session is calling; Backchannel needs it"
        )
    path = f"/p/{quote(profile)}/api/sessions/{quote(session_id)}/{route}"
    naming = Naming(
        who=f"the Backchannel gateway at {base}",
        not_sent=functools.partial(GatewayError, code=_NOT_SENT),
        maybe_sent=functools.partial(GatewayError, code=_MAYBE_SENT),
    )
    try:
        with (
            map_httpx_errors(naming, "POST", path, timeout=timeout, secret=key),
            httpx.Client(
                headers={"Authorization": f"Bearer {key}", "User-Agent": "backchannel-hermes"},
                timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)),
                follow_redirects=False,  # never send the key on to somewhere else
                verify=system_tls(),
                trust_env=False,  # no proxy from Hermes's environment between it and this gateway
            ) as client,
        ):
            resp = client.post(base + path, json=payload)
    except GatewayError as exc:
        if exc.code == _NOT_SENT:
            raise _Unanswered(Outcome.FAILED, _NOT_SENT, f"{exc.message}; nothing was sent") from None
        raise _Unanswered(
            Outcome.UNKNOWN,
            _MAYBE_SENT,
            f"{exc.message}: the message may have been accepted; do not resend it, ask with check_message or "
            "list_sessions later",
        ) from None
    if resp.status_code >= 300:
        raise _refused(resp.status_code, resp.content, base)
    body = json_object(resp.content)
    if body is None:
        raise _Unanswered(
            Outcome.UNKNOWN,
            "backchannel_error",
            f"the Backchannel gateway at {base} answered with something not a JSON object",
        )
    return body


def _refused(status: int, raw: bytes, base: str) -> _Unanswered:
    """The gateway's error answer (its envelope's code and message), with the outcome its status means."""
    outcome = of_http_error(status)
    err = error_of(status, json_object(raw))
    if err.code:
        return _Unanswered(outcome, err.code, err.message)
    return _Unanswered(outcome, "backchannel_error", f"the Backchannel gateway at {base} answered HTTP {status}")


def _handler(tool: str, default_profile: str) -> Callable[..., str]:
    def handle(args: dict[str, Any], **kw: Any) -> str:
        profile = os.environ.get("BACKCHANNEL_PROFILE") or default_profile
        return call(
            tool, args if isinstance(args, dict) else {}, session_id=str(kw.get("session_id") or ""), profile=profile
        )

    handle.__name__ = f"backchannel_{tool}"
    return handle


def _mention_wait() -> float:
    try:
        wait = float(os.environ.get("BACKCHANNEL_MENTION_WAIT") or MENTION_WAIT)
    except ValueError:
        return MENTION_WAIT
    return min(wait, 120.0) if wait > 0 else MENTION_WAIT  # Backchannel waits 120 s at most


def _chat_session(event: Any, gateway: Any, session_store: Any) -> str | None:
    """The Hermes session of the chat a platform message came from (made as Hermes would make it next)."""
    source = getattr(event, "source", None)
    if source is None or session_store is None:
        return None
    entry = session_store.get_or_create_session(source)
    session_id = getattr(entry, "session_id", None)
    return session_id if isinstance(session_id, str) and session_id else None


def pre_gateway_dispatch_hook(default_profile: str) -> Callable[..., dict[str, Any] | None]:
    """The `pre_gateway_dispatch` hook: a platform message's mentions answered, the text rewritten."""

    def hook(*, event: Any = None, gateway: Any = None, session_store: Any = None, **_: Any) -> dict[str, Any] | None:
        text = getattr(event, "text", None)
        if not isinstance(text, str) or not MENTION_RE.search(text) or getattr(event, "internal", False):
            return None
        source = getattr(event, "source", None)
        authorized = getattr(gateway, "_is_user_authorized", None)
        if source is None or authorized is None or not authorized(source):
            return None  # the hook runs before Hermes's own auth: a stranger's mentions are not ours to send
        session_id = _chat_session(event, gateway, session_store)
        if session_id is None:
            return None
        profile = os.environ.get("BACKCHANNEL_PROFILE") or default_profile
        rewritten = answer_mentions(text, session_id=session_id, profile=profile, wait=_mention_wait())
        return {"action": "rewrite", "text": rewritten} if rewritten is not None else None

    hook.__name__ = "backchannel_mentions"
    return hook


def register(ctx: Any) -> None:
    """Hermes's plugin entry: the six messaging tools, in the `backchannel` toolset, and the mentions hook."""
    profile = str(getattr(ctx, "profile_name", None) or "default")
    register_hook = getattr(ctx, "register_hook", None)
    if register_hook is not None:
        register_hook("pre_gateway_dispatch", pre_gateway_dispatch_hook(profile))
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
