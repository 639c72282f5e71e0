"""An exchange drawn as a timeline (the web view's exchange page): a lane per session, a bar per run, arrows for the
sends and the replies; laid out here in the SVG's own units, drawn by `_timeline.html`.

Everything comes from the store's records of the exchange (no tracing set-up needed): when each message was sent,
when its turn began and ended, its outcome, hop and tokens, when its model read it (the consumed mark), and its
deadline (a mark in its lane when it falls within the drawing; the bar's label says it, and `expired` when the run
ended at it).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ... import addresses
from ...framing import is_human
from ...records import LedgerEntry

WIDTH = 1000.0  # the drawing's width in its own units (it scales to the page)
LABELS = 190.0  # the lanes' names, left of the time axis
LANE = 44.0  # one lane's height
TOP = 28.0  # room for the time axis' labels
MIN_BAR = 4.0  # a run too quick to see still shows
RIGHT = 100.0  # room right of the time axis for the last bar's label


@dataclass(frozen=True)
class Bar:
    """One run (or message to a peer) in its target's lane: its wait (queued or held) and its turn."""

    lane: int
    x: float  # sent
    start: float  # its turn began (x when it never waited)
    end: float  # it ended (or now)
    outcome: str
    state: str
    run_id: str | None
    hop: int
    message: str
    reply: str
    tokens: int
    seconds: float | None
    here: bool  # a run of this gateway (it has a run page); a message to a peer has none
    read_at: float | None = None  # where its model first held the message (the consumed mark); None: not read
    read: str = "-"  # `step N`, `no` (it ended unread) or `-` (not known)
    deadline: str | None = None  # when its sender stopped waiting (the time of day), if it had a deadline
    deadline_x: float | None = None  # where that falls, when within the drawing

    @property
    def waited(self) -> float:
        return max(0.0, self.start - self.x)

    @property
    def ran(self) -> float:
        return max(MIN_BAR, self.end - self.start)


@dataclass(frozen=True)
class Arrow:
    """A send (from the sender's lane to the target's) or a reply (back), at one moment."""

    x: float
    from_lane: int
    to_lane: int
    kind: str  # send | reply


@dataclass(frozen=True)
class Timeline:
    lanes: list[str]
    bars: list[Bar]
    arrows: list[Arrow]
    ticks: list[tuple[float, str]]  # (x, seconds since the first message)
    height: float
    width: float = WIDTH
    left: float = LABELS

    def y(self, lane: int) -> float:
        return TOP + lane * LANE


def timeline(entries: list[LedgerEntry], *, now: float) -> Timeline | None:
    """The exchange's entries (runs and messages to peers; refusals have no bar) laid out; None when nothing ran."""
    shown = [e for e in entries if e.kind in ("run", "peer")]
    if not shown:
        return None
    first = min(e.at for e in shown)
    last = max(e.finished_at if e.finished_at is not None else now for e in shown)
    span = max(last - first, 0.001)

    def x(at: float) -> float:
        return LABELS + (WIDTH - LABELS - RIGHT) * (at - first) / span

    lanes: list[str] = []

    def lane(address: str) -> int:
        if address not in lanes:
            lanes.append(address)
        return lanes.index(address)

    bars: list[Bar] = []
    arrows: list[Arrow] = []
    for e in sorted(shown, key=lambda e: e.at):
        source, target = lane(e.sender), lane(e.target)
        end = e.finished_at if e.finished_at is not None else now
        begun = e.started_at if e.started_at is not None else (e.at if e.kind == "peer" else end)
        bars.append(
            Bar(
                lane=target,
                x=x(e.at),
                start=x(begun),
                end=x(end),
                outcome=e.outcome.value,
                state=e.state,
                run_id=e.run_id,
                hop=e.hops,
                message=e.message,
                reply=e.reply or e.reason or "",
                tokens=e.tokens_in + e.tokens_out,
                seconds=(e.finished_at - e.at) if e.finished_at is not None else None,
                here=e.kind == "run",
                read_at=x(e.consumed.at) if e.consumed is not None else None,
                read=e.read,
                deadline=None if e.deadline is None else dt.datetime.fromtimestamp(e.deadline).strftime("%H:%M:%S"),
                deadline_x=x(e.deadline) if e.deadline is not None and first <= e.deadline <= last else None,
            )
        )
        arrows.append(Arrow(x(e.at), source, target, "send"))
        if e.finished_at is not None and e.outcome.value == "delivered" and source != target:
            arrows.append(Arrow(x(e.finished_at), target, source, "reply"))
    ticks = [(x(first + span * i / 4), _seconds(span * i / 4, span)) for i in range(5)]
    height = TOP + LANE * len(lanes)
    return Timeline(lanes=[_label(a) for a in lanes], bars=bars, arrows=arrows, ticks=ticks, height=height)


def _seconds(value: float, span: float) -> str:
    return f"{value:.2f}s" if span < 10 else f"{value:.0f}s"


def _label(address: str) -> str:
    """A lane's name: the person, a profile with its session's id cut short, or a peer's agent."""
    if is_human(address):
        return "you" if address in ("human:cli", "human:web", "human:api") else address
    if addresses.is_remote(address):
        return address
    profile, _, session = address.partition("/")
    return f"{profile} · {session[-6:]}" if session else profile
