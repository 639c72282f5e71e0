"""The HTTP API in the Hermes API-server dialect: app, routes, request reading, response shapes."""
