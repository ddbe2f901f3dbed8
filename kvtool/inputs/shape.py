"""Model + engine + KV dtype + tp (+ block size), as typed, into one ``KvShape``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvtool.errors import InputError
from kvtool.model.engines import check_block_size, get_engine
from kvtool.model.formats import resolve_format
from kvtool.units import parse_count

if TYPE_CHECKING:
    from kvtool.model.engines import EngineRules
    from kvtool.model.shape import KvShape
    from kvtool.model.spec import ModelSpec
    from kvtool.profiles.resolve import ResolvedModel

MAX_CONTEXT_TOKENS = 2**31 - 1  # an engine's positions are 32-bit: no model runs past it


def resolve_shape(
    model: str | ResolvedModel,
    *,
    engine: str = "vllm",
    kv_dtype: str = "auto",
    tp: str | int | None = None,
    block_size: str | int | None = None,
    state_dtype: str = "auto",
) -> KvShape:
    """The shape of ``model``'s KV: a bundled name, a config path or a Hub id (or a model
    already resolved), under ``engine``'s rules, in ``kv_dtype`` (``auto``: the model's own),
    at ``tp`` (None: 1, marked not given so a planner may choose), its recurrent states in
    ``state_dtype`` (``auto``: as the engine keeps them)."""
    from kvtool.model.shape import KvShape  # (here: a replay without a model needs none)
    from kvtool.profiles.resolve import resolve_model

    resolved = resolve_model(model) if isinstance(model, str) else model
    spec = resolved.spec
    rules = engine_rules(engine)
    block = _block_tokens(block_size)
    if block is not None:
        if not (rules.cpu_backend and spec.is_mla):  # (vLLM's CPU MLA takes 16, model/cpu.py)
            check_block_size(rules, block)
        if block > MAX_CONTEXT_TOKENS:  # a block past any context holds no session's KV
            raise InputError(
                f"--block-tokens {block:,} tokens is past any engine's context (at most"
                f" {MAX_CONTEXT_TOKENS:,} tokens: positions are 32-bit integers)",
                "give the tokens per block, e.g. 16 or 32",
            )
    if state_dtype.strip().lower() != "auto":
        spec = _with_state_dtype(spec, state_dtype, rules)
    if rules.fp32_runs_as and resolve_format(kv_dtype, spec.dtype).name == "fp32":
        rules, spec = _float32(rules, spec, kv_dtype)
    return KvShape(
        spec=spec,
        rules=rules,
        fmt=resolve_format(kv_dtype, spec.kv_dtype_auto or spec.dtype),
        tp=_count(tp, "--tp") or 1,
        block_size=block,
        tp_given=tp is not None,
    )


def engine_rules(engine: str) -> EngineRules:
    """``--engine``'s rules; for ``hf``, those of the transformers release installed here
    (``hf==X.Y`` names one whatever is installed; none installed: the newest checked)."""
    rules = get_engine(engine)
    if rules.installed_release:
        from kvtool.model.engines import for_installed
        from kvtool.probe.host import installed_version

        rules = for_installed(rules, installed_version(rules.installed_release))
    return rules


def _float32(rules: EngineRules, spec: ModelSpec, kv_dtype: str) -> tuple[EngineRules, ModelSpec]:
    """vLLM keeps KV in the model's dtype and has no float32 --kv-cache-dtype, and --dtype auto
    runs a float32 checkpoint in bf16 (``_resolve_auto_dtype``, config/model.py:2440-2442 in
    0.33.0, :2422-2424 in 0.32.0): KV in fp32 is ``vllm serve --dtype float32``. ``--kv-dtype
    fp32`` asks for it (the model then runs, weights included, in float32); ``auto`` on a
    float32 checkpoint is vLLM's bf16."""
    if kv_dtype.strip().lower() == "auto":
        return rules, spec
    note = (
        f"--kv-dtype fp32: {rules.source} keeps KV in the model's dtype, so the model runs in"
        " float32 (vllm serve --dtype float32), its weights too"
    )
    return rules._replace(fp32_runs_as=None), spec._replace(dtype="fp32", notes=(*spec.notes, note))


