"""Identifiers: session ids `YYYYMMDD_HHMMSS_<6 hex>` and run ids `run_<32 hex>`."""

from __future__ import annotations

import re
import secrets
import time
import uuid

SESSION_ID_RE = re.compile(r"^\d{8}_\d{6}_[0-9a-f]{6}\Z")
# Ids given by API clients (Hermes allows its own); kept to characters safe in paths and addresses.
CLIENT_SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")


def new_session_id(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(now if now is not None else time.time()))
    return f"{stamp}_{secrets.token_hex(3)}"


def new_run_id() -> str:
    return f"run_{uuid.uuid4().hex}"
