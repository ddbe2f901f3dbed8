"""Bundled and user-supplied profiles: model configs now, hardware and storage later."""
