"""`python -m backchannel`: the same as the `backchannel` command."""

from .cli import main

main()
