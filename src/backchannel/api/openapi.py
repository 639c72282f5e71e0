"""The OpenAPI 3.1 document of the gateway's HTTP API (served at /openapi.json)."""

from __future__ import annotations

import copy
from typing import Any

from .. import __version__
from ..core.hosted import HOSTED_TOOLS
from ..messages import MAX_MESSAGE_CHARS

ERROR = {"$ref": "#/components/schemas/Error"}
JSON = "application/json"


def _resp(description: str, schema: dict[str, Any] | None = None, media: str = JSON) -> dict[str, Any]:
    out: dict[str, Any] = {"description": description}
    if schema is not None:
        out["content"] = {media: {"schema": schema}}
    return out


def _errors(*codes: int) -> dict[str, Any]:
    names = {
        400: "Malformed request",
        401: "Missing or wrong API key",
        403: "The key used does not reach this (a peer's key: other profiles, sessions, runs, the ledger, holds)",
        404: "Unknown profile, session or run",
        409: "Conflict (idempotency key reused for another message, run not active, no running turn to steer)",
        413: "Body too large",
        424: "The run ended without a reply (failed, cancelled or expired), or a peer could not be reached",
        429: "Too many streams open (too_many_streams: the message names the bound; Retry-After says when to try"
        " again): a peer's key, the run, or the peers together hold as many as they may",
    }
    return {str(c): _resp(names[c], ERROR) for c in codes}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {JSON: {"schema": schema}}}


