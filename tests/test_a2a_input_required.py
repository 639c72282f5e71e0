"""A2A `input-required` (issue 42): a task whose turn asks its person (the echo engine's `/ask`) is
INPUT_REQUIRED with the question as its status message; a message naming that task is the answer, and the same
task goes on to its end. Through a2a-sdk's own client against a real gateway, over JSON-RPC and HTTP+JSON."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from a2a.client.client import Client
from a2a.types import (
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from a2a_client import JSONRPC, REST, V1, make_key, request, rpc, send, shared_gateway, until, with_client
from backchannel import a2a_extension
from conftest import GatewayProcess
from push_receiver import COMPLETED, Receiver, pushing_gateway, sent_with_push

BINDINGS = pytest.mark.parametrize("binding", [JSONRPC, REST])
ASKS = TaskState.TASK_STATE_INPUT_REQUIRED
DONE = TaskState.TASK_STATE_COMPLETED


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    yield from shared_gateway(tmp_path_factory, "a2a-input-required")


def answer(task: Task, text: str, message_id: str, *, immediately: bool = False) -> SendMessageRequest:
    """The follow-up message that names `task` (and its contextId): the answer to its question."""
    message = Message(
        message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)], task_id=task.id, context_id=task.context_id
    )
    return SendMessageRequest(message=message, configuration=SendMessageConfiguration(return_immediately=immediately))


def question_of(task: Task) -> tuple[str, dict[str, object]]:
    """The status message's text and what the Backchannel extension says of the question."""
    message = task.status.message
    assert message.role == Role.ROLE_AGENT, message
    said = MessageToDict(message.metadata)[a2a_extension.URI]["question"]
    return "".join(p.text for p in message.parts), said


async def events(stream: object) -> list[StreamResponse]:
    return [e async for e in stream]  # type: ignore[attr-defined]


def state_of(event: StreamResponse) -> TaskState:
    if event.HasField("task"):
        return event.task.status.state
    if event.HasField("status_update"):
        return event.status_update.status.state
    return TaskState.TASK_STATE_UNSPECIFIED


@BINDINGS
def test_a_task_that_asks_is_input_required_and_its_answer_completes_the_same_task(
    shared: GatewayProcess, binding: str
) -> None:
    tag = binding.lower().replace("+", "-")

    async def body(client: Client) -> None:
        asked = await send(client, request(f"/ask what colour, {tag}? | red, blue | blue | 600", f"ask-{tag}"))
        assert asked.status.state == ASKS, asked  # a blocking send returns at the question
        got = await client.get_task(GetTaskRequest(id=asked.id))
        assert got.status.state == ASKS, got
        text, said = question_of(got)
        assert text == f"what colour, {tag}?", got.status.message
        assert said["choices"] == ["red", "blue"] and said["default"] == "blue" and "expiresAt" in said, said
        assert str(said["id"]).startswith("q"), said
        listed = await client.list_tasks(ListTasksRequest())
        assert any(t.id == asked.id and t.status.state == ASKS for t in listed.tasks), listed

        done = await send(client, answer(asked, "red", f"answer-{tag}"))
        assert done.id == asked.id and done.status.state == DONE, done
        assert "".join(p.text for p in done.artifacts[0].parts) == "default (echo): red", done
        assert (await client.get_task(GetTaskRequest(id=asked.id))).status.state == DONE

        with pytest.raises(UnsupportedOperationError) as again:  # answered once: a second answer is refused
            await send(client, answer(asked, "blue", f"again-{tag}"))
        assert again.value.data == {"code": "question_closed"}, again.value
        plain = await send(client, request(f"no question {tag}", f"plain-{tag}"))
        assert plain.status.state == DONE, plain
        with pytest.raises(UnsupportedOperationError) as ended:  # a follow-up on a task that ended: as before
            await send(client, answer(plain, "more", f"more-{tag}"))
        assert ended.value.data == {"code": "task_ended"}, ended.value

    with_client(shared, body, binding=binding)


