"""Bring your own model: a plain-torch network measured and placed by netsim (docs/baechi.md)."""
