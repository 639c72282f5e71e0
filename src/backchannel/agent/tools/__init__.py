"""Tools offered to agents: memory, and the messaging tools built on the router."""
