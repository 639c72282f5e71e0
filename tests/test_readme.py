"""The CLI reference (docs/cli.md, moved there from the REFERENCE) is the CLI: every command is listed (and nothing
that is not one), the exit-code table says what `Outcome.exit_code` and the error classes do, and every error code
the code gives is explained."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import click
import pytest

from backchannel import errors
from backchannel.cli.app import cli
from backchannel.outcome import Outcome
from conftest import subcommands

pytestmark = pytest.mark.quick  # pure: no home on disk, no process, no gateway (make quick)

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")  # the CLI reference, exit codes, error codes
SRC = ROOT / "src" / "backchannel"


def section(title: str) -> str:
    """docs/cli.md's text under the heading `title`, up to the next heading."""
    match = re.search(rf"^#+ {re.escape(title)}\n", REFERENCE, re.M)
    assert match, f"docs/cli.md has no section {title!r}"
    rest = REFERENCE[match.end() :]
    end = re.search(r"^#+ ", rest, re.M)
    return rest[: end.start()] if end else rest


def rows(text: str) -> list[list[str]]:
    """The cells of each row of the markdown tables in `text` (header and rule rows left out)."""
    found = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            found.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return [r for r in found if r and r[0] not in ("command", "exit", "code")]


def command_paths(group: click.Group, prefix: str = "backchannel") -> list[str]:
    paths = []
    for name, command in subcommands(group).items():
        path = f"{prefix} {name}"
        paths.append(path)
        if isinstance(command, click.Group):
            paths += command_paths(command, path)
    return paths


def runnable_groups(group: click.Group, prefix: str = "backchannel") -> list[str]:
    """Groups that are commands themselves too (`backchannel gateway` runs, `backchannel gateway stop` too)."""
    found = []
    for name, command in subcommands(group).items():
        if isinstance(command, click.Group):
            if command.invoke_without_command:
                found.append(f"{prefix} {name}")
            found += runnable_groups(command, f"{prefix} {name}")
    return found


def listed_commands() -> list[str]:
    """The command each row of the reference starts with: the words before the first argument or option."""
    listed = []
    for cells in rows(section("CLI reference")):
        words = cells[0].strip("`").split()
        command = []
        for word in words:
            if not re.fullmatch(r"[a-z][a-z-]*", word):
                break
            command.append(word)
        listed.append(" ".join(command))
    return listed


def test_every_command_and_subcommand_is_in_the_reference() -> None:
    listed = listed_commands()
    paths = command_paths(cli)
    assert len(paths) > 20
    for path in paths:
        assert any(entry == path or entry.startswith(path + " ") for entry in listed), f"{path} is not in docs/cli.md"
    leaves = [p for p in paths if not any(q.startswith(p + " ") for q in paths)] + runnable_groups(cli)
    for entry in listed:
        assert entry in leaves, f"docs/cli.md lists {entry!r}, which is not a command"


def test_the_exit_code_table_is_what_outcomes_exit_with() -> None:
    table = {int(cells[0]): cells for cells in rows(section("Exit codes"))}
    assert sorted(table) == [0, 1, 2, 130]
    seen = set()
    for code, cells in table.items():
        for name in re.findall(r"`(\w+)`", cells[1]):
            assert Outcome(name).exit_code == code, f"{name}: docs/cli.md says exit {code}"
            seen.add(name)
    assert seen == {o.value for o in Outcome}
    assert {cls.exit_code for cls in error_classes()} <= set(table)


def error_classes() -> list[type[errors.BackchannelError]]:
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.BackchannelError) and cls.__module__ == errors.__name__
    ]


def test_every_error_class_is_in_the_error_table_with_its_exit_code_and_http_status() -> None:
    table = {cells[0].strip("`"): cells for cells in rows(section("Error codes")) if len(cells) == 4}
    narrower = {cells[0].strip("`"): cells[1] for cells in rows(section("Error codes")) if len(cells) == 3}
    for cls in error_classes():
        code = cls.code
        if code not in table:  # a narrower code, listed under its kind: the class answers as that kind does
            assert code in narrower, f"{cls.__name__}'s code {code!r} is not in docs/cli.md"
            kind = next(base.code for base in cls.__mro__[1:] if getattr(base, "code", None) in table)
            assert f"`{kind}`" in narrower[code], f"{code}: docs/cli.md gives its kind as {narrower[code]}, not {kind}"
            code = kind
        _, exit_code, status, meaning = table[code]
        assert int(exit_code) == cls.exit_code, (
            f"{cls.code}: docs/cli.md says exit {exit_code}, {cls.__name__} {cls.exit_code}"
        )
        assert int(status) == cls.http_status, (
            f"{cls.code}: docs/cli.md says HTTP {status}, {cls.__name__} {cls.http_status}"
        )
        assert meaning


CODE_PATTERNS = [
    r'\bcode="(\w+)"',  # an error raised with a narrower code than its class's
    r'ToolFailure\(\s*"(\w+)"',  # a tool's error result
    r'error_result\(\s*"(\w+)"',
    r'Refusal\(\s*"(\w+)"',  # a policy refusal
    r"error_code = '(\w+)'",  # a run's failure code, set in SQL
    r'(\d{3}): "(\w+)"',  # an HTTP error of the router
]


def codes_in_the_source() -> set[str]:
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for pattern in CODE_PATTERNS:
            for match in re.finditer(pattern, text):
                found.add(match.groups()[-1])
    return found


def test_every_error_code_the_code_gives_is_explained() -> None:
    codes = codes_in_the_source()
    assert {
        "invalid_address",
        "unknown_tool",
        "hop_limit",
        "expired",
        "method_not_allowed",
    } <= codes  # the patterns work
    explained = {cells[0].strip("`") for cells in rows(section("Error codes"))}
    missing = sorted(codes - explained - {cls.code for cls in error_classes()})
    assert not missing, f"error codes not explained in docs/cli.md's Error codes: {missing}"
    undocumented_classes = sorted(cls.code for cls in error_classes() if cls.code not in explained)
    assert not undocumented_classes
