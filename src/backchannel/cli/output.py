"""Printing for the CLI: data to stdout (text or --json), diagnostics to stderr."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import click

from .. import shell
from ..errors import UsageError
from ..events import Chunk, Ended, Event, Other, Step
from ..home import schema


def text_streams() -> None:
    """stdout and stderr write UTF-8, and never fail on a character; stdin not a terminal reads UTF-8.

    Python writes a pipe or a file in the locale's encoding, which on Windows is a code page such as cp1252:
    a reply with `→` or an emoji would crash there after the message was delivered. A terminal is left in
    its own encoding (a Windows console is written through its UTF-16 interface, where Python already says
    UTF-8; a POSIX terminal shows what its locale says), with `backslashreplace` for what it cannot show.
    Piped stdin is read as UTF-8 with a BOM dropped (PowerShell may write one): `read_message` reads the
    bytes itself, the prompt loops read lines through this."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:
            continue  # no stream at all (pythonw), or one a caller replaced with its own
        if _is_tty(stream):
            reconfigure(errors="backslashreplace")
        else:
            reconfigure(encoding="utf-8", errors="backslashreplace")
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None and not _is_tty(sys.stdin):
        reconfigure(encoding="utf-8-sig")


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (OSError, ValueError):  # closed or detached
        return False


def examples(*lines: str) -> str:
    """A command's EXAMPLES section for its --help, kept as written (click does not rewrap a \\b paragraph)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def shell_command(*words: str) -> str:
    """A `backchannel` command as the person types it again, each word quoted for the shell at hand."""
    return shell.command("backchannel", *words)


def message_words(given: str | None, text: str) -> list[str]:
    """The MESSAGE argument of a command to type again: the message itself; '-' when it came on stdin; a
    placeholder when the shell at hand would change it even quoted (`%VAR%` in cmd, `$` in PowerShell)."""
    if given in (None, "-"):
        return ["-"]
    return [text] if shell.literal(text) else ["<the same message>"]


def emit(data: Any, *, as_json: bool, text: Callable[[], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        text()


def note(message: str) -> None:
    click.echo(message, err=True)


class _Warnings(logging.Handler):
    """The loading code's warnings (an unknown key in a config file) as `warning:` lines on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"warning: {record.getMessage()}", err=True)


def show_config_warnings(where: Literal["stderr", "log", "nowhere"] = "stderr") -> None:
    """Where the loading code's warnings go: stderr as lines of their own (a command), the log like the rest
    (the gateway), or nowhere (doctor, which reports each as a check of its own)."""
    logger = schema.log
    for handler in [h for h in logger.handlers if isinstance(h, _Warnings)]:
        logger.removeHandler(handler)
    if where == "stderr":
        logger.addHandler(_Warnings(logging.WARNING))
    logger.propagate = where == "log"
    logger.disabled = where == "nowhere"


def when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S")


GAP = 2  # spaces between two columns
NARROWEST = 10  # a column that gives way keeps at least this many characters (or its heading's)
WIDE_HELP = "Every column whole, however wide the terminal (by default a table fits the terminal's width)."


def table(
    rows: list[list[str]],
    headers: list[str],
    *,
    fit: tuple[str, ...] = (),
    drop: tuple[str, ...] = (),
    wide: bool = False,
) -> None:
    """Rows under their headings, in columns. On a terminal (or BACKCHANNEL_COLUMNS) a table wider than it fits: the
    columns named in `drop` are left out, in that order, while it cannot fit otherwise; then those named in `fit`
    give way, the widest first, their cells cut with `…` (an address keeps its profile and the end of its id).
    `wide`, or output to a pipe or a file, keeps every column and cell whole."""
    if not rows:
        return
    shown = list(range(len(headers)))
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    room = None if wide else terminal_width()
    if room is not None:
        flexible = [headers.index(h) for h in fit if h in headers]
        for name in drop:
            if _least(widths, shown, flexible, headers) <= room or name not in headers:
                continue
            shown.remove(headers.index(name))
        widths = _fitted(widths, shown, flexible, headers, room)
    click.echo("  ".join(headers[i].ljust(widths[i]) for i in shown).rstrip())
    for row in rows:
        click.echo("  ".join(_cut(row[i], widths[i]).ljust(widths[i]) for i in shown).rstrip())


WIDTH_VAR = "BACKCHANNEL_COLUMNS"  # the width tables fit, whatever stdout is (0: every cell whole)


