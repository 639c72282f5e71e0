"""The error tree: every failure Backchannel reports, with its exit code, HTTP status and code.

BackchannelError
 ├── UsageError            exit 2, 400 invalid_request   bad argument, bad name, bad body
 │    ├── BodyTooLarge     exit 2, 413 body_too_large
 │    ├── RequestTimeout   exit 2, 408 request_timeout   the request's body came too slowly
 │    └── ConfigError      exit 2, 400 invalid_config    unreadable config.yaml / .env
 ├── NotFound              exit 2, 404 not_found         unknown profile, session, run
 ├── Conflict              exit 2, 409 conflict           e.g. an id or key already used differently
 ├── Refused               exit 2, 403 not_allowed       refused by local policy
 ├── Forbidden             exit 2, 403 forbidden         the key used does not reach this (a peer's key)
 │    └── AgentKeyScope    exit 2, 403 agent_key_scope   an agent's key used past its profile's sessions' tools
 ├── AuthError             exit 1, 401 invalid_api_key
 ├── LimitReached          exit 1, 429 queue_full        a limit of the gateway's (also rate_limited, too_many_sessions)
 │    └── TooManyStreams   exit 1, 429 too_many_streams  a peer's key holds as many open streams as it may
 ├── StoreError            exit 2, 503 store_unavailable locked, damaged (store_damaged) or newer-schema state.db
 │    └── DiskFull         exit 1, 503 store_full        the disk (or the database's size limit) is full
 ├── GatewayDraining       exit 1, 503 gateway_draining  the gateway is stopping: try again shortly (Retry-After)
 ├── EngineError           exit 1, 502 engine_error      the model endpoint failed
 │    └── HermesPluginAbsent exit 1, hermes_plugin_absent a chat-driven Hermes session, its gateway's plugin not there
 ├── McpServerError        exit 1, 502 mcp_server_failed a profile's MCP server cannot start or list its tools
 ├── DeliveryError         exit 1, 424 run_failed        the run failed, expired or was cancelled
 ├── GatewayError          exit 1, 502 gateway_error     the running gateway could not be reached
 ├── PushFailed            exit 1, 502 push_failed       an A2A push notification's receiver could not be reached
 ├── Interrupted           exit 130                      Ctrl-C after the message was handed in: says how to ask again
 └── PeerError             exit 1, 424 peer_error        another gateway: unreachable, wrong key, failed
      ├── PeerUnreachable  exit 1, peer_unreachable      nothing was sent: the same key may go again
      ├── PeerAuthRefused  exit 1, peer_auth             the peer refused our key (or asks for other credentials)
      ├── NotAnAgentCard   exit 1, not_an_agent_card     the URL answered with no A2A agent card
      ├── UnsupportedBinding exit 1, unsupported_binding the card offers no JSON-RPC interface
      ├── NoEventStream    exit 1, no_stream             the peer has no event stream for the run: poll instead
      ├── PeerRefused      exit 2                        refused by the peer's policy or as malformed
      └── PeerOutcomeUnknown exit 1                      sent, but no answer: check, never resend blindly

`cli.main` and the HTTP app's exception handler are the only places that catch the root.
An error's audience is a property of its class: `model_visible` errors are the sender's doing (a bad
address, a refusal, an unknown run) and go back to a model as a tool result; the others are the
operator's (a broken store, an engine down) and fail the turn. A class with a `plain` message tells
anyone but the person only that (`concealed`): a store's address, user and database are the person's.
"""

from __future__ import annotations

from typing import Self


