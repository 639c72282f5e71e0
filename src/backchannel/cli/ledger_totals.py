"""`backchannel ledger --totals`: what the runs of the ledger used, per exchange and per pair per day."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import click

from .. import addresses
from ..core.views import LedgerEntry
from .output import emit, note, table


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


def show(entries: list[LedgerEntry], *, as_json: bool) -> None:
    exchanges, pairs = totals(entries)

    def text() -> None:
        table(
            [[origin, str(t.runs), _tokens(t), _usd(t.cost_usd), _first(t.first)] for origin, t in exchanges.items()],
            ["EXCHANGE", "RUNS", "TOKENS (IN+OUT)", "COST", "FIRST MESSAGE"],
        )
        click.echo()
        table(
            [[day, a, b, str(t.runs), _tokens(t), _usd(t.cost_usd)] for (day, a, b), t in pairs.items()],
            ["DAY", "FROM", "TO", "RUNS", "TOKENS (IN+OUT)", "COST"],
        )
        if not exchanges:
            note("no runs here for this filter")

    emit(
        {
            "exchanges": [
                {"exchange": origin, "first_message": t.first, **t.to_dict()} for origin, t in exchanges.items()
            ],
            "pairs": [{"day": day, "from": a, "to": b, **t.to_dict()} for (day, a, b), t in pairs.items()],
        },
        as_json=as_json,
        text=text,
    )


def _tokens(t: Total) -> str:
    return f"{t.tokens_in + t.tokens_out:,} ({t.tokens_in:,}+{t.tokens_out:,})"


def _usd(amount: float) -> str:
    return f"${amount:,.4f}" if amount else "-"


def _first(message: str) -> str:
    line = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
    return line if len(line) <= 48 else line[:47] + "…"
