"""Backchannel: persistent AI agents messaging each other, locally and across gateways."""

__version__ = "0.1.0"
