"""The `backchannel` command line: one module per command group; `main` turns errors into exit codes."""

from __future__ import annotations

import errno
import json
import os
import sys

import click

from ..errors import BackchannelError, DiskFull
from ..outcome import error_body, of_error

DEBUG_VAR = "BACKCHANNEL_DEBUG"  # set: an unexpected error shows its traceback


def main() -> None:
    """Entry point: the one place where a BackchannelError becomes a message on stderr and an exit code
    (and, under --json, one JSON object on stdout: the outcome and the error)."""
    from ..home.modes import private_umask
    from .app import cli
    from .output import show_config_warnings, text_streams

    text_streams()  # UTF-8 in and out whatever the code page: before anything is read or printed
    private_umask()  # every file of the home is born 0600, whatever the caller's umask
    show_config_warnings()
    try:
        _utf8_arguments(sys.argv[1:])
        # Arguments as typed: on Windows click would expand ~, $VAR/%VAR% and globs in every one of them
        # (a message '*.md' sent as the names of files, an allowlist pattern 'peer:*' as whatever it matches).
        cli.main(prog_name="backchannel", standalone_mode=False, windows_expand_args=False)
    except BackchannelError as exc:
        _fail(exc)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        code = 2 if isinstance(exc, click.UsageError) else exc.exit_code
        if _wants_json():
            body = {"result": "refused", "error": {"code": "invalid_request", "message": exc.format_message()}}
            click.echo(json.dumps(body, ensure_ascii=False, indent=2))
        sys.exit(code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(1)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            _unexpected(exc)
        _fail(DiskFull(f"the disk is full{_named(exc)}; free some space and run the command again"))
    except Exception as exc:  # a bug: one clear line (and under --json one object), not a traceback
        _unexpected(exc)


def _utf8_arguments(args: list[str]) -> None:
    """Refuse an argument that is not UTF-8 text (Python hands its undecodable bytes on as lone surrogates, which
    nothing can write: a message, a file, a request), naming the argument and its first bad byte."""
    from ..errors import UsageError

    for n, arg in enumerate(args, start=1):
        bad = next((i for i, ch in enumerate(arg) if "\udc80" <= ch <= "\udcff"), None)
        if bad is not None:
            byte = ord(arg[bad]) - 0xDC00
            raise UsageError(
                f"argument {n} is not UTF-8 text (byte 0x{byte:02x} after {arg[:bad]!r}): Backchannel reads its"
                " arguments as UTF-8; set the terminal or the script that calls it to UTF-8",
            )


def _unexpected(exc: BaseException) -> None:
    """An error no part of the program expected: named in one line; its traceback only with BACKCHANNEL_DEBUG."""
    if os.environ.get(DEBUG_VAR):
        raise exc
    _fail(
        BackchannelError(
            f"internal error: {type(exc).__name__}: {exc} (a bug in backchannel; run the command again with"
            f" {DEBUG_VAR}=1 to see where it happened, and report it)"
        )
    )


def _fail(exc: BackchannelError) -> None:
    from ..home import config, redact

    click.echo(f"error: {exc.message}", err=True)
    if redact.SHOWN in exc.message:  # a run's error names files of the home so (its sender may be a peer)
        click.echo(f"note: {redact.SHOWN} is this home, {str(config.home())!r}", err=True)
    if _wants_json():
        click.echo(json.dumps(error_object(exc), ensure_ascii=False, indent=2))
    sys.exit(exc.exit_code)


def _named(exc: OSError) -> str:
    return f" (writing {str(exc.filename)!r})" if exc.filename else ""


def error_object(exc: BackchannelError) -> dict[str, object]:
    """What `--json` prints for an error: the outcome it means for the message, and the error itself."""
    return error_body(of_error(exc), exc.code, exc.message, **exc.details)


def _wants_json() -> bool:
    return "--json" in sys.argv[1:]
