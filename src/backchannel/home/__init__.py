"""The home on disk: config.yaml and .env, profiles, and the peer registry."""
