"""The SDK's `RequestHandler` over the delivery service: a task is a run, sent and seen as the key's caller."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine
from typing import Any, NoReturn, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    A2AError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length, validate_history_length
from google.protobuf.json_format import MessageToDict

from ... import a2a_extension, keys, tracing
from ...core.access import Caller
from ...core.delivery.admission import Attempt
from ...errors import BackchannelError, KeyRevoked, NotFound, Refused
from ...framing import is_human
from ...home.redact import redact
from ...records import Question, Run, RunState
from ..context import Context
from . import inbound
from .answers import answer
from .conversations import Conversation, check_context, context_of, conversation, refuse_follow_up
from .listing import list_tasks
from .push_configs import PushConfigs
from .streams import updates
from .tasks import STATES, rejected, task_of

CALLER = "backchannel.caller"
PROFILE = "backchannel.profile"
PERSON_SENDER = "human:a2a"
ENDS = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
STOPS = ENDS | {TaskState.TASK_STATE_INPUT_REQUIRED}  # where a blocking send returns (§3.2.2) and its stream closes


Params = TypeVar("Params")
Answer = TypeVar("Answer")


def _mapped(
    method: Callable[[RunsHandler, Params, ServerCallContext], Coroutine[Any, Any, Answer]],
) -> Callable[[RunsHandler, Params, ServerCallContext], Coroutine[Any, Any, Answer]]:
    """A handler method whose Backchannel errors leave as the A2A errors the SDK answers (`RunsHandler._fail`),
    not as its internal error quoting them."""

    @functools.wraps(method)
    async def mapped(self: RunsHandler, params: Params, context: ServerCallContext) -> Answer:
        try:
            return await method(self, params, context)
        except BackchannelError as exc:
            self._fail(exc, context)

    return mapped


def _mapped_stream(
    method: Callable[[RunsHandler, Params, ServerCallContext], AsyncGenerator[Event]],
) -> Callable[[RunsHandler, Params, ServerCallContext], AsyncGenerator[Event]]:
    """`_mapped` for a method that streams its events."""

    @functools.wraps(method)
    async def mapped(self: RunsHandler, params: Params, context: ServerCallContext) -> AsyncGenerator[Event]:
        try:
            async with contextlib.aclosing(method(self, params, context)) as events:
                async for event in events:
                    yield event
        except BackchannelError as exc:
            self._fail(exc, context)

    return mapped


class RunsHandler(RequestHandler):
    """SendMessage, GetTask and CancelTask as deliver/submit, status and stop; SendStreamingMessage and
    SubscribeToTask follow the run's events; ListTasks pages through the caller's tasks; the push notification
    configs of the caller's tasks are the gateway's `Pushes` (`push_configs`). The extended card is not served.

    `contextId` is a conversation (`conversations`: the caller's own contextId, a session's id, `bot-chat`;
    none: a peer key's own conversation, the person's Bot Chat), `taskId` a run, `messageId` with the message's
    content the run's idempotency key for this caller and profile (an exact repeat answers with the same task).
    A task is its sender's: another caller's is not found."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._push = PushConfigs(ctx.messages.pushes, own_run=self._own_run, owner=_owner)

    @_mapped
    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        """The task the message is (its history within `configuration.historyLength`). With a push config, the
        task is watched by it before the send waits, so its receiver is told every change from the first."""
        config = params.configuration
        _check(config)
        with tracing.span_of(_a2a_span, "SendMessage", params.message) as span:
            asked = await self._push.asked(config, context)
            immediately = config.return_immediately or asked is not None
            task = await self._accept(params.message, context, immediately=immediately)
            if asked is not None:
                await self._push.attach(asked, task, context)
                if not config.return_immediately and task.status.state not in STOPS:
                    task = await self._task(await self._settled(task.id), context)
            _told(span, task)
        return apply_history_length(task, config)

    @_mapped
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        validate_history_length(params)
        with tracing.span_of(_a2a_span, "GetTask") as span:
            task = await self._task(await self._own_run(params.id, context), context)
            _told(span, task)
        return apply_history_length(task, params)

    @_mapped
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        run = await self._own_run(params.id, context)
        if run.state.terminal:
            raise TaskNotCancelableError(f"task {run.id!r} has ended already ({run.state.value}): nothing to cancel")
        delivered = await self.ctx.messages.stop(run.id, profile=run.profile)  # a held task too: it never ran
        return await self._task(delivered.run, context)

    @_mapped
    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        who, profile = _scope(context)
        return await list_tasks(
            self.ctx.messages,
            self.ctx.roster,
            params,
            profile=profile,
            sender=_holder(who),
            profiles=who.peer is not None,
        )

    @_mapped_stream
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """The message accepted as SendMessage with returnImmediately does it, then its task followed: the
        Task, its updates, closed when it ends. A task that cannot move on its own (refused, held for the
        person, a replay of one that ended) is the Task alone."""
        config = params.configuration
        _check(config)
        with tracing.span_of(_a2a_span, "SendStreamingMessage", params.message) as span:
            asked = await self._push.asked(config, context)
            task = await self._accept(params.message, context, immediately=True)
            if asked is not None:
                await self._push.attach(asked, task, context)
            _told(span, task)
        yield apply_history_length(task, config)
        if task.status.state in STOPS:
            return
        run = await self.ctx.messages.run(task.id)
        if run.state is RunState.HELD:
            return
        since = run.updated_at if params.message.task_id else None  # an answer: the resumed run from the answer on
        followed = updates(
            self.ctx.messages, run, context_id=task.context_id, until_asked=True, since=since, told=task.status.state
        )
        async for event in self._while_valid(context, followed):
            yield event

    @_mapped_stream
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """The task as the store has it now (what a caller missed, across a restart too), then its updates
        until it ends; a task that has ended is UnsupportedOperation (§3.1.6): GetTask reads it."""
        run = await self._own_run(params.id, context)
        if run.state.terminal:
            raise UnsupportedOperationError(
                f"task {run.id!r} has ended already ({TaskState.Name(STATES[run.state])}): read it with GetTask"
            )
        task = await self._task(run, context)
        yield task
        async for event in self._while_valid(context, updates(self.ctx.messages, run, context_id=task.context_id)):
            yield event

    # --- push notification configs ----------------------------------------------------------------

    @_mapped
    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        return await self._push.create(params, context)

    @_mapped
    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        return await self._push.get(params, context)

    @_mapped
    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        return await self._push.list(params, context)

    @_mapped
    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        await self._push.delete(params, context)

    # --- what is not served yet ------------------------------------------------------------------

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError("there is no extended agent card: the public card is all")

    # --- helpers ---------------------------------------------------------------------------------

    def _fail(self, exc: BackchannelError, context: ServerCallContext) -> NoReturn:
        """`_fail`, the error naming no path of the home (it leaves the gateway), told in full to the person only
        (anyone else reads what its class says plainly: a store's address is the person's to know)."""
        who, _profile = _scope(context)
        redact(exc, self.ctx.gateway.root)
        _fail(exc if who.is_person else exc.concealed())

    async def _while_valid(self, context: ServerCallContext, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """A stream's events until it ends, or until the caller's key is revoked or rotated: then an error
        (the SDK ends the stream with it; the task goes on)."""
        who, _profile = _scope(context)
        try:
            async for event in self.ctx.gateway.keys.while_valid(who, events):
                yield event
        except KeyRevoked as exc:
            raise InvalidRequestError(exc.message, {"code": exc.code}) from None

    async def _accept(self, message: Message, context: ServerCallContext, *, immediately: bool) -> Task:
        """The message delivered (or, `immediately`, accepted) as the caller's: its run's task, or the REJECTED
        task of a message the policy refuses."""
        who, profile = _scope(context)
        caller = _holder(who)
        if message.task_id:
            run = await self._own_run(message.task_id, context)
            known_as = await context_of(self.ctx.roster, caller, run)
            check_context(message, run, known_as)
            question = await self.ctx.messages.asked(run.id)
            if question is None or (question.is_open and run.state is not RunState.INPUT_REQUIRED):
                refuse_follow_up(message, run, known_as)
            assert question is not None
            resumed = await answer(self.ctx.messages, run, question, message, by=caller)
            if not immediately:
                resumed = await self._settled(run.id)
            return await self._task(resumed, context)
        read = inbound.read(message)
        try:
            carried = _hops_chain(message)
            sender = _sender(who, carried.profile)
            key = keys.a2a(sender, profile, message.message_id, content=read.content)
            filed = await self._filed_in(key, caller, profile) if not message.context_id else None
            joined = filed or await conversation(self.ctx.roster, who, caller, profile, message.context_id)
            incoming = Attempt.handed_in(
                session=joined.session,
                text=read.text,
                sender=sender,
                key=key,
                hops=carried.hops,
                chain=carried.chain,
                exchange=carried.exchange,
                files=read.files,
                context=joined.new,
                deadline=carried.deadline,
            )
            waits = None if immediately else self.ctx.settings.http_wait_seconds
            delivered = await self.ctx.messages.submit(incoming, wait=waits)
            if not immediately and not delivered.run.state.terminal:  # a blocking send: to its end or its question
                waited = await self.ctx.messages.wait(
                    delivered.run.id, self.ctx.settings.http_wait_seconds, interrupted=True
                )
                delivered = dataclasses.replace(waited, result=delivered.result)
        except Refused as exc:  # only the delivery refuses: the conversation was found (a new one is not begun)
            asked = Message()
            asked.CopyFrom(message)
            asked.context_id = joined.context_id
            return rejected(joined.context_id, asked, code=exc.code, reason=exc.message)
        question = await self._asked(delivered.run)
        task = task_of(delivered.run, context_id=joined.context_id, files=read.files, question=question)
        if delivered.result.replayed:  # the same message again: its task as it is, and said to be a replay
            task.metadata.update({"replayed": True})
        return task

    async def _filed_in(self, key: str, caller: str, profile: str) -> Conversation | None:
        """The conversation a message with no contextId joined when it was first filed under `key`: its retry is
        answered with its task, wherever a new message would go now (before a peer key had a conversation of its
        own, the Bot Chat). None for a message not filed yet."""
        filed = await self.ctx.messages.run_id_of(key)
        if filed is None:
            return None
        try:
            run = await self.ctx.messages.run(filed, profile=profile)
            session = await self.ctx.roster.session(run.session_id, profile=profile)
        except NotFound:
            return None
        return Conversation(session, await context_of(self.ctx.roster, caller, run))

    async def _task(self, run: Run, context: ServerCallContext) -> Task:
        """The caller's run as a task: under the contextId the caller knows its session by, with its files."""
        who, _profile = _scope(context)
        files = (await self.ctx.messages.files([run.id])).get(run.id, ())
        context_id = await context_of(self.ctx.roster, _holder(who), run)
        return task_of(run, context_id=context_id, files=files, question=await self._asked(run))

    async def _settled(self, run_id: str) -> Run:
        """A blocking send's run once it ended or waits for its person's answer, or as it is after the gateway's
        HTTP wait (§3.2.2)."""
        return (await self.ctx.messages.wait(run_id, self.ctx.settings.http_wait_seconds, interrupted=True)).run

    async def _asked(self, run: Run) -> Question | None:
        """The question a run waiting for its person's answer asked (None for a run in any other state)."""
        return await self.ctx.messages.asked(run.id) if run.state is RunState.INPUT_REQUIRED else None

    async def _own_run(self, task_id: str, context: ServerCallContext) -> Run:
        """The caller's run `task_id` in the path's profile; anyone else's is not found."""
        who, profile = _scope(context)
        try:
            run = await self.ctx.messages.run(task_id, profile=profile)
        except NotFound:
            raise TaskNotFoundError(f"no task {task_id!r} in profile {profile!r}") from None
        if not (is_human(run.sender) if who.is_person else who.sent(run.sender)):
            raise TaskNotFoundError(f"no task {task_id!r} in profile {profile!r}")
        return run


def _a2a_span(method: str, message: Message | None = None) -> tuple[str, str, dict[str, object]]:
    """An A2A request's server span, named by its method (the A2A conventions: `a2a.method.name`, the task, the
    message, the contextId as the conversation)."""
    attributes: dict[str, object] = {"a2a.method.name": method, "rpc.system.name": "a2a"}
    if message is not None:
        attributes["a2a.message.id"] = message.message_id or None
        attributes["gen_ai.conversation.id"] = message.context_id or None
    return method, "server", attributes


def _told(span: Any, task: Task) -> None:
    """What the A2A request came to, on its span (when tracing is on)."""
    if span is not None:
        tracing.annotate(
            span,
            {
                "a2a.task.id": task.id,
                "a2a.task.state": TaskState.Name(task.status.state),
                "gen_ai.conversation.id": task.context_id,
            },
        )


def _scope(context: ServerCallContext) -> tuple[Caller, str]:
    who, profile = context.state[CALLER], context.state[PROFILE]
    assert isinstance(who, Caller) and isinstance(profile, str)
    return who, profile


def _owner(context: ServerCallContext) -> str:
    """Whose push notification configs a caller's are: the person's, or one peer key's (whatever profile sent)."""
    who, _profile = _scope(context)
    return PERSON_SENDER if who.is_person else who.principal


def _sender(who: Caller, profile: str | None = None) -> str:
    """Whom a caller's A2A messages are from: a peer's `peer:NAME/<profile>` (`peer:NAME/default` when its
    message says no sending profile); a person's `human:a2a`. Its tasks are those runs."""
    return who.sender(profile) if who.peer else PERSON_SENDER


def _holder(who: Caller) -> str:
    """Who holds the caller's key: the person (`human:a2a`) or the peer (`peer:NAME`), whatever profile sends;
    its conversations (contextIds) and its tasks are the holder's."""
    return PERSON_SENDER if who.is_person else who.principal


def _hops_chain(message: Message) -> a2a_extension.HopsChain:
    """The Backchannel extension's hops and chain in the message's metadata (none: hop 0, no chain).

    A peer's word is checked against our own records by the delivery service (its hop never lower than its
    exchange reached here); a person's is taken as they say it, as the X-Backchannel-Hops header is. A
    malformed entry is an invalid-params error naming the field, and nothing is recorded."""
    if not message.HasField("metadata"):
        return a2a_extension.HopsChain()
    return a2a_extension.read(MessageToDict(message.metadata))


def _fail(exc: BackchannelError) -> NoReturn:
    """A Backchannel error as the A2A error the SDK answers with: the caller's doing is invalid params, the
    gateway's an internal error; the code is the one docs/cli.md's Error codes lists."""
    data = {"code": exc.code}  # the SDK sends it as the error's google.rpc.ErrorInfo metadata: strings
    if exc.retry_after is not None:
        data["retryAfter"] = f"{exc.retry_after:.0f}"
    caller_s = exc.http_status < 500  # a bad request, an unknown session, a key that does not reach it, a limit
    error: A2AError = InvalidParamsError(exc.message, data) if caller_s else InternalError(exc.message, data)
    raise error from exc


def _check(config: SendMessageConfiguration) -> None:
    """Refuse what a send's configuration asks that is not served: a negative historyLength."""
    validate_history_length(config)
