"""Stores of a home: the SQLite database, its migrations, sessions, runs and the ledger."""
