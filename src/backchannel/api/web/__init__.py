"""The web view: pages for the person at `/` and under `/web/`, behind the API key (a login form and a cookie).

Its routes call the delivery service and the directory, like every other route, and the holds for the
messages waiting for the person's approval.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...core.revocations import Revocations
from . import actions, live, pages
from .auth import WebAuth, WebSession, load_secret
from .guard import is_web, logged_in, web_auth
from .logouts import WebLogouts
from .render import page
from .static import PUBLIC, static_file

__all__ = ["error_page", "is_web", "make_auth", "routes", "web_auth"]


def make_auth(root: Path, api_key: str, revocations: Revocations) -> WebAuth:
    return WebAuth(secret=load_secret(root), api_key=api_key, logouts=WebLogouts(revocations))


async def _asset(request: Request, session: WebSession) -> Response:
    return static_file(request.path_params["name"])


async def _static(request: Request) -> Response:
    name = request.path_params["name"]
    return static_file(name) if name in PUBLIC else await logged_in(_asset)(request)


def routes() -> list[BaseRoute]:
    return [
        Route("/", logged_in(pages.overview), methods=["GET"]),
        Route("/web/login", actions.login_form, methods=["GET"]),
        Route("/web/login", actions.login, methods=["POST"]),
        Route("/web/logout", logged_in(actions.logout), methods=["POST"]),
        Route("/web/static/{name:path}", _static, methods=["GET"]),
        Route("/web/sessions/{session_id}", logged_in(pages.session_page), methods=["GET"]),
        Route("/web/sessions/{session_id}/send", logged_in(actions.send), methods=["POST"]),
        Route("/web/runs", logged_in(pages.runs_page), methods=["GET"]),
        Route("/web/runs/live", logged_in(live.runs_live), methods=["GET"]),
        Route("/web/runs/{run_id}", logged_in(pages.run_page), methods=["GET"]),
        Route("/web/runs/{run_id}/reply", logged_in(live.reply_stream), methods=["GET"]),
        Route("/web/runs/{run_id}/stop", logged_in(actions.stop), methods=["POST"]),
        Route("/web/ledger", logged_in(pages.ledger_page), methods=["GET"]),
        Route("/web/exchanges/{run_id}", logged_in(pages.exchange_page), methods=["GET"]),
        Route("/web/peers/{name}", logged_in(live.peer_status), methods=["GET"]),
        Route("/web/held", logged_in(pages.held_page), methods=["GET"]),
        Route("/web/rooms", logged_in(pages.rooms_page), methods=["GET"]),
        Route("/web/rooms/{name}", logged_in(pages.room_page), methods=["GET"]),
        Route("/web/rooms/{name}/lines", logged_in(pages.room_lines), methods=["GET"]),
        Route("/web/rooms/{name}/say", logged_in(actions.say_in_room), methods=["POST"]),
        Route("/web/held/{run_id}/approve", logged_in(actions.approve), methods=["POST"]),
        Route("/web/held/{run_id}/deny", logged_in(actions.deny), methods=["POST"]),
        Route("/web/questions", logged_in(pages.questions_page), methods=["GET"]),
        Route("/web/questions/{question_id}/answer", logged_in(actions.answer), methods=["POST"]),
        Route("/web/questions/{question_id}/decline", logged_in(actions.decline), methods=["POST"]),
    ]


def error_page(request: Request, status: int, message: str, code: str) -> Response:
    """An error as the web view shows it: a page (or a fragment for htmx) naming what went wrong."""
    session = web_auth(request).session(request)
    return page(request, "error.html", status=status, session=session, message=message, code=code, status_code=status)
