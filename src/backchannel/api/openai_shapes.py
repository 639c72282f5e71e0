"""The OpenAI-compatible routes' answers as Hermes gives them: a chat completion and its `chat.completion.chunk`
stream (`hermes.tool.progress` events, `data: [DONE]`), a response and its `response.*` event stream.

A stream's frames are made from a run's events (`backchannel.events`), one route's `Frames` per stream: what the
run says as it goes (its text, its tool steps), then its end read from the store (the reply's rest, when the text
streamed was less; its usage; or why it failed, as Hermes's `hermes` object says it).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..core.delivery.delivery import Delivered
from ..errors import NotFound
from ..events import Chunk, Event, Step
from ..records import Run, RunState
from .shapes import queued as receipt

__all__ = ["ChatFrames", "Frames", "ResponseFrames", "chat_completion", "receipt", "response", "run_id_of_response"]

Frame = tuple[str | None, dict[str, Any] | str]  # (event name or None, its data)


def _hex(run_id: str) -> str:
    return run_id.removeprefix("run_")


def _usage(run: Run, *, openai: bool) -> dict[str, int]:
    if openai:  # chat completions name them so
        return {
            "prompt_tokens": run.tokens_in,
            "completion_tokens": run.tokens_out,
            "total_tokens": run.tokens_in + run.tokens_out,
        }
    return {
        "input_tokens": run.tokens_in,
        "output_tokens": run.tokens_out,
        "total_tokens": run.tokens_in + run.tokens_out,
    }


def chat_completion(d: Delivered, model: str) -> dict[str, Any]:
    run = d.run
    return {
        "id": f"chatcmpl-{_hex(run.id)}",
        "object": "chat.completion",
        "created": int(run.created_at),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": run.reply or ""}, "finish_reason": "stop"}
        ],
        "usage": _usage(run, openai=True),
        "session_id": run.session_id,
        "run_id": run.id,
        "replayed": d.result.replayed,
    }


def response_id(run_id: str) -> str:
    return f"resp_{_hex(run_id)}"


def run_id_of_response(given: str) -> str:
    """The run a response id names (`resp_<hex>`; a run id is taken as it is)."""
    if given.startswith("run_"):
        return given
    if not given.startswith("resp_") or len(given) > 80:
        raise NotFound(f"no response {given[:80]!r}", code="response_not_found")
    return "run_" + given.removeprefix("resp_")


def _message_item(run: Run, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"id": f"msg_{_hex(run.id)}", "type": "message", "status": status, "role": "assistant", "content": content}


def _envelope(run: Run, model: str, status: str) -> dict[str, Any]:
    return {
        "id": response_id(run.id),
        "object": "response",
        "status": status,
        "created_at": int(run.created_at),
        "model": model,
        "output": [],
        "session_id": run.session_id,
        "run_id": run.id,
    }


def response(d: Delivered, model: str) -> dict[str, Any]:
    body = _envelope(d.run, model, "completed")
    body["output"] = [_message_item(d.run, d.run.reply or "", "completed")]
    body["usage"] = _usage(d.run, openai=False)
    body["replayed"] = d.result.replayed
    return body


class Frames(Protocol):
    """One stream's frames: its start, each step of the run's progress, its end (or its cut, when the key it was
    opened with is revoked)."""

    def start(self, first: Delivered) -> list[Frame]: ...

    def step(self, step: Event) -> list[Frame]: ...

    def end(self, run: Run) -> list[Frame]: ...

    def cut(self, state: str, code: str, message: str) -> list[Frame]: ...


class ChatFrames:
    """`chat.completion.chunk` frames: the role, each piece of text, `hermes.tool.progress` for tool steps, the
    finish (`stop`, or `error` with Hermes's `hermes` object) with the usage, then `[DONE]`."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.run_id = ""
        self.created = 0
        self.said = ""  # the text streamed so far
        self.tools: dict[str, list[str]] = {}  # each tool's calls started and not completed yet, oldest first
        self.calls = 0

    def _chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> Frame:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        head = {"id": f"chatcmpl-{_hex(self.run_id)}", "object": "chat.completion.chunk", "created": self.created}
        return None, {**head, "model": self.model, "choices": [choice], **extra}

    def start(self, first: Delivered) -> list[Frame]:
        self.run_id, self.created = first.run.id, int(first.run.created_at)
        run = first.run
        return [
            self._chunk({"role": "assistant"}, run_id=run.id, session_id=run.session_id, replayed=first.result.replayed)
        ]

    def step(self, step: Event) -> list[Frame]:
        if isinstance(step, Chunk) and step.text:
            self.said += step.text
            return [self._chunk({"content": step.text})]
        if isinstance(step, Step) and step.name == "tool.started":
            self.calls += 1
            call = f"call_{_hex(self.run_id)[:16]}_{self.calls}"
            self.tools.setdefault(step.tool, []).append(call)
            label = step.preview if isinstance(step.preview, str) and step.preview else step.tool
            return [
                ("hermes.tool.progress", {"tool": step.tool, "label": label, "toolCallId": call, "status": "running"})
            ]
        if isinstance(step, Step) and step.name == "tool.completed" and self.tools.get(step.tool):
            call = self.tools[step.tool].pop(0)
            return [("hermes.tool.progress", {"tool": step.tool, "toolCallId": call, "status": "completed"})]
        return []

    def end(self, run: Run) -> list[Frame]:
        if run.state is RunState.COMPLETED:
            reply = run.reply or ""
            rest = reply[len(self.said) :] if reply.startswith(self.said) else ""
            frames = [self._chunk({"content": rest})] if rest else []
            frames.append(self._chunk({}, "stop", usage=_usage(run, openai=True)))
            return [*frames, (None, "[DONE]")]
        return self.cut(run.state.value, run.error_code or f"run_{run.state.value}", run.error or run.state.value)

    def cut(self, state: str, code: str, message: str) -> list[Frame]:
        hermes = {"completed": False, "failed": True, "partial": bool(self.said), "error": message}
        hermes.update(error_code="agent_error", code=code, status=state, run_id=self.run_id)
        error = {"message": message, "type": "agent_error", "code": code}
        return [self._chunk({}, "error", error=error, hermes=hermes), (None, "[DONE]")]


class ResponseFrames:
    """`response.*` events, as named frames each with its `type` and `sequence_number`: `response.created`, the
    message item and its text deltas, then `response.completed` with the whole response (or `response.failed`)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.run: Run | None = None
        self.said = ""
        self.opened = False
        self.seq = 0

    def _event(self, name: str, **data: Any) -> Frame:
        frame: Frame = (name, {"type": name, "sequence_number": self.seq, **data})
        self.seq += 1
        return frame

    def _text(self, text: str) -> list[Frame]:
        assert self.run is not None
        frames = []
        if not self.opened:
            self.opened = True
            frames.append(
                self._event(
                    "response.output_item.added", output_index=0, item=_message_item(self.run, "", "in_progress")
                )
            )
        self.said += text
        item = f"msg_{_hex(self.run.id)}"
        frames.append(
            self._event("response.output_text.delta", item_id=item, output_index=0, content_index=0, delta=text)
        )
        return frames

    def start(self, first: Delivered) -> list[Frame]:
        self.run = first.run
        envelope = {**_envelope(first.run, self.model, "in_progress"), "replayed": first.result.replayed}
        return [self._event("response.created", response=envelope)]

    def step(self, step: Event) -> list[Frame]:
        return self._text(step.text) if isinstance(step, Chunk) and step.text else []

    def end(self, run: Run) -> list[Frame]:
        self.run = run
        if run.state is not RunState.COMPLETED:
            return self.cut(run.state.value, run.error_code or f"run_{run.state.value}", run.error or run.state.value)
        reply = run.reply or ""
        rest = reply[len(self.said) :] if reply.startswith(self.said) else ""
        frames = self._text(rest) if rest or not self.opened else []
        item = f"msg_{_hex(run.id)}"
        done = _message_item(run, reply, "completed")
        frames.append(
            self._event("response.output_text.done", item_id=item, output_index=0, content_index=0, text=reply)
        )
        frames.append(self._event("response.output_item.done", output_index=0, item=done))
        whole = {**_envelope(run, self.model, "completed"), "output": [done], "usage": _usage(run, openai=False)}
        return [*frames, self._event("response.completed", response=whole)]

    def cut(self, state: str, code: str, message: str) -> list[Frame]:
        assert self.run is not None
        failed = {**_envelope(self.run, self.model, "failed"), "error": {"code": code, "message": message}}
        return [self._event("response.failed", response={**failed, "status_detail": state})]
