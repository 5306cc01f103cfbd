"""Evaluation against external systems (the real public streaming peers)."""
