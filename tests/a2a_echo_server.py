"""An A2A agent of another make: a2a-sdk's hello-world shape (an echoing AgentExecutor, the SDK's default handler
and in-memory task store), served on loopback with a Bearer key, for the client tests.

    python tests/a2a_echo_server.py PORT KEY [--no-streaming] [--extension]

`sleep N rest` sleeps N seconds before it answers `echo: rest`; a cancel ends the sleep as CANCELED.
`/seen` answers with the Backchannel extension metadata and the `A2A-Extensions` header the message came with.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys

import uvicorn
from a2a.helpers.proto_helpers import get_message_text, new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

EXTENSION = "urn:backchannel:a2a:hops-chain:v1"
SLEEP_RE = re.compile(r"sleep (\d+(?:\.\d+)?) ?(.*)", re.S)


class Echo(AgentExecutor):
    """Echoes the text; `sleep N …` first waits (cancellable); `/seen` tells what the message carried."""

    def __init__(self) -> None:
        self.sleeping: dict[str, asyncio.Task[None]] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = get_message_text(context.message)
        if text.strip() == "/seen":
            meta = MessageToDict(context.message).get("metadata", {})
            text = json.dumps({"metadata": meta, "extensions": sorted(context.requested_extensions)})
        found = SLEEP_RE.fullmatch(text.strip())
        if found:
            await updater.start_work()
            nap = asyncio.ensure_future(asyncio.sleep(float(found.group(1))))
            self.sleeping[task.id] = nap
            try:
                await nap
            except asyncio.CancelledError:
                return
            finally:
                self.sleeping.pop(task.id, None)
            text = found.group(2)
        await updater.add_artifact([new_text_message(f"echo: {text}").parts[0]], name="reply")
        await updater.complete(new_text_message(f"echo: {text}", context_id=task.context_id, task_id=task.id))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        nap = self.sleeping.pop(context.task_id, None)
        if nap is not None:
            nap.cancel()
        updater = TaskUpdater(event_queue, context.task_id, context.context_id or "")
        await updater.cancel()


class BearerOnly:
    """401 for any request but the card's without `Authorization: Bearer KEY`."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app, self.key = app, key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith("/.well-known/"):
            headers = dict(scope["headers"])
            if headers.get(b"authorization", b"").decode() != f"Bearer {self.key}":
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def app(port: int, key: str, *, streaming: bool, extension: bool) -> ASGIApp:
    url = f"http://127.0.0.1:{port}"
    capabilities = AgentCapabilities(streaming=streaming, push_notifications=False)
    if extension:
        capabilities.extensions.append(AgentExtension(uri=EXTENSION, description="hops and chain"))
    card = AgentCard(
        name="echo",
        description="Echoes what it is told.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=f"{url}/rpc", protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=capabilities,
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="Echoes.", tags=["echo"])],
    )
    handler = DefaultRequestHandlerV2(Echo(), InMemoryTaskStore(), card)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/rpc")]
    starlette = Starlette(routes=routes)
    starlette.add_route("/health", health)
    return BearerOnly(starlette, key)


def main() -> None:
    port, key = int(sys.argv[1]), sys.argv[2]
    served = app(port, key, streaming="--no-streaming" not in sys.argv, extension="--extension" in sys.argv)
    uvicorn.run(served, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
