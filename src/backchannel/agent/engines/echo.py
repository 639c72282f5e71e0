"""The offline, deterministic `echo` engine, with a small command language that makes it call tools.

Each line of the incoming message that starts with one of these is a command; the other lines are text:

    /send <address> <text>      call send_to_session(session_id=<address>, message=<text>)
    /peer <peer[/profile]> <text>   call send_to_peer(target=..., message=<text>)
    /tool <name> <json object>  call any offered tool with those arguments
    /remember <text>            call memory(action="add", target="memory", content=<text>)
    /sleep <seconds>            take that long before answering (a slow model; cancellable)
    /ask <question>[ | <choices>[ | <default>[ | <expires_in>]]]
                                call ask_person(question=…): the turn ends, its run waits for the person's answer;
                                `choices` comma-separated, each part optional (empty: left out), e.g.
                                `/ask Which colour? | red, blue | blue | 30`
    /fail <text>                fail the turn with an engine error
    /json <json value>          answer with that value as structured output: a reply that is one fenced JSON
                                block (```json … ```) and nothing else, how any engine gives structured output

The reply is `<profile> (echo): <text>` (without the `[Message from …]` provenance line, nor the `[Your person …]`
heading of an answer to its question: so a resumed turn says `<profile> (echo): <the answer>`) followed by
one line per tool result. Given a room's briefing, it says back only the person's newest words in it (else the
newest line another member said), so that a room's transcript does not grow with each echo of an echo.
Its usage is counted in words, so that token budgets can be tried offline: every
word of the request (system prompt and messages) in, every word of the answer (or of its tool calls) out.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ...errors import EngineError
from ...messages import Message, ToolCall, Usage
from .base import ModelRequest, OnDelta

MAX_SLEEP = 3600.0


class EchoEngine:
    name = "echo"
    uses_context = False  # deterministic from the message alone
    keeps_session = False
    offers_tools = True

    def __init__(self, *, profile: str) -> None:
        self.profile = profile

    async def step(self, request: ModelRequest, on_delta: OnDelta | None = None) -> Message:
        last_user = max((i for i, m in enumerate(request.messages) if m.role == "user"), default=None)
        read = _words(request.system_prompt) + sum(_words(m.content) for m in request.messages)
        if last_user is None:
            text = f"{self.profile} (echo): (nothing to answer)"
            return Message(role="assistant", content=text, usage=Usage(read, _words(text)))
        incoming = request.messages[last_user]
        after = request.messages[last_user + 1 :]
        text_lines, calls, sleep, structured = self._parse(_in_a_room(incoming.content))
        if not any(m.role == "assistant" for m in after):
            if sleep:
                await asyncio.sleep(sleep)
            if calls:
                wrote = sum(_words(c.name) + _words(c.arguments) for c in calls)
                return Message(role="assistant", content="", tool_calls=tuple(calls), usage=Usage(read, wrote))
        results = [f"→ {m.name}: {m.content}" for m in after if m.role == "tool"]
        reply = f"{self.profile} (echo): " + "\n".join(text_lines).strip()
        if results:
            reply += "\n" + "\n".join(results)
        if structured:
            reply = "```json\n" + json.dumps(structured[0], indent=2, ensure_ascii=False) + "\n```"
        if on_delta is not None:
            on_delta(reply)
        return Message(role="assistant", content=reply, usage=Usage(read, _words(reply)))

    def _parse(self, content: str) -> tuple[list[str], list[ToolCall], float, list[Any]]:
        text: list[str] = []
        calls: list[ToolCall] = []
        sleep = 0.0
        structured: list[Any] = []  # the /json value, when one was given
        for line in content.splitlines():
            stripped = line.strip()
            command, _, rest = stripped.partition(" ")
            rest = rest.strip()
            if command == "/send" or command == "/peer":
                target, _, body = rest.partition(" ")
                key = "session_id" if command == "/send" else "target"
                name = "send_to_session" if command == "/send" else "send_to_peer"
                calls.append(self._call(len(calls), name, {key: target, "message": body.strip()}))
            elif command == "/tool":
                name, _, raw = rest.partition(" ")
                calls.append(ToolCall(id=f"call_echo_{len(calls)}", name=name, arguments=raw.strip() or "{}"))
            elif command == "/ask":
                calls.append(self._call(len(calls), "ask_person", _asked(rest)))
            elif command == "/remember":
                calls.append(self._call(len(calls), "memory", {"action": "add", "target": "memory", "content": rest}))
            elif command == "/sleep":
                try:
                    sleep += min(max(float(rest), 0.0), MAX_SLEEP)
                except ValueError:
                    text.append(line)
            elif stripped.removeprefix("\\").startswith(("[Message from ", "[Room ")) and stripped.endswith("]"):
                continue  # a frame (a room's headings too, quoted as a peer gets them) is for the agent: not said
            elif stripped.startswith("[Your person ") and stripped.endswith("]"):
                continue  # the heading of its person's answer: the answer follows it
            elif stripped.startswith("[Answer by ") and stripped.endswith("]"):
                continue  # the deadline of the turn (backchannel.deadlines): for the agent
            elif command == "/json":
                try:
                    structured[:] = [json.loads(rest)]
                except ValueError:
                    text.append(line)
            elif command == "/fail":
                raise EngineError(f"echo engine of profile {self.profile!r} was told to fail: {rest or 'no reason'}")
            else:
                text.append(line)
        return text, calls, sleep, structured

    @staticmethod
    def _call(index: int, name: str, args: dict[str, Any]) -> ToolCall:
        return ToolCall(id=f"call_echo_{index}", name=name, arguments=json.dumps(args))

    async def aclose(self) -> None:
        return None


def _asked(rest: str) -> dict[str, Any]:
    """`/ask`'s arguments: `question | choices | default | expires_in`, each part after the question optional."""
    parts = [p.strip() for p in rest.split("|")]
    args: dict[str, Any] = {"question": parts[0]}
    if len(parts) > 1 and parts[1]:
        args["choices"] = [c.strip() for c in parts[1].split(",") if c.strip()]
    if len(parts) > 2 and parts[2]:
        args["default"] = parts[2]
    if len(parts) > 3 and parts[3]:
        try:
            args["expires_in"] = float(parts[3])
        except ValueError:
            args["expires_in"] = parts[3]  # refused by the tool, as a model's bad argument is
    return args


def _words(text: str) -> int:
    return len(text.split())


def _in_a_room(content: str) -> str:
    """A room's briefing (`[Room NAME — …]` headings, each before what one speaker said) as its newest words of
    the person's, else its newest words of another member's; any other message as it is."""
    blocks: list[tuple[bool, list[str]]] = []  # (said by the person, its lines)
    for line in content.splitlines():
        heading = line.strip().removeprefix("\\")
        if heading.startswith("[Room ") and heading.endswith("]"):
            if heading.endswith(" said:]") or "said (another agent" in heading:
                blocks.append((heading.endswith("the person said:]"), []))
            continue
        if blocks:
            blocks[-1][1].append(line)
    if not blocks:
        return content
    person = [said for by_person, said in blocks if by_person]
    return "\n".join(person[-1] if person else blocks[-1][1])
