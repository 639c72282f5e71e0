"""Whom the connection cap's reserve is for: a request head that carries the person's key, or the web view's
login made with it (the server asks only once `max_connections` are open; `protocol.Door`)."""

from __future__ import annotations

import hmac
from collections.abc import Callable

from starlette.requests import Request

from .protocol import Head
from .web.auth import WebAuth


def person_check(api_key: str, web: WebAuth) -> Callable[[Head], bool]:
    """Whether a request's head is the person's: their key as its bearer token, or a web session cookie of theirs."""
    key = api_key.encode()

    def is_person(head: Head) -> bool:
        request = Request({"type": "http", "headers": list(head)})
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode("latin-1"), key):
            return True
        return web.session(request) is not None

    return is_person
