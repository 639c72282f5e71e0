"""The Backchannel plugin for Hermes Agent: `send_to_session` and its siblings inside a Hermes session, and the way
Backchannel's turns reach a session a person drives from a chat platform.

Installed into Hermes's environment with Backchannel itself (the entry point group `hermes_agent.plugins` names
it `backchannel`) and enabled by `backchannel hermes connect PROFILE --hermes-home DIR`, which writes its
settings (`settings`) into that Hermes home's .env and enables it in its config.yaml.

Tools. It registers the tools Backchannel's own agents get, with the same schemas (imported from
`backchannel.agent.tools.messaging`, so they cannot drift), and hands each call to the Backchannel gateway as the
calling Hermes session, saying where the call comes from (`origin`): there the sender's allowlist, hops, chain
and pair budget apply exactly as for a native agent, and a call is a step of a Backchannel turn only when it
comes from that turn. Every failure, the gateway's refusals (`not_allowed`, `would_deadlock` …) and an
unreachable gateway alike, is a tool result the model reads (`{"result": "refused" | "failed" | "unknown",
"error": {"code", "message"}}`), never an exception in the Hermes turn.

Chats. A Hermes session that a person drives from weixin, Telegram … has one writer, Hermes's own gateway:
Backchannel hands its turns for such a session to this plugin (`handoffs`), which gives them to the chat as
Hermes gives its own background results, behind the person's turn; the reply goes to the chat and back.

Mentions: the `pre_gateway_dispatch` hook sees each platform message before Hermes's agent does. A message from
an authorized user with `@session:` or `@peer:` mentions goes to the Backchannel gateway as that chat's Hermes
session (`POST …/mentions`), which answers them as Backchannel's own mentions are; the hook rewrites the text
with the replies, marked `[Replies to the mentions in this message: …]`. Hermes calls its hooks synchronously in
its event loop, so its gateway waits for those replies (`BACKCHANNEL_MENTION_WAIT` seconds at most, default 60).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from backchannel.addresses import MENTION_RE
from backchannel.agent.tools.messaging import DEFAULT_WAIT, TOOLS, offered
from backchannel.net.http import quote
from backchannel.outcome import Outcome

from . import link, origin, settings
from .handoffs import Worker

TOOLSET = "backchannel"
HOSTED = ("send_to_session", "send_to_peer", "check_message", "notify_when_idle", "cancel_message", "list_sessions")
ANSWER_MARGIN = 30.0  # seconds past a send's own wait before the gateway's silence is a timeout
REQUEST_TIMEOUT = 30.0

_workers: dict[str, Worker] = {}  # profile -> the handoffs of this process (one each, whatever loads the plugin)


def call(tool: str, args: dict[str, Any], *, session_id: str, profile: str) -> str:
    """One tool call made as Hermes session `session_id` of Backchannel profile `profile`; the result text."""
    timeout = REQUEST_TIMEOUT
    if tool in ("send_to_session", "send_to_peer"):
        wait = args.get("wait_seconds", DEFAULT_WAIT)
        timeout = (float(wait) if isinstance(wait, int | float) and wait > 0 else 0.0) + ANSWER_MARGIN
    try:
        body = _post(
            f"tools/{quote(tool)}",
            {"arguments": args, "origin": origin.of_call(session_id)},
            session_id=session_id,
            profile=profile,
            timeout=timeout,
        )
        result = body.get("result")
        if not isinstance(result, dict):
            raise link.Unanswered(
                Outcome.UNKNOWN,
                "backchannel_error",
                f"the Backchannel gateway at {settings.base_url()} answered without a tool result: ask with"
                " check_message",
            )
    except link.Unanswered as exc:
        return json.dumps(exc.body, ensure_ascii=False)
    return json.dumps(result, ensure_ascii=False)


def answer_mentions(text: str, *, session_id: str, profile: str, wait: float = settings.MENTION_WAIT) -> str | None:
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
    except link.Unanswered as exc:
        raise RuntimeError(f"Backchannel did not answer the mentions: {exc}") from None
    rewritten = body.get("message")
    return rewritten if isinstance(rewritten, str) and body.get("mentions") else None


def _post(route: str, payload: dict[str, Any], *, session_id: str, profile: str, timeout: float) -> dict[str, Any]:
    if not session_id:
        raise link.Unanswered(
            Outcome.FAILED, "unavailable", "Hermes did not say which session is calling; Backchannel needs it"
        )
    path = f"/p/{quote(profile)}/api/sessions/{quote(session_id)}/{route}"
    return link.request("POST", path, payload=payload, timeout=timeout)


def _handler(tool: str, default_profile: str) -> Callable[..., str]:
    def handle(args: dict[str, Any], **kw: Any) -> str:
        return call(
            tool,
            args if isinstance(args, dict) else {},
            session_id=str(kw.get("session_id") or ""),
            profile=settings.profile(default_profile),
        )

    handle.__name__ = f"backchannel_{tool}"
    return handle


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
        profile = settings.profile(default_profile)
        rewritten = answer_mentions(text, session_id=session_id, profile=profile, wait=settings.mention_wait())
        return {"action": "rewrite", "text": rewritten} if rewritten is not None else None

    hook.__name__ = "backchannel_mentions"
    return hook


def register(ctx: Any) -> None:
    """Hermes's plugin entry: the six messaging tools (toolset `backchannel`), the mentions hook, and the handoffs
    of Backchannel's turns to this gateway's chats (their two hooks, and the thread that asks for them)."""
    default_profile = str(getattr(ctx, "profile_name", None) or "default")
    register_hook = getattr(ctx, "register_hook", None)
    if register_hook is not None:
        register_hook("pre_gateway_dispatch", pre_gateway_dispatch_hook(default_profile))
        profile = settings.profile(default_profile)
        worker = _workers.setdefault(profile, Worker(profile))
        register_hook("pre_llm_call", worker.pre_llm_call)
        register_hook("post_llm_call", worker.post_llm_call)
        if settings.api_key():  # connected to a Backchannel gateway: its turns for this gateway's chats come here
            worker.start()
    options = settings.send_options()
    for tool in TOOLS:
        spec = offered(tool.spec, options)
        if spec.name not in HOSTED:
            continue
        ctx.register_tool(
            name=spec.name,
            toolset=TOOLSET,
            schema={"name": spec.name, "description": spec.description, "parameters": spec.parameters},
            handler=_handler(spec.name, default_profile),
            description=spec.description,
            emoji="📨",
        )
