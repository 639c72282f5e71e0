"""A2A's error shapes, in one place: JSON-RPC's error object and HTTP+JSON's `google.rpc.Status` (AIP-193),
each with the `google.rpc.ErrorInfo` the spec asks for (our error code in its metadata), bounded in size.

Errors raised before any A2A method runs (the key, the profile, the body's size, time and content type) are
answered here in the shape of the binding the request came by, with the gateway's HTTP status; so are the
SDK's own errors, rewritten to the spec's HTTP statuses (§5.4: TaskNotCancelable is 409, ContentTypeNotSupported
415) and cut to size (a malformed parameter of 1 MB is not echoed back, nor logged, in full). No SDK import here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse

from ...errors import BackchannelError

DOMAIN = "a2a-protocol.org"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
MAX_TEXT = 300  # characters of an error's message, or of one metadata value, that are sent and logged
Binding = Literal["jsonrpc", "rest"]

# /a2a/jsonrpc and /a2a/rest/..., at the root or under /p/<profile>, with or without a trailing slash.
_PATH = re.compile(r"^(?:/p/[^/]+)?/a2a/(jsonrpc/?$|rest(?:/|$))")

# The spec's HTTP status of each A2A error reason (§5.4) where the SDK answers another; the rest are the SDK's.
SPEC_HTTP_STATUS = {
    "TASK_NOT_CANCELABLE": 409,
    "CONTENT_TYPE_NOT_SUPPORTED": 415,
    "INVALID_AGENT_RESPONSE": 502,
}

# The JSON-RPC codes of the caller's malformed requests: each is logged once, and counted against a peer's rate.
BAD_REQUEST_CODES = frozenset({-32700, -32600, -32601, -32602, -32005, -32009})
BAD_REQUEST_REASONS = frozenset(
    {"INVALID_REQUEST", "INVALID_PARAMS", "METHOD_NOT_FOUND", "CONTENT_TYPE_NOT_SUPPORTED", "VERSION_NOT_SUPPORTED"}
)


@dataclass(frozen=True)
class Failure:
    """One A2A error in every binding's terms: JSON-RPC code, ErrorInfo reason, HTTP status and gRPC status name."""

    jsonrpc_code: int
    reason: str
    http_status: int
    status: str
    message: str
    metadata: Mapping[str, str] = field(default_factory=dict)

    def jsonrpc(self, request_id: object = None) -> dict[str, Any]:
        error = {"code": self.jsonrpc_code, "message": bounded(self.message), "data": [self._info()]}
        return {"jsonrpc": "2.0", "id": request_id, "error": error}

    def rest(self) -> dict[str, Any]:
        return {
            "error": {
                "code": self.http_status,
                "status": self.status,
                "message": bounded(self.message),
                "details": [self._info()],
            }
        }

    def _info(self) -> dict[str, Any]:
        return {
            "@type": ERROR_INFO,
            "reason": self.reason,
            "domain": DOMAIN,
            "metadata": {k: bounded(v) for k, v in self.metadata.items()},
        }


# How a gateway error met before any A2A method ran is told: (JSON-RPC code, reason, gRPC status) by HTTP status.
_BY_STATUS: dict[int, tuple[int, str, str]] = {
    400: (-32602, "INVALID_PARAMS", "INVALID_ARGUMENT"),
    401: (-32600, "INVALID_REQUEST", "UNAUTHENTICATED"),
    403: (-32600, "INVALID_REQUEST", "PERMISSION_DENIED"),
    404: (-32600, "INVALID_REQUEST", "NOT_FOUND"),
    405: (-32600, "INVALID_REQUEST", "UNIMPLEMENTED"),
    408: (-32600, "INVALID_REQUEST", "DEADLINE_EXCEEDED"),
    413: (-32600, "INVALID_REQUEST", "INVALID_ARGUMENT"),
    415: (-32005, "CONTENT_TYPE_NOT_SUPPORTED", "INVALID_ARGUMENT"),
    429: (-32600, "INVALID_REQUEST", "RESOURCE_EXHAUSTED"),
}


