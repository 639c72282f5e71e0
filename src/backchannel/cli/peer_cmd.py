"""`backchannel peer`: register other gateways and message their agents (dm, run, status, stop)."""

from __future__ import annotations

import asyncio
import getpass
import re
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

import click

from .. import addresses, deadlines, keys, shell
from ..addresses import RemoteAddress
from ..errors import Conflict, UsageError
from ..events import Event, event_of
from ..home import config
from ..home import peers as registry
from ..net import wire
from ..net.http import quote
from ..outcome import NOT_CONSUMED, Outcome, Result
from . import complete
from .connect import call, gateway_link, interruptible
from .deadline_option import deadline_of, deadline_option
from .output import WIDE_HELP, emit, examples, message_words, note, read_message, shell_command, show_progress, table

if TYPE_CHECKING:
    from ..dialect import PeerProbed  # a type only: the dialect loads pydantic
    from ..net.local import GatewayClient

PROBE_SECONDS = 30.0  # what asking a new peer's URL may take at the gateway, beyond the peer's own timeout
SENT_FROM = {"X-Backchannel-Sender": "human:cli"}  # the person's message, as sent from the CLI (the ledger says so)


class AliasedGroup(click.Group):
    aliases: ClassVar[dict[str, str]] = {"set": "add", "ls": "list", "rm": "remove"}

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(name, name))

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        _, command, rest = super().resolve_command(ctx, args)
        return (command.name if command else None), command, rest


@click.group("peer", cls=AliasedGroup)
def peer() -> None:
    """Other gateways (Backchannel or Hermes) and their agents. Aliases: set = add, ls = list, rm = remove."""


# --- registry ------------------------------------------------------------------------------------


@peer.command(
    "add",
    epilog=examples(
        "backchannel peer add spark --url http://spark.lan:8377 --note 'homelab'",
        "backchannel peer add spark --url http://spark.lan:8377 < spark.key",
        "backchannel peer add spark --url http://spark.lan:8377 --key-back --as home --url-back http://home.lan:8377",
        "backchannel peer add team --url http://gw1.lan:8377 --url http://gw2.lan:8377",
    ),
)
@click.argument("name", shell_complete=complete.peer_names)
@click.option(
    "--url",
    "urls",
    required=True,
    multiple=True,
    help="The peer gateway's base URL, e.g. http://spark.lan:8377. Repeat it for the gateways of one shared store:"
    " each is tried in order when the one before cannot be reached, with the same idempotency key.",
)
@click.option("--key", help="Its API_SERVER_KEY (else asked without echo, or read from stdin).")
@click.option("--note", "note_text", help="A note shown by `peer list`.")
@click.option(
    "--timeout",
    "timeout_seconds",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds to wait for each answer before giving up (a message: its wait plus this) [default: 30].",
)
@click.option(
    "--key-back/--no-key-back",
    default=None,
    help="Make the key NAME uses to message this gateway back, and print the command to run there "
    "[default: asked at a terminal].",
)
@click.option("--as", "as_name", help="This gateway's name on the other side, for that command [default: host name].")
@click.option("--url-back", help="The URL the peer reaches this gateway at, for that command.")
def add(
    name: str,
    urls: tuple[str, ...],
    key: str | None,
    note_text: str | None,
    timeout_seconds: float | None,
    key_back: bool | None,
    as_name: str | None,
    url_back: str | None,
) -> None:
    """Register (or update) peer NAME. The key goes to the home's .env, never to config.yaml.

    It can also make the key for the way back (a key of NAME's own here: its messages are from
    peer:NAME) and print the `backchannel peer add` or `hermes peer add` to run on the other side."""
    root = config.home()
    config.require_home(root)
    config.check_name(name, what="peer")
    url, *more = [registry.check_url(u) for u in urls]
    if as_name is not None:
        config.check_name(as_name, what="peer")
    if url_back is not None:
        registry.check_url(url_back)
    if key is None:
        key = _read_key(name, root)
    probe_key = registry.check_key(name, key) if key is not None else config.secret_value(root, registry.key_var(name))
    if probe_key is None:
        raise UsageError(f"peer {name!r} needs a key: give --key, or type it when asked, or pipe it on stdin")
    found = _probe(name, url, probe_key, timeout_seconds)
    existed = registry.save(
        root,
        name,
        url=url,
        key=key,
        note=note_text,
        timeout_seconds=timeout_seconds,
        a2a_url=found["a2a_url"],
        failover_urls=tuple(more),
    )
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    click.echo(
        f"{'updated' if existed else 'added'} peer {name} ({', '.join([url, *more])})"
        + ("" if key is not None else "; kept its key")
    )
    if found["gateway_id"]:
        registry.remember_gateway_id(root, name, found["gateway_id"])
    for line in found["notes"]:
        note(line)
    if key_back is None:
        key_back = interactive and click.confirm(
            f"Make a key for {name} to message this gateway back (its messages are then from peer:{name})?",
            default=True,
        )
    if key_back:
        _key_back(root, name, found["platform"], as_name=as_name or _own_name(root), url_back=url_back)


