"""A stop asked for over the HTTP API (`POST /v1/gateway/stop`, the person's key only).

The gateway then ends as SIGTERM ends it: it takes no new work, lets running turns finish within its grace,
requeues those still running, and releases the home's lock. Windows has no SIGTERM a program can catch
(`taskkill /F` and `TerminateProcess` are hard kills), so this is the graceful stop there, and
`backchannel gateway stop` uses it on every platform.
"""

from __future__ import annotations


class StopRequest:
    """Set by the route; the server that was built with it sees it within a tick and shuts down."""

    def __init__(self) -> None:
        self.requested = False

    def request(self) -> bool:
        """Ask for the stop; True the first time, False when it was asked already."""
        first = not self.requested
        self.requested = True
        return first