@BINDINGS
def test_streams_see_the_question_and_the_answer_streams_the_resumed_run(shared: GatewayProcess, binding: str) -> None:
    tag = binding.lower().replace("+", "-")

    async def body(client: Client) -> None:
        first = await events(client.send_message(request(f"/ask which size? {tag}", f"stream-ask-{tag}")))
        assert first[0].HasField("task"), first
        assert state_of(first[-1]) == ASKS, first  # the sender's stream closes at the question
        task_id = first[0].task.id
        asked = await client.get_task(GetTaskRequest(id=task_id))
        assert question_of(asked)[0] == f"which size? {tag}", asked.status.message

        async def subscribed() -> list[StreamResponse]:
            return await events(client.subscribe(SubscribeToTaskRequest(id=task_id)))

        watching = asyncio.create_task(subscribed())  # a subscription goes on through the answer to the end
        await asyncio.sleep(0.5)
        answered = await events(client.send_message(answer(asked, "large", f"stream-answer-{tag}")))
        assert answered[0].HasField("task") and answered[0].task.id == task_id, answered
        assert state_of(answered[-1]) == DONE, answered
        replied = [e for e in answered if e.HasField("artifact_update")]
        assert "".join(p.text for p in replied[-1].artifact_update.artifact.parts) == "default (echo): large"
        seen = await asyncio.wait_for(watching, 20)
        assert state_of(seen[0]) == ASKS and state_of(seen[-1]) == DONE, seen

    with_client(shared, body, binding=binding, streaming=True)


@BINDINGS
def test_only_the_owner_answers_and_only_once(shared: GatewayProcess, binding: str) -> None:
    tag = binding.lower().replace("+", "-")
    other = make_key(shared.root, f"stranger-{tag}")
    held: dict[str, Task] = {}

    async def ask(client: Client) -> None:
        held["task"] = await send(client, request(f"/ask yes or no? {tag}", f"once-{tag}"))
        assert held["task"].status.state == ASKS

    async def stranger(client: Client) -> None:
        with pytest.raises(TaskNotFoundError):
            await send(client, answer(held["task"], "no", f"stranger-{tag}"))

    async def twice(client: Client) -> None:
        task = held["task"]
        tries = await asyncio.gather(
            send(client, answer(task, "yes", f"one-{tag}", immediately=True)),
            send(client, answer(task, "no", f"two-{tag}", immediately=True)),
            return_exceptions=True,
        )
        won = [t for t in tries if isinstance(t, Task)]
        lost = [t for t in tries if not isinstance(t, Task)]
        assert len(won) == 1 and len(lost) == 1, tries
        assert isinstance(lost[0], UnsupportedOperationError) and lost[0].data == {"code": "question_closed"}, lost
        done = await until(client, task.id, lambda t: t.status.state == DONE)
        reply = "".join(p.text for p in done.artifacts[0].parts)
        assert reply in ("default (echo): yes", "default (echo): no"), done

    with_client(shared, ask, binding=binding)
    with_client(shared, stranger, binding=binding, key=other)
    with_client(shared, twice, binding=binding)


@pytest.fixture(scope="module")
def pushing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway whose home allows push receivers on loopback."""
    gw = pushing_gateway(tmp_path_factory.mktemp("push-asks") / "home", push_allow_private=True)
    try:
        yield gw
    finally:
        gw.kill()


def test_a_push_receiver_is_told_the_question_then_the_answered_tasks_end(pushing: GatewayProcess) -> None:
    with Receiver() as receiver:
        push = {"url": receiver.url, "token": "tok-asks"}
        sent = rpc(pushing, "SendMessage", sent_with_push("/ask pick one? | a, b", "m-push-ask", push), headers=V1)
        task = sent["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", sent
        told = receiver.wait_for(lambda posts: any(p.state == "TASK_STATE_INPUT_REQUIRED" for p in posts))
        (asking,) = [p.json["statusUpdate"]["status"] for p in told if p.state == "TASK_STATE_INPUT_REQUIRED"]
        assert asking["message"]["parts"] == [{"text": "pick one?"}], asking
        assert asking["message"]["metadata"][a2a_extension.URI]["question"]["choices"] == ["a", "b"], asking

        follow_up = {"messageId": "m-push-answer", "role": "ROLE_USER", "parts": [{"text": "b"}], "taskId": task["id"]}
        done = rpc(pushing, "SendMessage", {"message": follow_up}, headers=V1)["result"]["task"]
        assert done["id"] == task["id"] and done["status"]["state"] == COMPLETED, done
        posts = receiver.wait_for(lambda posts: any(p.state == COMPLETED for p in posts))
        assert posts[-1].json["statusUpdate"]["status"]["message"]["parts"] == [{"text": "default (echo): b"}]
