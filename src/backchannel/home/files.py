"""Reading text files: UTF-8 or an error that names the file, never a raw OSError or UnicodeDecodeError."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError, UsageError


def read_text(path: Path, *, missing_ok: bool = False, error: type[UsageError] = ConfigError) -> str:
    """The file's text. A missing file is "" with `missing_ok`; anything unreadable raises `error` naming it.

    `ConfigError` (the default) is for the home's own files, the operator's to fix; a file given on the
    command line is the caller's mistake: pass `error=UsageError`.
    """
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        if missing_ok:
            return ""
        raise error(f"cannot read {str(path)!r}: there is no such file") from exc
    except IsADirectoryError as exc:
        raise error(f"cannot read {str(path)!r}: it is a folder, not a file") from exc
    except UnicodeDecodeError as exc:
        raise error(
            f"cannot read {str(path)!r}: it is not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8"
        ) from exc
    except OSError as exc:
        raise error(f"cannot read {str(path)!r}: {exc.strerror or type(exc).__name__}") from exc
