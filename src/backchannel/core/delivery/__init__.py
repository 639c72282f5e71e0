"""Delivery: who may send what to whom, and how a message reaches its target — the person's and the agents'
sends, outbound messages to peers, wake-ups, holds, mentions, rates, the directory of reachable sessions,
Hermes sessions imported and agents hosted in a Hermes gateway."""
