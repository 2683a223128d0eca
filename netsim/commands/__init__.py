"""CLI commands, one module each (see netsim/cli.py)."""
