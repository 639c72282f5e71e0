"""A2A details met from outside (issue 42): HTTP+JSON continues the caller's trace as JSON-RPC does; numbers
in a data part keep their type; the card says when it last changed; a push receiver whose host does not
resolve yet is accepted and screened when it is told; a caller without a contextId has a conversation of its
own. Each through a2a-sdk's own client (or the wire, where the client cannot tell) against a real gateway."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types import (
    ListTaskPushNotificationConfigsRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseDict

from a2a_client import JSONRPC, REST, TIMEOUT, V1, ledger, make_key, send
from backchannel.home import config
from conftest import GatewayProcess, api_key, free_port, run_cli
from gateway_http import in_home
from otlp_receiver import OtlpReceiver, Span
from polling import eventually

BINDINGS = pytest.mark.parametrize("binding", [JSONRPC, REST])
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


def new_gateway(root: Path, env: dict[str, str] | None = None) -> GatewayProcess:
    with in_home(root):
        assert run_cli("init").exit_code == 0
    gw = GatewayProcess(root, free_port(), env=env or {})
    data = config.load_yaml(config.config_path(root))
    config.write_yaml(config.config_path(root), {**data, "gateway": {**data["gateway"], "port": gw.port}})
    return gw


def talk(
    gw: GatewayProcess,
    body: Callable[[Client], Awaitable[None]],
    *,
    binding: str = JSONRPC,
    key: str | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    """`body` with a2a-sdk's client over `binding`, each request carrying `headers` besides the key."""

    async def main() -> None:
        sent = {"Authorization": f"Bearer {key or api_key(gw.root)}", **(headers or {})}
        async with httpx.AsyncClient(headers=sent, timeout=TIMEOUT, trust_env=False) as http:
            made = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=[binding])
            await body(await create_client(gw.url, made))

    asyncio.run(main())


def said(text: str, message_id: str, *parts: Part, context_id: str = "") -> SendMessageRequest:
    message = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text), *parts])
    message.context_id = context_id
    return SendMessageRequest(message=message)


# --- 1. HTTP+JSON continues the caller's trace ----------------------------------------------------------


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, OtlpReceiver]]:
    with OtlpReceiver() as otlp:
        gw = new_gateway(tmp_path_factory.mktemp("a2a-traced") / "home", otlp.env("gw"))
        gw.start()
        try:
            yield gw, otlp
        finally:
            gw.kill()


@BINDINGS
def test_a_send_continues_the_callers_trace_over_either_binding(
    traced: tuple[GatewayProcess, OtlpReceiver], binding: str
) -> None:
    gw, otlp = traced
    task_ids: list[str] = []

    async def body(client: Client) -> None:
        task_ids.append((await send(client, said("traced", f"m-traced-{binding}"))).id)

    talk(gw, body, binding=binding, headers={"traceparent": TRACEPARENT})
    (task_id,) = task_ids

    def sent(spans: list[Span]) -> list[Span]:
        return [s for s in spans if s.name == "SendMessage" and s.attributes.get("a2a.task.id") == task_id]

    spans = otlp.wait_for(
        lambda got: bool(sent(got)) and any(s.attributes.get("backchannel.run_id") == task_id for s in got),
        "the SendMessage span and its run's",
    )
    (method,) = sent(spans)
    assert (method.kind, method.trace_id, method.parent_id) == ("server", CALLER_TRACE, CALLER_SPAN), method
    (run,) = [
        s for s in spans if s.name.startswith("invoke_agent") and s.attributes.get("backchannel.run_id") == task_id
    ]
    assert (run.trace_id, run.parent_id) == (CALLER_TRACE, method.span_id), run


# --- 4. a push receiver whose host does not resolve yet ---------------------------------------------------


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway with the default push settings (public receivers only), retrying quickly."""
    gw = new_gateway(tmp_path_factory.mktemp("a2a-strict") / "home")
    data = config.load_yaml(config.config_path(gw.root))
    a2a = {"push_retry_first_seconds": 0.2, "push_retry_max_seconds": 0.4}
    config.write_yaml(config.config_path(gw.root), {**data, "gateway": {**data["gateway"], "a2a": a2a}})
    gw.start()
    try:
        yield gw
    finally:
        gw.kill()


@BINDINGS
def test_a_receiver_whose_host_does_not_resolve_yet_is_accepted_and_screened_when_told(
    strict: GatewayProcess, binding: str
) -> None:
    """A resolver down for a moment refuses no valid receiver (`.invalid` never resolves: RFC 6761); a name
    that resolves to loopback is still refused when given, and what is owed to the unresolved one is tried
    (and fails, nothing sent) at each delivery."""
    unresolved = f"http://receiver-{binding.lower().replace('+', '-')}.push.invalid/hook"

    async def body(client: Client) -> None:
        task = await send(client, said("/sleep 1\npush me", f"m-unresolved-{binding}"))
        made = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, id="later", url=unresolved)
        )
        assert (made.id, made.url) == ("later", unresolved)
        with pytest.raises(A2AError, match="loopback address"):
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, id="local", url="http://localhost:9/hook")
            )
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in listed.configs] == ["later"]

    talk(strict, body, binding=binding)
    host = unresolved.split("/")[2]
    eventually(
        strict.log,
        lambda log: re.search(rf"to {re.escape(unresolved)}: attempt \d+ failed .*{re.escape(host)}", log),
        within=30.0,
        what=lambda log: f"no failed attempt to {unresolved}:\n{log[-3000:]}",
    )


# --- 5. a caller without a contextId has a conversation of its own ---------------------------------------


def target_of(gw: GatewayProcess, text: str) -> str:
    """The session (`profile/session`) the run of a message went to, from the person's ledger."""
    (entry,) = [e for e in ledger(gw) if e["message"] == text]
    target: str = entry["target"]
    return target


