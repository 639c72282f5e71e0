"""Rendering the web view: the Jinja2 templates in the package, their filters, and the headers every page gets."""

from __future__ import annotations

import functools
import re
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import HTMLResponse

from ... import __version__, addresses

# Scripts and styles only from this gateway; nothing may frame the pages or send their forms elsewhere.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_SESSION_ADDRESS = re.compile(r"^(?P<profile>[a-z0-9][a-z0-9_-]{0,63})/(?P<session>[A-Za-z0-9_.-]{1,128})$")


def when(epoch: float | None) -> str:
    """A time as a person reads it: local, to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch)) if epoch else "—"


def session_of(address: str | None) -> str | None:
    """The local session an address names (`profile/session-id`), or None (a person, a peer, a profile)."""
    found = _SESSION_ADDRESS.match(address or "")
    return found["session"] if found else None


def short(text: str | None, limit: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def short_id(value: str | None, keep: int = 8) -> str:
    """A long id as a person tells it apart: its first characters (`run_d212…`); the page keeps the whole in the
    element's title and its link."""
    value = value or ""
    return value if len(value) <= keep + 4 else value[:keep] + "…"


def short_address(address: str | None) -> str:
    """A long address as a person tells it apart: its profile (and peer) kept, its session id's end
    (`research/…4e5dff`); the page keeps the whole in the element's title and its link."""
    address = address or ""
    head, slash, tail = address.rpartition("/")
    if slash and len(tail) > 12:
        return f"{head}/…{tail[-6:]}"
    return address if slash or len(address) <= 28 else address[:24] + "…"


if TYPE_CHECKING:
    import jinja2


@functools.cache
def _templates() -> jinja2.Environment:
    """The templates, loaded with the first page (a gateway that serves none, or a command's own, never loads
    Jinja2)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("backchannel.api.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, session_of=session_of, short=short, head=addresses.head)
    env.filters.update(short_id=short_id, short_address=short_address)
    env.tests.update(remote=addresses.is_remote)
    env.globals.update(version=__version__)
    return env


def fragment(template: str, **context: Any) -> str:
    return _templates().get_template(template).render(**context)


def page(request: Request, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
    """A full page (or an htmx fragment) with the security headers of every page."""
    context.setdefault("session", None)
    context.setdefault("path", request.url.path)
    return HTMLResponse(fragment(template, **context), status_code=status, headers=HEADERS)
