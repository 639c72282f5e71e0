"""The gateway's log file in the home: `logs/gateway.log`, rotated by size (`logs.max_bytes`, `logs.keep` in the
home's config.yaml) into `gateway.log.1` (the newest rotated) … `gateway.log.<keep>` (the oldest), UTF-8, in the
one format the gateway also writes on stderr. Private as every file of the home (0700 folder, 0600 files)."""

from __future__ import annotations

import datetime as dt
import io
import logging
import logging.handlers
import os
import re
import sys
from pathlib import Path

from .modes import DIR_MODE, FILE_MODE, private_umask

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
LOG_DIR = "logs"
LOG_FILE = "gateway.log"
STAMP_RE = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def log_path(root: Path) -> Path:
    return root / LOG_DIR / LOG_FILE


def log_files(root: Path) -> list[Path]:
    """The log's files that exist, oldest first: the rotated ones from the highest number down, then gateway.log."""
    folder = root / LOG_DIR
    rotated: list[tuple[int, Path]] = []
    if folder.is_dir():
        for path in folder.glob(f"{LOG_FILE}.*"):
            suffix = path.name[len(LOG_FILE) + 1 :]
            if suffix.isdigit():
                rotated.append((int(suffix), path))
    current = log_path(root)
    return [p for _, p in sorted(rotated, reverse=True)] + ([current] if current.is_file() else [])


def line_time(line: str) -> float | None:
    """When a line of the log was written (local time, as the format writes it); None for a line that does not
    start a record (a traceback's)."""
    match = STAMP_RE.match(line)
    if match is None:
        return None
    try:
        stamp = dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    return stamp.timestamp() + int(match.group(2)) / 1000


class LogFile(logging.handlers.RotatingFileHandler):
    """The home's log file. One that cannot be written (a full disk, a file locked by another program) is said
    once on stderr, not with a traceback per line; the log goes on to stderr as before."""

    def __init__(self, root: Path, *, max_bytes: int, keep: int) -> None:
        private_umask()  # born 0600 (and its folder 0700) whatever the umask the gateway was started with
        super().__init__(log_path(root), maxBytes=max_bytes, backupCount=keep, encoding="utf-8", delay=True)
        self.setFormatter(logging.Formatter(LOG_FORMAT))
        self._failing = False
        self._size = 0  # bytes in the current file (counted from its size when opened)

    def write_line(self, line: str) -> None:
        """A line already in the log's format (the run log's, several a turn), into the file, rotated as the others:
        written here, not through a LogRecord and the handler's machinery, which cost more than the line."""
        self.acquire()
        try:
            self._write(line if line.endswith("\n") else line + "\n")
        finally:
            self.release()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        self._write(line, record)

    # The size is counted here, not asked of the file: the base class seeks and asks a text stream its position
    # for every line, which cost a busy gateway a fifth of its turns a second.
    def _write(self, line: str, record: logging.LogRecord | None = None) -> None:
        try:
            size = len(line.encode("utf-8"))
            if self.stream is None:
                self.stream = self._open()
            if 0 < self.maxBytes <= self._size + size:
                self.doRollover()
                self.stream = self._open()
            self.stream.write(line)
            self.stream.flush()
            self._size += size
        except Exception:
            self.handleError(record)

    def _open(self) -> io.TextIOWrapper:
        Path(self.baseFilename).parent.mkdir(mode=DIR_MODE, exist_ok=True)  # made with the first line, not before
        stream = super()._open()
        if os.name == "posix":
            os.chmod(self.baseFilename, FILE_MODE)  # a file made before the umask was private
        self._size = os.path.getsize(self.baseFilename)
        return stream

    def handleError(self, record: logging.LogRecord | None) -> None:  # logging's name
        error = sys.exc_info()[1]
        if self._failing:
            return
        self._failing = True
        if sys.stderr is not None:
            what = f"{type(error).__name__}: {error}" if error is not None else "an error"
            sys.stderr.write(f"cannot write the log file {self.baseFilename!r} ({what}); the log goes on on stderr\n")


class Tee:
    """The run log's stream: each line on stderr, as before, and in the log file."""

    def __init__(self, file: LogFile) -> None:
        self.file = file

    def write(self, text: str) -> int:
        if sys.stderr is not None:
            sys.stderr.write(text)
        self.file.write_line(text)
        return len(text)

    def flush(self) -> None:
        if sys.stderr is not None:
            sys.stderr.flush()
