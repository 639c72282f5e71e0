"""Idempotency keys: who makes which, the internal prefixes nobody outside may use, and content fingerprints.

- a key given by a caller (HTTP `Idempotency-Key`, `--idempotency-key`) is that caller's: the person's is kept
  as it is, a peer's under its sender (`peer:NAME/<profile>>KEY`), so one caller's key never names another's run;
- an agent's send from inside a turn: the sending turn's run, the target, the text and its ordinal in
  the turn, so a turn re-run after a crash does not send twice and a later turn always sends;
- a person's CLI command: a fresh key per invocation (retries inside it reuse it);
- an HTTP request without a key: a new run (a person asking twice gets two answers); only a client's automatic
  retry that cannot carry a key (an OpenAI SDK's, on the OpenAI-compatible routes) is the run with the same
  fingerprint (sender, target, text) accepted within the retry window (a sliding window, not a fixed bucket);
- a wake-up (a reply delivered into the session of a sender that stopped waiting): one per run;
- an A2A message: its `messageId`, scoped to the caller and the profile it was sent to, and to its content:
  an exact repeat is a replay, the same `messageId` on another message a new task (A2A defines no dedup).
"""

from __future__ import annotations

import hashlib
import uuid

from .errors import UsageError

MAX_KEY_CHARS = 255
# Not "auto:": clients of the receipt dialect send content-derived "auto:" keys of their own.
AUTO = "dedup:"
SEND = "send:"
WAKE = "wake:"
A2A = "a2a:"
PEER = "peer:"  # a peer's own key, kept under its sender
RESERVED_PREFIXES = (AUTO, SEND, WAKE, A2A, PEER)
SCOPE_END = ">"  # between a peer's sender and its key (neither peer names nor sending profiles hold it)


def group_member(key: str, member: str) -> str:
    """The key of one member's message in a group send under `key` (a retried group send: the same run per member,
    a peer member's too, whatever order the members are sent in)."""
    return "grp-" + hashlib.sha256(f"{key}\0{member}".encode("utf-8", "surrogateescape")).hexdigest()[:48]


def check_external(key: str | None) -> str | None:
    """A key given from outside: 1-255 characters, no line breaks, none of the internal prefixes."""
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_KEY_CHARS or any(c in key for c in "\r\n\0"):
        raise UsageError("an idempotency key has 1-255 characters and no line breaks", code="invalid_idempotency_key")
    if key.startswith(RESERVED_PREFIXES):
        raise UsageError(
            f"idempotency keys starting with {', '.join(map(repr, RESERVED_PREFIXES))} are reserved for the gateway",
            code="invalid_idempotency_key",
        )
    return key


def of_caller(sender: str, key: str | None) -> str | None:
    """The key a caller's message is filed under: the person's as given, a peer's under its sender (another
    peer, or the person, may use the same words for a key of their own); the gateway's own keys as they are."""
    if key is None or sender.startswith("human:") or key.startswith(RESERVED_PREFIXES):
        return key
    return f"{sender}{SCOPE_END}{key}"


def given(key: str) -> str:
    """The key as its caller gave it (a peer's without the sender it is filed under)."""
    if key.startswith(PEER) and SCOPE_END in key:
        return key.partition(SCOPE_END)[2]
    return key


def fingerprint(sender: str, session_id: str, message: str) -> str:
    """Who sent what where: equal for the same words from the same sender to the same session."""
    return hashlib.sha256("\0".join(("v1", sender, session_id, message)).encode()).hexdigest()


def dedup(fingerprint_hex: str, run_id: str) -> str:
    """The key a keyless HTTP request's new run is filed under (unique: it names the run)."""
    return f"{AUTO}{fingerprint_hex[:24]}:{run_id.removeprefix('run_')}"


def agent_send(run_id: str, target: str, message: str, ordinal: int) -> str:
    """An agent's send: the `ordinal`-th send of these words to this target within the turn of `run_id`."""
    digest = hashlib.sha256("\0".join((target, message)).encode()).hexdigest()[:24]
    return f"{SEND}{run_id}:{digest}:{ordinal}"


def for_peer(gateway_id: str, key: str) -> str:
    """An agent's key as it travels to another gateway: namespaced by ours, never one of the reserved forms."""
    return f"bc-{gateway_id}:{key}"


def wake(run_id: str) -> str:
    return f"{WAKE}{run_id}"


def wake_outbound(outbound_id: int) -> str:
    return f"{WAKE}out:{outbound_id}"


def wake_question(outbound_id: int, question_id: str) -> str:
    """The wake-up that brings a question a peer's run asks to the agent that sent it: one per question."""
    return f"{WAKE}out:{outbound_id}:{question_id}"


def is_wake(key: str) -> bool:
    return key.startswith(WAKE)


def cli() -> str:
    """A person's command: one key per invocation."""
    return f"cli-{uuid.uuid4().hex}"


def a2a(caller: str, profile: str, message_id: str, *, content: str = "") -> str:
    """An A2A message's key: its `messageId` as `caller` sent it to `profile` (another caller's is another key),
    with a digest of its `content` (what makes it the same message: its parts, context and task)."""
    if not message_id or any(c in message_id for c in "\r\n\0"):
        raise UsageError("an A2A messageId must be non-empty, without line breaks", code="invalid_idempotency_key")
    digest = f"#{hashlib.sha256(content.encode()).hexdigest()[:16]}" if content else ""
    key = f"{A2A}{caller}>{profile}{digest}:{message_id}"
    if len(key) > MAX_KEY_CHARS:
        raise UsageError(
            f"the A2A messageId has {len(message_id)} characters; at most {MAX_KEY_CHARS - len(key) + len(message_id)}"
            " are accepted",
            code="invalid_idempotency_key",
        )
    return key


def a2a_message_id(key: str) -> str | None:
    """The `messageId` an A2A message's key was made from; None for any other key."""
    _, arrow, rest = key.partition(">")  # callers and profiles hold no ">"; profiles (and digests) no ":"
    _, colon, message_id = rest.partition(":")
    return message_id if key.startswith(A2A) and arrow and colon else None
