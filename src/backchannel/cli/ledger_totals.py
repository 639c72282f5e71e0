"""`backchannel ledger --totals`: what the runs of the ledger used, per exchange and per pair per day."""

from __future__ import annotations

import click

from ..core.spending import Total, totals
from ..records import LedgerEntry
from .output import emit, note, table


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
