"""The home's config.yaml as one model: the `gateway:` section (its limits and `a2a:` push settings) and the
`peers:` registry. The defaults, the checks and the config reference (docs/config.md) all come from here."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, Field, model_validator

from .defaults import DEFAULT_HOST as DEFAULT_HOST
from .defaults import DEFAULT_PORT as DEFAULT_PORT
from .defaults import DURABILITIES as DURABILITIES
from .defaults import PEER_DIALECTS as PEER_DIALECTS
from .defaults import PEER_TIMEOUT_SECONDS as PEER_TIMEOUT_SECONDS
from .defaults import Dialect as Dialect
from .defaults import Durability as Durability
from .push_settings import PushSettings
from .values import Count, Flag, Frozen, Kind, PositiveCount, Seconds, Text, Words, at_least, one_of

OrNone = Annotated[str | None, BeforeValidator(lambda v: v or None), Kind("string")]


class PeerEntry(Frozen):
    """One entry of `peers:`: where another gateway is and how it is spoken to (its key is in .env)."""

    url: Text = Field(description="the peer's base URL, http(s)://host[:port][/path]")
    note: Words = Field("", description="shown in `peer list`")
    gateway_id: OrNone = Field(None, description="the peer's gateway id, remembered from its first answer")
    timeout_seconds: Seconds = Field(
        PEER_TIMEOUT_SECONDS, description="each request's bound (a chat: its wait plus this)"
    )
    dialect: Annotated[Dialect, one_of(*PEER_DIALECTS), BeforeValidator(lambda v: v or "hermes")] = Field(
        "hermes", description="how it is spoken to: the Hermes API-server dialect, or A2A (`a2a_url`, from its card)"
    )
    a2a_url: OrNone = Field(None, description="an A2A peer's JSON-RPC endpoint, from its agent card")
    failover_urls: Annotated[list[Text], BeforeValidator(lambda v: [] if v is None else v), Kind("list of URLs")] = (
        Field(
            default_factory=list,
            description="more URLs of the same gateway (gateways sharing one store), tried in order when one cannot"
            " be reached (`peer add --url U1 --url U2`)",
        )
    )

    @model_validator(mode="before")
    @classmethod
    def _needs_url(cls, data: object) -> object:
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            raise ValueError("needs a 'url'")
        if (data.get("dialect") or "hermes") != "a2a":  # a peer file from before A2A: the Hermes dialect
            return {k: v for k, v in data.items() if k != "a2a_url"}
        return data

    @model_validator(mode="after")
    def _a2a_needs_its_url(self) -> PeerEntry:
        if self.dialect == "a2a" and not self.a2a_url:
            raise ValueError("an a2a peer needs its a2a_url (run `backchannel peer add` again)")
        return self


class GatewaySettings(Frozen):
    """The `gateway:` section of the home's config.yaml."""

    host: Words = Field(DEFAULT_HOST, description="the address the gateway listens on")
    port: Count = Field(DEFAULT_PORT, description="the port it listens on")
    gateway_id: Words = Field("", alias="id", description="made by init; names this gateway to others")
    dedup_window_seconds: Count = Field(
        60,
        description="a request without an idempotency key is a new message, but for an OpenAI client's automatic "
        "retry (X-Stainless-Retry-Count) on /v1/chat/completions or /v1/responses: the same text from the same "
        "caller to the same session within this many seconds (or still unfinished) is answered by its first run",
    )
    max_concurrent_turns: Count = Field(32, description="turns running at once")
    run_ttl_seconds: Count = Field(3600, description="a run still queued after this long expires")
    max_attempts: Count = Field(3, description="attempts of a turn before its run fails")
    http_wait_seconds: Annotated[float, at_least(0), Kind("non-negative integer")] = Field(
        600.0, description="default wait of the chat route"
    )
    max_body_bytes: Count = Field(1_048_576, description="a request's body")
    durability: Annotated[Durability, one_of(*DURABILITIES)] = Field(
        "normal", description="or full: PRAGMA synchronous=FULL (see Reliability)"
    )
    # Limits no sender can exhaust (docs/security.md); the HTTP ones bound every connection.
    max_header_bytes: PositiveCount = Field(65_536, description="a request's head (request line and headers)")
    max_headers: PositiveCount = Field(100, description="headers in one request")
    header_timeout_seconds: PositiveCount = Field(10, description="a head must arrive within this, whole")
    body_timeout_seconds: PositiveCount = Field(30, description="a body must arrive within this, whole")
    keepalive_timeout_seconds: PositiveCount = Field(
        5, description="an idle kept-alive connection is closed after this"
    )
    max_connections: PositiveCount = Field(1024, description="open connections at once (503 past it)")
    reserved_connections: PositiveCount = Field(
        64,
        description="kept for the person: past max_connections, this many requests with the person's key are"
        " still served, however many connections others hold; and the peers' streams together stay this many"
        " under max_connections",
    )
    max_streams_per_key: PositiveCount = Field(
        64,
        description="streams (run events, chat/stream, A2A streaming) one peer's key may hold open at once"
        " (429 too_many_streams past it; the person's are not counted)",
    )
    max_streams_per_run: PositiveCount = Field(8, description="streams the peers' keys may hold open on one run")
    max_queued_per_session: PositiveCount = Field(
        100, description="runs waiting in one session (429 queue_full; a wake-up goes past it)"
    )
    max_runs_per_sender_per_minute: PositiveCount = Field(
        120, description="new runs one agent or peer may start (the person is never limited)"
    )
    max_turns_per_profile: Count = Field(
        0, description="turn slots one profile may hold; 0 = half of max_concurrent_turns"
    )
    max_sessions_per_profile: PositiveCount = Field(10_000, description="sessions one profile may hold")
    push: PushSettings = Field(
        default_factory=PushSettings, alias="a2a", description="A2A push notifications (see Push notifications)"
    )

    @model_validator(mode="after")
    def _room_for_peers(self) -> GatewaySettings:
        if self.reserved_connections >= self.max_connections:
            raise ValueError(
                f"reserved_connections ({self.reserved_connections}) must be below max_connections"
                f" ({self.max_connections}): the peers' streams get what the person's reserve leaves"
            )
        return self

    @property
    def peer_streams(self) -> int:
        """The streams all peers' keys together may hold open: what the person's reserve leaves of the connections."""
        return self.max_connections - self.reserved_connections

    @property
    def turns_per_profile(self) -> int:
        """The turn slots one profile may hold at once, so another profile's turns always find one."""
        total = max(1, self.max_concurrent_turns)
        share = self.max_turns_per_profile or total // 2
        return max(1, min(share, total))


