"""`backchannel profile allow | accept | hold | budget`: a profile's messaging rules, changed without an editor.

Each command edits `agent.session_messaging` in the profile's config.yaml (comments kept, written atomically,
checked as the gateway checks it) and prints the rules as they load now; a running gateway follows the
change at its next use, as after a hand edit.
"""

from __future__ import annotations

from typing import Any

import click

from .. import addresses
from ..home import config, rules
from ..home.profiles import list_profiles
from ..home.rules import Budget, Changed, RuleList
from . import complete
from .output import emit, examples, note
from .profile_view import describe, print_facts

WHAT = {
    "allow": "what PROFILE's sessions may message (deny by default: empty allows nothing)",
    "accept": "who may message PROFILE (no list: any sender that is allowed to)",
    "hold": "whose messages to PROFILE wait for your approval (`backchannel held`)",
}
SHORT = {
    "allow": "Change what a profile's sessions may message.",
    "accept": "Change who may message a profile.",
    "hold": "Change whose messages to a profile wait for you.",
}
CLEAR_HELP = {
    "allow": "Empty the list: the profile's sessions may message nothing.",
    "accept": "Remove the list: any sender that is allowed to may message the profile.",
    "hold": "Empty the list: nothing is held.",
}
CLEAR_HELP = {
    "allow": "Empty the list: the profile's sessions may message nothing.",
    "accept": "Remove the list: any sender that is allowed to may message the profile.",
    "hold": "Empty the list: nothing is held.",
}
EXAMPLES = {
    "allow": (
        "backchannel profile allow research builds 'peer:spark/*'",
        "backchannel profile allow research builds --remove",
    ),
    "accept": ("backchannel profile accept builds research 'peer:*'", "backchannel profile accept builds --clear"),
    "hold": ("backchannel profile hold builds 'peer:*'", "backchannel profile hold builds 'peer:*' --remove --json"),
}


def _rule_command(key: RuleList) -> click.Command:
    @click.command(key, epilog=examples(*EXAMPLES[key]))
    @click.argument("profile_name", metavar="PROFILE", shell_complete=complete.profile_names)
    @click.argument("patterns", metavar="PATTERN...", nargs=-1)
    @click.option("--remove", is_flag=True, help="Take the patterns out of the list instead of adding them.")
    @click.option("--clear", is_flag=True, help=CLEAR_HELP[key])
    @click.option("--json", "as_json", is_flag=True, help="Print the profile as `profile show --json` does.")
    def command(profile_name: str, patterns: tuple[str, ...], remove: bool, clear: bool, as_json: bool) -> None:
        root = config.home()
        config.require_home(root)
        if clear and (patterns or remove):
            raise click.UsageError("--clear takes no patterns and no --remove")
        if not clear and not patterns:
            raise click.UsageError("give at least one PATTERN (or --clear)")
        changed = rules.edit_list(
            root,
            profile_name,
            key,
            add=() if remove else patterns,
            remove=patterns if remove else (),
            clear=clear,
        )
        _show(changed, key, as_json=as_json)

    command.short_help = SHORT[key]
    command.help = (
        f"Change {WHAT[key]}.\n\n"
        f"Adds each PATTERN to agent.session_messaging.{key} in PROFILE's config.yaml (--remove takes them out). "
        "A pattern is a glob over addresses: `builds` (its Bot Chat), `builds/*` (every session of builds), `*` "
        "(every local session), `peer:spark/*` (the agents of peer spark). Comments in the file are kept; a "
        "running gateway follows the change."
    )
    return command


def _show(changed: Changed, key: str, *, as_json: bool) -> None:
    data = describe(changed.profile)
    sm = changed.profile.config.messaging
    now = getattr(sm, key) if key in rules.RULE_LISTS else None

    def text() -> None:
        if changed.added:
            click.echo(f"added to {key}: {', '.join(changed.added)}")
        if changed.removed:
            click.echo(f"removed from {key}: {', '.join(changed.removed)}")
        if key in rules.RULE_LISTS:
            shown = "any sender that is allowed to (no accept list)" if now is None else (", ".join(now) or "nothing")
            click.echo(f"{changed.profile.name} {key}: {shown}")
        else:
            print_facts({"session_messaging": data["session_messaging"]})

    emit(data, as_json=as_json, text=text)
    if key in rules.RULE_LISTS and now is not None and not as_json:
        _note_unknown(changed.added)


