"""The HTTP API, declared once: each operation's route, who may call it, what it takes and what it answers. The
app serves these routes (`api.app`) and the OpenAPI document is generated from the same list (`api.openapi`),
so a route cannot be served undocumented or documented unserved.

The A2A routes, MCP and the web view are not here: each speaks a protocol documented elsewhere (A2A's agent
card, MCP's own discovery, HTML pages).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import dialect
from ..core.hosted import HOSTED_TOOLS
from ..outcome import Outcome
from . import (
    routes_about,
    routes_directory,
    routes_gateway,
    routes_handoffs,
    routes_held,
    routes_history,
    routes_keys,
    routes_messages,
    routes_metrics,
    routes_openai,
    routes_peers,
    routes_profiles,
    routes_questions,
    routes_rooms,
    routes_run_answers,
    routes_runs,
    routes_sessions,
    routes_tools,
)
from .openapi import JSON, SSE, TEXT, Answer, Op, document


def _header(name: str, description: str | None = None, **schema: Any) -> Mapping[str, Any]:
    param: dict[str, Any] = {"name": name, "in": "header", "required": False, "schema": {"type": "string", **schema}}
    if description:
        param["description"] = description
    return param


def _path(name: str, **schema: Any) -> Mapping[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string", **schema}}


def _query(name: str, kind: str = "string", *, required: bool = False, **schema: Any) -> Mapping[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": {"type": kind, **schema}}


DELIVERY_HEADERS = (
    _header("Idempotency-Key", minLength=1, maxLength=255),
    _header("X-Hermes-Wait-Seconds"),
    _header("X-Hermes-Sender-Profile"),
    _header("X-Backchannel-Hops", pattern="^[0-9]{1,3}$"),
    _header("X-Backchannel-Chain"),
    _header("X-Backchannel-Exchange"),
    _header(
        "X-Backchannel-Mode",
        "queue (default): the message waits its turn; steer: it joins the session's running turn at its next model"
        " step (echo and openai engines), else it is queued",
        enum=["queue", "steer"],
    ),
)
OPENAI_HEADERS = (
    *DELIVERY_HEADERS,
    _header("X-Hermes-Session-Id"),
    _header(
        "X-Stainless-Retry-Count",
        "an OpenAI SDK's automatic retry (1 or more): without Idempotency-Key, answered by its first run within"
        " gateway.dedup_window_seconds",
    ),
)
NAME = "^[a-z0-9][a-z0-9_-]{0,63}$"
SESSION_ID = _path("session_id")
RUN_ID = _path("run_id")
QUESTION_ID = _path("question_id")
ROOM = _path("name", pattern=NAME)
PROFILE = _path("profile", pattern=NAME)
LIMIT = _query("limit", "integer", minimum=1, maximum=10000)
LEDGER_LIMIT = _query("limit", "integer", minimum=1, maximum=routes_runs.LEDGER_MOST)

STREAM = {200: Answer("Server-sent events", {"type": "string"}, (SSE,))}
RECEIPT = Answer("Receipt: the wait ran out, the run goes on; do not resend", dialect.Queued)
LIVENESS = {200: Answer("OK")}
OUTCOME = {"type": "object", "required": ["result", "to"]}


@functools.cache
def openapi_document() -> dict[str, Any]:
    return document(OPERATIONS, PROFILE)


async def serve_openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


OPERATIONS: tuple[Op, ...] = (
    Op("GET", "/health", routes_about.health, "Liveness (no auth)", LIVENESS, reach="public"),
    Op("GET", "/v1/health", routes_about.health, "Liveness (no auth), as Hermes also serves it", LIVENESS,
       reach="public", mounted=False),
    Op("GET", "/openapi.json", serve_openapi, "This document (no auth: it says nothing a stranger should not read)",
       LIVENESS, reach="public", mounted=False),
    Op("GET", "/v1/capabilities", routes_about.capabilities, "What this gateway supports",
       {200: Answer("Capabilities")}, (401, 404)),
    Op("GET", "/v1/models", routes_about.models,
       "Each profile as a model, as a multiplexed Hermes gateway lists them (under /p/{profile}: that one)",
       {200: Answer("Models", dialect.ModelList)}, (401, 404)),
    Op("GET", "/api/sessions", routes_sessions.list_sessions, "List sessions, newest activity first",
       {200: Answer("Sessions", dialect.SessionList)}, (400, 401, 404),
       params=(_query("title"), LIMIT, _query("offset", "integer", minimum=0))),
    Op("POST", "/api/sessions", routes_sessions.create_session,
       "Create a session (title 'Bot Chat' returns the existing one)",
       {201: Answer("Created", dialect.SessionEnvelope), 200: Answer("Existing Bot Chat", dialect.SessionEnvelope)},
       (400, 401, 404, 409, 413), body=dialect.NewSession),
    Op("GET", "/api/sessions/{session_id}", routes_sessions.get_session, "One session",
       {200: Answer("Session", dialect.SessionEnvelope)}, (401, 404), params=(SESSION_ID,)),
    Op("GET", "/api/sessions/{session_id}/messages", routes_sessions.session_messages,
       "All messages of a session, in order", {200: Answer("Messages")}, (401, 404), params=(SESSION_ID,)),
    Op("POST", "/api/sessions/{session_id}/chat", routes_sessions.chat,
       "Deliver a message and wait for the reply or a receipt",
       {200: Answer("The reply (or, asked for, the send_result envelope)", (dialect.Completion, dialect.SendResult)),
        202: Answer("Receipt: accepted and queued, do not resend", dialect.Queued)},
       (400, 401, 404, 409, 413, 424), params=(SESSION_ID, *DELIVERY_HEADERS), body=dialect.Message, spanned=True),
    Op("POST", "/api/sessions/{session_id}/chat/stream", routes_sessions.chat_stream,
       "The same as chat, as server-sent events", STREAM, (400, 401, 404, 409, 413, 429),
       params=(SESSION_ID, *DELIVERY_HEADERS), body=dialect.Message, spanned=True),
    Op("POST", "/api/sessions/{session_id}/tools/{tool}", routes_tools.call_tool,
       "Call a messaging tool as this session (its id here or in its Hermes gateway): the Hermes plugin's route; a"
       " step of the run in progress on the session only when `origin` names it",
       {200: Answer("The tool's result (a refusal too, as the model reads it)")}, (400, 401, 404, 413),
       reach="agent", params=(SESSION_ID, _path("tool", enum=list(HOSTED_TOOLS))), body=dialect.ToolCall),
    Op("POST", "/api/sessions/{session_id}/mentions", routes_tools.answer_mentions,
       "Answer the @session: and @peer: mentions in a person's message as from this session (its id here or in its"
       " Hermes gateway): the Hermes plugin's route for platform chats; the message comes back with the replies"
       " added, marked as Backchannel's own mentions are",
       {200: Answer("The text, its mentions answered, and how many it had")}, (400, 401, 404, 413),
       reach="agent", params=(SESSION_ID,), body=dialect.Mentions),
    Op("POST", "/v1/runs", routes_runs.start_run, "Start a run",
       {202: Answer("Accepted", dialect.RunStarted)}, (400, 401, 404, 409, 413),
       params=DELIVERY_HEADERS, body=dialect.StartRun, spanned=True),
    Op("POST", "/v1/chat/completions", routes_openai.chat_completions,
       "Hermes's OpenAI-compatible chat: `model` names the profile, X-Hermes-Session-Id the session (none: a new"
       " one, named in the answer's X-Hermes-Session-Id); the last user message of `messages` is delivered (the"
       " session holds the history); `stream`: chat.completion.chunk events, then [DONE]",
       {200: Answer("The chat completion (or, with stream, its chunks)", media=(JSON, SSE)), 202: RECEIPT},
       (400, 401, 403, 404, 409, 413, 424, 429), params=OPENAI_HEADERS, body=dialect.ChatCompletions, spanned=True),
    Op("POST", "/v1/responses", routes_openai.responses,
       "Hermes's OpenAI-compatible responses: `model` names the profile; the session is the one"
       " X-Hermes-Session-Id names or previous_response_id was answered in, else a new one; `stream`: response.*"
       " events",
       {200: Answer("The response (or, with stream, its events)", media=(JSON, SSE)), 202: RECEIPT},
       (400, 401, 403, 404, 409, 413, 424, 429), params=OPENAI_HEADERS, body=dialect.Responses, spanned=True),
    Op("GET", "/v1/runs/{run_id}", routes_runs.get_run, "A run's state and result",
       {200: Answer("Run", dialect.Run)}, (401, 404), reach="run", params=(RUN_ID,)),
    Op("GET", "/v1/runs/{run_id}/events", routes_runs.run_events, "A run's events", STREAM, (401, 404, 429),
       reach="run", params=(RUN_ID,)),
    Op("POST", "/v1/runs/{run_id}/stop", routes_runs.stop_run, "Cancel a run, keeping its partial output",
       {200: Answer("Run", dialect.Run)}, (401, 404, 409), reach="run", params=(RUN_ID,)),
    Op("POST", "/v1/runs/{run_id}/steer", routes_runs.steer_run,
       "Hermes's steer: the message into that run's running turn, at its next model step (only the run's own"
       " sender; echo and openai engines): {object: hermes.run.steer, run_id, accepted, steer_run_id, landed}",
       {200: Answer("Taken into the turn")}, (400, 401, 403, 404, 409, 413), reach="run",
       params=(RUN_ID, *DELIVERY_HEADERS), body=dialect.Steer),
    Op("GET", "/v1/ledger", routes_runs.get_ledger,
       "Every run and refusal, newest first; one address: what it sent or received, two: what passed between them",
       {200: Answer("Ledger entries")}, (400, 401, 404),
       params=(_query("address"), LEDGER_LIMIT, _query("since", "number"),
               _query("state", enum=list(routes_runs.LEDGER_STATES)),
               _query("outcome", enum=[o.value for o in Outcome]))),
    Op("GET", "/v1/held", routes_held.list_held, "Messages held for the person (the person's key only)",
       {200: Answer("Held runs", dialect.HeldList)}, (401, 403, 404), reach="person"),
    Op("POST", "/v1/held/{run_id}/approve", routes_held.approve, "Queue a held message (the person's key only)",
       {200: Answer("Run", dialect.HeldRun)}, (401, 403, 404, 409), reach="person", params=(RUN_ID,)),
    Op("POST", "/v1/held/{run_id}/deny", routes_held.deny, "Refuse a held message (the person's key only)",
       {200: Answer("Run", dialect.HeldRun)}, (400, 401, 403, 404, 409), reach="person", params=(RUN_ID,),
       body=dialect.Deny),
    Op("POST", "/v1/gateway/stop", routes_gateway.stop_gateway,
       "Stop the gateway as SIGTERM does: no new work, running turns get its --grace to finish, the rest are"
       " requeued (the person's key only; `backchannel gateway stop`)",
       {202: Answer("Stopping", dialect.Stopping)}, (401, 403, 404), reach="person"),
    Op("POST", "/v1/messages", routes_messages.send_message,
       "Send the person's message to any address (the person's key only): a session of the home (a profile is its"
       " Bot Chat, made on first use), peer:NAME[/AGENT] or group:NAME; its outcome as `backchannel send --json`"
       " prints it, or with stream true (a session) its run's events",
       {200: Answer("The outcome (each member's, for a group), or the run's events", OUTCOME, (JSON, SSE))},
       (400, 401, 403, 404, 409, 413, 424, 429), reach="person", params=DELIVERY_HEADERS, body=dialect.Send),
    Op("POST", "/v1/groups/{name}/messages", routes_messages.send_to_group,
       "Send the person's message to every member of a group of the home (the person's key only): each member's"
       " outcome, and how many were reached",
       {200: Answer("Each member's outcome")}, (400, 401, 403, 404, 413), reach="person",
       params=(_path("name", pattern=NAME), *DELIVERY_HEADERS), body=dialect.MessageOnly),
    Op("POST", "/v1/peers/{name}/messages", routes_messages.send_to_peer,
       "Send the person's message to an agent on a peer gateway (the person's key only), kept in this home's"
       " ledger: its outcome, and whether the peer deduplicates",
       {200: Answer("The outcome")}, (400, 401, 403, 404, 409, 413, 424), reach="person",
       params=(_path("name"), *DELIVERY_HEADERS), body=dialect.PeerMessage),
    Op("GET", "/v1/handoffs", routes_handoffs.take_handoffs,
       "The Hermes plugin's work: the profile's turns handed to its gateway's chats (a long poll; it also says the"
       " plugin is there); the profile's agent key or the person's",
       {200: Answer("The handoffs taken")}, (400, 401, 403, 404), reach="agent",
       params=(_query("taker", required=True, maxLength=128), _query("wait", "number", minimum=0, maximum=15))),
    Op("POST", "/v1/handoffs/{run_id}", routes_handoffs.settle_handoff,
       "What became of a handoff: waiting or running (progress), answered (with the reply), failed (with why),"
       " not_a_chat (no chat drives that session)",
       {200: Answer("The handoff")}, (400, 401, 403, 404, 413), reach="agent", params=(RUN_ID,),
       body=dialect.HandoffState),
    Op("GET", "/metrics", routes_metrics.metrics,
       "The gateway's metrics in the Prometheus text format (the person's key, or a key made with"
       " `key create NAME --metrics`)",
       {200: Answer("The metrics", {"type": "string"}, (TEXT,))}, (401, 403, 404), reach="home"),
    Op("GET", "/v1/rooms", routes_rooms.list_rooms, "The home's rooms and their members (the person's key only)",
       {200: Answer("The rooms")}, (401, 403, 404), reach="person"),
    Op("GET", "/v1/rooms/{name}", routes_rooms.get_room,
       "A room and its transcript (the person's key only); `after`: only the lines after that one",
       {200: Answer("The room and its lines")}, (400, 401, 403, 404), reach="person",
       params=(ROOM, _query("after", "integer", minimum=0))),
    Op("POST", "/v1/rooms/{name}/messages", routes_rooms.say_in_room,
       "Say the person's message in a room (the person's key only): its line, and the round that asks each member"
       " in turn (202; read the answers with GET /v1/rooms/{name}?after=…)",
       {202: Answer("The line and its round")}, (400, 401, 403, 404, 413), reach="person", params=(ROOM,),
       body=dialect.MessageOnly),
    # The person's reads of the home: sessions across profiles, runs, a message's run
    Op("GET", "/v1/sessions", routes_directory.list_sessions,
       "The home's sessions, most recently active first (the person's key only; under /p/{profile}: that"
       " profile's); with `address` (a profile: its Bot Chat, profile/session-id or a session id), the one it names",
       {200: Answer("Sessions", dialect.SessionRecords)}, (400, 401, 403, 404), reach="person",
       params=(_query("address"), LIMIT)),
    Op("POST", "/v1/sessions/import", routes_directory.import_sessions,
       "Make the sessions of the profile's Hermes gateway addressable here, each under its Hermes id (the person's"
       " key only; a profile with the hermes engine)",
       {200: Answer("Each session of the Hermes gateway, and whether it is new here", dialect.ImportedSessions)},
       (400, 401, 403, 404), reach="person"),
    Op("GET", "/v1/runs", routes_history.list_runs,
       "The home's runs, newest first, each with its outcome so far (the person's key only); `state` repeats;"
       " `address`: a profile's runs, or a session's",
       {200: Answer("Runs", dialect.RunRecords)}, (400, 401, 403, 404), reach="person",
       params=(_query("state", enum=list(routes_history.STATES)), _query("address"), LIMIT)),
    Op("GET", "/v1/runs/{run_id}/record", routes_history.run_record,
       "A run's whole record: its outcome, who sent what, what it used (the person's key only); `run_id` may be"
       " the start of one run's id (8 characters or more; `400` when shorter, or when it starts several)",
       {200: Answer("Run", dialect.RunRecord)}, (400, 401, 403, 404), reach="person", params=(RUN_ID,)),
    Op("GET", "/v1/messages", routes_history.message_run,
       "The run a message sent with idempotency key `key` was filed under, here or at a peer (the person's key"
       " only); run_id null while none is known",
       {200: Answer("The message's run", dialect.MessageRun)}, (400, 401, 403), reach="person",
       params=(_query("key", required=True, minLength=1, maxLength=255),), mounted=False),
    # The home's own commands: keys, rooms, runs on peers, profiles (the person's key only)
    Op("GET", "/v1/keys", routes_keys.list_keys, "The keys of peers and agents, never their values",
       {200: Answer("The keys", dialect.PeerKeyList)}, (401, 403), reach="person", mounted=False),
    Op("POST", "/v1/keys", routes_keys.create_key,
       "Make a key for a peer (a request made with it is from peer:NAME); its value is answered this once",
       {201: Answer("The key, with its value", dialect.NewKey)}, (400, 401, 403, 404, 409, 413), reach="person",
       body=dialect.NewPeerKey, mounted=False),
    Op("POST", "/v1/keys/{name}/rotate", routes_keys.rotate_key,
       "Give a key a new value, answered this once (the old one stops at once)",
       {200: Answer("The key, with its new value", dialect.NewKey)}, (400, 401, 403, 404), reach="person",
       params=(_path("name"),), mounted=False),
    Op("DELETE", "/v1/keys/{name}", routes_keys.revoke_key, "Revoke a key: requests made with it are refused",
       {200: Answer("The key revoked", dialect.PeerKey)}, (400, 401, 403, 404), reach="person",
       params=(_path("name"),), mounted=False),
    Op("POST", "/v1/agent-keys", routes_keys.agent_key,
       "The agent key of a profile for a Hermes home (`backchannel hermes connect`): the one its .env holds while"
       " in force (`held`), else a new value, answered this once",
       {200: Answer("The key, with its value", dialect.AgentKey)}, (400, 401, 403, 404, 409, 413), reach="person",
       body=dialect.NewAgentKey, mounted=False),
    Op("POST", "/v1/rooms", routes_rooms.create_room, "Make a room with its members, in speaking order",
       {201: Answer("The room", dialect.Room)}, (400, 401, 403, 404, 409, 413), reach="person",
       body=dialect.NewRoom),
    Op("POST", "/v1/rooms/{name}/members", routes_rooms.add_members,
       "Add members to a room (they speak after the others)",
       {200: Answer("The room", dialect.Room)}, (400, 401, 403, 404, 413), reach="person", params=(ROOM,),
       body=dialect.Members),
    Op("POST", "/v1/rooms/{name}/members/remove", routes_rooms.remove_members,
       "Remove members from a room (the transcript keeps what they said)",
       {200: Answer("The room", dialect.Room)}, (400, 401, 403, 404, 413), reach="person", params=(ROOM,),
       body=dialect.Members),
    Op("GET", "/v1/rooms/{name}/rounds/{round}", routes_rooms.get_round,
       "A round a message opened in a room: open or done, and its lines so far",
       {200: Answer("The round", dialect.RoomRound)}, (401, 403, 404), reach="person",
       params=(ROOM, _path("round"))),
    Op("POST", "/v1/peers/{name}/runs", routes_peers.start_run,
       "Start a turn in the Bot Chat of an agent on a peer gateway, kept in this home's ledger: its receipt, and"
       " what the peer says it is",
       {202: Answer("Started", dialect.PeerRunStarted)}, (400, 401, 403, 404, 409, 413, 424), reach="person",
       params=(_path("name"), *DELIVERY_HEADERS), body=dialect.PeerMessage, mounted=False),
    Op("GET", "/v1/peers/{name}/runs/{run_id}", routes_peers.get_run,
       "A run on a peer as the peer tells it now (its end settles this home's ledger entry); `agent`: for a run"
       " this home did not send",
       {200: Answer("The run", dialect.PeerRunState)}, (401, 403, 404, 424), reach="person",
       params=(_path("name"), RUN_ID, _query("agent")), mounted=False),
    Op("GET", "/v1/peers/{name}/runs/{run_id}/events", routes_peers.run_events,
       "A run's events on a peer until it ends (a failure on the way: a last `stream.failed` event)", STREAM,
       (401, 403, 404), reach="person", params=(_path("name"), RUN_ID, _query("agent")), mounted=False),
    Op("POST", "/v1/peers/{name}/runs/{run_id}/stop", routes_peers.stop_run,
       "Cancel a run on a peer: what it produced so far",
       {200: Answer("The run", dialect.PeerRunState)}, (401, 403, 404, 424), reach="person",
       params=(_path("name"), RUN_ID, _query("agent")), mounted=False),
    Op("POST", "/v1/peers/{name}/probe", routes_peers.probe_peer,
       "What answers at a URL, asked with a key before peer NAME is added (`backchannel peer add`): a gateway or an"
       " A2A agent, and what to tell of it; nothing is saved",
       {200: Answer("What it is", dialect.PeerProbed)}, (400, 401, 403, 413), reach="person",
       params=(_path("name", pattern=NAME),), body=dialect.PeerProbe, mounted=False),
    Op("DELETE", "/v1/profiles/{name}", routes_profiles.remove_profile,
       "Remove a profile, keeping its history: its folder set aside, its Bot Chat retitled; refused while it has"
       " runs queued or running or messages held for the person (`dry_run`: only that check)",
       {200: Answer("The profile removed (or checked)", dialect.ProfileRemoved)}, (400, 401, 403, 404),
       reach="person", params=(_path("name", pattern=NAME), _query("dry_run", "boolean")), mounted=False),
    # questions (issue 42)
    Op("GET", "/v1/questions", routes_questions.list_questions,
       "The questions turns asked the person (`ask_person`), open ones by default, oldest first (the person's key"
       " only); `for_peer=true`: those asked in runs peers sent, which each peer answers (never the person);"
       " `for_peer=any`: every one, with those a peer's agent asked one of our agents (which that agent answers)",
       {200: Answer("Questions", dialect.QuestionList)}, (400, 401, 403), reach="person",
       params=(_query("state", enum=["open", "answered", "defaulted", "cancelled", routes_questions.ANY]),
               _query("limit", "integer", minimum=1, maximum=1000),
               _query("for_peer", enum=list(routes_questions.FOR_PEER))), mounted=False),
    Op("GET", "/v1/questions/{question_id}", routes_questions.get_question, "One question, in whatever state",
       {200: Answer("The question", dialect.Question)}, (401, 403, 404), reach="person",
       params=(QUESTION_ID,), mounted=False),
    Op("POST", "/v1/questions/{question_id}", routes_questions.answer_question,
       "Answer a question (`answer`), or decline it (`cancel: true`): answered once, the first answer wins (409"
       " `question_closed` after); its run is queued again, the same run, the answer its next message",
       {200: Answer("The question, closed, and its run", dialect.QuestionClosed)}, (400, 401, 403, 404, 409, 413),
       reach="person", params=(QUESTION_ID,), body=dialect.QuestionAnswer, mounted=False),
    # a peer's questions (issue 42): the run's own sender answers what its run asks
    Op("POST", "/v1/runs/{run_id}/answer", routes_run_answers.answer_run,
       "Answer the question the run asks (`answer`), or decline it (`cancel: true`): only the run's own sender (a"
       " peer answers the runs it sent; its question is never this gateway's person's); answered once (409"
       " `question_closed` after), the same run queued again",
       {200: Answer("The question, closed, and its run", dialect.QuestionClosed)}, (400, 401, 403, 404, 409, 413),
       reach="run", params=(RUN_ID,), body=dialect.QuestionAnswer),
)