def _own_name(root: Path) -> str:
    """This gateway's name for the other side: the host name when it is a valid peer name, else the gateway id."""
    host = socket.gethostname().split(".")[0].lower()
    host = re.sub(r"[^a-z0-9_-]", "-", host).strip("-_")[:64]
    return host if config.NAME_RE.fullmatch(host) else (config.load_gateway_config(root).gateway_id or "home")


def _key_back(root: Path, name: str, platform: str | None, *, as_name: str, url_back: str | None) -> None:
    """The key `name` messages us with, and the command that registers us over there."""

    try:
        value = call("POST", "/v1/keys", {"name": name})["key"]
    except Conflict:
        note(f"peer {name} has a key here already (`backchannel key rotate {name}` gives it a new value, printed once)")
        return
    settings = config.load_gateway_config(root)
    url = url_back or f"http://{settings.host}:{settings.port}"
    program = "hermes" if platform is not None and platform not in ("backchannel", "a2a") else "backchannel"
    if platform == "a2a":  # an A2A agent finds this gateway by its card (a Backchannel gateway's `peer add` does)
        url += "/.well-known/agent-card.json"
    note(f"made the key {name} uses to message this gateway (profile default; shown only this once)")
    if url_back is None and settings.host in ("127.0.0.1", "localhost", "::1"):
        note(
            f"this gateway listens on {settings.host} only: start it with --host on an address {name} reaches, "
            "and give that URL below"
        )
    click.echo(f"On {name}, run:")
    click.echo("  " + shell.command(program, "peer", "add", as_name, "--url", url, "--key", value))


def _probe(name: str, url: str, key: str, timeout: float | None) -> PeerProbed:
    """What answers at the peer's URL, as the gateway finds it (`core.delivery.probe`): a UsageError when it is
    neither a gateway nor an A2A agent (nothing is saved)."""
    body = {"url": url, "key": key, **({"timeout_seconds": timeout} if timeout is not None else {})}
    bound = (timeout or config.PEER_TIMEOUT_SECONDS) + PROBE_SECONDS
    return cast("PeerProbed", call("POST", f"/v1/peers/{quote(name)}/probe", body, timeout=bound))


def _read_key(name: str, root: Path) -> str | None:
    has_key = bool(config.read_env(root).get(registry.key_var(name)))
    if sys.stdin.isatty():
        prompt = f"API key of peer {name}" + (" (Enter keeps the current one)" if has_key else "") + ": "
        typed = getpass.getpass(prompt).strip()
    else:
        typed = sys.stdin.read().strip()
    return typed or None


@peer.command("list", epilog=examples("backchannel peer list", "backchannel peer ls --json"))
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
@click.option("--wide", is_flag=True, help=WIDE_HELP)
def list_(as_json: bool, wide: bool) -> None:
    """The registered peers (keys are never shown)."""
    root = config.home()
    config.require_home(root)
    peers = registry.all_peers(root)

    def text() -> None:
        table(
            [[p.name, " ".join(p.urls), "set" if p.key else "MISSING", p.note] for p in peers],
            ["NAME", "URL", "KEY", "NOTE"],
            fit=("NOTE", "URL"),
            wide=wide,
        )
        if not peers:
            note("no peers yet: backchannel peer add NAME --url URL")

    emit([p.to_dict() for p in peers], as_json=as_json, text=text)


@peer.command("remove", epilog=examples("backchannel peer rm spark"))
@click.argument("name", shell_complete=complete.peer_names)
def remove(name: str) -> None:
    """Forget peer NAME and its key."""
    root = config.home()
    config.require_home(root)
    registry.remove(root, name)
    click.echo(f"removed peer {name}")


# --- messaging -----------------------------------------------------------------------------------


def _target(text: str) -> tuple[str, str | None]:
    remote = addresses.parse_peer(text)
    if remote.session_id is not None:
        raise UsageError(f"{text!r}: address a peer as PEER or PEER/AGENT (its Bot Chat)")
    config.require_home(config.home())
    return remote.peer, remote.profile


def _message(message: str | None) -> str:
    text = read_message(message)
    if not text or not text.strip():
        raise UsageError("no message: give it as an argument, or '-' to read stdin")
    return text.strip()


