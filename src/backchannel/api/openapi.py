"""The OpenAPI 3.1 document of the gateway's HTTP API (served at /openapi.json), generated from the operations
`api.surface` declares: each body's schema is pydantic's JSON Schema of its `dialect` type, under components."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter
from starlette.requests import Request
from starlette.responses import Response

from .. import __version__, dialect

Endpoint = Callable[[Request], Awaitable[Response]]
# Who may call it: no key (public); a key that reaches the profile (profile); the run's profile, checked by the
# route (run); the person's key only (person); a session's agent key or the person's (agent); the home as a whole,
# the route asking the caller itself (home).
Reach = Literal["public", "profile", "run", "person", "agent", "home"]

JSON = "application/json"
SSE = "text/event-stream"
TEXT = "text/plain"


@dataclass(frozen=True)
class Answer:
    """One status of an operation: `body` is a `dialect` type (a tuple: one of them), a JSON Schema, or None for an
    object the summary describes."""

    description: str
    body: Any = None
    media: tuple[str, ...] = (JSON,)


@dataclass(frozen=True)
class Op:
    """An operation. `mounted`: also served under /p/{profile}, for that profile. `spanned`: the route's work has a
    server span of its own (see `app.protected`)."""

    method: str
    path: str
    endpoint: Endpoint
    summary: str
    answers: Mapping[int, Answer]
    errors: tuple[int, ...] = ()
    reach: Reach = "profile"
    params: tuple[Mapping[str, Any], ...] = ()
    body: Any = None
    spanned: bool = False
    mounted: bool = True


REF = "#/components/schemas/{model}"
ERRORS = {
    400: "Malformed request",
    401: "Missing or wrong API key",
    403: "The key used does not reach this (a peer's key: other profiles, sessions, runs, the ledger, holds)",
    404: "Unknown profile, session or run",
    409: "Conflict (idempotency key reused for another message, run not active, no running turn to steer)",
    413: "Body too large",
    424: "The run ended without a reply (failed, cancelled or expired), or a peer could not be reached",
    429: "Too many streams open (too_many_streams: the message names the bound; Retry-After says when to try again):"
    " a peer's key, the run, or the peers together hold as many as they may",
}


class _Components:
    """The schemas the document names, each once: a `dialect` type and the types inside it."""

    def __init__(self) -> None:
        self.schemas: dict[str, Any] = {}

    def ref(self, kind: Any) -> dict[str, Any]:
        """A schema for `kind`: a reference to its component (made on first use), one of several, or as given."""
        if kind is None:
            return {"type": "object"}
        if isinstance(kind, dict):
            return kind
        if isinstance(kind, tuple):
            return {"oneOf": [self.ref(k) for k in kind]}
        name = kind.__name__
        if name not in self.schemas:
            schema = _schema(kind)
            self.schemas.update(schema.pop("$defs", {}))
            self.schemas[name] = schema
        return {"$ref": REF.format(model=name)}


@functools.cache
def _schema(kind: Any) -> dict[str, Any]:
    return TypeAdapter(kind).json_schema(ref_template=REF)


def _answer(answer: Answer, components: _Components) -> dict[str, Any]:
    out: dict[str, Any] = {"description": answer.description}
    schema = components.ref(answer.body)
    out["content"] = {media: {"schema": schema} for media in answer.media}
    return out


def _operation(op: Op, components: _Components, scope: tuple[Mapping[str, Any], ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": op.summary + (" (named profile)" if scope else "")}
    if op.reach == "public":
        out["security"] = []
    if scope or op.params:
        out["parameters"] = [*scope, *op.params]
    if op.body is not None:
        out["requestBody"] = {"required": True, "content": {"application/json": {"schema": components.ref(op.body)}}}
    error = {"application/json": {"schema": components.ref(dialect.Error)}}
    out["responses"] = {
        **{str(status): _answer(answer, components) for status, answer in op.answers.items()},
        **{str(code): {"description": ERRORS[code], "content": error} for code in op.errors},
    }
    return out


def document(operations: Iterable[Op], profile: Mapping[str, Any]) -> dict[str, Any]:
    """The document: every operation at its path, and the mounted ones again under /p/{profile}."""
    components = _Components()
    paths: dict[str, dict[str, Any]] = {}
    scoped: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, components, ())
        if op.mounted:
            scoped.setdefault("/p/{profile}" + op.path, {})[op.method.lower()] = _operation(op, components, (profile,))
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Backchannel gateway",
            "version": __version__,
            "description": "Hermes API-server dialect: sessions, chat, runs. Errors use one envelope.",
        },
        "security": [{"bearer": []}],
        "paths": {**paths, **scoped},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": dict(sorted(components.schemas.items())),
        },
    }
