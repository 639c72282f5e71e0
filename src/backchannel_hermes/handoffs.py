"""The turns Backchannel hands to this Hermes gateway's chats: asked for, handed in, and their replies handed back.

A thread of the plugin's asks the Backchannel gateway for its profile's handoffs (a long poll, which also tells
Backchannel the plugin is there) once a Hermes gateway runs in this process. Each handoff is worked in a thread
of its own: the session's chat is found (none: `not_a_chat`, and Backchannel asks the API server instead), the
message is handed in (`waiting` is said first while the person's turn runs, `running` otherwise; a handoff its
stopped run withdrew by then is not handed in; Hermes queues one behind the person's turn), and the turn's
reply, caught by the `post_llm_call` hook as Hermes finishes it, is handed back (`answered`). Hermes has sent
that reply to the chat itself.

A ledger in the Hermes home (`backchannel/handoffs.json`) remembers each run handed in: a handoff asked for again
after this Hermes gateway restarted is never handed in twice (its reply is handed back if it came; otherwise
the turn was cut, and Backchannel is told so).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backchannel.net.http import quote

from . import chat, link, origin

log = logging.getLogger("backchannel_hermes")
ASK_WAIT = 15.0  # seconds the gateway holds an ask for work open (its most)
ASK_MARGIN = 15.0  # and how much longer the ask may take
RETRY_SECONDS = 5.0  # after an ask that failed (the gateway down)
RUNNING_EVERY = 20.0  # how often a handed-in turn still running is said to be (the gateway's sign of progress)
TURN_LIMIT = 3600.0  # a handed-in turn not finished in this long is given up
START_WITHIN = 600.0  # a process where no Hermes gateway runs within this long (a CLI) stops looking
REPORT_TRIES = 5  # how often a settled handoff is reported before the reply is left in the ledger
KEEP_SECONDS = 2 * 86_400.0  # a ledger entry's life
TOLD, UNANSWERED, GONE, WITHDRAWN = "told", "unanswered", "gone", "withdrawn"  # what telling the gateway came to


@dataclass
class Pending:
    """A turn handed in and not finished: the text Hermes's agent reads, and its reply once it has one."""

    run_id: str
    text: str
    reply: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


