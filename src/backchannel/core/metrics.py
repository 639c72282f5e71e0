"""The gateway's metrics, in the Prometheus text format (`GET /metrics`, prometheus-client).

What happens in this gateway is counted as it happens (runs that ended here, by state and outcome; turn and queue
wait durations; model tokens and cost; calls to peers by outcome; how long a run's end takes to commit). What the
store holds for every gateway sharing it is read at each scrape: the messages queued, running and held per profile,
and the refusals by code. Names are `backchannel_*`, in seconds, counters ending `_total`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..outcome import of_state
from ..states import RunState
from ..store import stats
from ..store.driver import Db
from ..store.runs import RunRow

CONTENT_TYPE = CONTENT_TYPE_LATEST
# From a quick echo turn to a long tool-using one; the queue wait alike.
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
LIVE = (  # the runs' states counted from the store at each scrape: (state, metric, what it says)
    ("queued", "backchannel_queue_depth", "Messages waiting in the queues, per profile (every gateway on the store)"),
    ("running", "backchannel_running_turns", "Turns running now, per profile (every gateway on the store)"),
    ("held", "backchannel_held", "Messages held for the person's approval, per profile"),
)


class _StoreFigures(Collector):
    """The figures read from the store for the scrape being answered (`Metrics.render` reads them first)."""

    def __init__(self) -> None:
        self.live: list[tuple[str, str, int]] = []
        self.refusals: list[tuple[str, int]] = []

    def collect(self) -> Iterator[Metric]:
        for state, name, what in LIVE:
            family = GaugeMetricFamily(name, what, labels=["profile"])
            for profile, at, count in self.live:
                if at == state:
                    family.add_metric([profile], count)
            yield family
        refused = CounterMetricFamily(
            "backchannel_refusals", "Messages refused by policy, by code (every gateway on the store)", labels=["code"]
        )
        for code, count in self.refusals:
            refused.add_metric([code], count)
        yield refused

    def describe(self) -> Iterable[Metric]:
        return []


class Metrics:
    """One gateway's instruments and the registry `GET /metrics` renders."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.registry = CollectorRegistry(auto_describe=True)
        self.runs = Counter(
            "backchannel_runs",
            "Runs that ended in this gateway, by profile, state and outcome",
            ["profile", "state", "outcome"],
            registry=self.registry,
        )
        self.turn_seconds = Histogram(
            "backchannel_turn_duration_seconds",
            "A run's turn, from its start to its end (ended in this gateway)",
            ["profile"],
            buckets=SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.queue_seconds = Histogram(
            "backchannel_queue_wait_seconds",
            "A run's wait in the queue, from its arrival to its turn's start",
            ["profile"],
            buckets=SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter(
            "backchannel_model_tokens",
            "Tokens the runs' model calls read (in) and wrote (out), by profile",
            ["profile", "direction"],
            registry=self.registry,
        )
        self.cost = Counter(
            "backchannel_model_cost_usd",
            "What the runs' model calls cost, in US dollars (the profiles' model.prices)",
            ["profile"],
            registry=self.registry,
        )
        self.peer_calls = Counter(
            "backchannel_peer_calls",
            "Messages and runs sent to peers, by peer and outcome",
            ["peer", "outcome"],
            registry=self.registry,
        )
        self.commit_seconds = Histogram(
            "backchannel_store_commit_duration_seconds",
            "Committing a run's end (its state, reply and messages) to the store",
            buckets=COMMIT_BUCKETS,
            registry=self.registry,
        )
        self._store = _StoreFigures()
        self.registry.register(self._store)

    # --- what the gateway tells -------------------------------------------------------------------

    def noticed(self, run: RunRow, state: RunState) -> None:
        """A run's state changed in this gateway: an end is counted with its durations and what it used."""
        if not state.terminal:
            return
        self.runs.labels(run.profile, state.value, of_state(state.value).value).inc()
        if run.started_at is not None:
            self.queue_seconds.labels(run.profile).observe(max(0.0, run.started_at - run.created_at))
            if run.finished_at is not None:
                self.turn_seconds.labels(run.profile).observe(max(0.0, run.finished_at - run.started_at))
        if run.tokens_in or run.tokens_out:
            self.tokens.labels(run.profile, "in").inc(run.tokens_in)
            self.tokens.labels(run.profile, "out").inc(run.tokens_out)
        if run.cost_usd:
            self.cost.labels(run.profile).inc(run.cost_usd)

    def peer_call(self, peer: str, outcome: str) -> None:
        self.peer_calls.labels(peer, outcome).inc()

    def committed(self, seconds: float) -> None:
        self.commit_seconds.observe(seconds)

    # --- a scrape --------------------------------------------------------------------------------

    async def render(self) -> bytes:
        """The text a scrape gets: the store's figures read now, with this gateway's instruments."""
        self._store.live = await stats.live_runs(self.db)
        self._store.refusals = await stats.refusals_by_code(self.db)
        return generate_latest(self.registry)
