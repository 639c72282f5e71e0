"""Peers: other gateways (Backchannel or Hermes) known by a name, a URL and a key."""