class Worker:
    """The plugin's handoffs in this process: one asking thread, one thread per handoff, and the two hooks."""

    def __init__(self, profile: str) -> None:
        self.profile = profile
        self.taker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._lock = threading.Lock()
        self._pending: dict[str, list[Pending]] = {}  # Hermes session id -> turns handed in there, in order
        self._working: set[str] = set()  # run ids worked in this process
        self._ledger = Ledger()
        self._started = False

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._ask, name="backchannel-handoffs", daemon=True).start()

    # --- asking for work ---------------------------------------------------------------------------------

    def _ask(self) -> None:
        began = time.monotonic()
        while (gateway := chat.runner()) is None:
            if time.monotonic() - began > START_WITHIN:
                return  # no Hermes gateway in this process: nothing of Backchannel's to run here
            time.sleep(1.0)
        path = f"/p/{quote(self.profile)}/v1/handoffs?taker={quote(self.taker)}&wait={ASK_WAIT:g}"
        while True:
            try:
                found = link.request("GET", path, timeout=ASK_WAIT + ASK_MARGIN).get("data")
            except link.Unanswered as exc:
                log.debug("backchannel: asking for handoffs: %s", exc)
                time.sleep(RETRY_SECONDS)
                continue
            for item in found if isinstance(found, list) else []:
                if isinstance(item, dict) and isinstance(item.get("run_id"), str):
                    self._begin(gateway, item)

    def _begin(self, gateway: Any, item: dict[str, Any]) -> None:
        run_id = item["run_id"]
        with self._lock:
            if run_id in self._working:
                return  # being worked here: asked again only because it is still held
            self._working.add(run_id)
        threading.Thread(
            target=self._work, args=(gateway, item), name=f"backchannel-handoff-{run_id[-8:]}", daemon=True
        ).start()

    # --- one handoff -------------------------------------------------------------------------------------

    def _work(self, gateway: Any, item: dict[str, Any]) -> None:
        run_id = str(item["run_id"])
        try:
            outcome = self._deliver(gateway, run_id, str(item["remote_session"]), str(item["message"]))
            if outcome is not None:
                self._settle(run_id, **outcome)
        except Exception as exc:  # a bug of ours must not leave the run waiting: it is told, plainly
            log.exception("backchannel: handoff of run %s failed", run_id)
            self._settle(run_id, state="failed", error=f"the Hermes plugin failed: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._working.discard(run_id)

    def _deliver(self, gateway: Any, run_id: str, session_id: str, text: str) -> dict[str, Any] | None:
        """What became of the handoff: the fields its settling is reported with (None: its run was stopped and the
        handoff withdrawn before it was handed in; nothing to report)."""
        known = self._ledger.get(run_id)
        if known is not None:
            if isinstance(known.get("reply"), str):
                return {"state": "answered", "reply": known["reply"]}
            return {
                "state": "failed",
                "error": "the Hermes gateway stopped while this turn ran in its chat; it is not run again",
            }
        found = chat.on_loop(gateway, lambda: _find(gateway, session_id), timeout=30.0)
        if found is None:
            return {"state": "not_a_chat"}
        target, busy = found
        # Said before it is handed in: a run stopped by now has withdrawn it, and it is not handed in.
        said = {"state": "waiting", "detail": "behind the turn the chat is running"} if busy else {"state": "running"}
        if self._report(run_id, **said) == WITHDRAWN:
            return None
        pending = Pending(run_id, text)
        with self._lock:
            self._pending.setdefault(session_id, []).append(pending)
        try:
            # Written before it is handed in: a gateway that stops in between never hands the run in twice.
            self._ledger.put(run_id, {"injected_at": time.time()})
            chat.on_loop(gateway, lambda: chat.hand_in(target, text), timeout=TURN_LIMIT)
            self._report(run_id, state="running")
            began = time.monotonic()
            while not pending.done.wait(RUNNING_EVERY):
                if time.monotonic() - began > TURN_LIMIT:
                    return {"state": "failed", "error": f"Hermes did not finish the turn in {TURN_LIMIT:.0f}s"}
                self._report(run_id, state="running")
        finally:
            with self._lock:
                waiting = self._pending.get(session_id, [])
                if pending in waiting:
                    waiting.remove(pending)
        self._ledger.put(run_id, {"injected_at": time.time(), "reply": pending.reply or ""})
        return {"state": "answered", "reply": pending.reply or ""}

    def _settle(self, run_id: str, **fields: Any) -> None:
        for attempt in range(REPORT_TRIES):
            if self._report(run_id, **fields) != UNANSWERED:
                return
            time.sleep(RETRY_SECONDS * (attempt + 1))
        log.warning("backchannel: run %s: its outcome could not be handed back; kept in the ledger", run_id)

    def _report(self, run_id: str, **fields: Any) -> str:
        """Tells the gateway where the handoff stands: TOLD, UNANSWERED (try again later), GONE (no such handoff
        there: nothing left to tell) or WITHDRAWN (its run was stopped: not to be handed in)."""
        path = f"/p/{quote(self.profile)}/v1/handoffs/{quote(run_id)}"
        try:
            link.request("POST", path, payload=fields, timeout=30.0)
        except link.Unanswered as exc:
            log.debug("backchannel: run %s: %s", run_id, exc)
            return {"handoff_not_found": GONE, "handoff_withdrawn": WITHDRAWN}.get(exc.code, UNANSWERED)
        return TOLD

    # --- the hooks (Hermes's agent thread) ---------------------------------------------------------------

    def pre_llm_call(self, *, session_id: str = "", user_message: Any = None, **_: Any) -> None:
        """A model call of a turn: if it is one handed in, calls made in it are that run's."""
        pending = self._match(str(session_id), user_message)
        origin.running(str(session_id), pending.run_id if pending is not None else None)

    def post_llm_call(
        self, *, session_id: str = "", user_message: Any = None, assistant_response: Any = None, **_: Any
    ) -> None:
        """A turn finished: a handed-in one's reply is handed back (by its own thread)."""
        pending = self._match(str(session_id), user_message)
        origin.running(str(session_id), None)
        if pending is not None:
            pending.reply = _text(assistant_response)
            pending.done.set()

    def _match(self, session_id: str, user_message: Any) -> Pending | None:
        said = _text(user_message)
        with self._lock:
            for pending in self._pending.get(session_id, []):
                if not pending.done.is_set() and pending.text in said:
                    return pending
        return None


async def _find(gateway: Any, session_id: str) -> tuple[chat.Chat, bool] | None:
    found = chat.find(gateway, session_id)
    return (found, chat.busy(found)) if found is not None else None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # multimodal parts
        return "".join(p.get("text", "") for p in value if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "" if value is None else str(value)


class Ledger:
    """The runs handed in from this Hermes home, kept across its gateway's restarts (`backchannel/handoffs.json`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        home = os.environ.get("HERMES_HOME") or str(Path.home() / ".hermes")
        return Path(home) / "backchannel" / "handoffs.json"

    def get(self, run_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._read().get(run_id)
        return found if isinstance(found, dict) else None

    def put(self, run_id: str, entry: dict[str, Any]) -> None:
        with self._lock:
            entries = self._read()
            cut = time.time() - KEEP_SECONDS
            entries = {k: v for k, v in entries.items() if isinstance(v, dict) and v.get("injected_at", 0) >= cut}
            entries[run_id] = entry
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fresh = self.path.with_suffix(".tmp")
            fresh.write_text(json.dumps(entries), encoding="utf-8")
            os.replace(fresh, self.path)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}
