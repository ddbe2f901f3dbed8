"""Usage mistakes said with their fix (``kvtool: error: ... (see kvtool X --help)``).

One rule names kvtool's inputs: a command's argument is what it answers about (``size`` and
``plan``: the model; ``advise`` and ``check``: the workload or plan file; ``inspect``, ``gc``
and ``doctor``: the folder; ``engine replay`` and ``sweep``: the trace; ``metrics``: the
sources); everywhere else the model is ``--model`` (``-m``), and ``-n`` is always
``--sessions``. click's own suggestion is a list of options near in spelling (``size --model
X`` got "Possible options: --help, --nodes"); these say what was meant.
"""

from __future__ import annotations

import difflib
import re
import shlex
from typing import Any


def usage_message(exc: Any, argv: list[str]) -> str:
    """What to say for click's usage error ``exc`` raised on ``argv`` (the words after
    ``kvtool``): a model given as an option where it is the argument, or as an argument
    where it is ``--model``, gets the command as it should be typed; an unknown option gets
    the one option it is closest to, if any."""
    ctx = getattr(exc, "ctx", None)
    command = ctx.command if ctx is not None else None
    path = ctx.command_path.removeprefix("kvtool ") if ctx is not None else ""
    params = list(getattr(command, "params", ()))
    takes_model = any(p.name == "model" and p.param_type_name == "argument" for p in params)
    model_option = any("--model" in getattr(p, "opts", ()) for p in params)
    option = getattr(exc, "option_name", None)
    if option is not None:
        if option in ("--model", "-m") and takes_model:
            value = _value_of(option, argv)
            rest = _without(option, argv, path)
            fixed = shlex.join(["kvtool", *path.split(), *([value] if value else []), *rest])
            return f"no option {option}: the model is {path}'s argument: {fixed}"
        shown = [o for p in params if not getattr(p, "hidden", False)
                 for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]  # fmt: skip
        near = difflib.get_close_matches(option, shown, n=1, cutoff=0.75)
        return f"no option {option}" + (f": did you mean {near[0]}?" if near else "")
    message = str(exc.format_message())
    extra = re.fullmatch(r"Got unexpected extra argument(?:\(s\)|s)? \((.*)\)", message)
    if extra and model_option:
        models = [word for word in extra.group(1).split() if _is_bundled_model(word)]
        if models:
            rest = [word for word in argv[len(path.split()) :] if word != models[0]]
            fixed = shlex.join(["kvtool", *path.split(), "--model", models[0], *rest])
            return f"{models[0]} is a model: {path} takes it as --model: {fixed}"
    return message


def _value_of(option: str, argv: list[str]) -> str | None:
    """The value given to ``option`` in ``argv`` (``--model X`` or ``--model=X``)."""
    for index, word in enumerate(argv):
        if word == option and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith(option + "="):
            return word.split("=", 1)[1]
    return None


def _without(option: str, argv: list[str], path: str) -> list[str]:
    """``argv`` after the command's own words, less ``option`` and its value."""
    words = argv[len(path.split()) :]
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == option:
            skip = True
        elif not word.startswith(option + "="):
            out.append(word)
    return out


def _is_bundled_model(word: str) -> bool:
    """Whether ``word`` names a bundled model (``kvtool models``)."""
    from kvtool.profiles.load import find_model_profile

    if word.startswith("-") or "\x00" in word:
        return False
    try:
        return find_model_profile(word) is not None
    except (OSError, ValueError):  # a word no file name can be (too long, a stray byte)
        return False
