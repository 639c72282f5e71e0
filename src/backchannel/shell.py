"""Commands printed for a person to copy, quoted the way the shell at hand reads them.

POSIX shells (and Git Bash or MSYS2 on Windows, which set `MSYSTEM`) get `shlex.quote`'s single quotes. cmd and
PowerShell read neither single quotes alike nor backslashes as escapes, but both pass a double-quoted word
on whole, as the C runtime that splits a Windows program's arguments reads it (`subprocess.list2cmdline`'s
rules): so on Windows a word that needs quoting is put in double quotes, a `"` inside escaped as `\\"` and the
backslashes before one doubled. What neither shell leaves alone even in double quotes (`%VAR%` in cmd, `$`
and backticks in PowerShell) is no word to print there: `literal` tells (the CLI prints a placeholder for a
message that has them).
"""

from __future__ import annotations

import os
import re
import shlex

_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./\\-]+")  # words both Windows shells take as they are


def windows_shell() -> bool:
    """Whether the person types into cmd or PowerShell (Windows, outside Git Bash and MSYS2)."""
    return os.name == "nt" and not os.environ.get("MSYSTEM")


def quote(word: str, *, windows: bool | None = None) -> str:
    """`word` as one argument of a command line typed into the shell at hand (or, with `windows`, the one named)."""
    if not (windows_shell() if windows is None else windows):
        return shlex.quote(word)
    if word and _PLAIN.fullmatch(word):
        return word
    out: list[str] = []
    backslashes = 0
    for char in word:
        if char == "\\":
            backslashes += 1
            continue
        if char == '"':
            out.append("\\" * (2 * backslashes + 1) + '"')
        else:
            out.append("\\" * backslashes + char)
        backslashes = 0
    out.append("\\" * (2 * backslashes))  # before the closing quote, every backslash is doubled
    return '"' + "".join(out) + '"'


_EXPANDED_ON_WINDOWS = re.compile(r"[%$`!\r\n]")  # cmd's %VAR% and !VAR!, PowerShell's $ and backtick, a line end


def literal(word: str, *, windows: bool | None = None) -> bool:
    """Whether `quote(word)` reaches the program as it is in the shell at hand: always in a POSIX shell; in cmd
    and PowerShell not when it holds what they expand inside double quotes."""
    if not (windows_shell() if windows is None else windows):
        return True
    return _EXPANDED_ON_WINDOWS.search(word) is None


def command(*words: str, windows: bool | None = None) -> str:
    """A command line of `words`, each quoted for the shell at hand: `command("backchannel", "chat", "-q", "hi
    there")` is `backchannel chat -q 'hi there'` in bash and `backchannel chat -q "hi there"` in cmd."""
    return " ".join(quote(word, windows=windows) for word in words)
