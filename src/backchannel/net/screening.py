"""Where a URL a caller gives may lead: public addresses only, unless the home allows more by name.

A caller's URL (a push notification receiver) is checked when it is given (`Screen.check`: its form, then
every address its host resolves to) and again at each connection: `net.webhook` connects only through
net/http's checked network, which refuses a name that now resolves elsewhere (DNS rebinding), and an address
written in the URL itself is checked before anything is sent. A host that does not resolve when the URL is
given (a resolver down for a moment, a name not yet published) is accepted: the check at each connection is
the one that holds, and a name that never resolves is a delivery that fails and is retried, never a
delivery to an address the home refuses.

    public unicast                      allowed
    loopback, private, link-local,      refused, unless gateway.a2a.push_allow_private is true
      shared (100.64.0.0/10)
    cloud metadata (169.254.169.254 …)  refused, unless push_allow_hosts names it (or a network holding it)
    unspecified, multicast, reserved    refused, unless push_allow_hosts names it
    a host push_allow_hosts names       allowed, whatever it resolves to
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse
from dataclasses import dataclass

from ..errors import UsageError
from ..home.push_settings import PushSettings

MAX_URL_CHARS = 2048
RESOLVE_SECONDS = 10.0  # a host name that takes longer to resolve is accepted unscreened (screened when told)
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# The instance metadata services of the clouds (AWS, GCP and Azure share the first; ECS, AWS over IPv6,
# Alibaba, Azure's wire server): credentials live there, so private networks allowed do not open them.
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "169.254.169.253",
        "fd00:ec2::254",
        "100.100.100.200",
        "168.63.129.16",
    )
)
SHARED = ipaddress.ip_network("100.64.0.0/10")


@dataclass(frozen=True)
class Target:
    """A URL's parts that decide where it leads."""

    url: str
    scheme: str
    host: str  # lower case, without brackets
    port: int


class Screen:
    """The home's rule for the URLs callers give: which addresses they may reach (module docstring)."""

    def __init__(self, settings: PushSettings, *, what: str = "push notification URL") -> None:
        self.settings = settings
        self.what = what

    def target(self, url: str) -> Target:
        """The URL's scheme, host and port; a URL that is not an http(s) URL with a host is a usage error."""
        if not isinstance(url, str) or not url:
            raise UsageError(f"the {self.what} is missing", code="invalid_push_url")
        if len(url) > MAX_URL_CHARS or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
            raise UsageError(
                f"the {self.what} must be at most {MAX_URL_CHARS} characters with no spaces or control characters",
                code="invalid_push_url",
            )
        try:
            parts = urllib.parse.urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise UsageError(f"the {self.what} {url!r} is not a URL: {exc}", code="invalid_push_url") from exc
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise UsageError(f"the {self.what} {url!r} must be an http or https URL", code="invalid_push_url")
        if not parts.hostname:
            raise UsageError(f"the {self.what} {url!r} has no host", code="invalid_push_url")
        if parts.username is not None or parts.password is not None:
            raise UsageError(
                f"the {self.what} {shown_url(url)!r} may not hold credentials: give them as the config's"
                " authentication (or token)",
                code="invalid_push_url",
            )
        return Target(url, scheme, parts.hostname.lower(), port or (443 if scheme == "https" else 80))

    def refusal(self, host: str, address: str) -> str | None:
        """Why `host` may not be reached at `address` (None: it may)."""
        if host.rstrip(".") in self.settings.allow_names:
            return None
        try:
            ip: Address = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return f"{address!r} is not an address"
        mapped = getattr(ip, "ipv4_mapped", None)
        if mapped is not None:
            ip = mapped
        if any(ip in network for network in self.settings.allow_networks):
            return None
        kind = _kind(ip)
        if kind is None:
            return None
        if self.settings.allow_private and kind in ("loopback", "private", "link-local", "shared"):
            return None
        return f"{ip} is a {kind} address"

    async def check(self, url: str) -> Target:
        """The URL's target once its form is right and every address its host resolves to may be reached (none,
        when it does not resolve now: each connection is screened); otherwise a usage error naming the address
        and the settings that would allow it."""
        target = self.target(url)
        for address in await _resolve(target, self.what):
            refused = self.refusal(target.host, address)
            if refused is not None:
                raise UsageError(self.refused_message(target, refused), code="push_url_not_allowed")
        return target

    def refused_message(self, target: Target, why: str) -> str:
        return (
            f"the {self.what} {shown_url(target.url)!r} leads to {target.host!r}, and {why}: pushes go to public"
            " addresses only, unless the home allows more (gateway.a2a.push_allow_private: true for loopback,"
            " private and link-local receivers; gateway.a2a.push_allow_hosts for named hosts or networks)"
        )


def _kind(ip: Address) -> str | None:
    """What kind of non-public address `ip` is (None: public unicast)."""
    if ip in METADATA:
        return "cloud metadata"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv4Address) and ip in SHARED:
        return "shared"
    if ip.is_private:
        return "private"
    if ip.is_reserved or not ip.is_global:
        return "reserved"
    return None


async def _resolve(target: Target, what: str) -> list[str]:
    """The addresses the host resolves to now; none when it does not resolve (or not in time): a resolver down
    for a moment must not refuse a receiver the home would allow. A host that is no host name is refused."""
    try:
        return [str(ipaddress.ip_address(target.host.strip("[]")))]
    except ValueError:
        pass
    try:
        infos = await asyncio.wait_for(
            asyncio.get_running_loop().getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM),
            timeout=RESOLVE_SECONDS,
        )
    except UnicodeError as exc:
        raise UsageError(
            f"the {what} {shown_url(target.url)!r}: its host {target.host!r} is not a host name",
            code="invalid_push_url",
        ) from exc
    except (OSError, TimeoutError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def shown_url(url: str) -> str:
    """The URL without its query (which may hold a secret) for an error message."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url[:80]
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))
