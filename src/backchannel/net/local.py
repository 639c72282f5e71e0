"""HTTP client of a Backchannel gateway, as the CLI uses it. httpx errors are translated here."""

from __future__ import annotations

import urllib.parse
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from ..errors import BackchannelError, GatewayError
from ..home.config import GatewayConfig

PROBE_TIMEOUT = 0.5


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]


class GatewayClient:
    def __init__(self, base_url: str, api_key: str, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}", "User-Agent": "backchannel-cli"}
        self._http = httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False)

    @classmethod
    def for_home(cls, settings: GatewayConfig, api_key: str) -> GatewayClient:
        host = settings.host if settings.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        return cls(f"http://{host}:{settings.port}", api_key)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def probe(self, gateway_id: str) -> bool:
        """True when the gateway of this home answers (same gateway id, our key accepted)."""
        try:
            r = await self._http.get(f"{self.base_url}/v1/capabilities", headers=self._headers, timeout=PROBE_TIMEOUT)
        except httpx.HTTPError:
            return False
        if r.status_code != 200:
            return False
        try:
            return bool(r.json().get("gateway_id") == gateway_id)
        except ValueError:
            return False

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> Answer:
        url = self.base_url + path
        try:
            r = await self._http.request(
                method,
                url,
                json=json,
                headers={**self._headers, **(headers or {})},
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.TimeoutException as exc:
            raise GatewayError(f"the gateway at {self.base_url} did not answer {method} {path} in time") from exc
        except httpx.HTTPError as exc:
            raise GatewayError(f"the gateway at {self.base_url} could not be reached: {exc}") from exc
        try:
            body = r.json()
        except ValueError as exc:
            raise GatewayError(f"the gateway answered {method} {path} with non-JSON (HTTP {r.status_code})") from exc
        if not isinstance(body, dict):
            raise GatewayError(f"the gateway answered {method} {path} with a non-object")
        if r.status_code >= 400:
            raise _error(r.status_code, body)
        return Answer(r.status_code, body)

    async def chat(
        self,
        profile: str,
        session_id: str,
        message: str,
        *,
        wait: float,
        idempotency_key: str | None = None,
        sender: str = "human:cli",
    ) -> Answer:
        headers = {
            "Idempotency-Key": idempotency_key or f"cli-{uuid.uuid4().hex}",
            "X-Hermes-Wait-Seconds": f"{max(wait, 0.001):g}",
            "X-Backchannel-Sender": sender,
        }
        path = f"/p/{_q(profile)}/api/sessions/{_q(session_id)}/chat"
        return await self.request("POST", path, json={"message": message}, headers=headers, timeout=wait + 30)


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _error(status: int, body: dict[str, Any]) -> BackchannelError:
    err = body.get("error")
    message = err.get("message") if isinstance(err, dict) else str(err or f"HTTP {status}")
    code = err.get("code") if isinstance(err, dict) else None
    exc = BackchannelError(
        str(message),
        code=str(code) if code else None,
        details={k: v for k, v in (err.items() if isinstance(err, dict) else []) if k == "run_id"},
    )
    exc.http_status = status
    exc.exit_code = 2 if status in (400, 403, 404, 409, 413) else 1
    return exc