STORE_SCHEMES = ("postgresql://", "postgres://")
STORE_PASSWORD_VAR = "BACKCHANNEL_STORE_PASSWORD"  # a shared store's password: in the home's .env, never in config


def _store_url(value: object) -> object:
    """A store URL is empty (the home's state.db) or a PostgreSQL URL without a password."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        return value  # the type's own check says what it must be
    if not value.startswith(STORE_SCHEMES):
        raise ValueError(f"must be empty (the home's state.db) or a postgresql:// URL, got {value!r}")
    userinfo = value.split("://", 1)[1].split("/", 1)[0].rpartition("@")[0]
    if ":" in userinfo:
        raise ValueError(
            f"holds a password: put it in the home's .env as {STORE_PASSWORD_VAR} and leave it out of the URL"
        )
    return value


class StoreSettings(Frozen):
    """The home's `store:` section: where runs, sessions and messages are kept."""

    url: Annotated[str, BeforeValidator(_store_url), Kind("postgresql:// URL, or empty")] = Field(
        "",
        description="empty: the home's state.db (SQLite, one gateway); postgresql://user@host:5432/db: a store "
        f"several gateways share (its password in .env as {STORE_PASSWORD_VAR}); BACKCHANNEL_STORE_URL wins",
    )
    lease_seconds: Seconds = Field(
        15.0,
        description="how long a claimed turn is a gateway's without renewal: a gateway paused or cut off from the "
        "store this long loses it (on a shared store, one that ended loses it at once)",
    )
    pool_size: PositiveCount = Field(
        16,
        description="the most connections a gateway opens to a shared store, as turns need them (idle ones close "
        "after a minute); keep gateways x pool_size below the server's max_connections",
    )
    keep_days: Count = Field(
        0,
        description="what ended this many days ago loses its message and reply text, its ledger row kept (0: kept)",
    )


GROUP_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}\Z")  # as a profile's or a peer's name


