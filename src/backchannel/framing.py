"""How a message is shown to the agent that receives it: a person's words as they are, anyone else's framed."""

from __future__ import annotations


def is_human(sender: str) -> bool:
    return sender.startswith("human:")


def frame(sender: str, message: str, *, via: str = "send_to_session") -> str:
    """Provenance first, so another agent's text is never taken for the person's."""
    if is_human(sender):
        return message
    if sender.startswith("peer:"):
        origin = f"peer {sender[5:]}"
        via = "the peer API" if via == "send_to_session" else via
    else:
        origin = f"session {sender}"
    return f"[Message from {origin} via {via} — another agent, not your user]\n{message}"
