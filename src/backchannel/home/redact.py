"""The home's path kept out of what leaves the gateway: error texts name files under `$BACKCHANNEL_HOME`.

Errors name the file they are about (`'/home/me/.backchannel/profiles/x/config.yaml' line 3: …`), which is
what a person at the CLI needs; but the same text answered to a peer, an A2A client or an MCP host, or kept
as a run's error that its sender reads, would tell every caller where the home is and whose it is. At those
doors the home's absolute path is shown as `$BACKCHANNEL_HOME`, in every spelling it may have in a message
(as given and resolved; with either slash; doubled backslashes as `repr` writes a Windows path).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TypeVar

from ..errors import BackchannelError

SHOWN = "$BACKCHANNEL_HOME"
E = TypeVar("E", bound=BackchannelError)


@functools.lru_cache(maxsize=16)
def _pattern(root: str) -> re.Pattern[str] | None:
    path = Path(root)
    spellings: set[str] = set()
    for p in {path, path.resolve()} if path.is_absolute() else {path.resolve()}:
        text = str(p)
        spellings.update({text, p.as_posix(), text.replace("\\", "\\\\")})
    spellings = {s.rstrip("/\\") for s in spellings if len(s.rstrip("/\\")) > 1}  # never "/" alone
    if not spellings:
        return None
    alternatives = "|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True))
    return re.compile(f"(?:{alternatives})(?=$|[\\\\/'\"\\s:,;)\\]])")


def without_home(text: str, root: Path) -> str:
    """`text` with the home's absolute path shown as $BACKCHANNEL_HOME."""
    pattern = _pattern(str(root))
    return text if pattern is None or not text else pattern.sub(SHOWN, text)


def redact(exc: E, root: Path) -> E:
    """The error with the home's path out of its message and its details (changed in place: it is about to
    leave the gateway, and its class, code and status stay what they are)."""
    exc.message = without_home(exc.message, root)
    exc.details = {k: without_home(v, root) if isinstance(v, str) else v for k, v in exc.details.items()}
    return exc
