"""A profile's config.yaml as one model: `model:` (the engine), `agent:` (turns and the messaging rules) and
`mcp_servers:`. The defaults, the checks and the config reference (docs/config.md) all come from here.

Every key has a default, so an empty (or missing) config.yaml is a profile on the defaults: the echo
engine, and messaging that allows nothing. A Hermes profile's own keys are not read (`schema` knows them).
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field, field_validator, model_validator

from ..ids import REMOTE
from .defaults import ENGINES as ENGINES
from .defaults import EngineName as EngineName
from .values import (
    AmountLimit,
    Count,
    Frozen,
    KeyProblem,
    Kind,
    Limit,
    Number,
    OptionalText,
    PositiveCount,
    Seconds,
    Words,
    one_of,
)

# The profile names a Hermes gateway serves under /p/<name>/ (upper case allowed there).
HERMES_PROFILE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
# An MCP server's name becomes the prefix of its tools' names (`<server>__<tool>`), as the model sees them.
MCP_SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
HTTP = ("http://", "https://")

# One segment of an address pattern: the characters of names and session ids, and fnmatch's `* ? [ ] !`.
_SEGMENT_RE = re.compile(r"[A-Za-z0-9_.*?\[\]!-]+")
PATTERN_MAX_CHARS = 200


def pattern_error(pattern: str) -> str | None:
    """Why `pattern` is no glob over addresses (`builds`, `builds/*`, `*`, `peer:spark/*`), or None when it is one.

    The one check of a messaging pattern: the loader applies it to every list, `profile allow` to what it adds."""
    if not pattern or len(pattern) > PATTERN_MAX_CHARS:
        return f"pattern {pattern!r} must be 1-{PATTERN_MAX_CHARS} characters"
    remote = pattern.startswith(REMOTE)
    parts = pattern.removeprefix(REMOTE).split("/")
    if len(parts) > (3 if remote else 2):
        shape = "peer:name[/profile[/session-id]]" if remote else "profile[/session-id]"
        return f"pattern {pattern!r} has too many parts for an address ({shape})"
    for part in parts:
        if not _SEGMENT_RE.fullmatch(part):
            return (
                f"pattern {pattern!r} is no address pattern: each part is letters, digits, '_', '.', '-' and the "
                "glob characters * ? [ ] (no blanks)"
            )
    return None


def _patterns(value: Any) -> Any:
    """A list of address patterns (one pattern alone is a list of one); None stays None (unset)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a list of patterns")
    for pattern in value:
        if (why := pattern_error(pattern)) is not None:
            raise ValueError(why)
    return tuple(value)


Patterns = Annotated[tuple[str, ...], BeforeValidator(lambda v: () if v is None else v), BeforeValidator(_patterns)]
OptionalPatterns = Annotated[tuple[str, ...] | None, BeforeValidator(_patterns), Kind("list of patterns")]
EnvName = Annotated[str | None, BeforeValidator(lambda v: str(v) if v else None), Kind("string")]


class Prices(Frozen):
    """`model.prices:`: what the model costs, from which each run's cost is counted (0: nothing)."""

    input_per_mtok: Number = Field(0.0, description="US dollars per million tokens read")
    output_per_mtok: Number = Field(0.0, description="US dollars per million tokens written")

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        """US dollars for that many tokens read and written."""
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1_000_000


def _section(value: Any) -> Any:
    return {} if value is None else value