_HEADERS = [
    {
        "name": "Idempotency-Key",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "minLength": 1, "maxLength": 255},
    },
    {"name": "X-Hermes-Wait-Seconds", "in": "header", "required": False, "schema": {"type": "string"}},
    {"name": "X-Hermes-Sender-Profile", "in": "header", "required": False, "schema": {"type": "string"}},
    {
        "name": "X-Backchannel-Hops",
        "in": "header",
        "required": False,
        "schema": {"type": "string", "pattern": "^[0-9]{1,3}$"},
    },
    {"name": "X-Backchannel-Chain", "in": "header", "required": False, "schema": {"type": "string"}},
    {"name": "X-Backchannel-Exchange", "in": "header", "required": False, "schema": {"type": "string"}},
    {
        "name": "X-Backchannel-Mode",
        "in": "header",
        "required": False,
        "description": "queue (default): the message waits its turn; steer: it joins the session's running turn at"
        " its next model step (echo and openai engines), else it is queued",
        "schema": {"type": "string", "enum": ["queue", "steer"]},
    },
]
_SESSION_ID = {"name": "session_id", "in": "path", "required": True, "schema": {"type": "string"}}
_SESSION_HEADER = {"name": "X-Hermes-Session-Id", "in": "header", "required": False, "schema": {"type": "string"}}
_RETRY_HEADER = {
    "name": "X-Stainless-Retry-Count",
    "in": "header",
    "required": False,
    "description": "an OpenAI SDK's automatic retry (1 or more): without Idempotency-Key, answered by its first run"
    " within gateway.dedup_window_seconds",
    "schema": {"type": "string"},
}
_ROOM_NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"},
}
_RUN_ID = {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}
_MESSAGE_BODY = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE_CHARS},
        "author": {"type": "object"},
    },
    "required": ["message"],
}
_MESSAGE_ONLY = {  # a group's or a room's message: the text alone
    "type": "object",
    "required": ["message"],
    "properties": {"message": {"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE_CHARS}},
}
_STREAM = {"200": _resp("Server-sent events", {"type": "string"}, "text/event-stream")}


def _paths() -> dict[str, Any]:
    session = {"$ref": "#/components/schemas/SessionEnvelope"}
    run = {"$ref": "#/components/schemas/Run"}
    return {
        "/v1/capabilities": {
            "get": {
                "summary": "What this gateway supports",
                "responses": {"200": _resp("Capabilities", {"type": "object"}), **_errors(401, 404)},
            }
        },
        "/v1/models": {
            "get": {
                "summary": "Each profile as a model, as a multiplexed Hermes gateway lists them (under /p/{profile}:"
                " that one)",
                "responses": {"200": _resp("Models", {"$ref": "#/components/schemas/ModelList"}), **_errors(401, 404)},
            }
        },
        "/api/sessions": {
            "get": {
                "summary": "List sessions, newest activity first",
                "parameters": [
                    {"name": "title", "in": "query", "required": False, "schema": {"type": "string"}},
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 1, "maximum": 10000},
                    },
                    {"name": "offset", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 0}},
                ],
                "responses": {
                    "200": _resp("Sessions", {"$ref": "#/components/schemas/SessionList"}),
                    **_errors(400, 401, 404),
                },
            },
            "post": {
                "summary": "Create a session (title 'Bot Chat' returns the existing one)",
                "requestBody": _body(
                    {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "title": {"type": "string"},
                            "source": {"type": "string"},
                        },
                    }
                ),
                "responses": {
                    "201": _resp("Created", session),
                    "200": _resp("Existing Bot Chat", session),
                    **_errors(400, 401, 404, 409, 413),
                },
            },
        },
        "/api/sessions/{session_id}": {
            "get": {
                "summary": "One session",
                "parameters": [_SESSION_ID],
                "responses": {"200": _resp("Session", session), **_errors(401, 404)},
            }
        },
        "/api/sessions/{session_id}/messages": {
            "get": {
                "summary": "All messages of a session, in order",
                "parameters": [_SESSION_ID],
                "responses": {"200": _resp("Messages", {"type": "object"}), **_errors(401, 404)},
            }
        },
        "/api/sessions/{session_id}/chat": {
            "post": {
                "summary": "Deliver a message and wait for the reply or a receipt",
                "parameters": [_SESSION_ID, *_HEADERS],
                "requestBody": _body(_MESSAGE_BODY),
                "responses": {
                    "200": _resp("The reply (or the send_result envelope)", {"type": "object"}),
                    "202": _resp("Receipt: accepted and queued, do not resend", {"type": "object"}),
                    **_errors(400, 401, 404, 409, 413, 424),
                },
            }
        },
        "/api/sessions/{session_id}/chat/stream": {
            "post": {
                "summary": "The same as chat, as server-sent events",
                "parameters": [_SESSION_ID, *_HEADERS],
                "requestBody": _body(_MESSAGE_BODY),
                "responses": {**_STREAM, **_errors(400, 401, 404, 409, 413, 429)},
            }
        },
        "/api/sessions/{session_id}/mentions": {
            "post": {
                "summary": "Answer the @session: and @peer: mentions in a person's message as from this session "
                "(its id here or in its Hermes gateway): the Hermes plugin's route for platform chats; the message "
                "comes back with the replies added, marked as Backchannel's own mentions are",
                "parameters": [_SESSION_ID],
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["message"],
                        "properties": {
                            "message": {"type": "string", "maxLength": MAX_MESSAGE_CHARS},
                            "wait_seconds": {"type": "number", "minimum": 0, "maximum": 120},
                        },
                    }
                ),
                "responses": {
                    "200": _resp("The text, its mentions answered, and how many it had", {"type": "object"}),
                    **_errors(400, 401, 404, 413),
                },
            }
        },
        "/api/sessions/{session_id}/tools/{tool}": {
            "post": {
                "summary": "Call a messaging tool as this session (its id here or in its Hermes gateway): the "
                "Hermes plugin's route; a step of the run in progress on the session only when `origin` names it",
                "parameters": [
                    _SESSION_ID,
                    {
                        "name": "tool",
                        "in": "path",
                        "required": True,
                        "schema": {
                            "type": "string",
                            "enum": list(HOSTED_TOOLS),
                        },
                    },
                ],
                "requestBody": _body(
                    {
                        "type": "object",
                        "properties": {
                            "arguments": {"type": "object"},
                            "origin": {
                                "type": "object",
                                "description": "where the call comes from: the run of a turn handed to the"
                                " chat, the tag of a turn Backchannel asked (X-Hermes-Session-Key), the surface",
                                "properties": {
                                    "run_id": {"type": "string", "maxLength": 256},
                                    "tag": {"type": "string", "maxLength": 256},
                                    "surface": {"type": "string", "maxLength": 256},
                                },
                            },
                        },
                    }
                ),
                "responses": {
                    "200": _resp("The tool's result (a refusal too, as the model reads it)", {"type": "object"}),
                    **_errors(400, 401, 404, 413),
                },
            }
        },
        "/v1/handoffs": {
            "get": {
                "summary": "The Hermes plugin's work: the profile's turns handed to its gateway's chats (a long poll;"
                " it also says the plugin is there); the profile's agent key or the person's",
                "parameters": [
                    {"name": "taker", "in": "query", "required": True, "schema": {"type": "string", "maxLength": 128}},
                    {"name": "wait", "in": "query", "schema": {"type": "number", "minimum": 0, "maximum": 15}},
                ],
                "responses": {"200": _resp("The handoffs taken", {"type": "object"}), **_errors(400, 401, 403, 404)},
            }
        },
        "/v1/handoffs/{run_id}": {
            "post": {
                "summary": "What became of a handoff: waiting or running (progress), answered (with the reply),"
                " failed (with why), not_a_chat (no chat drives that session)",
                "parameters": [_RUN_ID],
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["state"],
                        "properties": {
                            "state": {
                                "type": "string",
                                "enum": ["waiting", "running", "answered", "failed", "not_a_chat"],
                            },
                            "reply": {"type": "string"},
                            "error": {"type": "string"},
                            "detail": {"type": "string"},
                        },
                    }
                ),
                "responses": {"200": _resp("The handoff", {"type": "object"}), **_errors(400, 401, 403, 404, 413)},
            }
        },
        "/v1/runs": {
            "post": {
                "summary": "Start a run",
                "parameters": _HEADERS,
                "requestBody": _body(
                    {
                        "type": "object",
                        "properties": {"input": {"type": "string", "minLength": 1}, "session_id": {"type": "string"}},
                        "required": ["input"],
                    }
                ),
                "responses": {"202": _resp("Accepted", {"type": "object"}), **_errors(400, 401, 404, 409, 413)},
            }
        },
        "/v1/chat/completions": {
            "post": {
                "summary": "Hermes's OpenAI-compatible chat: `model` names the profile, X-Hermes-Session-Id the session"
                " (none: a new one, named in the answer's X-Hermes-Session-Id); the last user message of `messages` is"
                " delivered (the session holds the history); `stream`: chat.completion.chunk events, then [DONE]",
                "parameters": [*_HEADERS, _SESSION_HEADER, _RETRY_HEADER],
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["messages"],
                        "properties": {
                            "model": {"type": "string"},
                            "messages": {"type": "array", "minItems": 1, "items": {"type": "object"}},
                            "stream": {"type": "boolean"},
                        },
                    }
                ),
                "responses": {
                    "200": {
                        "description": "The chat completion (or, with stream, its chunks)",
                        "content": {
                            JSON: {"schema": {"type": "object"}},
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    "202": _resp("Receipt: the wait ran out, the run goes on; do not resend", {"type": "object"}),
                    **_errors(400, 401, 403, 404, 409, 413, 424, 429),
                },
            }
        },
        "/v1/responses": {
            "post": {
                "summary": "Hermes's OpenAI-compatible responses: `model` names the profile; the session is the one"
                " X-Hermes-Session-Id names or previous_response_id was answered in, else a new one; `stream`:"
                " response.* events",
                "parameters": [*_HEADERS, _SESSION_HEADER, _RETRY_HEADER],
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["input"],
                        "properties": {
                            "model": {"type": "string"},
                            "input": {"type": ["string", "array"]},
                            "previous_response_id": {"type": "string"},
                            "stream": {"type": "boolean"},
                        },
                    }
                ),
                "responses": {
                    "200": {
                        "description": "The response (or, with stream, its events)",
                        "content": {
                            JSON: {"schema": {"type": "object"}},
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    "202": _resp("Receipt: the wait ran out, the run goes on; do not resend", {"type": "object"}),
                    **_errors(400, 401, 403, 404, 409, 413, 424, 429),
                },
            }
        },
        "/v1/runs/{run_id}": {
            "get": {
                "summary": "A run's state and result",
                "parameters": [_RUN_ID],
                "responses": {"200": _resp("Run", run), **_errors(401, 404)},
            }
        },
        "/v1/runs/{run_id}/events": {
            "get": {
                "summary": "A run's events",
                "parameters": [_RUN_ID],
                "responses": {**_STREAM, **_errors(401, 404, 429)},
            }
        },
        "/v1/ledger": {
            "get": {
                "summary": "Every run and refusal, newest first; one address: what it sent or received, two: "
                "what passed between them",
                "parameters": [
                    {"name": "address", "in": "query", "required": False, "schema": {"type": "string"}},
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 1, "maximum": 10000},
                    },
                ],
                "responses": {"200": _resp("Ledger entries", {"type": "object"}), **_errors(400, 401, 404)},
            }
        },
        "/v1/runs/{run_id}/stop": {
            "post": {
                "summary": "Cancel a run, keeping its partial output",
                "parameters": [_RUN_ID],
                "responses": {"200": _resp("Run", run), **_errors(401, 404, 409)},
            }
        },
        "/v1/runs/{run_id}/steer": {
            "post": {
                "summary": "Hermes's steer: the message into that run's running turn, at its next model step (only"
                " the run's own sender; echo and openai engines): {object: hermes.run.steer, run_id, accepted,"
                " steer_run_id, landed}",
                "parameters": [_RUN_ID, *_HEADERS],
                "requestBody": _body(
                    {
                        "type": "object",
                        "properties": {
                            "input": {"type": "string"},
                            "message": {"type": "string"},
                            "text": {"type": "string"},
                        },
                    }
                ),
                "responses": {
                    "200": _resp("Taken into the turn", {"type": "object"}),
                    **_errors(400, 401, 403, 404, 409, 413),
                },
            }
        },
        "/v1/held": {
            "get": {
                "summary": "Messages held for the person (the person's key only)",
                "responses": {"200": _resp("Held runs", {"type": "object"}), **_errors(401, 403, 404)},
            }
        },
        "/v1/held/{run_id}/approve": {
            "post": {
                "summary": "Queue a held message (the person's key only)",
                "parameters": [_RUN_ID],
                "responses": {"200": _resp("Run", run), **_errors(401, 403, 404, 409)},
            }
        },
        "/v1/held/{run_id}/deny": {
            "post": {
                "summary": "Refuse a held message (the person's key only); body {why?}",
                "parameters": [_RUN_ID],
                "requestBody": _body({"type": "object", "properties": {"why": {"type": "string"}}}),
                "responses": {"200": _resp("Run", run), **_errors(400, 401, 403, 404, 409)},
            }
        },
        "/v1/groups/{name}/messages": {
            "post": {
                "summary": "Send the person's message to every member of a group of the home (the person's key only):"
                " each member's outcome, and how many were reached",
                "parameters": [
                    {
                        "name": "name",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"},
                    },
                    *_HEADERS,
                ],
                "requestBody": _body(_MESSAGE_ONLY),
                "responses": {
                    "200": _resp("Each member's outcome", {"type": "object"}),
                    **_errors(400, 401, 403, 404, 413),
                },
            }
        },
        "/v1/peers/{name}/messages": {
            "post": {
                "summary": "Send the person's message to an agent on a peer gateway (the person's key only), kept in"
                " this home's ledger: its outcome, and whether the peer deduplicates",
                "parameters": [
                    {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                    *_HEADERS,
                ],
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["message"],
                        "properties": {"message": {"type": "string"}, "agent": {"type": "string"}},
                    }
                ),
                "responses": {
                    "200": _resp("The outcome", {"type": "object"}),
                    **_errors(400, 401, 403, 404, 409, 413, 424),
                },
            }
        },
        "/v1/messages": {
            "post": {
                "summary": "Send the person's message to any address (the person's key only): a session of the home (a"
                " profile is its Bot Chat, made on first use), peer:NAME[/AGENT] or group:NAME; its outcome as"
                " `backchannel send --json` prints it, or with stream true (a session) its run's events",
                "parameters": _HEADERS,
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["to", "message"],
                        "properties": {
                            "to": {"type": "string", "minLength": 1},
                            "message": {"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE_CHARS},
                            "stream": {"type": "boolean"},
                        },
                    }
                ),
                "responses": {
                    "200": {
                        "description": "The outcome (each member's, for a group), or the run's events",
                        "content": {
                            JSON: {"schema": {"type": "object", "required": ["result", "to"]}},
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    **_errors(400, 401, 403, 404, 409, 413, 424, 429),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "The gateway's metrics in the Prometheus text format (the person's key, or a key made"
                " with `key create NAME --metrics`)",
                "responses": {
                    "200": {"description": "The metrics", "content": {"text/plain": {"schema": {"type": "string"}}}},
                    **_errors(401, 403, 404),
                },
            }
        },
        "/v1/rooms": {
            "get": {
                "summary": "The home's rooms and their members (the person's key only)",
                "responses": {"200": _resp("The rooms", {"type": "object"}), **_errors(401, 403, 404)},
            }
        },
        "/v1/rooms/{name}": {
            "get": {
                "summary": "A room and its transcript (the person's key only); `after`: only the lines after that one",
                "parameters": [
                    _ROOM_NAME,
                    {"name": "after", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 0}},
                ],
                "responses": {
                    "200": _resp("The room and its lines", {"type": "object"}),
                    **_errors(400, 401, 403, 404),
                },
            }
        },
        "/v1/rooms/{name}/messages": {
            "post": {
                "summary": "Say the person's message in a room (the person's key only): its line, and the round that"
                " asks each member in turn (202; read the answers with GET /v1/rooms/{name}?after=…)",
                "parameters": [_ROOM_NAME],
                "requestBody": _body(_MESSAGE_ONLY),
                "responses": {
                    "202": _resp("The line and its round", {"type": "object"}),
                    **_errors(400, 401, 403, 404, 413),
                },
            }
        },
        "/v1/gateway/stop": {
            "post": {
                "summary": "Stop the gateway as SIGTERM does: no new work, running turns get its --grace to finish, "
                "the rest are requeued (the person's key only; `backchannel gateway stop`)",
                "responses": {
                    "202": _resp("Stopping", {"$ref": "#/components/schemas/Stopping"}),
                    **_errors(401, 403, 404),
                },
            }
        },
    }


