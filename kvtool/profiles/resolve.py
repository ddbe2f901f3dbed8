"""Turn what the user typed after ``kvtool size`` into a ``ModelSpec``.

Order: a bundled profile (name, alias or HF id, any case); a path to a config.json or to a
folder holding one; any other Hugging Face repo id through ``transformers.AutoConfig``, which
honours ``HF_HOME``, ``HF_HUB_OFFLINE`` and ``HF_TOKEN``. Only that last route imports
transformers, so bundled names and files stay instant.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvtool.errors import InputError
from kvtool.model.config import spec_from_config
from kvtool.model.spec import ModelSpec
from kvtool.profiles.load import find_model_profile, model_profiles, read_config_json
from kvtool.profiles.schema import ModelProfile
from kvtool.record import Record

if TYPE_CHECKING:
    from kvtool.profiles.checkpoint import CheckpointBytes


class ResolvedModel(Record):
    """A model spec, the config it came from, and where (``bundled``, ``file`` or ``hub``)."""

    spec: ModelSpec
    origin: str
    location: str
    config: dict[str, Any]
    profile: ModelProfile | None = None


def resolve_model(ref: str) -> ResolvedModel:
    """Find ``ref`` and build its spec; unknown names raise InputError with the closest names."""
    ref = ref.strip()
    if not ref:
        raise InputError("no model given", "name a bundled model (kvtool models) or a config path")
    found = find_model_profile(ref)
    if found:
        profile, folder = found
        config = read_config_json(folder / "config.json")
        spec = spec_from_config(config, name=profile.name, source=f"bundled {profile.name}")
        return ResolvedModel(spec, "bundled", profile.hf_id, config, profile)
    path = Path(ref).expanduser()
    if path.exists():
        file = path / "config.json" if path.is_dir() else path
        if not file.is_file():
            raise InputError(f"{path} holds no config.json", "pass the config file itself")
        config = read_config_json(file)
        # A config.json is named by its folder (./config.json and . by the current folder's
        # name, as a Hub snapshot is); any other file by itself (deepseek-v4-flash.json)
        name = (
            (file.resolve().parent.name or file.stem) if file.name == "config.json" else file.stem
        )
        spec = spec_from_config(config, name=name, source=str(file))
        if file.name == "config.json":  # a checkpoint folder: its weights, exactly
            from kvtool.profiles.checkpoint import checkpoint_bytes

            exact = checkpoint_bytes(file.parent)
            if exact is not None:
                spec = _with_exact_weights(spec, exact)
        return ResolvedModel(spec, "file", str(file), config)
    if ref.endswith(".json") or ref.startswith(("/", "./", "../", "~")):
        raise InputError(f"{ref}: no such file", "pass the path of a config.json, or its folder")
    if _looks_like_repo_id(ref):
        config, online = load_hub_config(ref)
        spec = spec_from_config(config, name=ref, source=ref)
        return ResolvedModel(_with_hub_weights(spec, ref, online), "hub", ref, config)
    raise InputError(f"unknown model {ref!r}", _closest_hint(ref))


def _looks_like_repo_id(ref: str) -> bool:
    parts = ref.split("/")
    return len(parts) == 2 and all(parts) and not ref.startswith((".", "~"))


def _closest_hint(ref: str) -> str:
    import difflib

    names: dict[str, str] = {}
    for profile, _ in model_profiles():
        for name in (profile.name, profile.hf_id, *profile.aliases):
            names.setdefault(name.lower(), profile.name)
    close = difflib.get_close_matches(ref.lower(), names, n=6, cutoff=0.5)
    suggestions = list(dict.fromkeys(names[c] for c in close))[:3]
    if suggestions:
        return "did you mean " + ", ".join(suggestions) + "? (kvtool models lists all)"
    return "kvtool models lists the bundled names; or pass a config.json path or an HF repo id"


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether the Hugging Face endpoint answers a TCP connect within ``timeout_s``.

    False at once when ``HF_HUB_OFFLINE`` is set. Without this, huggingface_hub retries an
    unreachable hub for about 25 s before transformers gives up.
    """
    import os
    import socket
    import threading
    from urllib.parse import urlsplit

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    result: list[bool] = []

    def connect() -> None:  # in a thread: a stuck DNS lookup ignores socket timeouts
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            result.append(True)
        except OSError:
            result.append(False)

    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    worker.join(timeout_s)
    return bool(result and result[0])


def _with_hub_weights(spec: ModelSpec, repo_id: str, online: bool) -> ModelSpec:
    """``spec`` with the repository's exact weight bytes where the Hub gives them (its
    safetensors index or header), and a note saying which source the weights came from."""
    import os

    from kvtool.profiles.checkpoint import hub_checkpoint_bytes

    if not online:
        why = "the Hub cannot be reached"
        exact = None
    else:
        endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
        token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
        exact, why = hub_checkpoint_bytes(repo_id, endpoint=endpoint, token=token)
    if exact is None:
        note = f"weights from the parameter arithmetic: {why}"
        return spec._replace(notes=(*spec.notes, note))
    return _with_exact_weights(spec, exact)


def _with_exact_weights(spec: ModelSpec, exact: "CheckpointBytes") -> ModelSpec:
    return spec._replace(
        checkpoint_bytes=exact.nbytes, checkpoint_source=exact.source,
        notes=(*spec.notes, f"weights: {exact.nbytes:,} B, read from {exact.source}"
               " (not the parameter arithmetic)"),
    )  # fmt: skip


def load_hub_config(repo_id: str) -> tuple[dict[str, Any], bool]:
    """``AutoConfig.from_pretrained(repo_id).to_dict()``, and whether the Hub answered; needs
    the ``hf`` extra.

    When the hub cannot be reached (or ``HF_HUB_OFFLINE`` is set) only the local cache is
    read, so a missing network costs a few seconds, not half a minute of retries.
    transformers' and huggingface_hub's own log lines are kept off the terminal: kvtool
    reports the outcome in one line of its own.
    """
    import logging
    import os

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    not_installed = InputError(
        f"{repo_id!r} is not a bundled model and transformers is not installed",
        "pip install 'kvtool[hf]', or download its config.json and pass the path",
    )
    not_cached = InputError(
        f"{repo_id!r} is not in the local Hugging Face cache and the hub cannot be"
        " reached (offline, or HF_HUB_OFFLINE is set)",
        "connect to the network, set HF_ENDPOINT to a mirror, or pass a config.json path",
    )
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        raise not_installed from None
    online = hub_reachable()
    try:
        cached = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:  # huggingface_hub's HFValidationError: no name the Hub can hold
        raise InputError(
            f"{repo_id[:100]!r} is no Hugging Face repo id, nor a bundled model",
            "a repo id is owner/name, each at most 96 letters, digits, '-', '_' or '.'",
        ) from None
    if not online and not isinstance(cached, str):
        raise not_cached  # answered from the cache index, without importing transformers
    try:
        from transformers import AutoConfig
    except ImportError:
        raise not_installed from None
    try:
        config = AutoConfig.from_pretrained(repo_id, local_files_only=not online)
    except (OSError, ValueError, KeyError) as exc:
        if not online:
            raise not_cached from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(
            f"could not load the config of {repo_id!r} through transformers: {first}",
            "check the repo id, HF_TOKEN for gated models, or HF_HUB_OFFLINE; or pass a path",
        ) from None
    data: dict[str, Any] = config.to_dict()
    return data, online
