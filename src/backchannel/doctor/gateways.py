"""Doctor's checks of gateways: this home's own (running? where? which version?) and every peer's answer to our key."""

from __future__ import annotations

from typing import Any

from ..errors import BackchannelError, PeerAuthRefused, PeerError, PeerOutcomeUnknown, PeerUnreachable
from ..home.config import GatewayConfig
from ..home.peers import Peer
from ..home.runtime import Listening
from ..net.a2a_peer import A2APeerClient
from ..net.local import GatewayClient
from ..net.peer import PeerClient
from ..net.wire import about_of
from .report import Check, fail, ok, warn

TIMEOUT = 3.0

# What Backchannel's peer verbs use of another gateway, by its /v1/capabilities feature name.
USED_FEATURES = {
    "session_chat": "peer dm",
    "session_resources": "finding the Bot Chat",
    "run_submission": "peer run",
    "run_status": "peer status",
    "run_events_sse": "peer status --follow",
    "run_stop": "peer stop",
    "runs_idempotency": "a retried peer run never running twice",
}


async def own(found: Listening | None, settings: GatewayConfig, key: str | None) -> Check:
    """This home's gateway, from the runtime file it writes: running or not, where, its version."""
    if found is None:
        return ok("gateway", "not running: commands run in-process (start it with `backchannel gateway`)")
    where = f"{found.url} (pid {found.pid})"
    if not key:
        return warn("gateway", f"running at {where}; not asked which version: the home has no API key")
    client = GatewayClient(found.url, key, timeout=TIMEOUT)
    try:
        caps = (await client.request("GET", "/v1/capabilities")).body
    except BackchannelError as exc:
        fix = f"if pid {found.pid} is stuck, stop it and run `backchannel gateway` again"
        return fail("gateway", f"the runtime file says it runs at {where}, but: {exc.message}", fix)
    finally:
        await client.aclose()
    about = about_of(caps)
    answered = about.gateway_id or ""
    if answered != settings.gateway_id:
        detail = f"{where} answers as gateway {answered or '(none)'}, not this home's {settings.gateway_id}"
        return fail("gateway", detail, "stop whatever serves that port, then run `backchannel gateway`")
    return ok("gateway", f"running at {where}: {about.platform or '?'} {about.version or '?'}, {answered}")


async def peer(p: Peer) -> Check:
    """A peer answers /v1/capabilities with our key; what it lacks of what Backchannel uses."""
    check = f"peer {p.name}"
    readd = f"backchannel peer add {p.name} --url {p.url} --key KEY"
    if not p.key:
        return fail(check, f"no key for {p.url} in .env", readd)
    if p.is_a2a:
        return await _a2a_peer(p, check, readd)
    try:
        client = PeerClient(p)
    except BackchannelError as exc:
        return fail(check, exc.message, readd)
    try:
        caps = await client.capabilities(timeout=TIMEOUT, strict=True, retries=0)
    except PeerError as exc:
        if isinstance(exc, PeerAuthRefused):
            return fail(check, exc.message, f"get a key from its owner (`backchannel key create` there), then {readd}")
        if isinstance(exc, PeerUnreachable | PeerOutcomeUnknown):
            return fail(check, exc.message, f"is its gateway running? if its URL changed: {readd}")
        return fail(check, exc.message, f"check that {p.url} is a Backchannel or Hermes gateway")
    finally:
        await client.aclose()
    about = about_of(caps)
    what = f"{about.platform or 'a gateway'} {about.version or ''}".rstrip()
    answered = about.gateway_id or ""
    if p.gateway_id and answered and answered != p.gateway_id:
        detail = f"{p.url} now answers as gateway {answered}, not {p.gateway_id} as before"
        return warn(check, detail, f"if it is the same machine rebuilt: {readd}")
    identity = (caps.get("auth") or {}).get("identity") if isinstance(caps.get("auth"), dict) else None
    if identity == "person":  # the peer's own API_SERVER_KEY: our agents arrive there as its person, unframed
        detail = (
            f"{what} at {p.url} takes our key as its person's: what our agents send arrives there unframed, "
            "past its allowlists and hop limits"
        )
        return warn(check, detail, f"ask its owner for a peer key (`backchannel key create NAME` there), then {readd}")
    lacking = [f"{name} ({use})" for name, use in USED_FEATURES.items() if not _has(caps, name)]
    if lacking:
        return warn(check, f"{what} at {p.url}, key accepted; it lacks: {', '.join(lacking)}")
    return ok(check, f"{what} at {p.url}, key accepted" + (f", gateway {answered}" if answered else ""))


async def _a2a_peer(p: Peer, check: str, readd: str) -> Check:
    """An A2A peer's card answers and still names a JSON-RPC interface (its key is checked by the first message)."""
    async with A2APeerClient(p) as client:
        try:
            card = await client.card(strict=True, timeout=TIMEOUT)
        except PeerError as exc:
            return fail(check, exc.message, f"is the agent running? if its URL changed: {readd}")
    assert card is not None
    what = f"A2A agent {card.name} {card.version}".rstrip()
    if card.rpc_url != p.a2a_url:
        return warn(check, f"{what}: its card now names {card.rpc_url}, not {p.a2a_url}", readd)
    extension = "declares" if card.extension else "does not declare"
    return ok(check, f"{what} at {card.rpc_url}, card read; it {extension} the hop and chain extension")


def _has(caps: dict[str, Any], name: str) -> bool:
    value = (caps.get("features") or {}).get(name)
    if isinstance(value, dict):  # runs_idempotency: {supported, durable}
        return bool(value.get("supported")) and value.get("durable") is not False
    return bool(value)
