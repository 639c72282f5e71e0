"""The agent card's HTTP caching (§8.6.1): a `max-age`, an ETag of the card's content, its `Last-Modified`,
and `304 Not Modified` for a client that already has it (its `If-None-Match`, compared weakly as RFC 9110
§13.1.2 says, or, without one, its `If-Modified-Since`, as §13.2.2 orders them).

A card is made of its profile's SOUL.md and skills (skills/**/SKILL.md) and of the gateway's code and
version; the request's address and version choose its URLs and shape, never its time. So its time is the
latest of: the gateway's start (code and version change only with a restart), SOUL.md's modification and
the skills' (each SKILL.md and each folder under skills/, whose own time changes when a skill is added or
removed). A file edited since the start is seen at the next request; an earlier time is never given."""

from __future__ import annotations

import email.utils
import hashlib
import os
from pathlib import Path
from typing import Any

from starlette.responses import JSONResponse, Response

from ...home.profiles import Profile

# A card changes when its profile's SOUL.md or skills do, or the gateway is upgraded: a client keeps it five
# minutes, then asks again with its ETag and, the card unchanged, gets a 304 without a body.
MAX_AGE_SECONDS = 300
# One path gives the 1.0 card or, asked with `A2A-Version: 0.3`, the 0.3 one: a cache keeps them apart.
VARY = "A2A-Version"


def changed_at(profile: Profile, started: float) -> float:
    """When the profile's card last changed, at the latest (module docstring): whole seconds, as HTTP says it."""
    latest = max(started, _mtime(profile.soul_path), _mtime(profile.skills_dir))
    if profile.skills_dir.is_dir():
        for folder, _dirs, files in os.walk(profile.skills_dir):
            latest = max(latest, _mtime(Path(folder)), *(_mtime(Path(folder, f)) for f in files if f == "SKILL.md"))
    return float(int(latest))


def card_response(
    card: dict[str, Any], modified: float, *, if_none_match: str | None, if_modified_since: str | None
) -> Response:
    """The card as JSON with its caching headers, or a 304 with those headers alone when `if_none_match` names
    it (or is `*`) or, with no `if_none_match`, when it has not changed since `if_modified_since`."""
    response = JSONResponse(card)
    etag = '"' + hashlib.sha256(bytes(response.body)).hexdigest()[:32] + '"'
    headers = {
        "ETag": etag,
        "Last-Modified": email.utils.formatdate(modified, usegmt=True),
        "Cache-Control": f"public, max-age={MAX_AGE_SECONDS}",
        "Vary": VARY,
    }
    if if_none_match is not None:
        unchanged = _names(if_none_match, etag)
    else:
        unchanged = if_modified_since is not None and _not_since(if_modified_since, modified)
    if unchanged:
        return Response(status_code=304, headers=headers)
    response.headers.update(headers)
    return response


def _names(if_none_match: str, etag: str) -> bool:
    tags = [tag.strip() for tag in if_none_match.split(",")]
    return "*" in tags or any(tag.removeprefix("W/") == etag for tag in tags)


def _not_since(if_modified_since: str, modified: float) -> bool:
    """The card unchanged since the date given; a date that cannot be read is ignored (RFC 9110 §13.1.3)."""
    try:
        since = email.utils.parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError, IndexError):
        return False
    if since.tzinfo is None:
        return False
    return modified <= since.timestamp()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # not there (no SOUL.md, no skills): it does not date the card
        return 0.0
