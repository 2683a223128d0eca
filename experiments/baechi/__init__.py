"""Baechi placement experiments (see README.md)."""
