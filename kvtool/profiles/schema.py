"""The shape of a model profile's ``profile.json``. Pure: validates dicts, reads no files.

A bundled model is a folder ``profiles/models/<name>/`` holding the model's own
``config.json`` (verbatim, as published) and a ``profile.json`` that names it and records
where the config was copied from::

    {
      "schema_version": 1,
      "name": "deepseek-r1",
      "hf_id": "deepseek-ai/DeepSeek-R1",
      "family": "DeepSeek",
      "aliases": ["r1"],
      "source": {
        "repository": "github.com/ai-dynamo/aiconfigurator",
        "path": "aic-core/.../deepseek-ai--DeepSeek-R1_config.json",
        "commit": "095f58a5...",
        "note": "verbatim copy"
      }
    }

Records here and in ``kvtool.model`` are ``kvtool.record.Record``s, not frozen dataclasses:
``kvtool size`` defines 25 of them at start-up, and a frozen dataclass costs about 1.7 ms to
define against 0.14 ms for a typing.NamedTuple and 0.03 ms for a Record (benchmarks/startup).
"""

from collections.abc import Mapping
from typing import Any

from kvtool.errors import InputError
from kvtool.record import Record

SCHEMA_VERSION = 1
_TOP_KEYS = {"schema_version", "name", "hf_id", "family", "aliases", "source"}
_SOURCE_KEYS = {"repository", "path", "commit", "note"}


class ModelSource(Record):
    """Where a bundled config.json was copied from."""

    repository: str
    path: str
    commit: str
    note: str


class ModelProfile(Record):
    """A bundled model: its names and its source. The config itself stays in config.json."""

    name: str
    hf_id: str
    family: str
    aliases: tuple[str, ...]
    source: ModelSource

    def names(self) -> tuple[str, ...]:
        """Every name this profile answers to, lower-cased."""
        return tuple(n.lower() for n in (self.name, self.hf_id, *self.aliases))


def _unknown(keys: Any, allowed: set[str], where: str, file: str) -> None:
    extra = sorted(set(keys) - allowed)
    if extra:
        raise InputError(
            f"{file}: unknown key {extra[0]!r}{where}",
            "allowed keys: " + ", ".join(sorted(allowed)),
        )


def _text(data: Mapping[str, Any], key: str, file: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(f"{file}: key {key!r} is missing or not a string")
    return value


def model_profile_from_dict(data: Mapping[str, Any], *, file: str) -> ModelProfile:
    """Validate a parsed profile.json; unknown or missing keys raise InputError naming them."""
    _unknown(data.keys(), _TOP_KEYS, "", file)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise InputError(
            f"{file}: schema_version must be {SCHEMA_VERSION}, got {data.get('schema_version')!r}"
        )
    source = data.get("source")
    if not isinstance(source, Mapping):
        raise InputError(f"{file}: missing [source] table")
    _unknown(source.keys(), _SOURCE_KEYS, " in [source]", file)
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise InputError(f"{file}: aliases must be a list of strings")
    return ModelProfile(
        name=_text(data, "name", file),
        hf_id=_text(data, "hf_id", file),
        family=_text(data, "family", file),
        aliases=tuple(aliases),
        source=ModelSource(
            repository=_text(source, "repository", file),
            path=_text(source, "path", file),
            commit=_text(source, "commit", file),
            note=str(source.get("note") or ""),
        ),
    )


def model_profile_to_dict(profile: ModelProfile) -> dict[str, Any]:
    """The inverse of ``model_profile_from_dict`` (used to round-trip every bundled profile)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "name": profile.name,
        "hf_id": profile.hf_id,
        "family": profile.family,
        "aliases": list(profile.aliases),
        "source": {
            "repository": profile.source.repository,
            "path": profile.source.path,
            "commit": profile.source.commit,
            "note": profile.source.note,
        },
    }
