"""The web view's login: the person's key taken once, a signed session cookie, CSRF tokens and the Origin check.

The cookie holds a random session id signed with a per-home secret (`web.secret`), salted with a digest of
the API key, so rotating the key logs every browser out; it never holds the key. A session's CSRF token
is derived from its id, so nothing is kept per session but the ids logged out before their cookies expire
(in state.db, so that a restart does not let a logged-out cookie back in).

Failed logins are counted per attempt source, so that nobody else's failures keep the person out: a browser
that has logged in here before carries a signed mark of it (a cookie sent only to the login form, which
another process can neither read from the person's browser nor forge) and is a source of its own; every other attempt —
a browser that never logged in, a script — counts against its client address, whatever cookie it sends, so
changing cookies gains a guesser nothing. The right key always logs in from the person's own browser.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import Response

from ...core.delivery.rates import SenderRates
from ...errors import AuthError, LimitReached, Refused
from ...home import config
from ...home.files import read_text
from .logouts import WebLogouts

COOKIE = "backchannel_session"
BROWSER_COOKIE = "backchannel_browser"  # set when the right key logs in: this browser did so before
MAX_AGE_SECONDS = 12 * 3600
BROWSER_MAX_AGE_SECONDS = 365 * 24 * 3600
SECRET_BYTES = 32
FAILED_LOGINS_PER_MINUTE = 10  # per attempt source: guessing a weak key takes years, a typo a retry


@dataclass(frozen=True)
class Browser:
    """A browser as its login cookie says: its random id, and whether the right key logged in from it."""

    bid: str
    trusted: bool = False


@dataclass(frozen=True)
class WebSession:
    """One logged-in browser: its session id and the CSRF token its forms carry."""

    sid: str
    csrf: str


def load_secret(root: Path) -> str:
    """The home's cookie-signing secret, made (0600) the first time it is needed."""
    path = config.web_secret_path(root)
    secret = read_text(path, missing_ok=True).strip()
    if len(secret) < SECRET_BYTES:
        secret = secrets.token_urlsafe(SECRET_BYTES)
        config.write_atomic(path, secret + "\n", mode=0o600)
    return secret


class WebAuth:
    """Logs a browser in with the person's key and recognises it afterwards by its cookie."""

    def __init__(self, *, secret: str, api_key: str, logouts: WebLogouts) -> None:
        self._api_key = api_key
        self._secret = secret.encode()
        salt = "web-session:" + hashlib.sha256(api_key.encode()).hexdigest()[:16]
        self._signer = URLSafeTimedSerializer(secret, salt=salt)
        self._browsers = URLSafeTimedSerializer(secret, salt=salt.replace("web-session:", "web-browser:"))
        self.logouts = logouts
        self._failures = SenderRates(FAILED_LOGINS_PER_MINUTE)  # failed logins per attempt source

    # --- logging in and out ----------------------------------------------------------------------

    def login(self, key: str, response: Response, *, secure: bool, client: str, browser: Browser | None) -> None:
        """Set the session cookie when `key` is the person's API key; AuthError otherwise (the key is never echoed).

        LimitReached (login_throttled) once the attempt's source failed FAILED_LOGINS_PER_MINUTE times in the
        last minute: then not even the right key is tried from that source until the minute has passed. The
        source is the browser when it logged in here before (`browser.trusted`), else the client address."""
        source, shown = (f"browser:{browser.bid}", "this browser") if browser and browser.trusted else (client, client)
        retry = self._failures.retry_after(source)
        if retry is not None:
            raise LimitReached(
                f"{FAILED_LOGINS_PER_MINUTE} failed logins from {shown} in the last minute: try again in {retry:.0f} s",
                code="login_throttled",
                retry_after=retry,
            )
        if not hmac.compare_digest(key.strip().encode(), self._api_key.encode()):
            self._failures.record(source)
            raise AuthError(
                "that is not this gateway's API key (API_SERVER_KEY in the home's .env)", code="login_failed"
            )
        token = self._signer.dumps({"sid": secrets.token_urlsafe(24)})
        response.set_cookie(
            COOKIE, token, max_age=MAX_AGE_SECONDS, path="/", httponly=True, samesite="strict", secure=secure
        )
        self._mark(response, Browser(browser.bid if browser else secrets.token_urlsafe(16), trusted=True), secure)

    def browser(self, request: Request) -> Browser | None:
        """The browser its login cookie names (None: no cookie, or one not signed here)."""
        token = request.cookies.get(BROWSER_COOKIE)
        if not token:
            return None
        try:
            data = self._browsers.loads(token, max_age=BROWSER_MAX_AGE_SECONDS)
        except BadSignature:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("bid"), str):
            return None
        return Browser(data["bid"], trusted=data.get("ok") is True)

    def _mark(self, response: Response, browser: Browser, secure: bool) -> None:
        token = self._browsers.dumps({"bid": browser.bid, "ok": browser.trusted})
        response.set_cookie(
            BROWSER_COOKIE,
            token,
            max_age=BROWSER_MAX_AGE_SECONDS,
            path="/web/login",
            httponly=True,
            samesite="strict",
            secure=secure,
        )

    async def logout(self, session: WebSession, response: Response) -> None:
        """Log the session out for good (its cookie no longer opens anything) and ask the browser to drop it."""
        await self.logouts.revoke(session.sid, until=time.time() + MAX_AGE_SECONDS)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")

    # --- recognising a browser ---------------------------------------------------------------------

    def session(self, request: Request) -> WebSession | None:
        """The browser's session from its cookie, or None (no cookie, a forged or expired one, logged out)."""
        token = request.cookies.get(COOKIE)
        if not token:
            return None
        try:
            data = self._signer.loads(token, max_age=MAX_AGE_SECONDS)
        except BadSignature:
            return None
        sid = data.get("sid") if isinstance(data, dict) else None
        if not isinstance(sid, str) or self.logouts.revoked(sid):
            return None
        csrf = hmac.new(self._secret, b"csrf:" + sid.encode(), hashlib.sha256).hexdigest()
        return WebSession(sid=sid, csrf=csrf)

    def require(self, request: Request) -> WebSession:
        found = self.session(request)
        if found is None:
            raise AuthError("log in first: the web view needs the person's API key", code="login_required")
        return found


def check_origin(request: Request) -> None:
    """A state-changing request must come from a page of this gateway (the browser's Origin says where)."""
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise Refused("a cross-site request may not change anything here", code="cross_site_request")
    origin = request.headers.get("origin")
    if origin is None:
        return  # not a browser's cross-origin request: the CSRF token still has to match
    own = f"{request.url.scheme}://{request.url.netloc}"
    if origin != own:
        raise Refused(f"a request from {origin!r} may not change anything on {own!r}", code="cross_site_request")


def check_csrf(request: Request, session: WebSession, given: str | None) -> None:
    check_origin(request)
    token = request.headers.get("x-csrf-token") or given or ""
    if not hmac.compare_digest(token.encode(), session.csrf.encode()):
        raise Refused("the form's CSRF token is missing or stale: reload the page and try again", code="csrf_failed")
