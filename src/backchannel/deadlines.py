"""Deadlines on the wait chain: when a sender stops waiting, as one absolute time that travels with the message.

A deadline is seconds since the epoch (UTC), absolute so that every hop of a chain shares one clock. A person gives
it as a duration (`10m`, `1h30m`, `90s`) or a time (`14:32`, `2026-11-30T14:32:00Z`); HTTP carries it in
`X-Backchannel-Deadline` (RFC 3339, or seconds since the epoch); our A2A extension under its metadata key. An agent's
send inherits the deadline of the turn it is sent from, less a reserve for that turn to use the answer
(`inherited`). A pure module: no clock of its own, every function is given `now`.
"""

from __future__ import annotations

import datetime as dt
import math
import re

from .errors import UsageError

HEADER = "X-Backchannel-Deadline"
CODE = "deadline_passed"  # the error code of a run that ended at its deadline (state expired, or stopped running)
RESERVE_SHARE = 0.1  # what a turn keeps of its time left to use the answer of a send it makes
RESERVE_MOST = 60.0  # seconds, at the most
_DURATION_RE = re.compile(r"(?:(?P<h>\d+(?:\.\d+)?)h)?(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s?)?")
_CLOCK_RE = re.compile(r"(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)")
EXAMPLES = "10m, 1h30m, 90s, 14:32 or 2026-11-30T14:32:00Z"


def parse(text: str, *, now: float) -> float:
    """A deadline as a person writes it: a duration from `now`, a clock time (today's, or tomorrow's once it passed,
    local time) or an ISO 8601 time (UTC unless it says its offset). UsageError for anything else."""
    given = text.strip()
    duration = _DURATION_RE.fullmatch(given)
    if given and duration is not None and any(duration.groups()):
        parts = {k: float(v) for k, v in duration.groupdict().items() if v}
        seconds = parts.get("h", 0.0) * 3600 + parts.get("m", 0.0) * 60 + parts.get("s", 0.0)
        if seconds <= 0:
            raise UsageError(f"deadline {text!r} is not in the future", code="invalid_deadline")
        return now + seconds
    clock = _CLOCK_RE.fullmatch(given)
    if clock is not None:
        today = dt.datetime.fromtimestamp(now).replace(
            hour=int(clock["h"]), minute=int(clock["m"]), second=0, microsecond=0
        )
        at = today.timestamp()
        return at if at > now else (today + dt.timedelta(days=1)).timestamp()
    return absolute(given)


def absolute(text: str) -> float:
    """A deadline as a wire carries it: RFC 3339 / ISO 8601 (UTC unless it says its offset) or seconds since the
    epoch. UsageError for anything else."""
    given = text.strip()
    try:
        seconds = float(given)
    except ValueError:
        try:
            when = dt.datetime.fromisoformat(given.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise UsageError(
                f"deadline {text[:60]!r} is not a time: give a duration or a time ({EXAMPLES})",
                code="invalid_deadline",
            ) from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        return when.timestamp()
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"deadline {text[:60]!r} is not a time", code="invalid_deadline")
    return seconds


def wire(deadline: float) -> str:
    """A deadline as HTTP and A2A carry it: RFC 3339 in UTC, to the millisecond."""
    return dt.datetime.fromtimestamp(deadline, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def reserve(left: float) -> float:
    """What a turn keeps of the `left` seconds before its deadline to use an answer: a tenth, a minute at most."""
    return min(RESERVE_MOST, max(left, 0.0) * RESERVE_SHARE)


def inherited(turn: float | None, given: float | None, *, now: float) -> float | None:
    """The deadline of a send made from a turn whose deadline is `turn`: the turn's, shortened by its reserve, and
    never later than the one the send gives itself (`given`). None when neither has one."""
    passed_on = None if turn is None else turn - reserve(turn - now)
    found = [d for d in (passed_on, given) if d is not None]
    return min(found) if found else None


def bounded(wait: float, deadline: float | None, *, now: float) -> float:
    """A wait no longer than the time left before `deadline` (what a peer that knows no deadlines is given)."""
    return wait if deadline is None else max(0.0, min(wait, deadline - now))


def frame_line(deadline: float, *, now: float) -> str:
    """The line of Backchannel's own that tells a turn its deadline: `[Answer by 14:32, 6 minutes from now …]`."""
    left = deadline - now
    at = dt.datetime.fromtimestamp(deadline).strftime("%H:%M" if left < 86_400 else "%Y-%m-%d %H:%M")
    if left <= 0:
        return f"[Answer by {at}: the sender's deadline has passed; answer in one short reply]"
    return f"[Answer by {at}, {span(left)} from now: the sender waits no longer, and this turn is stopped then]"


def span(seconds: float) -> str:
    """A duration as a person says it: `45 seconds`, `6 minutes`, `2 hours 5 minutes`."""
    whole = max(0, round(seconds))
    if whole < 90:
        return f"{whole} second{'' if whole == 1 else 's'}"
    minutes = round(whole / 60)
    if minutes < 120:
        return f"{minutes} minutes"
    hours, rest = divmod(minutes, 60)
    return f"{hours} hours" + (f" {rest} minutes" if rest else "")
