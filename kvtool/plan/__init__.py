"""Tier planning: where a deployment's KV lives, reload vs recompute, and the advice. Pure."""
