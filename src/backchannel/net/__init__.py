"""The network side: one HTTP transport, one SSE parser, the peer client, the CLI's link to its gateway."""
