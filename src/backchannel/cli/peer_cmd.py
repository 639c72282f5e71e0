"""`backchannel peer`: register other gateways and message their agents (dm, run, status, stop)."""

from __future__ import annotations

import asyncio
import getpass
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import click

from .. import addresses, keys
from ..errors import PeerError, UsageError
from ..home import config
from ..home import peers as registry
from ..outcome import Outcome, Result
from ..store import ledger
from .connect import store
from .output import emit, note, read_message, table

if TYPE_CHECKING:
    from ..net.peer import PeerClient

T = TypeVar("T")
TERMINAL = ("completed", "failed", "cancelled", "expired", "interrupted")
SENDER_PROFILE = "default"


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


@peer.command("add")
@click.argument("name")
@click.option("--url", required=True, help="The peer gateway's base URL, e.g. http://spark.lan:8377.")
@click.option("--key", help="Its API_SERVER_KEY (else asked without echo, or read from stdin).")
@click.option("--note", "note_text", help="A note shown by `peer list`.")
def add(name: str, url: str, key: str | None, note_text: str | None) -> None:
    """Register (or update) peer NAME. The key goes to the home's .env, never to config.yaml."""
    root = config.home()
    config.require_home(root)
    config.check_name(name, what="peer")
    registry.check_url(url)
    if key is None:
        key = _read_key(name, root)
    existed = registry.save(root, name, url=url, key=key, note=note_text)
    click.echo(
        f"{'updated' if existed else 'added'} peer {name} ({registry.check_url(url)})"
        + ("" if key is not None else "; kept its key")
    )
    _probe(root, registry.load(root, name))


def _probe(root: Any, p: registry.Peer) -> None:
    """Ask the new peer what it is, so messages from it are shown under its name here; never fatal."""

    async def go() -> dict[str, Any]:
        async with _client(p, None) as client:
            caps = await client.capabilities(timeout=3)
            return {**await client.health(), **caps} if caps else {}

    caps = _run(go)
    if not caps:
        note(f"note: peer {p.name} did not answer /v1/capabilities with this key just now; saved anyway")
    elif caps.get("platform") == "backchannel" and caps.get("gateway_id"):
        registry.remember_gateway_id(root, p.name, str(caps["gateway_id"]))
        note(f"peer {p.name} is Backchannel gateway {caps['gateway_id']} {caps.get('version', '')}".rstrip())
    else:
        note(f"peer {p.name} is {caps.get('platform') or 'a gateway'} {caps.get('version') or ''}".rstrip())


def _read_key(name: str, root: Any) -> str | None:
    has_key = bool(config.read_env(root).get(registry.key_var(name)))
    if sys.stdin.isatty():
        prompt = f"API key of peer {name}" + (" (Enter keeps the current one)" if has_key else "") + ": "
        typed = getpass.getpass(prompt).strip()
    else:
        typed = sys.stdin.read().strip()
    return typed or None


@peer.command("list")
@click.option("--json", "as_json", is_flag=True)
def list_(as_json: bool) -> None:
    """The registered peers (keys are never shown)."""
    root = config.home()
    config.require_home(root)
    peers = registry.all_peers(root)

    def text() -> None:
        table([[p.name, p.url, "set" if p.key else "MISSING", p.note] for p in peers], ["NAME", "URL", "KEY", "NOTE"])
        if not peers:
            note("no peers yet: backchannel peer add NAME --url URL")

    emit([p.to_dict() for p in peers], as_json=as_json, text=text)


@peer.command("remove")
@click.argument("name")
def remove(name: str) -> None:
    """Forget peer NAME and its key."""
    root = config.home()
    config.require_home(root)
    registry.remove(root, name)
    click.echo(f"removed peer {name}")


# --- messaging -----------------------------------------------------------------------------------


def _target(text: str) -> tuple[registry.Peer, str | None]:
    remote = addresses.parse_remote(text.removeprefix("peer:"))
    if remote.session_id is not None:
        raise UsageError(f"{text!r}: address a peer as PEER or PEER/AGENT (its Bot Chat)")
    root = config.home()
    config.require_home(root)
    return registry.load(root, remote.peer), remote.profile


def _client(p: registry.Peer, agent: str | None) -> PeerClient:
    from ..net.peer import PeerClient

    return PeerClient(p, agent, gateway_id=config.load_gateway_config(config.home()).gateway_id)