@peer.command(
    "dm",
    epilog=examples(
        "backchannel peer dm spark 'disk status?'",
        "backchannel peer dm spark/research - < question.txt",
        "backchannel peer dm spark 'again?' --idempotency-key ticket-7 --json",
        "backchannel peer dm spark/ci 'is the release blocked?' --deadline 10m",
    ),
)
@click.argument("target", shell_complete=complete.peer_names)
@click.argument("message", required=False)
@click.option(
    "--wait",
    type=click.FloatRange(0, 86_400),
    default=600,
    show_default=True,
    help="Seconds to wait for the reply; past it (or past --deadline, when sooner) a receipt is printed (exit 0: do"
    " not resend).",
)
@click.option("--idempotency-key", "key", help="Retries with the same key are delivered once.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
@deadline_option(" The wait ends at it; a peer that knows no deadlines is given the time left as its wait.")
def dm(
    target: str, message: str | None, wait: float, key: str | None, as_json: bool, deadline_text: str | None
) -> None:
    """Message the Bot Chat of PEER[/AGENT] and print the reply.

    Past --wait a receipt is printed instead (exit 0: the message is accepted, do not resend).
    MESSAGE is the argument, or stdin ('-', or none with stdin not a terminal), read as UTF-8 (a byte order
    mark is dropped).
    With --deadline, the message carries when you stop waiting (X-Backchannel-Deadline), and the wait ends then
    if --wait is longer.
    """
    name, agent = _target(target)
    text = _message(message)
    key = keys.check_external(key) or keys.cli()
    deadline = deadline_of(deadline_text)
    again = ["peer", "dm", target, *message_words(message, text)]
    if deadline is not None:  # asked again, the same clock: the deadline as the time it is, not a duration anew
        again += ["--deadline", deadlines.wire(deadline)]
    root = config.home()
    waited = deadlines.bounded(wait, deadline, now=time.time())  # the wait ends at the deadline, if that is sooner
    with interruptible(root, shell_command(*again, "--idempotency-key", key), key=key):
        result = send_dm(root, name, agent, text, wait=waited, key=key, deadline=deadline)
    emit(dm_dict(result), as_json=as_json, text=lambda: print_dm(result))
    if waited < wait and result.outcome is Outcome.RECEIPT:
        note("its deadline came first: nobody waits for the reply now (a peer that keeps deadlines ends the run)")
    retry_hint(result, again)
    sys.exit(result.outcome.exit_code)


def send_dm(
    root: Path, name: str, agent: str | None, text: str, *, wait: float, key: str | None, deadline: float | None = None
) -> Result:
    """Deliver as the person, with the exchange kept in this home's ledger (and `deadline` carried to the peer)."""
    given = keys.check_external(key) or keys.cli()
    return asyncio.run(_dm(root, name, agent, text, wait=wait, key=given, deadline=deadline))


async def _dm(
    root: Path, name: str, agent: str | None, text: str, *, wait: float, key: str, deadline: float | None
) -> Result:
    """Through the running gateway when there is one (this process then builds no core), else in-process."""
    async with gateway_link(root) as link:
        sent = await link.send(RemoteAddress(name, agent), text, wait=wait, key=key, deadline=deadline)
    assert isinstance(sent, Result)  # a peer's agent answers as one
    return sent


def dm_dict(r: Result) -> dict[str, Any]:
    """`peer dm --json`: the outcome as `result`, with where it went and what came back (`consumed`: the model
    call there that read it, null when none did; absent where the peer does not say)."""
    consumed = {"consumed": r.to_dict()["consumed"]} if r.consumed is not None or r.unread else {}
    return {
        "result": r.outcome.value,
        "peer": addresses.peer_of(r.to),
        "agent": addresses.profile_of(r.to),
        "session_id": r.session_id,
        "run_id": r.run_id,
        "reply": r.reply,
        "error": error_of(r),
        "state": r.state,  # the run's state where it ran (a run state), beside `result` (the outcome)
        "queue_position": r.queue_position,
        "question": r.question,  # input_required: what the peer's agent asks
        "replayed": r.replayed,  # the peer had this message already: this is its first run's answer
        "idempotency_key": r.idempotency_key,
        **consumed,
    }


def error_of(r: Result) -> dict[str, str] | None:
    """`error` in --json: `{code, message}` for a refused, failed or unknown outcome (as every surface gives it)."""
    if r.outcome in (Outcome.REFUSED, Outcome.FAILED, Outcome.UNKNOWN):
        return {"code": r.code or r.outcome.value, "message": r.error or r.outcome.value}
    return None


def print_dm(r: Result) -> None:
    if r.outcome is Outcome.DELIVERED:
        click.echo(r.reply or "(no reply)")
    elif r.outcome is Outcome.RECEIPT:
        where = f" (position {r.queue_position})" if r.queue_position else ""
        click.echo(
            f"receipt: run {r.run_id} {r.state or 'queued'}{where} in the Bot Chat of {addresses.peer_path(r.to)}"
            f" (session {r.session_id}): accepted{' and queued' if r.state != 'running' else ''}, do not resend"
        )
        if r.question is not None:  # the peer's agent asks: the question is in `ask list`, its answer goes there
            click.echo(f"it asks: {r.question}\nanswer it: backchannel ask list, then backchannel ask answer ID TEXT")
        click.echo(f"follow it: backchannel peer status {addresses.peer_of(r.to)} {r.run_id} --follow")
    elif r.outcome is Outcome.HELD:
        click.echo(
            f"held: run {r.run_id} waits for the person of {addresses.peer_path(r.to)} to approve it; do not resend"
        )
        click.echo(f"follow it: backchannel peer status {addresses.peer_of(r.to)} {r.run_id} --follow")
    else:
        code = f" ({r.code})" if r.code and r.code not in (r.error or "") else ""
        note(f"error: {r.error or r.outcome.value}{code}")  # the error names the peer already
    if r.unread:
        note(NOT_CONSUMED)


def retry_hint(r: Result, again: list[str]) -> None:
    """On stderr, text or --json alike: how to ask again about a message whose outcome is unknown (`again`: the
    command's words without its key)."""
    if r.outcome is not Outcome.UNKNOWN or not r.idempotency_key:
        return
    command = shell_command(*again, "--idempotency-key", r.idempotency_key)
    if r.deduplicated:
        note(
            "the outcome is unknown: it may have arrived. Ask again with the same message and key (it never runs "
            f"twice):\n  {command}"
        )
    else:
        where = f"session {r.session_id} of {r.to}" if r.session_id else r.to
        note(
            f"the outcome is unknown: it may have arrived, and this peer does not deduplicate. Look in {where} "
            f"first; if the message is not there, send it again with the same key:\n  {command}"
        )


@peer.command(
    "run",
    epilog=examples(
        "backchannel peer run spark 'analyse the full log' --idempotency-key ticket-123",
        "backchannel peer run spark/ci 'rerun the flaky job' --deadline 30m",
    ),
)
@click.argument("target", shell_complete=complete.peer_names)
@click.argument("message", required=False)
@click.option("--idempotency-key", "key", help="The same key twice gives the same run; the turn runs once.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
@deadline_option()
def run(target: str, message: str | None, key: str | None, as_json: bool, deadline_text: str | None) -> None:
    """Start a turn on PEER[/AGENT] and print its run id at once.

    The turn runs in the agent's Bot Chat; follow it with `peer status PEER RUN_ID --follow`.
    MESSAGE is the argument, or stdin ('-', or none with stdin not a terminal), read as UTF-8 (a byte order
    mark is dropped).
    """
    name, agent = _target(target)
    text = _message(message)
    given = keys.check_external(key) or keys.cli()
    deadline = deadline_of(deadline_text)
    body = {"message": text, **({"agent": agent} if agent else {})}
    headers = {"Idempotency-Key": given, **SENT_FROM}
    if deadline is not None:
        headers[deadlines.HEADER] = deadlines.wire(deadline)
    answer = call("POST", _runs(name), body, headers=headers)
    _warn_about(answer["about"])
    result = answer["outcome"]
    sent = wire.result_of(result, to=str(result["to"]))
    started = {
        "result": sent.outcome.value,
        "error": error_of(sent),
        "peer": name,
        "agent": agent,
        "session_id": result.get("session_id"),
        "run_id": result.get("run_id"),
        "status": result.get("state") or "started",
        "replayed": result["replayed"],
        "idempotency_key": result.get("idempotency_key"),
    }
    emit(
        started,
        as_json=as_json,
        text=lambda: click.echo(
            f"{started['run_id']}: {started['status']}{' (replayed)' if started['replayed'] else ''}\n"
            f"session_id: {started['session_id']}\nidempotency_key: {started['idempotency_key']}"
        ),
    )


def _warn_about(about: dict[str, Any]) -> None:
    """What the peer says it is (its platform, version, and whether it replays a run across a restart)."""
    if not about["durable_replay"]:
        note(
            "warning: this peer does not advertise restart-durable run replay; keep the run id and do not retry "
            "blindly after a peer restart"
        )
    if about["platform"] == "hermes-agent" and (about["version"] or "").startswith("0.19"):
        note(
            "warning: this peer (Hermes 0.19) keeps runs in memory and its /v1/runs does not load the Bot Chat's "
            "history; prefer `peer dm` when the agent needs the conversation"
        )


@peer.command(
    "status",
    epilog=examples(
        "backchannel peer status spark run_0123… --follow", "backchannel peer status spark/research run_0123… --json"
    ),
)
@click.argument("target", shell_complete=complete.peer_names)
@click.argument("run_id")
@click.option("--follow", is_flag=True, help="Stream the run's events until it ends, then print the result.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
def status(target: str, run_id: str, follow: bool, as_json: bool) -> None:
    """State and output of run RUN_ID on PEER.

    The agent is known from sending the run; PEER/AGENT names it for a run sent from elsewhere.
    """
    name, agent = _target(target)
    if not run_id.strip():
        raise UsageError("the run id is empty")

    path = _runs(name, run_id, agent)

    async def go() -> dict[str, Any]:
        async with gateway_link(config.home(), works=False) as link:
            if follow:
                events = _events(link.client, _runs(name, run_id, agent, "events"))
                await show_progress(run_id, events, still=not as_json)
            return (await link.client.request("GET", path)).body

    result, found = _state(asyncio.run(go()))
    base = {"peer": name, "agent": agent or _agent_of(result), "result": result.outcome.value}
    data: dict[str, Any]
    if found is None:
        code = result.code or "run_not_found"
        data = {**base, "run_id": run_id, "status": "unknown", "reason": code, "error": error_of(result)}
        emit(data, as_json=as_json, text=lambda: click.echo(f"{run_id}: unknown ({result.error})"))
    else:
        data = _run_data(base, result, found)
        emit(data, as_json=as_json, text=lambda: _print_run(run_id, data))
    sys.exit(result.outcome.exit_code)  # 0 completed or still going, 1 failed or unknown


def _run_data(base: dict[str, Any], result: Result, found: dict[str, Any]) -> dict[str, Any]:
    """A run on a peer as --json prints it: `result` (the outcome), the run as the peer said it, and `error` in the
    one shape of every surface, `{code, message}` (or null)."""
    data = {**base, **found}
    if isinstance(data.get("error"), str):
        data["error"] = {"code": str(data.get("code") or result.code or result.outcome.value), "message": data["error"]}
    data.setdefault("error", error_of(result))
    return data


def _agent_of(result: Result) -> str | None:
    return addresses.profile_of(result.to)


def _print_run(run_id: str, data: dict[str, Any]) -> None:
    click.echo(f"{run_id}: {data.get('status') or 'unknown'}")
    asked = data.get("question")
    if isinstance(asked, dict) and asked.get("question"):
        click.echo(f"it asks: {asked['question']}")
    if data.get("output"):
        click.echo(data["output"])
    elif data.get("error"):
        error = data["error"]
        note(str(error["message"] if isinstance(error, dict) else error))


def _runs(name: str, run_id: str | None = None, agent: str | None = None, then: str | None = None) -> str:
    """The path of the runs on peer `name` (of one of them; `then`: …/events, …/stop), for `agent`."""
    path = f"/v1/peers/{quote(name)}/runs" + (f"/{quote(run_id)}" if run_id is not None else "")
    path += f"/{then}" if then else ""
    return path + (f"?agent={quote(agent)}" if agent else "")


def _state(body: dict[str, Any]) -> tuple[Result, dict[str, Any] | None]:
    """A run on a peer as the gateway answers it: its outcome, and the run as the peer said it (None: unknown)."""
    outcome = body["outcome"]
    return wire.result_of(outcome, to=str(outcome["to"])), body["run"]


async def _events(client: GatewayClient, path: str) -> AsyncIterator[Event]:
    async for data in client.stream(path):
        event = event_of(data)
        yield event
        if event.ends:
            return


@peer.command("stop", epilog=examples("backchannel peer stop spark run_0123…"))
@click.argument("target", shell_complete=complete.peer_names)
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout (an error too, as one object).")
def stop(target: str, run_id: str, as_json: bool) -> None:
    """Cancel run RUN_ID on PEER and print what it produced so far."""
    name, agent = _target(target)
    if not run_id.strip():
        raise UsageError("the run id is empty")
    result, found = _state(call("POST", _runs(name, run_id, agent, "stop")))
    base = {"peer": name, "agent": agent or _agent_of(result), "result": result.outcome.value}
    data = _run_data(base, result, found or {})
    emit(data, as_json=as_json, text=lambda: _print_run(run_id, data))