class ModelConfig(Frozen):
    """`model:`: the engine a profile's turns run on, and where its model is."""

    engine: Annotated[EngineName, one_of(*ENGINES)] = Field(
        "echo",
        description="echo (offline), openai (an OpenAI-compatible endpoint) or hermes (a Hermes gateway); "
        "missing: openai when base_url is set",
    )
    base_url: str | None = Field(None, description="the endpoint (required by openai and hermes)")
    model: Annotated[Words, BeforeValidator(lambda v: v or "")] = Field(
        "",
        validation_alias=AliasChoices("default", "model"),
        description="the model name sent to the endpoint (`model` too, Hermes' older spelling)",
    )
    api_key_env: EnvName = Field(None, description="the variable (in .env or the environment) holding the key")
    timeout_seconds: Number = Field(120.0, description="a model call's bound")
    profile: str | None = Field(
        None, description="hermes engine: the Hermes profile, served under <base_url>/p/<profile>/"
    )
    approval_seconds: Number = Field(
        240.0,
        description="hermes engine: how long a Hermes run's dangerous-command approval waits for the person here"
        " before its default (deny); under Hermes's own approvals.timeout (300 s on 0.22), which denies it there",
    )
    prices: Annotated[Prices, BeforeValidator(_section)] = Field(
        default_factory=Prices, description="what the model costs: a run's cost is counted from its tokens"
    )

    @model_validator(mode="before")
    @classmethod
    def _engine_from_url(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        engine = data.get("engine")
        if engine is None:
            engine = "openai" if data.get("base_url") else "echo"
        return {**data, "engine": engine} if engine == "hermes" else {**data, "engine": engine, "profile": None}

    @field_validator("base_url")
    @classmethod
    def _no_trailing_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value is not None else None

    @model_validator(mode="after")
    def _engine_needs(self) -> ModelConfig:
        if self.engine != "echo" and self.base_url is None:
            raise KeyProblem("base_url", f"is required for the {self.engine} engine")
        if self.engine == "hermes" and not (self.base_url or "").startswith(HTTP):
            raise KeyProblem("base_url", f"{self.base_url!r} must be an http:// or https:// URL")
        if self.profile is not None and not HERMES_PROFILE_RE.match(self.profile):
            raise KeyProblem("profile", f"{self.profile!r} is not a Hermes profile name")
        return self


class Budget(Frozen):
    """`agent.session_messaging.budget:`: what this profile's agents may spend before their sends are refused
    (`budget_exhausted`); a key left out is no limit. The person's own messages are never refused by it."""

    tokens_per_exchange: Limit = Field(
        None, description="tokens used by all the runs that followed one person's message (none: no limit)"
    )
    tokens_per_day: Limit = Field(None, description="tokens used by this profile's turns in the last 24 hours")
    usd_per_day: AmountLimit = Field(None, description="US dollars this profile's turns cost in the last 24 hours")

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.tokens_per_exchange, self.tokens_per_day, self.usd_per_day))


SendOption = Literal["wait_seconds", "mode", "deadline"]  # send_to_session's optional arguments a profile may offer


def _listed(value: Any) -> Any:
    """None as nothing; a list as the tuple of its items (each checked by the field's own type)."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise ValueError("must be a list")
    return tuple(value)


SendOptions = Annotated[tuple[SendOption, ...], BeforeValidator(_listed), Kind("list of wait_seconds, mode, deadline")]


class MessagingPolicy(Frozen):
    """`agent.session_messaging:`: whom a profile's sessions may message, who may message it, and the bounds."""

    allow: Annotated[Patterns, Kind("list of patterns")] = Field(
        (), description="what this profile's sessions may message; empty or missing = nothing"
    )
    accept: OptionalPatterns = Field(None, description="who may message this profile; missing = anyone allowed to")
    max_hops: Count = Field(6, description="a message sent from a turn handling hop h is hop h+1")
    pair_budget_per_hour: Count = Field(30, description="agent-sent messages from this profile to one other, per hour")
    inbound_budget_per_hour: Count = Field(
        120, description="messages from one peer key to this profile per hour, whatever they say"
    )
    hold: Annotated[Patterns, Kind("list of patterns")] = Field(
        (), description="senders whose messages wait for the person's approval"
    )
    hold_expiry_seconds: Seconds = Field(86400.0, description="a held message not approved by then expires")
    send_options: SendOptions = Field(
        (), description="send_to_session's optional arguments offered to its models (wait_seconds, mode, deadline)"
    )
    budget: Annotated[Budget, BeforeValidator(_section)] = Field(
        default_factory=Budget, description="tokens and dollars this profile's agents may spend on sends"
    )