def _run(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(make())


def _message(message: str | None) -> str:
    text = read_message(message)
    if not text or not text.strip():
        raise UsageError("no message: give it as an argument, or '-' to read stdin")
    return text.strip()


@peer.command("dm")
@click.argument("target")
@click.argument("message", required=False)
@click.option(
    "--wait",
    type=click.FloatRange(0, 86_400),
    default=600,
    show_default=True,
    help="Seconds to wait for the reply; past it a receipt is printed (exit 0: do not resend).",
)
@click.option("--idempotency-key", "key", help="Retries with the same key are delivered once.")
@click.option("--json", "as_json", is_flag=True)
def dm(target: str, message: str | None, wait: float, key: str | None, as_json: bool) -> None:
    """Deliver MESSAGE into the Bot Chat of PEER[/AGENT] and print the reply (or a receipt)."""
    p, agent = _target(target)
    result = send_dm(p, agent, _message(message), wait=wait, key=key)
    emit(dm_dict(result), as_json=as_json, text=lambda: print_dm(result))
    sys.exit(result.outcome.exit_code)


def send_dm(p: registry.Peer, agent: str | None, text: str, *, wait: float, key: str | None) -> Result:
    """Deliver as the person, with the exchange kept in this home's ledger (no key given: a fresh one)."""
    key = key or keys.cli()
    with store(config.home()) as router:
        row = _record(router.db, p, agent, text, wait)

        async def go() -> Result:
            async with _client(p, agent) as client:
                return await client.dm(text, wait=wait, key=key, sender=SENDER_PROFILE)

        try:
            result = _run(go)
        except PeerError as exc:
            ledger.update_outbound(router.db, row, state="failed", error=exc.message)
            raise
        ledger.update_outbound(
            router.db,
            row,
            state=result.outcome.value,
            reply=result.reply,
            error=result.error,
            key=result.idempotency_key,
            remote_session_id=result.session_id,
            remote_run_id=result.run_id,
        )
    return result


def _record(db: Any, p: registry.Peer, agent: str | None, text: str, wait: float | None) -> int:
    return ledger.record_outbound(
        db,
        sender="human:cli",
        sender_profile=None,
        sender_session=None,
        origin=None,
        target=f"peer:{p.name}" + (f"/{agent}" if agent else ""),
        peer=p.name,
        agent=agent,
        message=text,
        hops=0,
        wait=wait,
    )


def _peer_of(r: Result) -> tuple[str, str | None]:
    remote = addresses.parse_remote(r.to.removeprefix("peer:"))
    return remote.peer, remote.profile


def dm_dict(r: Result) -> dict[str, Any]:
    """The `--json` shape of a dm (its keys are the CLI's contract)."""
    peer_name, agent = _peer_of(r)
    return {
        "result": r.outcome.value,
        "peer": peer_name,
        "agent": agent,
        "session_id": r.session_id,
        "run_id": r.run_id,
        "reply": r.reply,
        "error": r.error,
        "state": r.state,
        "queue_position": r.queue_position,
        "idempotency_key": r.idempotency_key,
    }


def print_dm(r: Result) -> None:
    peer_name, agent = _peer_of(r)
    if r.outcome is Outcome.DELIVERED:
        click.echo(r.reply or "(no reply)")
    elif r.outcome is Outcome.RECEIPT:
        where = f" (position {r.queue_position})" if r.queue_position else ""
        click.echo(
            f"receipt: run {r.run_id} {r.state or 'queued'}{where} in the Bot Chat of {peer_name}"
            f"{'/' + agent if agent else ''} (session {r.session_id}): accepted and queued, do not resend"
        )
        click.echo(f"follow it: backchannel peer status {peer_name} {r.run_id} --follow")
    else:
        note(f"peer {peer_name!r} {r.outcome.value}: {r.error or 'no detail'}")


@peer.command("run")
@click.argument("target")
@click.argument("message", required=False)
@click.option("--idempotency-key", "key", help="The same key twice gives the same run; the turn runs once.")
@click.option("--json", "as_json", is_flag=True)
def run(target: str, message: str | None, key: str | None, as_json: bool) -> None:
    """Start a turn in the Bot Chat of PEER[/AGENT] and print its run id at once."""
    p, agent = _target(target)
    text = _message(message)
    run_key = key or keys.cli()

    async def go() -> tuple[Result, dict[str, Any]]:
        async with _client(p, agent) as client:
            caps = {**await client.health(), **await client.capabilities()}
            return await client.start_run(text, key=run_key, sender=SENDER_PROFILE), caps

    with store(config.home()) as router:
        row = _record(router.db, p, agent, text, None)
        try:
            result, caps = _run(go)
        except PeerError as exc:
            ledger.update_outbound(router.db, row, state="failed", error=exc.message)
            raise
        ledger.update_outbound(
            router.db,
            row,
            state="started" if result.outcome is Outcome.RECEIPT else result.outcome.value,
            error=result.error,
            key=result.idempotency_key,
            remote_session_id=result.session_id,
            remote_run_id=result.run_id,
        )
    if result.outcome is not Outcome.RECEIPT:  # refused or failed by the peer's envelope
        emit(dm_dict(result), as_json=as_json, text=lambda: print_dm(result))
        sys.exit(result.outcome.exit_code)
    _warn_about(caps)
    started = {
        "peer": p.name,
        "agent": agent,
        "session_id": result.session_id,
        "run_id": result.run_id,
        "status": result.state,
        "replayed": result.replayed,
        "idempotency_key": result.idempotency_key,
    }
    emit(
        started,
        as_json=as_json,
        text=lambda: click.echo(
            f"{started['run_id']}: {started['status']}{' (replayed)' if started['replayed'] else ''}\n"
            f"session_id: {started['session_id']}\nidempotency_key: {started['idempotency_key']}"
        ),
    )


def _warn_about(caps: dict[str, Any]) -> None:
    idem = (caps.get("features") or {}).get("runs_idempotency")
    if not (isinstance(idem, dict) and idem.get("supported") and idem.get("durable") is True):
        note(
            "warning: this peer does not advertise restart-durable run replay; keep the run id and do not retry "
            "blindly after a peer restart"
        )
    if caps.get("platform") == "hermes-agent" and str(caps.get("version", "")).startswith("0.19"):
        note(
            "warning: this peer (Hermes 0.19) keeps runs in memory and its /v1/runs does not load the Bot Chat's "
            "history; prefer `peer dm` when the agent needs the conversation"
        )


@peer.command("status")
@click.argument("target")
@click.argument("run_id")
@click.option("--follow", is_flag=True, help="Stream the run's events until it ends, then print the result.")
@click.option("--json", "as_json", is_flag=True)
def status(target: str, run_id: str, follow: bool, as_json: bool) -> None:
    """State and output of run RUN_ID on PEER[/AGENT]."""
    p, agent = _target(target)
    if not run_id.strip():
        raise UsageError("the run id is empty")

    async def go() -> dict[str, Any] | None:
        async with _client(p, agent) as client:
            if follow:
                await _follow(client, run_id)
            return await client.run_status(run_id)

    found = _run(go)
    base = {"peer": p.name, "agent": agent}
    if found is None:
        data = {**base, "run_id": run_id, "status": "unknown", "reason": "run_not_found"}
        emit(
            data,
            as_json=as_json,
            text=lambda: click.echo(
                f"{run_id}: unknown (the peer does not know this run: expired, restarted, or never started)"
            ),
        )
        return
    data = {**base, **found}
    if data.get("status") in TERMINAL:  # the ledger learns how a run it saw leave ended
        with store(config.home()) as router:
            done = data.get("status") == "completed"
            ledger.settle_outbound(
                router.db,
                peer=p.name,
                remote_run_id=run_id,
                state="delivered" if done else str(data.get("status")),
                reply=data.get("output") if done else None,
                error=None if done else str(data.get("error") or data.get("status")),
            )
    emit(data, as_json=as_json, text=lambda: _print_run(run_id, data))
    if follow and data.get("status") in TERMINAL and data.get("status") != "completed":
        sys.exit(1)


def _print_run(run_id: str, data: dict[str, Any]) -> None:
    click.echo(f"{run_id}: {data.get('status') or 'unknown'}")
    if data.get("output"):
        click.echo(data["output"])
    elif data.get("error"):
        note(str(data["error"]))


async def _follow(client: PeerClient, run_id: str) -> None:
    """Show the run's progress on stderr: one live line on a terminal, one line per event otherwise."""
    tty = sys.stderr.isatty()
    counts = {"events": 0, "chars": 0, "tools": 0}

    def show(event: dict[str, Any]) -> None:
        counts["events"] += 1
        name = str(event.get("event"))
        counts["chars"] += len(str(event.get("delta") or ""))
        counts["tools"] += name == "tool.started"
        if tty:
            click.echo(
                f"\r\033[K{run_id}: {name} · {counts['tools']} tool calls · {counts['chars']} chars", nl=False, err=True
            )
        elif name != "message.delta":
            detail = event.get("tool") or event.get("error") or ""
            note(f"{name} {detail}".rstrip())

    try:
        async for event in client.events(run_id):
            show(event)
            if str(event.get("event")) in {f"run.{s}" for s in TERMINAL}:
                break
    except PeerError:  # no event stream (expired buffer, older peer): poll instead
        while True:
            found = await client.run_status(run_id)
            if found is None or found.get("status") in TERMINAL:
                break
            await asyncio.sleep(1.0)
    if tty:
        click.echo("", err=True)


@peer.command("stop")
@click.argument("target")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True)
def stop(target: str, run_id: str, as_json: bool) -> None:
    """Cancel run RUN_ID on PEER[/AGENT] and print what it produced so far."""
    p, agent = _target(target)
    if not run_id.strip():
        raise UsageError("the run id is empty")

    async def go() -> dict[str, Any]:
        async with _client(p, agent) as client:
            return await client.stop(run_id)

    data = {"peer": p.name, "agent": agent, **_run(go)}
    emit(data, as_json=as_json, text=lambda: _print_run(run_id, data))
