"""The web view's static files (its stylesheet, and htmx with its SSE extension, vendored with their licenses)."""

from __future__ import annotations

import functools
from importlib import resources

from starlette.responses import Response

from ...errors import NotFound
from .render import HEADERS

PUBLIC = frozenset({"style.css"})  # the login page's stylesheet: served before logging in
_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}


@functools.cache
def _files() -> dict[str, bytes]:
    root = resources.files("backchannel.api.web") / "static"
    found: dict[str, bytes] = {}
    for entry in root.iterdir():
        if entry.is_file():
            found[entry.name] = entry.read_bytes()
    for entry in (root / "vendor").iterdir():
        if entry.is_file():
            found[f"vendor/{entry.name}"] = entry.read_bytes()
    return found


def static_file(name: str) -> Response:
    body = _files().get(name)
    kind = _TYPES.get(name[name.rfind(".") :]) if "." in name else None
    if body is None or kind is None:
        raise NotFound(f"no static file {name!r} in the web view", code="not_found")
    headers = {**HEADERS, "Cache-Control": "private, max-age=3600"}
    return Response(body, media_type=kind, headers=headers)
