"""Read bundled profiles and model config files from disk.

Bundled profiles ship inside the wheel as ``kvtool/_profiles`` (hatch force-include of the
top-level ``profiles/`` folder); in a source checkout they are read from ``profiles/``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kvtool.errors import InputError
from kvtool.files import read_json_object, read_toml
from kvtool.profiles.schema import ModelProfile, model_profile_from_dict

if TYPE_CHECKING:  # the hardware schema is imported only by the commands that plan
    from kvtool.profiles.hardware import NodeProfile, StorageProfile


def builtin_root() -> Path:
    """The folder that holds the bundled ``models/`` (and later ``hardware/``) profiles."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "_profiles"  # a wheel install: importlib.resources would cost 10 ms
    if packaged.is_dir():
        return packaged
    return package.parent / "profiles"


@cache
def model_profiles(root: Path | None = None) -> tuple[tuple[ModelProfile, Path], ...]:
    """Every bundled model profile with its folder, sorted by name."""
    base = (root or builtin_root()) / "models"
    found = []
    for folder in sorted(base.iterdir()) if base.is_dir() else []:
        profile_file = folder / "profile.json"
        if profile_file.is_file():
            found.append((read_model_profile(profile_file), folder))
    return tuple(found)


def read_model_profile(path: Path) -> ModelProfile:
    """Parse and validate one profile.json (JSON, not TOML: the json module is loaded for the
    config anyway, and tomllib would add 5 ms to ``kvtool size``)."""
    return model_profile_from_dict(read_json_object(path, what="model profile"), file=str(path))


def find_model_profile(name: str, root: Path | None = None) -> tuple[ModelProfile, Path] | None:
    """The bundled profile answering to ``name`` (name, HF id or alias; any case), if any."""
    wanted = name.strip().lower()
    base = (root or builtin_root()) / "models"
    direct = base / wanted
    if "/" not in wanted and (direct / "profile.json").is_file():
        # Fast path: the canonical name is the folder name, so one file is read, not all.
        return read_model_profile(direct / "profile.json"), direct
    for profile, folder in model_profiles(root):
        if wanted in profile.names():
            return profile, folder
    return None


def read_config_json(path: Path) -> dict[str, Any]:
    """Load a config.json; malformed JSON raises InputError with file, line and column."""
    return read_json_object(path, what="model config")


@cache
def node_profiles(root: Path | None = None) -> tuple[NodeProfile, ...]:
    """Every bundled accelerator-node profile (profiles/hardware/*.toml), sorted by name."""
    from kvtool.profiles.hardware import node_profile_from_dict

    folder = (root or builtin_root()) / "hardware"
    return tuple(
        node_profile_from_dict(read_toml(path), file=str(path))
        for path in sorted(folder.glob("*.toml"))
    )


@cache
def storage_profiles(root: Path | None = None) -> tuple[StorageProfile, ...]:
    """Every bundled storage profile (profiles/storage/*.toml), sorted by name."""
    from kvtool.profiles.hardware import storage_profile_from_dict

    folder = (root or builtin_root()) / "storage"
    return tuple(
        storage_profile_from_dict(read_toml(path), file=str(path))
        for path in sorted(folder.glob("*.toml"))
    )


P = TypeVar("P", "NodeProfile", "StorageProfile")


def _load(
    ref: str,
    parse: Callable[..., P],
    bundled: tuple[P, ...],
    what: str,
) -> P:
    """A bundled profile by name or alias (any case), or a user's TOML file; unknown names
    raise InputError with the closest bundled names."""
    if ref.endswith(".toml"):
        path = Path(ref).expanduser()
        return parse(read_toml(path), file=str(path))
    wanted = ref.strip().lower()
    for profile in bundled:
        if wanted in profile.names():
            return profile
    import difflib

    names = [name for profile in bundled for name in profile.names()]
    # an accelerator's name (h100, b200, trainium2) names the profiles that carry it
    carriers = [
        profile.names()[0]
        for profile in bundled
        if wanted and wanted in str(getattr(profile, "accelerator", "")).lower().split()
    ]
    close = carriers[:4] or difflib.get_close_matches(wanted, names, n=3, cutoff=0.4)
    hint = ("did you mean " + ", ".join(close) + "? ") if close else ""
    raise InputError(
        f"unknown {what} {ref!r}", f"{hint}kvtool hardware lists them; or pass a .toml"
    )


def load_node_profile(ref: str) -> NodeProfile:
    """A bundled node by name or alias (any case), or a user's TOML file."""
    from kvtool.profiles.hardware import node_profile_from_dict

    return _load(ref, node_profile_from_dict, node_profiles(), "hardware")


def load_storage_profile(ref: str) -> StorageProfile:
    """A bundled storage profile by name or alias (any case), or a user's TOML file."""
    from kvtool.profiles.hardware import storage_profile_from_dict

    return _load(ref, storage_profile_from_dict, storage_profiles(), "storage")
