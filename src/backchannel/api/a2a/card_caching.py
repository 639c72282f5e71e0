"""The agent card's HTTP caching (§8.6.1): a `max-age`, an ETag of the card's content, and `304 Not Modified`
for a client that already has it (its `If-None-Match`, compared weakly as RFC 9110 §13.1.2 says)."""

from __future__ import annotations

import hashlib
from typing import Any

from starlette.responses import JSONResponse, Response

# A card changes when its profile's SOUL.md or skills do, or the gateway is upgraded: a client keeps it five
# minutes, then asks again with its ETag and, the card unchanged, gets a 304 without a body.
MAX_AGE_SECONDS = 300
# One path gives the 1.0 card or, asked with `A2A-Version: 0.3`, the 0.3 one: a cache keeps them apart.
VARY = "A2A-Version"


def card_response(card: dict[str, Any], if_none_match: str | None) -> Response:
    """The card as JSON with its caching headers, or a 304 with those headers alone when `if_none_match` names
    it (or is `*`)."""
    response = JSONResponse(card)
    etag = '"' + hashlib.sha256(bytes(response.body)).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Cache-Control": f"public, max-age={MAX_AGE_SECONDS}", "Vary": VARY}
    if if_none_match is not None and _names(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    response.headers.update(headers)
    return response


def _names(if_none_match: str, etag: str) -> bool:
    tags = [tag.strip() for tag in if_none_match.split(",")]
    return "*" in tags or any(tag.removeprefix("W/") == etag for tag in tags)
