"""What the gateway says it is: /health, /v1/capabilities and /v1/models, shaped as a Hermes gateway's.

Hermes's clients check each field a Hermes gateway gives (`platform: hermes-agent`, `model`, the chat-completion
flags) and refuse a gateway that says otherwise, so these say what Hermes says, for what we serve. What Backchannel
itself is (its version, gateway id, its own features) is under the key `backchannel`, where Backchannel's clients
look to know their own peers (`net.wire.backchannel_facts`).
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import __version__
from ..messages import MAX_MESSAGE_CHARS
from .context import caller, context
from .http import profile_of

PLATFORM = "hermes-agent"  # what every Hermes client checks a gateway says it is
OWNED_BY = "backchannel"

# The Hermes feature flags (HERMES-DIALECT.md 2.2), each as it holds here.
HERMES_FEATURES: dict[str, Any] = {
    "chat_completions": True,
    "chat_completions_streaming": True,
    "responses_api": True,
    "responses_streaming": True,
    "run_submission": True,
    "run_status": True,
    "run_events_sse": True,
    "run_stop": True,
    "run_steer": True,
    "run_approval_response": False,
    "tool_progress_events": True,
    "approval_events": False,
    "session_resources": True,
    "session_chat": True,
    "session_chat_streaming": True,
    "session_fork": False,
    "session_model_lock": False,
    "model_options": False,
    "reasoning_streaming": False,
    "skills_api": False,
    "admin_config_rw": False,
    "jobs_admin": False,
    "memory_write_api": False,
    "audio_api": False,
    "realtime_voice": False,
    "session_continuity_header": "X-Hermes-Session-Id",
    "cors": False,
}
# Backchannel's own: what its peers rely on (a chat asked again with its key is replayed), and the person's door
# (POST /v1/messages: a message to any address, what `backchannel send` asks a running gateway).
OWN_FEATURES = {
    "chat_idempotency": True,
    "receipts": True,
    "bot_chat": True,
    "messages": True,
}
ENDPOINTS = {
    "health": ("GET", "/health"),
    "models": ("GET", "/v1/models"),
    "chat_completions": ("POST", "/v1/chat/completions"),
    "responses": ("POST", "/v1/responses"),
    "runs": ("POST", "/v1/runs"),
    "run_status": ("GET", "/v1/runs/{run_id}"),
    "run_events": ("GET", "/v1/runs/{run_id}/events"),
    "run_steer": ("POST", "/v1/runs/{run_id}/steer"),
    "run_stop": ("POST", "/v1/runs/{run_id}/stop"),
    "sessions": ("GET", "/api/sessions"),
    "session_create": ("POST", "/api/sessions"),
    "session": ("GET", "/api/sessions/{session_id}"),
    "session_messages": ("GET", "/api/sessions/{session_id}/messages"),
    "session_chat": ("POST", "/api/sessions/{session_id}/chat"),
    "session_chat_stream": ("POST", "/api/sessions/{session_id}/chat/stream"),
    "messages": ("POST", "/v1/messages"),
}


async def health(request: Request) -> Response:
    ctx = context(request)
    return JSONResponse(
        {
            "status": "ok",
            "platform": PLATFORM,
            "version": __version__,
            "backchannel": {"version": __version__, "instance": ctx.instance or None},
        }
    )


async def capabilities(request: Request) -> Response:
    ctx = context(request)
    profile = ctx.roster.check_profile(profile_of(request))
    who = caller(request)
    features = {
        **HERMES_FEATURES,
        "runs_idempotency": {"supported": True, "durable": True, "retention_seconds": None},
    }
    return JSONResponse(
        {
            "object": "hermes.api_server.capabilities",
            "platform": PLATFORM,
            "model": profile,  # the profile a chat completion reaches here (`model` names it)
            "auth": {"type": "bearer", "required": True, "identity": "person" if who.is_person else who.principal},
            "runtime": {"mode": "server_agent", "tool_execution": "server", "split_runtime": False},
            "features": features,
            "endpoints": {name: {"method": m, "path": p} for name, (m, p) in ENDPOINTS.items()},
            "backchannel": {
                "version": __version__,
                "gateway_id": ctx.settings.gateway_id,
                "features": OWN_FEATURES,
                "limits": {"max_body_bytes": ctx.settings.max_body_bytes, "max_message_chars": MAX_MESSAGE_CHARS},
            },
        }
    )


async def models(request: Request) -> Response:
    """Each profile as a model, as a multiplexed Hermes gateway lists them: at the root every profile the key
    reaches, under /p/<profile> that one."""
    ctx = context(request)
    who = caller(request)
    if "profile" in request.path_params:
        names = [ctx.roster.check_profile(profile_of(request))]
    else:
        names = [name for name in ctx.roster.profiles() if who.reaches(name)]
    now = int(time.time())
    data: list[dict[str, Any]] = [
        {
            "id": name,
            "object": "model",
            "created": now,
            "owned_by": OWNED_BY,
            "permission": [],
            "root": name,
            "parent": None,
        }
        for name in names
    ]
    return JSONResponse({"object": "list", "data": data})
