"""Parse and format the quantities kvtool talks about: token counts and byte sizes.

Pure functions, no I/O. Token counts follow vLLM's ``--max-model-len`` convention
(``human_readable_int`` in vLLM's argument utilities: lowercase k/m/g/t are powers of 1000 and
may carry decimals, uppercase K/M/G/T are powers of 1024 and may not), so ``200k`` is 200,000
tokens and ``128K`` is 131,072.
"""

import re

from kvtool.errors import InputError
from kvtool.record import Record

_TOKEN_SUFFIX = {
    "": 1,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
    "t": 1000**4,
    "K": 1024,
    "M": 1024**2,
    "G": 1024**3,
    "T": 1024**4,
}
_TOKEN_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtKMGT]?)\s*$")
MAX_DIGITS = 24  # far past any real count or size (10**24 B is a yottabyte), short of a hang


def _check_digits(number: str, text: str, what: str) -> None:
    """A number of more than MAX_DIGITS digits is a typo or an attack: one clear line, not
    Python's 4,300-digit ValueError or a float overflow."""
    if len(number) > MAX_DIGITS:
        raise InputError(
            f"{what} {text[:30]!r}{'...' if len(text) > 30 else ''} has {len(number):,}"
            " digits: too large to mean anything",
            "give a real count or size",
        )


def parse_count(text: str, *, what: str = "--ctx") -> int:
    """Parse a positive count such as ``200k`` (200,000), ``128K`` (131,072) or ``1.5m``.

    Fractions are allowed with decimal suffixes only, and only where the result is a whole
    number (``1.5k`` = 1500; ``1.5K`` is refused, as vLLM refuses it).
    Raises InputError naming ``what`` for zero, negative or unreadable values.
    """
    match = _TOKEN_RE.match(text)
    if not match:
        grouped = _grouped(text)
        if grouped:
            raise InputError(f"{what} {text!r} is not a count: no commas in a number", grouped)
        raise InputError(
            f"{what} {text!r} is not a count",
            "use a positive number, optionally with k/m/g/t (x1000) or K/M/G/T (x1024), e.g. 200k",
        )
    number, suffix = str(match.group(1)), str(match.group(2))
    _check_digits(number, text, what)
    multiplier: int = _TOKEN_SUFFIX[suffix]
    if "." in number and (suffix == "" or suffix.isupper()):
        raise InputError(
            f"{what} {text!r}: decimals are allowed only with k/m/g/t (powers of 1000)",
            f"write e.g. {number}{suffix.lower() or 'k'} or a whole number",
        )
    if "." in number:
        whole, frac = number.split(".")
        numerator = int(whole + frac) * multiplier
        denominator = 10 ** len(frac)
        if numerator % denominator:
            raise InputError(
                f"{what} {text!r} is not a whole number of tokens",
                "drop the fraction or use a larger unit",
            )
        value: int = numerator // denominator
    else:
        value = int(number) * multiplier
    if value <= 0:
        raise InputError(f"{what} must be at least 1, got {text!r}", "pass a positive count")
    return value


def parse_count_list(text: str, *, what: str = "--ctx") -> list[int]:
    """Parse ``8k,32k,128K`` into ``[8000, 32000, 131072]``; order kept, duplicates dropped."""
    parts = text.split(",")
    grouped = _grouped(text)
    if grouped:  # 200,000: the comma is read as a thousands separator, not as two contexts
        raise InputError(
            f"{what} {text!r}: commas separate values ({what} 8k,32k is two), not thousands",
            grouped,
        )
    if not text.strip() or any(not part.strip() for part in parts):
        raise InputError(f"{what} {text!r} has an empty item", "use e.g. --ctx 8k,32k,200k")
    values: list[int] = []
    for part in parts:
        value = parse_count(part, what=what)
        if value not in values:
            values.append(value)
    return values


def _grouped(text: str) -> str | None:
    """How to write ``200,000`` (a number with thousands separators) as kvtool reads it:
    ``write 200000 or 200k``; None for anything else."""
    if "," not in text:  # (the pattern is compiled only where it can match: start-up)
        return None
    if not re.fullmatch(r"\d{1,3}(?:,\d{3})+", text.strip()):
        return None
    number = int(text.replace(",", ""))
    scales = ((10**9, "g"), (10**6, "m"), (10**3, "k"))
    short = next((f"{number // n}{suffix}" for n, suffix in scales if number % n == 0), None)
    return f"write {number}" + (f" or {short}" if short else "")


_DECIMAL = ["B", "kB", "MB", "GB", "TB", "PB", "EB"]
_BINARY = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]


def _scaled(value: float, base: int, names: list[str]) -> str:
    index = 0
    while abs(value) >= base and index < len(names) - 1:
        value /= base
        index += 1
    if index == 0:
        return f"{int(value):,} B"
    digits = 2 if value < 10 else 1 if value < 100 else 0
    return f"{value:,.{digits}f} {names[index]}"


def format_bytes_decimal(num_bytes: float) -> str:
    """``70272`` -> ``'70.3 kB'`` (SI, powers of 1000)."""
    return _scaled(float(num_bytes), 1000, _DECIMAL)


def format_bytes_binary(num_bytes: float) -> str:
    """``70272`` -> ``'68.6 KiB'`` (IEC, powers of 1024)."""
    return _scaled(float(num_bytes), 1024, _BINARY)


def format_bytes(num_bytes: float) -> str:
    """Both conventions side by side: ``'14.1 TB (12.8 TiB)'``; plain bytes below 1000."""
    if abs(num_bytes) < 1000:
        return f"{int(num_bytes):,} B"
    return f"{format_bytes_decimal(num_bytes)} ({format_bytes_binary(num_bytes)})"


