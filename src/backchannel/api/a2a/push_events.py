"""What a push receiver is told of a task: the A2A rendering the gateway's push job is given (SDK loaded late).

The gateway process hands `A2APushEvents` to its gateway; the SDK is imported on the first notification owed,
not when the gateway starts (it takes ~0.5 s).
"""

from __future__ import annotations

from ...records import Question, Run


class A2APushEvents:
    """A run's state as the StreamResponse bodies a stream would carry (`notifications.events`)."""

    def events(
        self, run: Run, *, version: str, max_bytes: int, question: Question | None = None
    ) -> list[tuple[str, bytes]]:
        from .notifications import events  # the SDK, once a notification is owed

        return events(run, version=version, max_bytes=max_bytes, question=question)
