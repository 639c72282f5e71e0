"""The plugin's requests to the Backchannel gateway: one blocking call each (Hermes runs tool handlers and hooks in
its agent thread, and the plugin's own work in a thread of its own), under the one transport's error map.

Every failure comes back as `Unanswered`, with the outcome it means for a message (nothing sent, or perhaps
sent) and a message that says why; the gateway's own refusals keep their code.
"""

from __future__ import annotations

import functools
from typing import Any

import httpx

from backchannel.errors import GatewayError
from backchannel.net.http import CONNECT_TIMEOUT, Naming, error_of, json_object, map_httpx_errors, system_tls
from backchannel.outcome import Outcome, error_body, of_http_error

from . import settings

NOT_SENT = "backchannel_unreachable"
MAYBE_SENT = "outcome_unknown"


class Unanswered(Exception):
    """No answer of the gateway's to hand on: `body` is the tool result that says why, with its outcome."""

    def __init__(self, outcome: Outcome, code: str, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.code = code
        self.body = error_body(outcome, code, message)


def request(method: str, path: str, *, payload: dict[str, Any] | None = None, timeout: float) -> dict[str, Any]:
    """`method path` on the Backchannel gateway with this Hermes home's key: its JSON object, or `Unanswered`."""
    base = settings.base_url()
    key = settings.api_key()
    if not key:
        raise Unanswered(
            Outcome.FAILED,
            "unavailable",
            "Backchannel is not set up here: BACKCHANNEL_API_KEY is missing from Hermes's .env"
            " (backchannel hermes connect PROFILE --hermes-home DIR writes it)",
        )
    naming = Naming(
        who=f"the Backchannel gateway at {base}",
        not_sent=functools.partial(GatewayError, code=NOT_SENT),
        maybe_sent=functools.partial(GatewayError, code=MAYBE_SENT),
    )
    try:
        with (
            map_httpx_errors(naming, method, path, timeout=timeout, secret=key),
            httpx.Client(
                headers={"Authorization": f"Bearer {key}", "User-Agent": "backchannel-hermes"},
                timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)),
                follow_redirects=False,  # never send the key on to somewhere else
                verify=system_tls(),
                trust_env=False,  # no proxy from Hermes's environment between it and this gateway
            ) as client,
        ):
            resp = client.request(method, base + path, json=payload)
    except GatewayError as exc:
        if exc.code == NOT_SENT:
            raise Unanswered(Outcome.FAILED, NOT_SENT, f"{exc.message}; nothing was sent") from None
        raise Unanswered(
            Outcome.UNKNOWN,
            MAYBE_SENT,
            f"{exc.message}: the message may have been accepted; do not resend it, ask with check_message or "
            "list_sessions later",
        ) from None
    if resp.status_code >= 300:
        raise _refused(resp.status_code, resp.content, base)
    body = json_object(resp.content)
    if body is None:
        raise Unanswered(
            Outcome.UNKNOWN,
            "backchannel_error",
            f"the Backchannel gateway at {base} answered with something not a JSON object",
        )
    return body


def _refused(status: int, raw: bytes, base: str) -> Unanswered:
    """The gateway's error answer (its envelope's code and message), with the outcome its status means."""
    outcome = of_http_error(status)
    err = error_of(status, json_object(raw))
    if err.code:
        return Unanswered(outcome, err.code, err.message)
    return Unanswered(outcome, "backchannel_error", f"the Backchannel gateway at {base} answered HTTP {status}")