def _health(summary: str, *parameters: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "security": [], "responses": {"200": _resp("OK", {"type": "object"})}}
    if parameters:
        op["parameters"] = list(parameters)
    return {"get": op}


def openapi_document() -> dict[str, Any]:
    paths: dict[str, Any] = {
        "/health": _health("Liveness (no auth)"),
        "/v1/health": _health("Liveness (no auth), as Hermes also serves it"),
        "/openapi.json": _health("This document (no auth: it says nothing a stranger should not read)"),
    }
    base = _paths()
    paths.update(base)
    profile = {
        "name": "profile",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"},
    }
    paths["/p/{profile}/health"] = _health("Liveness (no auth; the profile is not checked)", profile)
    for path, item in base.items():
        scoped = copy.deepcopy(item)
        for op in scoped.values():
            op["parameters"] = [profile, *op.get("parameters", [])]
            op["summary"] = op["summary"] + " (named profile)"
        paths["/p/{profile}" + path] = scoped
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Backchannel gateway",
            "version": __version__,
            "description": "Hermes API-server dialect: sessions, chat, runs. Errors use one envelope.",
        },
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["message", "type", "code"],
                            "properties": {
                                "message": {"type": "string"},
                                "type": {"type": "string"},
                                "code": {"type": "string"},
                            },
                        }
                    },
                },
                "Session": {
                    "type": "object",
                    "required": ["id", "profile", "title", "source"],
                    "properties": {
                        "id": {"type": "string"},
                        "profile": {"type": "string"},
                        "title": {"type": ["string", "null"]},
                        "source": {"type": "string"},
                        "started_at": {"type": "number"},
                        "last_active": {"type": "number"},
                        "message_count": {"type": "integer"},
                    },
                },
                "SessionEnvelope": {
                    "type": "object",
                    "required": ["session"],
                    "properties": {"session": {"$ref": "#/components/schemas/Session"}},
                },
                "SessionList": {
                    "type": "object",
                    "required": ["data"],
                    "properties": {
                        "data": {"type": "array", "items": {"$ref": "#/components/schemas/Session"}},
                        "has_more": {"type": "boolean"},
                    },
                },
                "ModelList": {
                    "type": "object",
                    "required": ["object", "data"],
                    "properties": {
                        "object": {"const": "list"},
                        "data": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["id", "object", "created", "owned_by"],
                                "properties": {
                                    "id": {"type": "string", "description": "a profile's name"},
                                    "object": {"const": "model"},
                                    "created": {"type": "integer"},
                                    "owned_by": {"type": "string"},
                                    "root": {"type": "string"},
                                    "parent": {"type": "null"},
                                },
                            },
                        },
                    },
                },
                "Stopping": {
                    "type": "object",
                    "required": ["status", "pid", "grace_seconds", "running_turns"],
                    "properties": {
                        "object": {"type": "string", "const": "backchannel.gateway.stopping"},
                        "status": {"type": "string", "const": "stopping"},
                        "gateway_id": {"type": "string"},
                        "pid": {"type": "integer"},
                        "grace_seconds": {"type": "number"},
                        "running_turns": {"type": "integer"},
                    },
                },
                "Run": {
                    "type": "object",
                    "required": ["run_id", "status", "session_id"],
                    "properties": {
                        "run_id": {"type": "string"},
                        "session_id": {"type": "string"},
                        "status": {
                            "type": "string",
                            "enum": [
                                "held",
                                "queued",
                                "running",
                                "completed",
                                "failed",
                                "cancelled",
                                "expired",
                                "denied",
                            ],
                        },
                        "output": {"type": "string"},
                        "error": {"type": "string"},
                        "queue_position": {"type": "integer"},
                    },
                },
            },
        },
    }
