"""`backchannel logs`: the gateway's log file (`<home>/logs/gateway.log` and its rotated files), or followed."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

import click

from ..home import config
from ..home.gateway_log import line_time, log_files, log_path
from .ledger_cmd import since_time
from .output import examples, note

FOLLOW_POLL_SECONDS = 0.25
FOLLOW_TAIL = 10  # lines shown before following when -n is not given


@click.command(
    "logs",
    epilog=examples(
        "backchannel logs",
        "backchannel logs -n 50",
        "backchannel logs --since 2h",
        "backchannel logs --since 2026-11-30T08:00",
        "backchannel logs -f",
    ),
)
@click.option("-f", "--follow", is_flag=True, help="Then print new lines as the gateway writes them, until Ctrl-C.")
@click.option(
    "--since",
    metavar="WHEN",
    callback=since_time,
    help="Only what was logged since then: 30s, 10m, 2h, 1d, or an ISO time.",
)
@click.option(
    "-n",
    "--lines",
    "count",
    type=click.IntRange(0),
    help=f"Only the last N lines (default: all; with --follow, {FOLLOW_TAIL}).",
)
def logs(follow: bool, since: float | None, count: int | None) -> None:
    """The gateway's log file: print it, or follow it.

    Every line of `logs/gateway.log` in the home, its rotated files first (oldest first). The gateway writes it
    beside its stderr, the same lines, rotated by size (the home config's `logs.max_bytes` and `logs.keep`).
    --follow prints new lines as they come, across a rotation, until Ctrl-C (exit 0).
    """
    root = config.home()
    config.require_home(root)
    files = log_files(root)
    if not files:
        note(
            f"no gateway log yet in {str(log_path(root))!r}: the gateway writes it once it runs "
            "(`backchannel gateway`, or as a service: `backchannel gateway install`)"
        )
        if not follow:
            return
    if count is None and follow:
        count = FOLLOW_TAIL
    shown = _since(_lines(files), since)
    for line in deque(shown, maxlen=count) if count is not None else shown:
        click.echo(line)
    if follow:
        try:
            _follow(log_path(root), files[-1] if files and files[-1] == log_path(root) else None)
        except KeyboardInterrupt:
            return  # Ctrl-C is how a follow ends


def _lines(files: Iterable[Path]) -> Iterator[str]:
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:  # rotated away meanwhile
            continue
        yield from text.splitlines()


def _since(lines: Iterable[str], since: float | None) -> Iterator[str]:
    """Lines from `since` on; a line that starts no record (a traceback's) goes with the record before it."""
    if since is None:
        yield from lines
        return
    keep = False
    for line in lines:
        stamp = line_time(line)
        if stamp is not None:
            keep = stamp >= since
        if keep:
            yield line


def _follow(current: Path, seen: Path | None) -> None:
    """Print what is added to `current` from now on. The file is opened at each look and closed again (a file
    held open would stop the gateway renaming it on Windows); a rotation is seen as another file at the path,
    whose rest is read from the rotated file before the new one."""
    identity, offset = (_identity(current), _size(current)) if seen is not None else (None, 0)
    while True:
        now = _identity(current)
        if now is not None and now != identity:
            if identity is not None:  # rotated: the rest of the file we read is now gateway.log.1
                rotated = current.with_name(current.name + ".1")
                if _identity(rotated) == identity:
                    _print_from(rotated, offset)
            identity, offset = now, 0
        if now is not None:
            if _size(current) < offset:  # emptied (a log kept with `logs.keep: 0`)
                offset = 0
            offset = _print_from(current, offset)
        time.sleep(FOLLOW_POLL_SECONDS)


def _print_from(path: Path, offset: int) -> int:
    """Print the whole lines of `path` past `offset`; the offset after them."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return offset
    end = data.rfind(b"\n") + 1  # a line still being written waits for its end
    if end:
        click.echo(data[:end].decode("utf-8", errors="replace"), nl=False)
    return offset + end


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
