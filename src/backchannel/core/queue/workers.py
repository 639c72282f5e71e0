"""The workers: take sessions with work from the run queue and run their turns, one at a time per session."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypedDict

from ... import deadlines, tracing
from ...agent.loop import TurnProgress
from ...errors import BackchannelError, StoreError
from ...events import Started
from ...home.redact import redact
from ...outcome import Consumed
from ...records import Run
from ...store.questions import NewQuestion
from ...store.runs import RunState, Spent
from .events import EventHub
from .pauses import Pauses
from .queue import RunQueue, Turn

log = logging.getLogger("backchannel.workers")
CLAIM_RETRY_SECONDS = 0.5  # a claim that could not be saved (a full disk) is tried again after this


class TurnRunner(Protocol):
    """Computes the turn of a claimed run; what it produces accumulates in `progress`."""

    async def run(self, run: Run, progress: TurnProgress) -> str: ...


class Workers:
    """One drain task per session with work, each turn in a slot of the queue; a stop interrupts a turn at once."""

    def __init__(self, queue: RunQueue, runner: TurnRunner, *, hub: EventHub, pauses: Pauses, home: Path) -> None:
        """`home`: the home whose path is kept out of a failed run's error (its sender reads it)."""
        self.queue = queue
        self.runner = runner
        self.hub = hub
        self.pauses = pauses
        self.home = home
        self._drains: dict[str, asyncio.Task[None]] = {}

    async def run(self) -> None:
        """The dispatcher: a drain task for every session the queue hands out."""
        while True:
            session_id, first = await self.queue.next_ready()
            self._drains[session_id] = asyncio.create_task(self._drain(session_id, first))

    async def stop(self, *, grace: float) -> None:
        """Let running turns finish (and commit) within `grace` seconds, then cut them."""
        drains = list(self._drains.values())
        if drains:
            await asyncio.wait(drains, timeout=grace)
        for task in drains:
            task.cancel()
        await asyncio.gather(*drains, return_exceptions=True)

    async def _drain(self, session_id: str, first: Run | None) -> None:
        try:
            while self.queue.accepting:
                try:
                    profile = first.profile if first else await self.queue.profile_of(session_id)
                    async with self.queue.slots.hold(profile):
                        run, first = first, None
                        if run is not None and not await self.queue.confirm(run):
                            continue  # recorded in a commit that failed: the run does not exist, its sender got a 503
                        if run is None:
                            run = await self.queue.claim(session_id)
                            if run is None:
                                break  # a run queued since the claim looked hands the session out anew on release
                        if self.pauses.check(run.profile) is not None:
                            await self.queue.unclaim(run)  # its config is broken: the run waits; resumed by the gateway
                            break
                        await self._execute(run)
                except StoreError as exc:  # the store is away a moment: the session is looked at again, not dropped
                    log.warning("session %s: its next run could not be claimed: %s", session_id, exc.message)
                    await asyncio.sleep(CLAIM_RETRY_SECONDS)
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug must not silently stop a session's queue
            log.exception("worker of session %s failed", session_id)
        finally:
            self._drains.pop(session_id, None)
            self.queue.release(session_id)

    async def _execute(self, run: Run) -> None:
        if not self.queue.owns(run.id):
            return  # stopped between its claim and its turn
        self.hub.publish(Started(run.id, run.session_id))
        progress = TurnProgress()
        task = asyncio.current_task()
        assert task is not None
        # The turn runs in this drain task; `stop` cancels the task, and the cancellation ends only the turn.
        turn = Turn(task, progress)
        self.queue.track(run.id, turn)
        span = self.queue.spans.begin(run)
        timer = None if run.deadline is None else _stop_at(run, turn, self.queue)  # one timer a turn with a deadline
        try:
            with tracing.current(span):  # the turn's model and tool calls, and the messages it sends, are its children
                reply = await self.runner.run(run, progress)
        except StoreError as exc:  # the turn could not read or write the store: nothing was answered; it runs again
            log.warning(
                "turn of run %s cut by the store (it runs again once the store answers): %s", run.id, exc.message
            )
            await self.queue.put_back(run)
        except asyncio.CancelledError:
            if turn.stop_requested and task.cancelling() == 1:  # a stop, and no shutdown besides it
                task.uncancel()
                late = turn.late  # stopped at its deadline: it expired, keeping what it had, as a stop keeps it
                await self.queue.finish(
                    run,
                    RunState.EXPIRED if late else RunState.CANCELLED,
                    reply=progress.output() or None,
                    error=f"stopped at its deadline ({_clock(run.deadline)})" if late else "stopped on request",
                    code=deadlines.CODE if late else "cancelled",
                    messages=progress.messages,
                    **_what_it_did(progress),
                )
                return
            raise  # shutting down: the run stays ours and is requeued when the queue closes
        except BackchannelError as exc:  # its sender reads the error (a peer, an MCP host): no path of the home in it
            log.info("turn of run %s failed: %s", run.id, exc.message)
            redact(exc, self.home)
            await self.queue.finish(run, RunState.FAILED, error=exc.message, code=exc.code, **_what_it_did(progress))
        except Exception as exc:
            log.exception("turn of run %s failed", run.id)
            error = f"internal error: {type(exc).__name__}"
            await self.queue.finish(run, RunState.FAILED, error=error, code="internal_error", **_what_it_did(progress))
        else:
            asked = progress.asked  # the turn asked its person: the run waits for the answer (`input_required`)
            await self.queue.finish(
                run,
                RunState.INPUT_REQUIRED if asked else RunState.COMPLETED,
                reply=None if asked else reply,
                messages=progress.messages,
                **_what_it_did(progress),
                question=NewQuestion(asked.id, asked.question, asked.choices, asked.default, asked.expires_in)
                if asked
                else None,
            )
        finally:
            if timer is not None:
                timer.cancel()
            self.queue.untrack(run.id)


class _Did(TypedDict):
    spent: Spent
    steered: Sequence[str]
    consumed: Mapping[str, Consumed]


def _what_it_did(progress: TurnProgress) -> _Did:
    """What a turn's end saves of its progress, however it ended: what it spent since last recorded, the messages it
    took in (steered), and which of its messages a model read (consumed)."""
    return {"spent": Spent(*progress.unrecorded()), "steered": progress.steered, "consumed": progress.consumed}


def _stop_at(run: Run, turn: Turn, queue: RunQueue) -> asyncio.TimerHandle:
    """A turn stopped at its run's deadline as `runs stop` stops it (its partial output kept), told apart as late;
    not once its end is being saved."""
    assert run.deadline is not None

    def stop() -> None:
        if turn.task.done() or turn.stop_requested or not queue.owns(run.id):
            return
        turn.late = True
        turn.progress.stop_requested = True
        turn.task.cancel()

    return asyncio.get_running_loop().call_later(max(0.0, run.deadline - time.time()), stop)


def _clock(deadline: float | None) -> str:
    return deadlines.wire(deadline) if deadline is not None else "none"
