"""The SDK's own request logging, kept to what is ours to read: a malformed request is the endpoints' one
bounded line (`backchannel.a2a`), not the SDK's traceback of it with the whole parameter in it (a peer's 1 MB
value logged four times over); what is left (an unhandled error: a bug) keeps its traceback, its text cut."""

from __future__ import annotations

import logging

from . import errors

# The SDK modules that log per request: their warnings are request errors the endpoints log themselves.
LOGGERS = (
    "a2a.server.routes.jsonrpc_dispatcher",
    "a2a.server.routes.rest_dispatcher",
    "a2a.utils.error_handlers",
    "a2a.utils.version_validator",
    "a2a.utils.proto_utils",
    "a2a.compat.v0_3.jsonrpc_adapter",
    "a2a.compat.v0_3.rest_adapter",
)
# What the SDK logs (as errors, with a traceback) about a request it could not read: the caller's mistake.
MALFORMED = (
    "Failed to parse request params",
    "Failed to validate base JSON-RPC request",
    "Parse error",
)


class _RequestErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return False
        if str(record.msg).startswith(MALFORMED):
            return False
        record.msg, record.args = errors.bounded(record.getMessage()), ()
        return True


_FILTER = _RequestErrors()


def quiet() -> None:
    """Put the filter on the SDK's request loggers (once; again is harmless)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
