"""Where the MCP server's calls go: the gateway that serves `/mcp` itself, or, for `backchannel mcp`, the home's
gateway through the one client (the running one over HTTP, else the one the command builds, through its app)."""

from __future__ import annotations

import json
from typing import Any, Protocol

from ..core.gateway import Gateway
from ..core.hosted import CallOrigin
from ..errors import BackchannelError
from ..home.redact import redact
from ..net.http import quote
from ..net.local import GatewayClient
from ..outcome import Outcome, error_body

ANSWERED_BY = "human:mcp"  # who answered a question through an MCP host (its person), as the question records it
HTTP_MARGIN = 30.0  # seconds a call to the gateway may take beyond the wait it asks for
MCP_HOST = CallOrigin(surface="mcp")  # an MCP host's call is its own: never a step of a Backchannel turn


class Backend(Protocol):
    """The hosted tools as one profile's session calls them, and a new session for a host connection."""

    async def call(
        self, profile: str, session_id: str, tool: str, arguments: dict[str, Any], *, wait: float
    ) -> tuple[dict[str, Any], bool]: ...

    async def new_session(self, profile: str, title: str) -> str: ...

    def check_profile(self, profile: str) -> str: ...

    async def open_questions(self) -> list[dict[str, Any]]: ...

    async def question(self, question_id: str) -> dict[str, Any]: ...

    async def close_question(self, question_id: str, answer: str | None) -> None:
        """The person's answer, or their decline (None); Conflict `question_closed` when answered already."""


class InProcess:
    """The hosted tools of the gateway that serves the MCP endpoint (`/mcp` of its HTTP app)."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def call(
        self, profile: str, session_id: str, tool: str, arguments: dict[str, Any], *, wait: float
    ) -> tuple[dict[str, Any], bool]:
        try:
            done = await self.gateway.hosting.call(profile, session_id, tool, arguments, MCP_HOST)
        except BackchannelError as exc:  # the host reads it: no path of the home in it
            raise redact(exc, self.gateway.root) from None
        result: dict[str, Any] = json.loads(done.result)
        return result, done.ok

    async def new_session(self, profile: str, title: str) -> str:
        row, _ = await self.gateway.roster.create_session(profile, title=title, source="mcp")
        return row.id

    def check_profile(self, profile: str) -> str:
        return self.gateway.roster.check_profile(profile)

    async def open_questions(self) -> list[dict[str, Any]]:
        return [q.to_dict() for q in await self.gateway.admin.questions(state="open", limit=1000)]

    async def question(self, question_id: str) -> dict[str, Any]:
        return (await self.gateway.admin.question(question_id)).to_dict()

    async def close_question(self, question_id: str, answer: str | None) -> None:
        if answer is None:
            await self.gateway.admin.decline(question_id, by=ANSWERED_BY)
        else:
            await self.gateway.admin.answer(question_id, answer, by=ANSWERED_BY)


class ViaGateway:
    """The home's running gateway: `POST /p/{profile}/api/sessions/{session}/tools/{tool}` as the person."""

    def __init__(self, client: GatewayClient) -> None:
        self.client = client

    async def call(
        self, profile: str, session_id: str, tool: str, arguments: dict[str, Any], *, wait: float
    ) -> tuple[dict[str, Any], bool]:
        path = f"/p/{quote(profile)}/api/sessions/{quote(session_id)}/tools/{quote(tool)}"
        body = {"arguments": arguments, "origin": {"surface": MCP_HOST.surface}}
        answer = await self.client.request("POST", path, json=body, timeout=wait + HTTP_MARGIN)
        result = answer.body.get("result")
        if not isinstance(result, dict):
            what = f"the gateway answered {tool!r} without a tool result: a message may or may not have been sent"
            return error_body(Outcome.UNKNOWN, "gateway_error", what), False
        return result, bool(answer.body.get("ok"))

    async def new_session(self, profile: str, title: str) -> str:
        answer = await self.client.request(
            "POST", f"/p/{quote(profile)}/api/sessions", json={"title": title, "source": "mcp"}
        )
        return str(answer.body["session"]["id"])

    def check_profile(self, profile: str) -> str:
        return profile  # the gateway checks it on every call

    async def open_questions(self) -> list[dict[str, Any]]:
        answer = await self.client.request("GET", "/v1/questions?state=open&limit=1000")
        return [q for q in answer.body.get("data", []) if isinstance(q, dict)]

    async def question(self, question_id: str) -> dict[str, Any]:
        return dict((await self.client.request("GET", f"/v1/questions/{quote(question_id)}")).body)

    async def close_question(self, question_id: str, answer: str | None) -> None:
        body: dict[str, Any] = {"cancel": True} if answer is None else {"answer": answer}
        headers = {"X-Backchannel-Sender": ANSWERED_BY}
        await self.client.request("POST", f"/v1/questions/{quote(question_id)}", json=body, headers=headers)
