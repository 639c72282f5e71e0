"""A2A v1.0: every profile an A2A agent (JSON-RPC and its agent card) over the delivery service.

`a2a-sdk` is the protocol layer only (its JSON-RPC dispatcher and error mapping); the tasks are our runs.
Nothing here imports the SDK: `endpoints` loads it on the first A2A request (it takes ~0.5 s to import).
"""

from __future__ import annotations

from .endpoints import A2AEndpoints

__all__ = ["A2AEndpoints"]
