"""What a person does in the web view: log in and out, send a message into a session, stop a run, approve
or deny a held message, answer or decline an agent's question.

Every form that changes something carries the session's CSRF token and must come from this gateway's pages;
each answers htmx with a fragment (or nothing) and a plain form with a redirect."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ...core.delivery.admission import Attempt
from ...errors import AuthError, LimitReached
from ...keys import check_external
from ..context import context
from ..http import form_body
from .auth import WebSession, check_csrf, check_origin
from .guard import local_path, web_auth
from .pages import new_send_key
from .render import page

WEB_SENDER = "human:web"


def _back(request: Request, to: str) -> Response:
    if "hx-request" in request.headers:
        return Response(status_code=204)
    return RedirectResponse(local_path(to), status_code=303)


async def login_form(request: Request) -> Response:
    auth = web_auth(request)
    target = local_path(request.query_params.get("next"))
    if auth.session(request) is not None:
        return RedirectResponse(target, status_code=303)
    return page(request, "login.html", next=target, error=None)


async def login(request: Request) -> Response:
    check_origin(request)
    form = await form_body(request, context(request).settings.max_body_bytes)
    target = local_path(form.get("next"))
    response = RedirectResponse(target, status_code=303)
    client = request.client.host if request.client else "unknown"
    auth = web_auth(request)
    try:
        auth.login(
            form.get("key", ""),
            response,
            secure=request.url.scheme == "https",
            client=client,
            browser=auth.browser(request),
        )
    except AuthError as exc:  # said on the form, which never shows the key that was typed
        return page(request, "login.html", status=401, next=target, error=exc.message)
    except LimitReached as exc:
        throttled = page(request, "login.html", status=429, next=target, error=exc.message)
        throttled.headers["Retry-After"] = f"{exc.retry_after or 60:.0f}"
        return throttled
    return response


async def logout(request: Request, session: WebSession) -> Response:
    form = await form_body(request, context(request).settings.max_body_bytes)
    check_csrf(request, session, form.get("csrf"))
    response = RedirectResponse("/web/login", status_code=303)
    await web_auth(request).logout(session, response)
    return response


async def send(request: Request, session: WebSession) -> Response:
    """The person's message into a session, through the delivery service (its mentions answered in the turn)."""
    ctx = context(request)
    form = await form_body(request, ctx.settings.max_body_bytes)
    check_csrf(request, session, form.get("csrf"))
    row = await ctx.roster.session(request.path_params["session_id"])
    d = await ctx.messages.submit(
        Attempt.handed_in(row, form.get("message", ""), WEB_SENDER, key=check_external(form.get("key")))
    )
    if "hx-request" not in request.headers:
        return RedirectResponse(f"/web/sessions/{row.id}", status_code=303)
    return page(request, "_sent.html", session=session, d=d, run=d.run, row=row, send_key=new_send_key())


async def say_in_room(request: Request, session: WebSession) -> Response:
    """The person's words into a room: the members answer in turn, shown on the room's page as they come."""
    ctx = context(request)
    form = await form_body(request, ctx.settings.max_body_bytes)
    check_csrf(request, session, form.get("csrf"))
    name = request.path_params["name"]
    await ctx.gateway.admin.say_in_room(name, form.get("message", ""), sender=WEB_SENDER)
    return _back(request, f"/web/rooms/{name}")


async def stop(request: Request, session: WebSession) -> Response:
    ctx = context(request)
    form = await form_body(request, ctx.settings.max_body_bytes)
    check_csrf(request, session, form.get("csrf"))
    d = await ctx.messages.stop(request.path_params["run_id"])
    return _back(request, form.get("next") or f"/web/runs/{d.run.id}")


async def approve(request: Request, session: WebSession) -> Response:
    """Queue a held message: it runs like any other; its sender learns the outcome when it ends."""
    ctx = context(request)
    form = await form_body(request, ctx.settings.max_body_bytes)
    check_csrf(request, session, form.get("csrf"))
    run = await ctx.gateway.admin.approve(request.path_params["run_id"])
    return _back(request, f"/web/runs/{run.id}")


async def deny(request: Request, session: WebSession) -> Response:
    """Refuse a held message, with the person's reason (told to the sender)."""
    ctx = context(request)
    form = await form_body(request, ctx.settings.max_body_bytes)
    check_csrf(request, session, form.get("csrf"))
    await ctx.gateway.admin.deny(request.path_params["run_id"], why=(form.get("why") or "").strip() or None)
    return _back(request, "/web/held")


async def answer(request: Request, session: WebSession) -> Response:
    """Answer an agent's question: its run goes on with the answer (the first answer from any surface wins)."""
    ctx = context(request)
    form = await form_body(request, ctx.settings.max_body_bytes)
    check_csrf(request, session, form.get("csrf"))
    _question, run = await ctx.gateway.admin.answer(
        request.path_params["question_id"], form.get("answer") or "", by=WEB_SENDER
    )
    return _back(request, f"/web/runs/{run.id}" if run is not None else "/web/questions")


async def decline(request: Request, session: WebSession) -> Response:
    """Decline an agent's question: its run goes on, told the person will not answer."""
    ctx = context(request)
    form = await form_body(request, ctx.settings.max_body_bytes)
    check_csrf(request, session, form.get("csrf"))
    await ctx.gateway.admin.decline(request.path_params["question_id"], by=WEB_SENDER)
    return _back(request, "/web/questions")
