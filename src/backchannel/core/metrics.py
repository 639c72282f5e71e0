"""The gateway's metrics, in the Prometheus text format (`GET /metrics`, prometheus-client).

What happens in this gateway is counted as it happens (runs that ended here, by state and outcome; turn and queue
wait durations; model tokens and cost; calls to peers by outcome; how long a run's end takes to commit). What the
store holds for every gateway sharing it is read at each scrape: the messages queued, running and held per profile,
and the refusals by code. Names are `backchannel_*`, in seconds, counters ending `_total`.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..outcome import of_state
from ..records import Run
from ..states import RunState
from ..store import stats
from ..store.driver import Db

CONTENT_TYPE = CONTENT_TYPE_LATEST
# From a quick echo turn to a long tool-using one; the queue wait alike.
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
Counts = defaultdict[tuple[str, ...], float]  # a count per label values
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
LIVE = (  # the runs' states counted from the store at each scrape: (state, metric, what it says)
    ("queued", "backchannel_queue_depth", "Messages waiting in the queues, per profile (every gateway on the store)"),
    ("running", "backchannel_running_turns", "Turns running now, per profile (every gateway on the store)"),
    ("held", "backchannel_held", "Messages held for the person's approval, per profile"),
)


@dataclass
class _Histogram:
    """Observations in buckets (the `le` upper bounds), their sum and count: added to on the event loop, read at
    a scrape (no lock: the gateway's loop is the only writer and the scrape runs on it too)."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound (+Inf)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def buckets(self) -> list[tuple[str, float]]:
        cumulative = list(itertools.accumulate(self.counts))
        return [
            *((str(float(b)), float(n)) for b, n in zip(self.bounds, cumulative, strict=False)),
            ("+Inf", float(self.count)),
        ]


class Metrics(Collector):
    """One gateway's figures, and the text `GET /metrics` renders from them (prometheus-client's registry and
    format). What this gateway does is counted in plain numbers as it happens, cheap on the turn path; the
    families are built at the scrape, with the store's figures read then."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.runs: Counts = defaultdict(float)  # (profile, state, outcome)
        self.turns: dict[tuple[str, ...], _Histogram] = {}
        self.waits: dict[tuple[str, ...], _Histogram] = {}
        self.tokens: Counts = defaultdict(float)  # (profile, direction)
        self.cost: Counts = defaultdict(float)  # (profile,)
        self.peer_calls: Counts = defaultdict(float)  # (peer, outcome)
        self.commits = _Histogram(COMMIT_BUCKETS)
        self._live: list[tuple[str, str, int]] = []
        self._refusals: list[tuple[str, int]] = []
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    # --- what the gateway tells -------------------------------------------------------------------

    def noticed(self, run: Run, state: RunState) -> None:
        """A run's state changed in this gateway: an end is counted with its durations and what it used."""
        if not state.terminal:
            return
        profile = (run.profile,)
        self.runs[(run.profile, state.value, of_state(state).value)] += 1
        if run.started_at is not None:
            _histogram(self.waits, profile).observe(max(0.0, run.started_at - run.created_at))
            if run.finished_at is not None:
                _histogram(self.turns, profile).observe(max(0.0, run.finished_at - run.started_at))
        if run.tokens_in or run.tokens_out:
            self.tokens[(run.profile, "in")] += run.tokens_in
            self.tokens[(run.profile, "out")] += run.tokens_out
        if run.cost_usd:
            self.cost[profile] += run.cost_usd

    def peer_call(self, peer: str, outcome: str) -> None:
        self.peer_calls[(peer, outcome)] += 1

    def committed(self, seconds: float) -> None:
        self.commits.observe(seconds)

    # --- a scrape --------------------------------------------------------------------------------

    async def render(self) -> bytes:
        """The text a scrape gets: the store's figures read now, with what this gateway counted."""
        self._live = await stats.live_runs(self.db)
        self._refusals = await stats.refusals_by_code(self.db)
        return generate_latest(self.registry)

    def collect(self) -> Iterator[Metric]:
        yield _counter(
            "backchannel_runs", "Runs that ended in this gateway", ["profile", "state", "outcome"], self.runs
        )
        yield _histograms(
            "backchannel_turn_duration_seconds",
            "A run's turn, from its start to its end (ended in this gateway)",
            self.turns,
        )
        yield _histograms(
            "backchannel_queue_wait_seconds",
            "A run's wait in the queue, from its arrival to its turn's start",
            self.waits,
        )
        yield _counter(
            "backchannel_model_tokens",
            "Tokens the runs' model calls read (in) and wrote (out)",
            ["profile", "direction"],
            self.tokens,
        )
        yield _counter(
            "backchannel_model_cost_usd",
            "What the runs' model calls cost, in US dollars (model.prices)",
            ["profile"],
            self.cost,
        )
        yield _counter(
            "backchannel_peer_calls",
            "Messages and runs sent to peers, by outcome",
            ["peer", "outcome"],
            self.peer_calls,
        )
        commits = HistogramMetricFamily(
            "backchannel_store_commit_duration_seconds", "Committing a run's end (its state, reply and messages)"
        )
        commits.add_metric([], self.commits.buckets(), self.commits.total)
        yield commits
        for state, name, what in LIVE:
            family = GaugeMetricFamily(name, what, labels=["profile"])
            for profile, at, count in self._live:
                if at == state:
                    family.add_metric([profile], count)
            yield family
        refused = CounterMetricFamily(
            "backchannel_refusals", "Messages refused by policy, by code (every gateway on the store)", labels=["code"]
        )
        for code, count in self._refusals:
            refused.add_metric([code], count)
        yield refused

    def describe(self) -> Iterable[Metric]:
        return []


def _histogram(found: dict[tuple[str, ...], _Histogram], labels: tuple[str, ...]) -> _Histogram:
    histogram = found.get(labels)
    if histogram is None:
        histogram = found[labels] = _Histogram(SECONDS_BUCKETS)
    return histogram


def _counter(name: str, what: str, labels: list[str], counts: dict[tuple[str, ...], float]) -> Metric:
    family = CounterMetricFamily(name, what, labels=labels)
    for values, count in sorted(counts.items()):
        family.add_metric(list(values), count)
    return family


def _histograms(name: str, what: str, found: dict[tuple[str, ...], _Histogram]) -> Metric:
    family = HistogramMetricFamily(name, what, labels=["profile"])
    for labels, histogram in sorted(found.items()):
        family.add_metric(list(labels), histogram.buckets(), histogram.total)
    return family
