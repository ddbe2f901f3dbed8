"""Which files ``kvtool gc`` may consider (``--layout``, ``--model``, ``--include-unknown``), and
the model a vLLM or llm-d FS-offload file belongs to.

Those two engines write the model into one place only: the ``config.json`` of the folder
``<model>_<sha256[:12]>`` beside the ranks' folders (vLLM 0.33.0 ``v1/kv_offload/
file_mapper.py`` ``FileMapper._compute_base_path``: the model name with "/" written as "_",
then the hash of the config's fields). The chunk files' own names carry no model. So under
``--model`` gc reads that config.json, once per folder, through the folder's open handle (a link
is not followed, a mount not entered, 1 MiB at most), and takes its ``model_name`` only when the
folder's own name carries it; a folder whose model cannot be told (no config.json, unreadable,
not JSON, no ``model_name``, or one the folder's name does not carry) is out of scope.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from kvtool.folders.layouts import TEMP, Match, model_matches
from kvtool.folders.walk import Handles, Root

_SUFFIX = re.compile(r"_[0-9a-f]{12}")


class Scope(NamedTuple):
    """Which files gc may consider."""

    layout: str | None = None  # one engine's file layout (layouts.ENGINES)
    models: tuple[str, ...] | None = None  # every name the model asked for goes by
    include_unknown: bool = False


class FolderModels:
    """The model of each vLLM-layout folder below ``root``, read from its config.json once
    (``model``: None where it cannot be told)."""

    def __init__(self, root: Root) -> None:
        self.root = root
        self._known: dict[str, str | None] = {}

    def model(self, base: str) -> str | None:
        if base not in self._known:
            self._known[base] = self._read(base)
        return self._known[base]

    def _read(self, base: str) -> str | None:
        from kvtool.folders.inspect import read_vllm_config

        parts = tuple(base.split("/"))
        with Handles(self.root, keep=len(parts)) as handles:
            fd = handles.get(parts)  # part by part, O_NOFOLLOW, on the root's mount
            config = None if fd is None else read_vllm_config(fd)
        return None if config is None else folder_model(parts[-1], config)


def folder_model(folder: str, config: dict[str, object]) -> str | None:
    """The ``model_name`` of a FileMapper's ``config.json`` in the folder named ``folder``,
    when that name is the model's (``/`` written as ``_``) and the 12 hex digits of its hash;
    None otherwise (the config is not that folder's, or names no model)."""
    name = config.get("model_name")
    if not isinstance(name, str) or not name or not _SUFFIX.fullmatch(folder[-13:]):
        return None
    return name if folder[:-13] == name.replace("/", "_") else None


def file_model(match: Match, models: FolderModels | None) -> str | None:
    """The model ``match``'s file belongs to: as its name says, or for the vLLM layout as its
    folder's config.json says; "" where the layout names none (kvtool's own T3), None where it
    cannot be told."""
    if not match.base:
        return match.model
    if models is None:
        return None
    return models.model(match.base)


def in_scope(scope: Scope, match: Match, model: str | None) -> bool:
    """Whether gc may consider ``match``'s file: of the layout asked for, and of the model
    asked for (a file whose model cannot be told, or whose layout names none, is not, under
    ``--model``). Temporaries are judged by layout alone: they never go, and they pin the
    chunk they name whatever model it is."""
    if scope.layout is not None and match.engine != scope.layout:
        return False
    if not scope.models or match.kind == TEMP:
        return True
    return bool(model) and model_matches(model or "", scope.models)