def format_count(tokens: int) -> str:
    """``200000`` -> ``'200,000'``."""
    return f"{tokens:,}"


_BYTE_UNITS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "pb": 1000**5,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
    "pib": 1024**5,
}
# sizes and durations: compiled on first use (re's cache), not at import (kvtool size needs none)
_NUMBER_UNIT = r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$"


def parse_bytes(text: str, *, what: str = "--fsx-capacity") -> int:
    """Parse a size such as ``96TiB``, ``100 TB`` or ``1200GiB`` into bytes; the unit is
    required, so ``96`` alone is refused rather than read as 96 bytes."""
    match = re.match(_NUMBER_UNIT, text)
    unit = match.group(2).lower() if match else ""
    if match and unit in ("k", "m", "g", "t", "p"):  # 20G: bytes in which convention?
        number, letter = match.group(1), unit.upper()
        raise InputError(
            f"{what} {text.strip()!r} has no byte unit: did you mean {number}{letter}iB or"
            f" {number}{letter}B?",
            f"{letter}iB is 1024-based, {letter}B 1000-based",
        )
    if not match or unit not in _BYTE_UNITS:
        raise InputError(
            f"{what} {text!r} is not a size",
            "use a number with a unit: B, kB, MB, GB, TB, PB or KiB, MiB, GiB, TiB, PiB",
        )
    _check_digits(match.group(1), text, what)
    value = float(match.group(1)) * _BYTE_UNITS[unit]
    if value < 1:
        raise InputError(f"{what} must be positive, got {text!r}")
    return int(value)


_FIO_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3}


def parse_transfer_size(text: str, *, what: str = "--transfer-size") -> int:
    """A transfer (block) size as fio and dd read it: ``4M`` or ``4m`` = 4 MiB, ``64k`` = 64
    KiB; ``4MiB`` as everywhere. ``4MB`` is refused: fio reads it as 4 MiB where kvtool's
    other sizes read 4,000,000 B, so it says which is meant."""
    match = re.match(_NUMBER_UNIT, text)
    unit = match.group(2).lower() if match else ""
    if match and unit in _FIO_UNITS:
        _check_digits(match.group(1), text, what)
        value = float(match.group(1)) * _FIO_UNITS[unit]
        if value < 1:
            raise InputError(f"{what} must be positive, got {text!r}")
        return int(value)
    if match and unit in ("kb", "mb", "gb"):
        raise InputError(
            f"{what} {text!r} is ambiguous: fio reads it as {match.group(1)}"
            f" {unit[0].upper()}iB, kvtool's other sizes as decimal",
            f"write {match.group(1)}{unit[0].upper()} or {match.group(1)}{unit[0].upper()}iB",
        )
    return parse_bytes(text, what=what)


def parse_fraction(text: str, *, what: str) -> float:
    """Parse a number in (0, 1], such as ``0.9`` or ``40%``; InputError names ``what``."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise InputError(f"{what} {text!r} is not a number", "use e.g. 0.4 or 40%") from None
    if not 0 < value <= 1:
        raise InputError(f"{what} must be in (0, 1], got {text!r}", "use e.g. 0.4 or 40%")
    return value


class TierSize(Record):
    """A tier size as typed: tokens, bytes, off (0) or unbounded (``inf``)."""

    unit: str  # "tokens", "bytes", "off" or "unbounded"
    value: int


def parse_tier_size(text: str, *, what: str) -> TierSize:
    """``3m`` (3,000,000), ``3M`` (3,145,728) or ``3000000`` tokens, ``80GiB`` or ``2TB``
    bytes, ``0`` (the tier off) or ``inf`` (unbounded); InputError names ``what``. Tokens
    follow the one rule of every token count (``parse_count``: k/m = x1000, K/M = x1024, as
    ``--ctx``); bytes take a unit with B."""
    raw = text.strip()
    if raw in ("0", "off"):
        return TierSize("off", 0)
    if raw.lower() in ("inf", "unbounded"):
        return TierSize("unbounded", 0)
    if raw[-1:].lower() == "b":
        return TierSize("bytes", parse_bytes(raw, what=what))
    try:
        return TierSize("tokens", parse_count(raw, what=what))
    except InputError:
        raise InputError(
            f"{what} {text!r} is not a size",
            "give tokens (3m, 3M, 3000000), bytes with a unit (80GiB, 2TB), 0 (off) or inf",
        ) from None


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 node``, ``2 nodes``, ``1 bad line``: the count with thousands separators and the
    noun in the number it takes (``nouns`` for an irregular plural)."""
    return f"{count:,} {noun if count == 1 else (nouns or noun + 's')}"


_DURATION_UNITS = {
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 7 * 86400.0,
}


def parse_duration(text: str, *, what: str) -> float:
    """A duration such as ``500ms``, ``90s``, ``30m``, ``12h``, ``7d`` or ``2w`` in seconds;
    the unit is required (``7`` alone could mean days or seconds), but for a bare 0, which is
    no time in any unit."""
    match = re.match(_NUMBER_UNIT, text)
    unit = match.group(2).lower() if match else ""
    if match and not unit and not match.group(1).strip("0."):
        return 0.0
    if not match or unit not in _DURATION_UNITS:
        raise InputError(
            f"{what} {text!r} is not a duration",
            "use a number with a unit: ms, s, m, h, d or w (e.g. 500ms, 30m, 7d)",
        )
    _check_digits(match.group(1), text, what)
    return float(match.group(1)) * _DURATION_UNITS[unit]