def terminal_width() -> int | None:
    """The columns a table may take: BACKCHANNEL_COLUMNS when set, else the terminal's; None (every cell whole)
    when stdout is a pipe or a file, whatever COLUMNS says (a shell or a test runner may export it)."""
    import os
    import shutil

    given = os.environ.get(WIDTH_VAR, "").strip()
    if given.isdigit():
        return int(given) or None
    if not _is_tty(sys.stdout):
        return None
    return shutil.get_terminal_size().columns


def _floor(i: int, headers: list[str], widths: list[int]) -> int:
    return min(widths[i], max(len(headers[i]), NARROWEST))


def _least(widths: list[int], shown: list[int], flexible: list[int], headers: list[str]) -> int:
    """The width of the shown columns with every flexible one at its narrowest."""
    least = [_floor(i, headers, widths) if i in flexible else widths[i] for i in shown]
    return sum(least) + GAP * (len(shown) - 1)


def _fitted(widths: list[int], shown: list[int], flexible: list[int], headers: list[str], room: int) -> list[int]:
    fitted = list(widths)
    over = sum(fitted[i] for i in shown) + GAP * (len(shown) - 1) - room
    giving = [i for i in flexible if i in shown]
    while over > 0:
        able = [i for i in giving if fitted[i] > _floor(i, headers, widths)]
        if not able:
            break  # as narrow as it goes: the terminal wraps the rest
        widest = max(able, key=lambda i: fitted[i])
        fitted[widest] -= 1
        over -= 1
    return fitted


def _cut(cell: str, width: int) -> str:
    if len(cell) <= width:
        return cell
    head, slash, rest = cell.partition("/")
    keep = width - len(head) - 2
    if slash and " " not in cell and keep >= 4:  # an address: its profile (or peer), then the end of its id
        return f"{head}/…{rest[-keep:]}"
    return cell[: width - 1] + "…"


def read_message(message: str | None) -> str | None:
    """The message argument; '-' (or none, with stdin not a terminal) reads stdin, as UTF-8."""
    if message == "-" or (message is None and not sys.stdin.isatty()):
        return stdin_text().rstrip("\n")  # the newline that ends the last line is not part of the message
    return message


def stdin_text() -> str:
    """All of stdin as text: UTF-8 whatever the platform's code page, a byte order mark dropped, line ends
    read as '\\n' (as text mode reads them); bytes that are not UTF-8 are a usage error, nothing is sent."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:
        return str(sys.stdin.read())  # a text stream a caller put there: already text
    data: bytes = buffer.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"the message on stdin is not UTF-8 text (byte {exc.start}: {exc.reason}): give it as UTF-8"
        ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


STILL_RUNNING_SECONDS = 30.0  # of silence in a followed run, then a line saying it goes on and for how long


async def show_progress(run_id: str, events: AsyncIterator[Event], *, still: bool = True) -> None:
    """A run's progress on stderr as its events arrive: one live line on a terminal, one line per event otherwise;
    after each STILL_RUNNING_SECONDS without one (`still`: not under --json), how long it has been followed."""
    tty = sys.stderr.isatty()
    counts = {"chars": 0, "tools": 0}
    began = time.monotonic()
    stream = aiter(events)
    coming: asyncio.Future[Event] = asyncio.ensure_future(anext(stream))
    try:
        while True:
            done, _ = await asyncio.wait({coming}, timeout=STILL_RUNNING_SECONDS if still else None)
            if not done:
                going = f"still running ({duration(time.monotonic() - began)})"
                _live(run_id, going, counts) if tty else note(going)
                continue
            try:
                event = coming.result()
            except StopAsyncIteration:
                break
            coming = asyncio.ensure_future(anext(stream))
            name = event.name
            counts["chars"] += len(event.text) if isinstance(event, Chunk) else 0
            counts["tools"] += name == "tool.started"
            if tty:
                _live(run_id, name, counts)
            elif not isinstance(event, Chunk):
                detail = (event.tool if isinstance(event, Step) else "") or (
                    event.error if isinstance(event, Step | Ended | Other) else ""
                )
                note(f"{name} {detail or ''}".rstrip())
    finally:
        coming.cancel()
    if tty:
        click.echo("", err=True)


def _live(run_id: str, what: str, counts: dict[str, int]) -> None:
    click.echo(f"\r\033[K{run_id}: {what} · {counts['tools']} tool calls · {counts['chars']} chars", nl=False, err=True)


def duration(seconds: float) -> str:
    """`45s`, `2m 10s`, `1h 5m`: how long, as a person says it."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60}s"
    return f"{whole // 3600}h {whole % 3600 // 60}m"
