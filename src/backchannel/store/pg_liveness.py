"""Whether the gateway that owns a running turn is still alive, asked of PostgreSQL itself: no lease, no clock.

Each gateway on a shared store holds an advisory lock named after its owner (`host:pid:token`, the mark it claims
runs under) on its listening connection (`pg_changes.ChangeListener`). The server frees that lock the moment the
connection ends, which a process's death ends at once, whatever machine it ran on. Another gateway reads
`pg_locks`: a running run whose owner's lock nobody holds is a dead gateway's, and is requeued within a check's
interval instead of after its lease (the lease stays for a gateway that is alive but silent: paused, or cut off
from the store, whose late writes its fencing refuses).

A lock's key is two int4s: LIVENESS_SPACE, then `hashtext(owner)`. Two owners whose hashes collide make a dead one
look alive, which only leaves its runs to their lease.
"""

from __future__ import annotations

LIVENESS_SPACE = 0x42434C56  # the first half of every liveness lock's key ("BCLV"), apart from other advisory locks

HOLD_SQL = "SELECT pg_try_advisory_lock($1, hashtext($2))"  # on the listening connection: held until it ends

# Of the owners given ($1), those whose lock no connection to this database holds.
GONE_SQL = (
    "SELECT o FROM unnest(?::text[]) AS o WHERE NOT EXISTS (SELECT 1 FROM pg_locks l"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2"
    f" AND l.classid = {LIVENESS_SPACE}::oid AND l.objid = hashtext(o)::oid"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))"
)
