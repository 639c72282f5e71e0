"""Backchannel: persistent AI agents messaging each other, locally and across gateways."""

import sys

__version__ = "0.1.0"

# httpx imports its own command-line client (click, rich's progress bars and tables, pygments) whenever rich and
# pygments are installed, as they are beside us: near half its import time, on every command that talks to a
# gateway. Nothing here uses it, and httpx goes on without it (`httpx.main()` then says what to install).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