class BackchannelError(Exception):
    """The root: a message that names the thing, and how each surface reports it."""

    exit_code: int = 1
    http_status: int = 500
    code: str = "internal_error"
    type: str = "server_error"
    model_visible: bool = False  # True: a model that caused it should read it and correct itself
    retry_after: float | None = None  # seconds, sent as Retry-After with the HTTP answer
    plain: str | None = None  # what anyone but the person is told instead of the message (None: the message)

    def __init__(self, message: str, *, code: str | None = None, details: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details or {}

    def envelope(self) -> dict[str, dict[str, object]]:
        return {"error": {"message": self.message, "type": self.type, "code": self.code, **self.details}}

    def concealed(self) -> Self:
        """The error as anyone but the person is told it: its class's `plain` message and no details when it has
        one (changed in place, as it leaves the gateway; its class, code and status stay what they are)."""
        if self.plain is not None:
            self.message = self.plain
            self.details = {}
        return self


class UsageError(BackchannelError):
    exit_code = 2
    model_visible = True
    http_status = 400
    code = "invalid_request"
    type = "invalid_request_error"


class BodyTooLarge(UsageError):
    http_status = 413
    code = "body_too_large"


class RequestTimeout(UsageError):
    http_status = 408
    code = "request_timeout"


class ConfigError(UsageError):
    code = "invalid_config"
    model_visible = False  # a broken file is the operator's to fix


class NotFound(BackchannelError):
    exit_code = 2
    model_visible = True
    http_status = 404
    code = "not_found"
    type = "invalid_request_error"


class Conflict(BackchannelError):
    exit_code = 2
    model_visible = True
    http_status = 409
    code = "conflict"
    type = "invalid_request_error"


class Refused(BackchannelError):
    exit_code = 2
    model_visible = True
    http_status = 403
    code = "not_allowed"
    type = "permission_error"


class Forbidden(BackchannelError):
    """A valid key that does not reach what was asked: another profile, session or run, or the ledger."""

    exit_code = 2
    http_status = 403
    code = "forbidden"
    type = "permission_error"


class AgentKeyScope(Forbidden):
    """An agent's key (`hermes connect`) acts only as its profile's sessions, through their tools and mentions:
    anything else (another profile, the ledger, held messages, the gateway) is refused."""

    code = "agent_key_scope"


class AuthError(BackchannelError):
    """No key, or a key that is nobody's (`key_sent`): HTTP answers it with a Bearer challenge (RFC 6750)."""

    exit_code = 1
    http_status = 401
    code = "invalid_api_key"
    type = "invalid_request_error"

    def __init__(self, message: str, *, code: str | None = None, key_sent: bool = False) -> None:
        super().__init__(message, code=code)
        self.key_sent = key_sent


class KeyRevoked(AuthError):
    """The key a stream was opened with was revoked or rotated meanwhile: the stream ends."""

    code = "key_revoked"


class LimitReached(BackchannelError):
    """A limit no sender may exhaust (a session's queue, a sender's rate, a profile's sessions): try again later."""

    exit_code = 1
    model_visible = True
    http_status = 429
    code = "queue_full"
    type = "rate_limit_error"

    def __init__(self, message: str, *, code: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class TooManyStreams(LimitReached):
    """A peer's key (or the peers together, or one run) holds as many open streams as it may: one must end first."""

    code = "too_many_streams"


class StoreError(BackchannelError):
    """The store cannot be used just now (locked, away, damaged): nothing was changed."""

    exit_code = 2
    http_status = 503
    code = "store_unavailable"
    type = "server_error"
    retry_after = 2.0  # a shared store's server restarting, a lock held elsewhere: soon, most often
    plain = "the store is not available just now: nothing was changed; try again shortly"


class DiskFull(StoreError):
    """No space left for the store or a home file: nothing was changed; the same command works once space is freed."""

    exit_code = 1
    code = "store_full"
    retry_after = 30.0
    plain = "the store is full: nothing was saved; try again later"


class GatewayDraining(BackchannelError):
    """The gateway is shutting down and takes no new work; the same request succeeds after its restart."""

    exit_code = 1
    http_status = 503
    code = "gateway_draining"
    type = "server_error"
    retry_after = 5.0


class EngineError(BackchannelError):
    exit_code = 1
    http_status = 502
    code = "engine_error"
    type = "server_error"


class HermesPluginAbsent(EngineError):
    """A Hermes session driven from a chat platform, whose gateway's Backchannel plugin is not asking for work."""

    code = "hermes_plugin_absent"


class McpServerError(BackchannelError):
    """A profile's MCP server that cannot be started or listed: the turn that needs its tools fails naming it."""

    exit_code = 1
    http_status = 502
    code = "mcp_server_failed"
    type = "server_error"


class DeliveryError(BackchannelError):
    """A run that ended without a reply. 424, not 5xx: the gateway worked, the turn did not."""

    exit_code = 1
    http_status = 424
    code = "run_failed"
    type = "server_error"


class GatewayError(BackchannelError):
    exit_code = 1
    http_status = 502
    code = "gateway_error"
    type = "server_error"


class PushFailed(BackchannelError):
    """A push notification's POST that did not reach its receiver (refused address, no answer, a broken
    connection): the notification stays owed and is tried again later."""

    exit_code = 1
    http_status = 502
    code = "push_failed"
    type = "server_error"


class Interrupted(BackchannelError):
    """The person pressed Ctrl-C while a message was on its way: it may have been accepted."""

    exit_code = 130
    http_status = 499
    code = "interrupted"
    type = "invalid_request_error"


class PeerError(BackchannelError):
    """Another gateway could not be reached, refused our key, failed, or answered nonsense."""

    exit_code = 1
    http_status = 424
    code = "peer_error"
    type = "peer_error"


class PeerUnreachable(PeerError):
    """Nothing reached the other gateway (down, a wrong URL, a refused connection): sending again is safe."""

    code = "peer_unreachable"


class PeerAuthRefused(PeerError):
    """The other gateway refused our key, or asks for credentials we do not have."""

    code = "peer_auth"


class NotAnAgentCard(PeerError):
    """A URL that answered, but with no A2A agent card."""

    code = "not_an_agent_card"


class UnsupportedBinding(PeerError):
    """An agent card that offers no interface Backchannel speaks (JSON-RPC)."""

    code = "unsupported_binding"


class NoEventStream(PeerError):
    """The peer has no event stream for a run (it does not stream, or the stream is gone): poll its state."""

    code = "no_stream"


class PeerRefused(PeerError):
    """The other gateway refused the message by its policy or as malformed: resending will not help."""

    exit_code = 2
    code = "refused"
    type = "peer_refused"  # apart from the other peer errors: a caller told so changes its request (exit 2)
    model_visible = True


class PeerOutcomeUnknown(PeerError):
    """The request may have reached the peer but no answer came back: never report it as not delivered."""

    code = "outcome_unknown"
