"""An A2A message's parts as the delivery service takes them: the text the agent reads, the files kept with the
run, and what makes two messages the same message.

    text part    its text, as it is (text parts follow each other without a separator)
    data part    fenced JSON (```json … ```, keys sorted: protobuf's Struct keeps no order) in a paragraph of its own
    file part    kept with the run: its bytes (`raw`, at most MAX_FILE_BYTES) or its `url`, which is never
                 fetched (no request to wherever a stranger points); the agent reads a line that names it,
                 its media type and its size or URL
A part whose media type the card does not list is ContentTypeNotSupported; nothing is recorded then.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass

from a2a.types import Message, Part
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.json_format import MessageToDict

from ...messages import Attachment
from .card import INPUT_MODES
from .json_numbers import plain

MAX_FILE_BYTES = 524_288  # per file part (the whole request is within gateway.max_body_bytes first)
MAX_FILES = 16  # file parts per message
MAX_NAME_CHARS = 255
MAX_URL_CHARS = 2048
ACCEPTED = frozenset(INPUT_MODES)


@dataclass(frozen=True)
class Inbound:
    """What a message says to the agent (`text`), the files it came with, and its `content` as canonical JSON
    (its parts, context and task: what an exact repeat of a messageId repeats)."""

    text: str
    files: tuple[Attachment, ...]
    content: str


def read(message: Message) -> Inbound:
    """The message's parts read; ContentTypeNotSupported or InvalidParams naming the part that cannot be."""
    said = ""
    files: list[Attachment] = []
    for n, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if part.media_type and part.media_type.lower() not in ACCEPTED:
            raise ContentTypeNotSupportedError(
                f"part {n} is {_clean(part.media_type)[:100]!r}, which this agent does not take; it takes"
                f" {', '.join(INPUT_MODES)}",
                {"code": "unsupported_media_type"},
            )
        if kind == "text":
            said += part.text
        elif kind == "data":
            said = _paragraph(said, _fenced(part))
        elif kind in ("raw", "url"):
            if len(files) >= MAX_FILES:
                raise InvalidParamsError(
                    f"the message has more than {MAX_FILES} file parts", {"code": "too_many_files"}
                )
            attachment = _file(n, part, kind)
            files.append(attachment)
            said = _paragraph(said, _named(attachment))
        else:
            raise InvalidParamsError(f"part {n} has no content (text, data, raw or url)", {"code": "invalid_payload"})
    content = json.dumps(
        {
            "parts": [MessageToDict(p) for p in message.parts],
            "contextId": message.context_id,
            "taskId": message.task_id,
        },
        sort_keys=True,
        ensure_ascii=False,
    )
    return Inbound(text=said.strip("\n"), files=tuple(files), content=content)


def _file(n: int, part: Part, kind: str) -> Attachment:
    name = _clean(part.filename)[:MAX_NAME_CHARS] or None
    media = part.media_type.lower() or None
    if kind == "raw":
        if len(part.raw) > MAX_FILE_BYTES:
            raise InvalidParamsError(
                f"part {n} (file {name!r}) has {len(part.raw)} bytes; at most {MAX_FILE_BYTES} are kept",
                {"code": "file_too_large"},
            )
        return Attachment(name=name, media_type=media, content=bytes(part.raw))
    url = part.url.strip()
    if not url or len(url) > MAX_URL_CHARS or any(c.isspace() or unicodedata.category(c).startswith("C") for c in url):
        raise InvalidParamsError(
            f"part {n} (file {name!r}) needs a URL of 1-{MAX_URL_CHARS} characters without spaces or line breaks",
            {"code": "invalid_payload"},
        )
    return Attachment(name=name, media_type=media, url=url)


def _named(file: Attachment) -> str:
    """The line that tells the agent of a file (never a bracket first: it cannot pass for a frame line)."""
    name = f"file {file.name!r}" if file.name else "a file"
    media = file.media_type or "media type not given"
    if file.url is not None:
        return f"({name}, {media}, at {file.url}; not fetched)"
    return f"({name}, {media}, {file.size} bytes, kept with this message)"


def _fenced(part: Part) -> str:
    value = plain(MessageToDict(part).get("data"))
    # Backticks only occur inside JSON strings, where \\u0060 means the same: the fence cannot be closed early.
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).replace("`", "\\u0060")
    return f"```json\n{text}\n```"


def _paragraph(said: str, block: str) -> str:
    """What was said so far, then `block` as a paragraph of its own (a blank line before and after it)."""
    before = said.rstrip("\n")
    return f"{before}\n\n{block}\n\n" if before.strip() else f"{block}\n\n"


def _clean(text: str) -> str:
    """Without line breaks, controls and other invisible characters (a name cannot start a line of its own)."""
    return "".join(c for c in text if not unicodedata.category(c).startswith(("C", "Z")) or c == " ").strip()
