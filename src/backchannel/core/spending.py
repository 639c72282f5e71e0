"""What runs used, added up: per exchange (the runs that followed one person's message) and per pair per day."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import addresses
from ..records import LedgerEntry


@dataclass
class Total:
    """Runs, tokens read and written and US dollars, added up."""

    runs: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    first: str = field(default="", repr=False)  # an exchange's first message

    def add(self, entry: LedgerEntry) -> None:
        self.runs += 1
        self.tokens_in += entry.tokens_in
        self.tokens_out += entry.tokens_out
        self.cost_usd += entry.cost_usd

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": round(self.cost_usd, 6),
        }


def totals(entries: Iterable[LedgerEntry]) -> tuple[dict[str, Total], dict[tuple[str, str, str], Total]]:
    """Of the runs among `entries`: a total per exchange (by its id), and per day, sender and target (each a
    profile as a whole, or the person, or a peer)."""
    exchanges: dict[str, Total] = {}
    pairs: dict[tuple[str, str, str], Total] = {}
    for entry in sorted(entries, key=lambda e: e.at):
        if entry.kind != "run":
            continue
        exchange = exchanges.setdefault(entry.origin or entry.run_id or "?", Total())
        exchange.first = exchange.first or entry.message
        exchange.add(entry)
        day = dt.datetime.fromtimestamp(entry.at).date().isoformat()
        pairs.setdefault((day, addresses.head(entry.sender), addresses.head(entry.target)), Total()).add(entry)
    return exchanges, pairs