def _note_unknown(patterns: tuple[str, ...]) -> None:
    """A plain local name that is no profile here: probably a typo (it is kept: the profile may come later)."""
    known = set(list_profiles(config.home()))
    for pattern in patterns:
        head = addresses.head(pattern)
        if not addresses.is_remote(pattern) and not any(c in head for c in "*?[") and head not in known:
            note(f"note: there is no profile {head!r} here (yet); profiles: {', '.join(sorted(known))}")


NO_LIMIT = "none"  # a spending budget given so is taken out: no limit


def spend(kind: type[int] | type[float]) -> Any:
    """The callback that reads a spending budget: a number of zero or more (whole for tokens), or `none`."""

    def read(ctx: click.Context, param: click.Parameter, value: str | None) -> float | str | None:
        if value is None or value.strip().lower() == NO_LIMIT:
            return None if value is None else NO_LIMIT
        try:
            number = kind(value.strip())
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise click.BadParameter(f"{value!r} is not {what} or `none`") from None
        if not 0 <= number < float("inf"):
            raise click.BadParameter(f"{value!r} is not zero or more")
        return number

    return read


@click.command(
    "budget",
    epilog=examples(
        "backchannel profile budget research --pair-budget 10 --max-hops 3",
        "backchannel profile budget builds --inbound-budget 60 --hold-expiry 3600 --json",
        "backchannel profile budget research --tokens-per-day 200000 --usd-per-day 2.50",
        "backchannel profile budget research --usd-per-day none",
    ),
)
@click.argument("profile_name", metavar="PROFILE", shell_complete=complete.profile_names)
@click.option("--max-hops", type=click.IntRange(0, 1000), help="A message past this hop is refused (hop_limit).")
@click.option(
    "--pair-budget",
    type=click.IntRange(0, 100_000),
    help="Agent-sent messages from PROFILE to one other profile per exchange and hour (pair_budget).",
)
@click.option(
    "--inbound-budget",
    type=click.IntRange(0, 100_000),
    help="Messages one peer key may send PROFILE within an hour (inbound_budget).",
)
@click.option(
    "--hold-expiry",
    type=click.FloatRange(0, 365 * 86_400, min_open=True),
    help="Seconds a held message waits for your approval before it expires.",
)
@click.option(
    "--tokens-per-exchange",
    metavar="INTEGER|none",
    callback=spend(int),
    help="Tokens all the runs that followed one person's message may use before PROFILE's agents' sends are refused"
    " (budget.tokens_per_exchange; `none`: no limit).",
)
@click.option(
    "--tokens-per-day",
    metavar="INTEGER|none",
    callback=spend(int),
    help="Tokens PROFILE's turns may use in 24 hours (budget.tokens_per_day; `none`: no limit).",
)
@click.option(
    "--usd-per-day",
    metavar="AMOUNT|none",
    callback=spend(float),
    help="US dollars PROFILE's turns may cost in 24 hours (budget.usd_per_day; `none`: no limit).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the profile as `profile show --json` does.")
def budget(
    profile_name: str,
    max_hops: int | None,
    pair_budget: int | None,
    inbound_budget: int | None,
    hold_expiry: float | None,
    tokens_per_exchange: float | str | None,
    tokens_per_day: float | str | None,
    usd_per_day: float | str | None,
    as_json: bool,
) -> None:
    """Set PROFILE's hop limit, budgets and hold expiry.

    Each option sets one number of agent.session_messaging in PROFILE's config.yaml (comments kept); a
    running gateway follows the change. The spending budgets (tokens, dollars) bound what PROFILE's agents may
    spend before their sends are refused (budget_exhausted); `none` takes one out."""
    root = config.home()
    config.require_home(root)
    given: dict[Budget, Any] = {
        "max_hops": max_hops,
        "pair_budget_per_hour": pair_budget,
        "inbound_budget_per_hour": inbound_budget,
        "hold_expiry_seconds": hold_expiry,
        "budget.tokens_per_exchange": tokens_per_exchange,
        "budget.tokens_per_day": tokens_per_day,
        "budget.usd_per_day": usd_per_day,
    }
    values = {k: (None if v == NO_LIMIT else v) for k, v in given.items() if v is not None}
    if not values:
        raise click.UsageError(
            "give at least one of --max-hops, --pair-budget, --inbound-budget, --hold-expiry, --tokens-per-exchange,"
            " --tokens-per-day, --usd-per-day"
        )
    _show(rules.set_budgets(root, profile_name, values), "budget", as_json=as_json)


RULE_COMMANDS = (*(_rule_command(k) for k in rules.RULE_LISTS), budget)