def _with_state_dtype(spec: ModelSpec, text: str, rules: EngineRules) -> ModelSpec:
    """``spec`` with every recurrent state in the dtype ``--state-dtype`` names, as the engine's
    own setting does: vLLM 0.33.0's ``--mamba-ssm-cache-dtype`` (Mamba, GDN, KDA;
    ``mamba_utils.py:98-146``), SGLang 0.5.23's ``--mamba-ssm-dtype`` (every family:
    ``configs/mamba_utils.py:96``). InputError where the engine has no such setting or refuses
    the dtype."""
    from kvtool.model.fields import normalize_dtype
    from kvtool.model.spec import StateLayers

    dtype = normalize_dtype(text.strip().lower())
    if dtype is None:
        raise InputError(f"--state-dtype {text!r} is not one of auto, fp32, bf16, fp16",
                         "e.g. --state-dtype bf16")  # fmt: skip
    if rules.state_dtype_setting is None:
        raise InputError(
            f"--state-dtype: {rules.source} has no setting for it (its recurrent states are"
            " what docs/sizing.md section 4 says)",
            "drop --state-dtype, or use --engine vllm or sglang",
        )
    states = [g for g in spec.groups if isinstance(g, StateLayers)]
    if not states:
        raise InputError(f"--state-dtype: {spec.name} has no recurrent-state layers",
                         "drop --state-dtype")  # fmt: skip
    for kind, refused, why in rules.state_dtype_refused:
        if any(g.kind == kind for g in states) and refused in ("", dtype):
            hint = "use bf16 or fp32" if refused else "use --kv-dtype instead"
            raise InputError(f"--state-dtype {dtype}: {why}", hint)
    groups = tuple(
        g._replace(state_dtype=dtype, state_dtype_key="") if isinstance(g, StateLayers) else g
        for g in spec.groups
    )
    setting = f": {rules.state_dtype_setting}" if rules.state_dtype_setting else ""
    note = f"recurrent states in {dtype} (--state-dtype{setting})"
    return spec._replace(groups=groups, notes=(*spec.notes, note))


def split_models(text: str) -> list[str]:
    """MODEL as typed: one model, or several separated by commas (``kvtool size a,b,c``
    compares them); a path that exists is one model whatever it holds. InputError for an
    empty name or one given twice."""
    from pathlib import Path

    if "," not in text:
        return [text]
    try:  # (a list past the system's longest name is no file: never looked up as one)
        if Path(text).exists():
            return [text]
    except (OSError, ValueError):
        pass
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise InputError(
            f"MODEL {text!r} has an empty name between commas",
            "give names separated by single commas, e.g. llama-3.1-405b,deepseek-r1",
        )
    twice = next((name for index, name in enumerate(names) if name in names[:index]), None)
    if twice is not None:
        raise InputError(f"MODEL names {twice!r} twice", "give each model once")
    return names


def _count(value: str | int | None, what: str) -> int | None:
    if value is None or isinstance(value, int):
        return value
    return parse_count(value, what=what)


def _block_tokens(value: str | int | None) -> int | None:
    """``--block-tokens``: tokens per KV block, a plain number (``4M`` is not a block size)."""
    if value is None or isinstance(value, int):
        return value
    text = value.strip().replace(",", "").replace("_", "")
    if not text.isdigit():
        raise InputError(
            f"--block-tokens {value!r} is not a number of tokens",
            "give the tokens per block as a plain number, e.g. 16 or 32",
        )
    return parse_count(text, what="--block-tokens")


def parse_chunk_tokens(text: str | int) -> int:
    """``--chunk-tokens``: tokens per chunk file (LMCache's chunk_size)."""
    return text if isinstance(text, int) else parse_count(text, what="--chunk-tokens")


def unused_shape_options(
    *,
    engine: str = "vllm",
    kv_dtype: str = "auto",
    tp: str | int | None = None,
    chunk_tokens: str | int | None = None,
    without: str = "without --model",
    why: str = "",
) -> list[str]:
    """The KV-shape options given where no model reads them: each value still checked (a
    ``--tp abc`` is a typo, whatever it would have done), and one note for each given,
    saying it has no effect ``without`` (e.g. "with --phase read"; ``why``: what is used
    instead)."""
    from kvtool.model.formats import FORMATS

    get_engine(engine)
    resolve_format(kv_dtype, next(iter(FORMATS)))
    _count(tp, "--tp")
    if chunk_tokens is not None:
        parse_chunk_tokens(chunk_tokens)
    given = (
        ("--tp", tp is not None),
        ("--kv-dtype", kv_dtype.strip().lower() != "auto"),
        ("--engine", engine.strip().lower() != "vllm"),
        ("--chunk-tokens", chunk_tokens is not None and str(chunk_tokens).strip() != "256"),
    )
    tail = f" ({why})" if why else ""
    return [f"{name} has no effect {without}{tail}" for name, on in given if on]