def failure(http_status: int, message: str, code: str, *, retry_after: float | None = None) -> Failure:
    """A gateway refusal (its HTTP status, message and our code) as an A2A error."""
    jsonrpc_code, reason, status = _BY_STATUS.get(
        http_status, (-32603, "INTERNAL_ERROR", "UNAVAILABLE" if http_status == 503 else "INTERNAL")
    )
    metadata = {"code": code}
    if retry_after is not None:
        metadata["retryAfter"] = f"{retry_after:.0f}"
    return Failure(jsonrpc_code, reason, http_status, status, message, metadata)


def parse_error(message: str, code: str) -> Failure:
    """JSON-RPC's parse error (-32700) for a body that is not JSON or is past the gateway's JSON bounds."""
    return Failure(-32700, "INVALID_REQUEST", 200, "INVALID_ARGUMENT", message, {"code": code})


def no_route(http_status: int, message: str, code: str) -> Failure:
    """A path or method the A2A endpoint does not serve (HTTP+JSON: an unknown route is an unknown method)."""
    if http_status == 404:
        return Failure(-32601, "METHOD_NOT_FOUND", 404, "NOT_FOUND", message, {"code": code})
    return failure(http_status, message, code)


def of_error(exc: BackchannelError) -> Failure:
    return failure(exc.http_status, exc.message, exc.code, retry_after=exc.retry_after)


def binding_of(request: Request) -> Binding | None:
    """Which A2A binding a request came by (None: not an A2A endpoint)."""
    found = _PATH.match(request.url.path)
    if found is None:
        return None
    return "jsonrpc" if found.group(1).startswith("jsonrpc") else "rest"


def response(binding: Binding, fail: Failure, *, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The error as the binding answers it, with the HTTP status it has."""
    body = fail.jsonrpc() if binding == "jsonrpc" else fail.rest()
    return JSONResponse(body, status_code=fail.http_status, headers=dict(headers or {}))


def bounded(value: object) -> str:
    """A message or metadata value, cut to MAX_TEXT characters (saying how long it was)."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}… ({len(text)} characters)"


def bound_jsonrpc(body: bytes) -> tuple[bytes, dict[str, Any] | None]:
    """A JSON-RPC answer whose error is cut to size: (the body, the error object) — the body unchanged and
    None when it is no error (answers start with their first member, `error` or `result`)."""
    if not body.startswith(b'{"error"'):
        return body, None
    answer = json.loads(body)
    error = answer.get("error")
    if not isinstance(error, dict):
        return body, None
    _bound_error(error, details_key="data")
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode(), error


def bound_rest(body: bytes, http_status: int) -> tuple[bytes, int, dict[str, Any] | None]:
    """An HTTP+JSON error answer cut to size, with the spec's status for its reason: (body, status, error)."""
    try:
        answer = json.loads(body)
    except ValueError:
        return body, http_status, None
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        return body, http_status, None
    _bound_error(error, details_key="details")
    status = SPEC_HTTP_STATUS.get(reason_of(error) or "", http_status)
    if isinstance(error.get("code"), int):
        error["code"] = status
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode(), status, error


def reason_of(error: Mapping[str, Any]) -> str | None:
    """The ErrorInfo reason of a JSON-RPC error (`data`) or an HTTP+JSON one (`details`)."""
    for key in ("data", "details"):
        details = error.get(key)
        if isinstance(details, list):
            for item in details:
                if isinstance(item, dict) and item.get("@type") == ERROR_INFO and isinstance(item.get("reason"), str):
                    return str(item["reason"])
    return None


def is_bad_request(error: Mapping[str, Any], *, binding: Binding) -> bool:
    """Whether an A2A error says the request itself was malformed (not, say, a task that was not found)."""
    if binding == "jsonrpc":
        return error.get("code") in BAD_REQUEST_CODES
    return reason_of(error) in BAD_REQUEST_REASONS


def _bound_error(error: dict[str, Any], *, details_key: str) -> None:
    if "message" in error:
        error["message"] = bounded(error["message"])
    details = error.get(details_key)
    if isinstance(details, list):
        for item in details:
            metadata = item.get("metadata") if isinstance(item, dict) else None
            if isinstance(metadata, dict):
                item["metadata"] = {bounded(k): bounded(v) for k, v in list(metadata.items())[:20]}
    elif details is not None and len(json.dumps(details, default=str)) > MAX_TEXT:
        error[details_key] = bounded(json.dumps(details, default=str))
