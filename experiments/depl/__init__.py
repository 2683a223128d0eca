"""DepL experiments (issue 7): scenarios and the figure runner (see README.md)."""
