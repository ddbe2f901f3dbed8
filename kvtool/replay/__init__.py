"""Trace replay, what-if sweeps and synthetic traces over the tiering engine's manager
(docs/replay.md)."""
