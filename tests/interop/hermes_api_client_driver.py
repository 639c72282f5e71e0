"""Run by tests/interop/hermes_clients.py in hermes-agent-api-client's own Python 3.13 (not collected by pytest):
`driver.py BASE_URL REQUEST_JSON [SESSION_ID]`, the key in HERMES_TEST_KEY. Prints, as JSON, what the client made
of the gateway: its capabilities (probe_capabilities) and each event of one streamed chat (stream_chat_events), or
the error it raised (its class and safe fields)."""

import asyncio
import json
import os
import sys

from hermes_agent_api_client import (
    AssistantDeltaEvent,
    HermesAgentApiClient,
    HermesContractError,
    KeepaliveEvent,
    TerminalEvent,
    ToolProgressEvent,
    UsageEvent,
)


def told(event):
    if isinstance(event, AssistantDeltaEvent):
        return {"kind": "delta", "text": event.text}
    if isinstance(event, ToolProgressEvent):
        return {"kind": "tool", "id": event.tool_call_id, "tool": event.tool_name, "status": event.status.value}
    if isinstance(event, UsageEvent):
        return {"kind": "usage", "total": event.total_tokens}
    if isinstance(event, KeepaliveEvent):
        return {"kind": "keepalive"}
    if isinstance(event, TerminalEvent):
        reason = event.failure_reason.value if event.failure_reason else None
        return {"kind": "terminal", "outcome": event.outcome.value, "partial": event.partial, "reason": reason}
    return {"kind": type(event).__name__}


async def main() -> dict:
    base_url, request = sys.argv[1], json.loads(sys.argv[2])
    session_id = sys.argv[3] if len(sys.argv) > 3 else None
    said: dict = {}
    try:
        async with HermesAgentApiClient(base_url, os.environ["HERMES_TEST_KEY"]) as client:
            caps = await client.probe_capabilities()
            said["capabilities"] = caps.model_dump()
            request = {"model": caps.model, **request}
            said["events"] = [told(e) async for e in client.stream_chat_events(request, session_id=session_id)]
    except HermesContractError as exc:
        said["error"] = {"class": type(exc).__name__, "category": exc.category.value, "status": exc.status_code}
    return said


print(json.dumps(asyncio.run(main())))
