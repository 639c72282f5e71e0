"""The A2A push notification config methods, and a send's own push config, over the gateway's `Pushes`.

A config is its caller's, on a task that is the caller's: another caller's task is not found, and so are
its configs. Its notifications take the shape of the protocol version its caller spoke when making it (a
0.3 client's receiver gets 0.3 Tasks). An empty config id is the task's id (the SDK's rule: one default
config per task); creating a config with an id the task already has replaces its receiver.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from a2a.server.context import ServerCallContext
from a2a.types import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    SendMessageConfiguration,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

from ...core.pushes import Pushes, check_config_id
from ...errors import UsageError
from ...records import PushConfig, Receiver, Run

OwnRun = Callable[[str, ServerCallContext], Awaitable[Run]]  # the caller's run of that id, else TaskNotFoundError
Owner = Callable[[ServerCallContext], str]  # who the caller is, as the owner of configs


class PushConfigs:
    """Create, get, list and delete a task's push notification configs, as the caller that owns the task."""

    def __init__(self, pushes: Pushes, *, own_run: OwnRun, owner: Owner) -> None:
        self.pushes = pushes
        self._own_run = own_run
        self._owner = owner

    async def asked(
        self, config: SendMessageConfiguration, context: ServerCallContext
    ) -> TaskPushNotificationConfig | None:
        """A send's push config, checked before anything is sent (None: the send asks for none)."""
        if not config.HasField("task_push_notification_config"):
            return None
        asked = config.task_push_notification_config
        if asked.id:
            check_config_id(asked.id)
        await self.pushes.check(receiver_of(asked))
        await self.pushes.require_room(self._owner(context))
        return asked

    async def attach(self, asked: TaskPushNotificationConfig, task: Task, context: ServerCallContext) -> None:
        """The send's task told to the config it asked for; a task the policy rejected has no run: nothing to tell."""
        try:
            run = await self._own_run(task.id, context)
        except TaskNotFoundError:
            return
        await self.pushes.watch(
            run,
            owner=self._owner(context),
            config_id=asked.id or run.id,
            receiver=receiver_of(asked),
            version=spoken(context),
            checked=True,
        )

    async def create(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        run = await self._run(params.task_id, context)
        saved = await self.pushes.watch(
            run,
            owner=self._owner(context),
            config_id=params.id or run.id,
            receiver=receiver_of(params),
            version=spoken(context),
        )
        return config_of(saved)

    async def get(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        run = await self._run(params.task_id, context)
        config_id = params.id or run.id
        for row in await self.pushes.configs(run.id, owner=self._owner(context)):
            if row.config_id == config_id:
                return config_of(row)
        raise TaskNotFoundError(f"task {run.id!r} has no push notification config {config_id!r}")

    async def list(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """All of the task's configs (a task has few: one page); a page token is one we never gave."""
        run = await self._run(params.task_id, context)
        if params.page_token:
            raise InvalidParamsError(
                f"page token {params.page_token[:40]!r} was not given by this agent: a task's configs are one page",
                {"code": "invalid_page_token"},
            )
        rows = await self.pushes.configs(run.id, owner=self._owner(context))
        return ListTaskPushNotificationConfigsResponse(configs=[config_of(r) for r in rows])

    async def delete(self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext) -> None:
        """Nothing more is sent to it; deleting a config that is gone changes nothing (idempotent, §3.1.10)."""
        run = await self._run(params.task_id, context)
        await self.pushes.forget(run.id, params.id or run.id, owner=self._owner(context))

    async def _run(self, task_id: str, context: ServerCallContext) -> Run:
        if not task_id:
            raise UsageError("the push notification config names no task (taskId)", code="invalid_push_config")
        return await self._own_run(task_id, context)


def spoken(context: ServerCallContext) -> str:
    """The protocol version the caller speaks: its `A2A-Version` (header or query), none being 0.3 (§3.6.2)."""
    headers = context.state.get("headers") or {}
    version = str(headers.get(VERSION_HEADER.lower(), "")).strip()
    return "0.3" if not version or version.startswith("0.") else "1.0"


def receiver_of(config: TaskPushNotificationConfig) -> Receiver:
    auth = config.authentication
    return Receiver(url=config.url, token=config.token, auth_scheme=auth.scheme, auth_credentials=auth.credentials)


def config_of(row: PushConfig) -> TaskPushNotificationConfig:
    """A stored config as the caller gave it (its token and credentials too: the config is theirs alone)."""
    receiver = row.receiver
    config = TaskPushNotificationConfig(id=row.config_id, task_id=row.task_id, url=receiver.url, token=receiver.token)
    if receiver.auth_scheme:
        config.authentication.CopyFrom(
            AuthenticationInfo(scheme=receiver.auth_scheme, credentials=receiver.auth_credentials)
        )
    return config
