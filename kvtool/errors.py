"""Errors that carry a hint for the user.

Library code raises these and never prints or exits; ``kvtool.cli.app`` turns them into one
line on stderr and an exit status (2 for bad input).
"""

from __future__ import annotations


class KvtoolError(Exception):
    """A problem the user can fix: ``message`` says what is wrong, ``hint`` how to fix it."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InputError(KvtoolError):
    """Bad user input: an option value, a file, a model name. Exit status 2."""


class ConfigError(InputError):
    """A model config that cannot be read or lacks a field its architecture needs."""


def has_control_character(text: str) -> bool:
    """A character below space, or DEL: a pasted line break or escape, which would start a
    line of its own in what kvtool writes (a YAML key, a shell or fio line) or prints."""
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def redact(text: str) -> str:
    """``text`` with any URL's user:password replaced by ``***`` (an AWS_ENDPOINT_URL may
    carry credentials, and error messages quote the URL)."""
    import re

    return re.sub(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@", r"\1***@", text)
