"""A client of an OpenAI-compatible model server (llama.cpp, Ollama, vLLM, OpenAI …): chat completions and
the model list, through the one transport (`net.http`) and its error map.

Every request goes out on a fresh connection, closed after its answer, never a pooled one. llama.cpp's
server closes each connection right after its event stream, under keep-alive headers; its FIN can land
just after the next request went out on the pooled connection, and a request that may have reached the
server cannot be sent again. One connect per request (a model step takes far longer) makes that case
impossible. Nothing is sent twice either: no retry after a connect failure or a 429/503 (a model step is
not ours to repeat behind the engine's back).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ..errors import BackchannelError
from .http import HttpResponse, Naming, Stream, Transport

__all__ = ["HttpResponse", "ModelAnswer", "ModelServer"]

ModelAnswer = Stream  # an answer read as it arrives: `status`, `headers`, `read()`, `chunks()`
CHAT_PATH = "/chat/completions"
MODELS_PATH = "/models"


class ModelServer:
    """One model server's base URL (`…/v1`) reached with one key, or none; its failures become `error`s
    whose messages name `who` (the endpoint and the profile)."""

    def __init__(
        self, base_url: str, api_key: str | None, *, who: str, error: type[BackchannelError], timeout: float
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.who = who
        self.timeout = timeout
        self._key = api_key or None
        self._error = error
        self._http: Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _transport(self) -> Transport:
        """The transport of the running event loop (a client's connections belong to the loop that made them)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._http = Transport(
                self.base_url,
                self._key,
                naming=Naming(who=self.who, not_sent=self._error, maybe_sent=self._error),
                follow_redirects=True,  # a server behind a proxy that moved it; the key never leaves its origin
                timeout=self.timeout,
                retries=0,
                keep_alive=False,
            )
            self._loop = loop
        return self._http

    @contextlib.asynccontextmanager
    async def chat_completions(self, payload: dict[str, Any]) -> AsyncIterator[ModelAnswer]:
        """POST `payload` to `/chat/completions`; the answer as it arrives, whatever its status. The body may
        pause for as long as it likes: the caller bounds the whole exchange."""
        headers = {"Accept": "text/event-stream, application/json"}
        async with self._transport().stream("POST", CHAT_PATH, json=payload, headers=headers) as answer:
            yield answer

    async def models(self, *, timeout: float) -> HttpResponse:
        """GET `/models`, the whole answer, whatever its status."""
        return await self._transport().request("GET", MODELS_PATH, timeout=timeout)

    def scrub(self, text: str) -> str:
        """`text` with the key cut out (a server may echo it back in an error)."""
        return text.replace(self._key, "[key]") if self._key else text

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()