class AgentSettings(Frozen):
    """`agent:`: the turn's bound and the messaging rules."""

    max_turns: PositiveCount = Field(20, description="model calls per turn")
    session_messaging: Annotated[MessagingPolicy, BeforeValidator(lambda v: {} if v is None else v)] = Field(
        default_factory=MessagingPolicy, description="the messaging rules (deny by default)"
    )


def _strings(value: Any) -> Any:
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(a, str | int | float) for a in value):
        raise ValueError("must be a list of strings")
    return tuple(str(a) for a in value)


def _string_map(value: Any) -> Any:
    if value is None:
        return ()
    if isinstance(value, tuple):
        return value
    if not isinstance(value, dict) or not all(isinstance(v, str | int | float) for v in value.values()):
        raise ValueError("must be a mapping of names to strings")
    return tuple((str(k), str(v)) for k, v in value.items())


StringMap = Annotated[tuple[tuple[str, str], ...], BeforeValidator(_string_map), Kind("mapping of names to strings")]


class McpServerConfig(Frozen):
    """One entry of a profile's `mcp_servers:`, in the shape Claude Code and Hermes read: a command to run
    (stdio) or a URL (streamable HTTP). `${VAR}` in args, env, url and headers is filled in when it starts."""

    name: str = Field("", exclude=True)  # the entry's key in `mcp_servers:`
    command: OptionalText = Field(None, description="the program of a stdio server")
    args: Annotated[tuple[str, ...], BeforeValidator(_strings), Kind("list of strings")] = Field(
        (), description="its arguments"
    )
    env: StringMap = Field((), description="variables set for it")
    url: OptionalText = Field(None, description="a streamable-HTTP server's URL")
    headers: StringMap = Field((), description="headers sent to it")
    timeout: Seconds = Field(120.0, description="seconds a tool call may take")
    connect_timeout: Seconds = Field(60.0, description="seconds to start and list the tools")

    @model_validator(mode="before")
    @classmethod
    def _command_or_url(cls, data: Any) -> Any:
        if isinstance(data, dict) and (data.get("command") is None) == (data.get("url") is None):
            raise ValueError("needs either 'command' (stdio) or 'url' (streamable HTTP)")
        return data

    @field_validator("command")
    @classmethod
    def _a_command(cls, value: str | None) -> str | None:
        if value is not None and not value:
            raise ValueError("must be a non-empty string")
        return value

    @field_validator("url")
    @classmethod
    def _an_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(HTTP):
            raise ValueError(f"{value!r} must be an http:// or https:// URL")
        return value


def _server_names(value: Any) -> Any:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("must be a mapping of server names")
    for name in value:
        if not isinstance(name, str) or not MCP_SERVER_NAME_RE.match(name):
            raise KeyProblem(str(name), "a server name is 1-32 letters, digits, '_' or '-'", joint=": ")
    return value


class ProfileConfig(Frozen):
    """A profile's config.yaml; `max_turns`, `messaging` and `mcp_servers` are what the rest of the code reads."""

    model: ModelConfig = Field(default_factory=ModelConfig, description="the engine")
    agent: AgentSettings = Field(default_factory=AgentSettings, description="the agent")
    servers: Annotated[dict[str, McpServerConfig], BeforeValidator(_server_names), Kind("mapping of servers")] = Field(
        default_factory=dict, alias="mcp_servers", description="MCP servers whose tools the agent gets, by name"
    )

    @model_validator(mode="before")
    @classmethod
    def _sections(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        model = data.get("model")
        if isinstance(model, str):  # Hermes allows `model: provider/name`
            data = {**data, "model": {"default": model}}
        return {k: {} if v is None and k in ("model", "agent") else v for k, v in data.items()}

    @property
    def max_turns(self) -> int:
        return self.agent.max_turns

    @property
    def messaging(self) -> MessagingPolicy:
        return self.agent.session_messaging

    @cached_property
    def mcp_servers(self) -> tuple[McpServerConfig, ...]:
        return tuple(server.model_copy(update={"name": name}) for name, server in self.servers.items())

    def __hash__(self) -> int:
        return hash((self.model, self.agent, tuple(self.servers.items())))
