"""File modes: the home is 0700 and every file in it 0600, whatever the umask (POSIX; a no-op on Windows).

New files: the process umask is set to 077 before anything is created, so SQLite's state.db, its -wal
and -shm, the logs and every config file are born private. An existing home (made by an older version,
or copied in) is tightened when its gateway starts: the gateway is what holds the home open for long, and
walking the home on every CLI command would cost each one time.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("backchannel.home")

PRIVATE_UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600


def private_umask() -> None:
    """Files and folders this process creates are its owner's only."""
    if os.name == "posix":
        os.umask(PRIVATE_UMASK)


def tighten(root: Path) -> int:
    """Make the home 0700 and everything in it private (folders 0700, files 0600); returns how many changed.

    Symbolic links are left alone (their targets may be elsewhere); an entry that cannot be changed is skipped."""
    if os.name != "posix" or not root.is_dir():
        return 0
    changed = 0
    for path in (root, *root.rglob("*")):
        try:
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            continue
        wanted = DIR_MODE if stat.S_ISDIR(info.st_mode) else FILE_MODE
        if stat.S_IMODE(info.st_mode) & ~wanted:
            try:
                path.chmod(stat.S_IMODE(info.st_mode) & wanted)
            except OSError:
                continue
            changed += 1
    if changed:
        log.warning("made %d entries of the home %s private (0700 folders, 0600 files)", changed, root)
    return changed