@BINDINGS
def test_each_caller_without_a_context_id_has_a_conversation_of_its_own(strict: GatewayProcess, binding: str) -> None:
    """Two peer keys (two ADK users) sending no contextId land in two conversations, each key's messages in its
    one; the person's land in the Bot Chat, which a peer reaches by naming it (`bot-chat`)."""
    tag = binding.lower().replace("+", "-")
    alice, bob = make_key(strict.root, f"alice-{tag}"), make_key(strict.root, f"bob-{tag}")
    contexts: dict[str, str] = {}

    def sends(key: str | None, *texts: str, context_id: str = "") -> None:
        async def body(client: Client) -> None:
            for text in texts:
                task = await send(client, said(text, f"m-{text}", context_id=context_id))
                assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
                contexts[text] = task.context_id

        talk(strict, body, binding=binding, key=key)

    sends(alice, f"alice first {tag}", f"alice again {tag}")
    sends(bob, f"bob first {tag}")
    sends(None, f"the person {tag}")
    sends(alice, f"alice goes on {tag}", context_id=contexts[f"alice first {tag}"])
    sends(alice, f"alice in the bot chat {tag}", context_id="bot-chat")
    alices = target_of(strict, f"alice first {tag}")
    assert target_of(strict, f"alice again {tag}") == target_of(strict, f"alice goes on {tag}") == alices
    bot_chat = target_of(strict, f"the person {tag}")
    assert len({alices, target_of(strict, f"bob first {tag}"), bot_chat}) == 3
    assert contexts[f"alice first {tag}"] == contexts[f"alice again {tag}"] == contexts[f"bob first {tag}"] == "own"
    assert target_of(strict, f"alice in the bot chat {tag}") == bot_chat
    assert contexts[f"alice in the bot chat {tag}"] == contexts[f"the person {tag}"] == bot_chat.partition("/")[2]


# --- 2. numbers in a data part keep their type ------------------------------------------------------------


@BINDINGS
def test_whole_numbers_in_a_data_part_stay_integers_both_ways(strict: GatewayProcess, binding: str) -> None:
    """What the agent reads of a data part says 42, not 42.0; a structured reply's data part (the echo
    engine's `/json`) is written with 42 and 7 on the wire, where any client's JSON reads integers."""
    tag = binding.lower().replace("+", "-")
    data = ParseDict({"data": {"n": 42, "nested": {"list": [7, 2.5]}}}, Part())
    replies: list[str] = []

    async def body(client: Client) -> None:
        task = await send(client, said("the numbers:", f"m-numbers-{tag}", data))
        replies.append(task.artifacts[0].parts[0].text)

    talk(strict, body, binding=binding)
    (reply,) = replies
    assert '"n": 42,' in reply and "7," in reply and "2.5" in reply and "42.0" not in reply, reply
    sent = {"messageId": f"m-json-{tag}", "role": "ROLE_USER", "parts": [{"text": '/json {"n": 42, "l": [7, 2.5]}'}]}
    headers = {"Authorization": f"Bearer {api_key(strict.root)}", **V1}
    if binding == JSONRPC:
        call = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": sent}}
        r = httpx.post(f"{strict.url}/a2a/jsonrpc", json=call, headers=headers, timeout=TIMEOUT, trust_env=False)
        task = r.json()["result"]["task"]
    else:
        r = httpx.post(
            f"{strict.url}/a2a/rest/message:send",
            json={"message": sent},
            headers=headers,
            timeout=TIMEOUT,
            trust_env=False,
        )
        task = r.json()["task"]
    assert r.status_code == 200 and r.headers["content-length"] == str(len(r.content)), r.text
    (value,) = [p["data"] for p in task["artifacts"][0]["parts"] if "data" in p]
    assert value == {"n": 42, "l": [7, 2.5]} and type(value["n"]) is int and type(value["l"][0]) is int, r.text
    assert b"42.0" not in r.content, r.text
