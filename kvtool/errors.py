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


_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f",
              "\r": "\\r", "\\": "\\\\", " ": "\\ "}  # fmt: skip


def escape_name(name: str) -> str:
    """A name read from disk, a lock file or the network, shown as ``ls -b`` shows it: C
    escapes for the usual controls, a backslash before a space or a backslash, and ``\\ooo``
    (octal, one per byte) for every other character that is not printable: a control, ESC,
    DEL, a C1 control, a bidirectional override, a line separator, or a byte that was not
    UTF-8 (which Python carries as a lone surrogate). So a name can neither move the cursor,
    nor colour the terminal, nor start a line of its own, and two names never print alike."""
    if name.isprintable() and "\\" not in name and " " not in name:
        return name
    out = []
    for char in name:
        if char in _C_ESCAPES:
            out.append(_C_ESCAPES[char])
        elif 0xDC80 <= ord(char) <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\{ord(char) - 0xDC00:03o}")
        elif char.isprintable():
            out.append(char)
        else:
            raw = char.encode("utf-8", "surrogatepass")
            out.append("".join(f"\\{byte:03o}" for byte in raw))
    return "".join(out)
