"""`backchannel ledger`: who said what to whom, filtered by address, state, outcome and time, or followed live.

The ledger is read through the home's gateway: the running one, else this home's opened in this process, which
reads the same store; so `--follow` sees what the gateway records as well as what a command records in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import re
import time
from typing import TYPE_CHECKING

import click

from ..home import config
from ..net.http import with_query
from ..outcome import Outcome
from ..records import LedgerEntry
from ..states import RunState
from . import complete
from .connect import gateway_link
from .output import emit, examples, note, table, when

if TYPE_CHECKING:
    from .link_http import HttpGateway

STATES = [*(s.value for s in RunState), "refused"]
OUTCOMES = [o.value for o in Outcome]
FOLLOW_POLL_SECONDS = 0.5
FOLLOW_OVERLAP_SECONDS = 5.0  # a row committed a moment after a later one is still seen
TOTALS_SCAN = 100_000  # the newest entries --totals adds up
NARROW = 48
DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def since_time(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """`--since`: ago as `30s`, `10m`, `2h`, `1d`, `1w`, or an ISO time (`2026-11-30T08:00`, local time)."""
    if value is None:
        return None
    text = value.strip()
    if match := DURATION_RE.fullmatch(text):
        return time.time() - float(match.group(1)) * UNITS[match.group(2)]
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither a time ago (30s, 10m, 2h, 1d, 1w) nor an ISO time (2026-11-30T08:00)"
        ) from None


@click.command(
    "ledger",
    epilog=examples(
        "backchannel ledger",
        "backchannel ledger research builds --json",
        "backchannel ledger research --since 2h --outcome refused",
        "backchannel ledger --state running --state queued --wide",
        "backchannel ledger peer:spark --follow",
        "backchannel ledger --totals --since 1d",
    ),
)
@click.argument("address", required=False, shell_complete=complete.addresses)
@click.argument("other", required=False, shell_complete=complete.addresses)
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="At most this many, newest first."
)
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(STATES),
    help="Only entries in this run state (repeatable; `refused`: the refusals).",
)
@click.option(
    "--outcome",
    "outcomes",
    multiple=True,
    type=click.Choice(OUTCOMES),
    help="Only entries with this outcome (repeatable), as the web view filters.",
)
@click.option(
    "--since",
    metavar="WHEN",
    callback=since_time,
    help="Only what was sent since then: 30s, 10m, 2h, 1d, or an ISO time.",
)
@click.option("--follow", is_flag=True, help="Then print each new entry (and each change) as it comes, until Ctrl-C.")
@click.option(
    "--totals",
    is_flag=True,
    help="What the runs used (tokens, cost), per exchange and per pair per day, instead of the entries.",
)
@click.option(
    "--wide",
    is_flag=True,
    help="Whole messages and replies and every column whole (by default the first line of each, cut to fit the"
    " terminal's width).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON on stdout (with --follow: one object per line, as they come)."
)
def ledger(
    address: str | None,
    other: str | None,
    limit: int,
    states: tuple[str, ...],
    outcomes: tuple[str, ...],
    since: float | None,
    follow: bool,
    totals: bool,
    wide: bool,
    as_json: bool,
) -> None:
    """Who said what to whom, newest first.

    Every run, every refusal and every message to a peer, with its outcome (delivered, receipt, held,
    refused, failed, unknown) and, where it says more, its run state or refusal code. With ADDRESS, what it
    sent or received (a profile covers its sessions); with two, what passed between them. With --follow, new
    entries are printed as they come, oldest first, whether a gateway or a command here records them.
    """

    if totals and follow:
        raise click.UsageError("--totals adds up what was; --follow shows what comes: one or the other")

    async def go() -> None:
        async with gateway_link(config.home(), works=False) as link:
            read = Reader(link, address, other, states=states, outcomes=outcomes)
            if totals:
                from . import ledger_totals

                ledger_totals.show(await read(limit=TOTALS_SCAN, since=since), as_json=as_json)
                return
            rows = await read(limit=limit, since=since)
            if not follow:
                emit([r.to_dict() for r in rows], as_json=as_json, text=lambda: _table(rows, wide=wide, filtered=read))
                return
            await _follow(read, list(reversed(rows)), as_json=as_json, wide=wide)

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends --follow (exit 0)
        asyncio.run(go())


class Reader:
    """The ledger as filtered (the gateway's `GET /v1/ledger`): newest first, at most `limit`, from `since` on."""

    def __init__(
        self,
        link: HttpGateway,
        a: str | None,
        b: str | None,
        *,
        states: tuple[str, ...],
        outcomes: tuple[str, ...],
    ) -> None:
        self.link = link
        self.addresses = tuple(given for given in (a, b) if given is not None)
        self.states = states
        self.outcomes = outcomes

    @property
    def filtered(self) -> bool:
        return bool(self.addresses or self.states or self.outcomes)

    async def __call__(self, *, limit: int, since: float | None) -> list[LedgerEntry]:
        path = with_query(
            "/v1/ledger", address=self.addresses, state=self.states, outcome=self.outcomes, since=since, limit=limit
        )
        return [LedgerEntry.of(r) for r in (await self.link.client.request("GET", path)).body["data"]]


async def _follow(read: Reader, first: list[LedgerEntry], *, as_json: bool, wide: bool) -> None:
    """Print `first`, then every entry that is new or whose state changed, until Ctrl-C (which ends it: exit 0)."""
    seen: dict[tuple[object, ...], str] = {}
    mark = time.time()

    def show(rows: list[LedgerEntry]) -> None:
        nonlocal mark
        for r in rows:
            if seen.get(r.identity) == r.state:
                continue
            seen[r.identity] = r.state
            mark = max(mark, r.at)
            click.echo(json.dumps(r.to_dict(), ensure_ascii=False) if as_json else _line_of(r, wide=wide))

    show(first)
    if not as_json:
        note("following the ledger: new entries as they come (Ctrl-C ends)")
    while True:
        await asyncio.sleep(FOLLOW_POLL_SECONDS)
        show(list(reversed(await read(limit=10_000, since=mark - FOLLOW_OVERLAP_SECONDS))))


def _outcome_of(r: LedgerEntry) -> str:
    return r.outcome.value + (f" ({r.detail})" if r.detail else "")


def _line_of(r: LedgerEntry, *, wide: bool) -> str:
    said = _text(r.message, wide=wide)
    answer = _text(r.reply or r.reason or "", wide=wide)
    by = f"  by {_deadline(r)}" if r.deadline is not None else ""
    return f"{when(r.at)}  {r.sender} → {r.target}  {_outcome_of(r)}  hop {r.hops}{by}  {said}" + (
        f"  ⟶ {answer}" if answer else ""
    )


def _table(rows: list[LedgerEntry], *, wide: bool, filtered: Reader) -> None:
    table(
        [
            [
                when(r.at),
                r.sender,
                r.target,
                _outcome_of(r),
                str(r.hops),
                _wait(r),
                _deadline(r),
                _spent(r),
                r.read,
                _text(r.message, wide=wide),
                _text(r.reply or r.reason or "", wide=wide),
            ]
            for r in rows
        ],
        ["TIME", "FROM", "TO", "OUTCOME", "HOPS", "WAIT", "DEADLINE", "TOKENS", "READ", "MESSAGE", "REPLY"],
        fit=("MESSAGE", "REPLY", "FROM", "TO"),
        drop=("WAIT", "DEADLINE", "TOKENS", "READ", "HOPS"),
        wide=wide,
    )
    if not rows:
        note("the ledger is empty" + (" for this filter" if filtered.filtered else ""))


def _text(text: str, *, wide: bool) -> str:
    """A message in one cell: its first line of substance cut to fit, or (wide) all of it, line breaks as ⏎."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if lines and lines[0].startswith("[Message from") and len(lines) > 1:
        lines = lines[1:]  # the frame says what FROM says already
    while len(lines) > 1 and lines[0].startswith("[Room ") and lines[0].endswith("]"):
        lines = lines[1:]  # a room's briefing: what was said, not its headings
    if wide:
        return " ⏎ ".join(ln.strip() for ln in lines)
    first = lines[0] if lines else ""
    return first if len(first) <= NARROW else first[: NARROW - 1] + "…"


def _spent(r: LedgerEntry) -> str:
    """A run's tokens (and cost, when its model has prices); '-' for what no turn here answered."""
    if not (r.tokens_in or r.tokens_out):
        return "-"
    return f"{r.tokens_in + r.tokens_out:,}" + (f" ${r.cost_usd:.4f}" if r.cost_usd else "")


def _deadline(r: LedgerEntry) -> str:
    """When its sender stopped waiting (the time of day; the date too when not today's), '-' for none."""
    if r.deadline is None:
        return "-"
    at = dt.datetime.fromtimestamp(r.deadline)
    return at.strftime("%H:%M:%S" if at.date() == dt.date.today() else "%Y-%m-%d %H:%M:%S")


def _wait(r: LedgerEntry) -> str:
    """How long its sender would wait for the reply; '-' for a message that never waited (refused, or held for
    the person: its sender was told at once)."""
    if r.wait_seconds is None or r.outcome in (Outcome.REFUSED, Outcome.HELD):
        return "-"
    return f"{r.wait_seconds:g}s"
