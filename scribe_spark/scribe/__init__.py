"""Scribe: topic-based multicast trees built over Pastry as supersteps."""