def _members(value: object) -> object:
    """A group's members: a list of addresses (each a non-empty word; what it names is checked where it is used)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(m, str) and m.strip() and not m.split()[1:] for m in value):
        raise ValueError(
            f"must be a list of addresses (profile, profile/session, peer:NAME[/AGENT], group:NAME), got {value!r}"
        )
    return [m.strip() for m in value]


def _group_names(value: object) -> object:
    if value is None:
        return {}
    if isinstance(value, dict):
        for name in value:
            if not isinstance(name, str) or not GROUP_NAME_RE.match(name):
                raise ValueError(f"{name!r} is not a group name (a-z, 0-9, '-', '_')")
    return value


Members = Annotated[list[str], BeforeValidator(_members), Kind("list of addresses")]
Groups = Annotated[dict[str, Members], BeforeValidator(_group_names), Kind("mapping of names to lists of addresses")]


class RoomSettings(Frozen):
    """The home's `rooms:` section: the bounds of every room (the rooms themselves are in the store)."""

    max_members: PositiveCount = Field(12, description="members a room may have")
    agent_messages_per_message: PositiveCount = Field(
        10, description="members' answers (hand-offs included) one of the person's messages sets going in a room"
    )


class TraceSettings(Frozen):
    """The home's `traces:` section: what goes into the spans beyond their ids, counts and outcomes (where they
    are sent is for the standard OTEL_* variables; see Observing)."""

    content: Flag = Field(
        False,
        description="put each message's and reply's text into its spans (they may hold anything), and each"
        " error's message and traceback (off: its class and code only)",
    )
    content_chars: PositiveCount = Field(1000, description="of a message's or reply's text in a span, with content")


class LogSettings(Frozen):
    """The home's `logs:` section: the gateway's log file, `<home>/logs/gateway.log` (see The gateway)."""

    max_bytes: PositiveCount = Field(
        5_242_880, description="the log file's size at which it is rotated (gateway.log.1, .2, …; the oldest dropped)"
    )
    keep: Count = Field(5, description="rotated files kept besides gateway.log (0: the log is emptied when full)")


class GatewayConfig(GatewaySettings):
    """The home's settings as the gateway uses them: the `gateway:` section, the store, the groups and the peers."""

    store: StoreSettings = Field(default_factory=StoreSettings)
    rooms: RoomSettings = Field(default_factory=RoomSettings)
    traces: TraceSettings = Field(default_factory=TraceSettings)
    logs: LogSettings = Field(default_factory=LogSettings)
    groups: dict[str, list[str]] = Field(default_factory=dict)
    peers: dict[str, PeerEntry] = Field(default_factory=dict)


class HomeFile(Frozen):
    """The home's config.yaml."""

    gateway: GatewaySettings = Field(default_factory=GatewaySettings, description="this gateway")
    store: Annotated[StoreSettings, BeforeValidator(lambda v: {} if v is None else v)] = Field(
        default_factory=StoreSettings, description="where the runs and sessions are kept (docs/shared-store.md)"
    )
    groups: Groups = Field(
        default_factory=dict,
        description="addresses sent to together, by name: `group:NAME` reaches each member (`group create`; see Teams)",
    )
    rooms: Annotated[RoomSettings, BeforeValidator(lambda v: {} if v is None else v)] = Field(
        default_factory=RoomSettings, description="the bounds of the rooms (`room create`; see Teams)"
    )
    traces: Annotated[TraceSettings, BeforeValidator(lambda v: {} if v is None else v)] = Field(
        default_factory=TraceSettings, description="what the spans say (sending them: OTEL_* variables; see Observing)"
    )
    peers: Annotated[dict[str, PeerEntry], BeforeValidator(lambda v: {} if v is None else v)] = Field(
        default_factory=dict, description="other gateways, by name (`peer add`)"
    )
    logs: Annotated[LogSettings, BeforeValidator(lambda v: {} if v is None else v)] = Field(
        default_factory=LogSettings, description="the gateway's log file, `logs/gateway.log` (see The gateway)"
    )

    @model_validator(mode="before")
    @classmethod
    def _empty_sections(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("gateway", {}) is None:
            return {**data, "gateway": {}}
        return data

    def settings(self) -> GatewayConfig:
        """The settings the gateway runs with: this file's gateway section and peers, in one object."""
        return GatewayConfig.model_construct(  # each part validated
            **dict(self.gateway),
            store=self.store,
            rooms=self.rooms,
            traces=self.traces,
            logs=self.logs,
            groups=self.groups,
            peers=self.peers,
        )
