"""The options several commands share, defined once: one name means one thing everywhere, with
help generated from the registries it chooses from.

* ``--model``, ``--engine``, ``--kv-dtype``, ``--tp``, ``--chunk-tokens``: the KV shape
  (``kvtool.inputs.shape``). ``--tp`` defaults to 1, or, where a command plans for
  ``--hardware``, to the chips of one instance.
* ``--hardware``, ``--t3-storage``, ``--t4-storage``, ``--t3-path``: the cluster's profiles.
* ``--t3-dir`` is always a folder on T3 and ``--t4-url`` where T4 objects go; ``--t1`` ..
  ``--t4`` (replay, sweep) are always a tier's size.
* ``--policy``, ``--posture``: the tiering engine's rules.

Old spellings (``--t3``/``--t4`` for a storage profile or a folder, ``--block-size`` for
bench's transfer size, ``--path``, ``--s3-url``) still work for one release, hidden from help,
with a note (``renamed``).
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, TypeVar

import typer

from kvtool.errors import InputError
from kvtool.model.engines import ENGINES
from kvtool.model.formats import KV_DTYPE_CHOICES

PANEL_SHAPE = "Model's KV (chunk and block sizes)"
PANEL_CLUSTER = "Cluster"

T = TypeVar("T")

MODEL_HELP = "Bundled model name (kvtool models), a config.json path, or a Hugging Face repo id."


def model_option(help_text: str = MODEL_HELP) -> Any:
    """``--model``/``-m``: the same option everywhere, with what it does in this command."""
    return typer.Option(
        "--model", "-m", metavar="MODEL", help=help_text, rich_help_panel=PANEL_SHAPE
    )


ModelOpt = Annotated[str | None, model_option()]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        "-e",
        metavar="ENGINE",
        help="Whose memory layout to count: " + ", ".join(ENGINES) + " (hf: the transformers"
        " release installed here; hf==5.24 names one; vllm==0.32 names a vLLM release;"
        " vllm-cpu: vLLM's CPU build).",
        rich_help_panel=PANEL_SHAPE,
    ),
]
StateDtypeOpt = Annotated[
    str,
    typer.Option(
        "--state-dtype",
        metavar="DTYPE",
        help="Recurrent-state format of Mamba, GDN and KDA layers: auto, fp32, bf16, fp16"
        " (vLLM's --mamba-ssm-cache-dtype, SGLang's --mamba-ssm-dtype). auto = the engine's.",
        rich_help_panel=PANEL_SHAPE,
    ),
]
KvDtypeOpt = Annotated[
    str,
    typer.Option(
        "--kv-dtype",
        metavar="DTYPE",
        help="KV element format: " + ", ".join(KV_DTYPE_CHOICES) + ". auto = model dtype.",
        rich_help_panel=PANEL_SHAPE,
    ),
]
TpOpt = Annotated[
    str | None,
    typer.Option(
        "--tp",
        metavar="N",
        help="Tensor-parallel size. Default 1; where the command plans for --hardware, the"
        " chips of one instance.",
        rich_help_panel=PANEL_SHAPE,
    ),
]
PpOpt = Annotated[
    str | None,
    typer.Option(
        "--pp",
        metavar="N",
        help="Pipeline-parallel stages (vLLM --pipeline-parallel-size): an engine spans tp x pp"
        " chips. Default 1.",
        rich_help_panel=PANEL_SHAPE,
    ),
]
FOLDER_MODEL_HELP = (
    "The model now served (alias, served name, Hub id): other models' files are orphans."
)
ChunkTokensOpt = Annotated[
    str,
    typer.Option(
        "--chunk-tokens",
        metavar="N",
        help="Tokens per chunk file (LMCache's chunk_size, 256).",
        rich_help_panel=PANEL_SHAPE,
    ),
]
HardwareOpt = Annotated[
    str | None,
    typer.Option(
        "--hardware",
        metavar="NODE",
        help="Node type (kvtool hardware lists them) or a .toml profile.",
        rich_help_panel=PANEL_CLUSTER,
    ),
]
T3StorageOpt = Annotated[
    str | None,
    typer.Option(
        "--t3-storage",
        metavar="STORAGE",
        help="T3 storage profile: fsx-lustre-persistent2 (default), -persistent1, -scratch2, or"
        " a .toml.",
        rich_help_panel=PANEL_CLUSTER,
    ),
]
T4StorageOpt = Annotated[
    str | None,
    typer.Option(
        "--t4-storage",
        metavar="STORAGE",
        help="T4 storage profile: s3-standard (default), s3-express-one-zone.",
        rich_help_panel=PANEL_CLUSTER,
    ),
]
T3PathOpt = Annotated[
    str | None,
    typer.Option(
        "--t3-path",
        metavar="PATH",
        help="Client path to FSx: ena, efa (default), efa-gds.",
        rich_help_panel=PANEL_CLUSTER,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
# what the plan assumes the engine may take of HBM (size's plan, metrics' side of it)
GpuMemoryUtilizationOpt = Annotated[
    str | None,
    typer.Option(
        "--gpu-memory-utilization",
        metavar="FRACTION",
        help="Share of HBM the engine may use (default 0.92, vLLM 0.33.0's).",
        rich_help_panel="Tier plan",
    ),
]


def engine_rule_options() -> tuple[Any, Any]:
    """``--policy`` and ``--posture`` (imported only by the engine's commands, so that
    ``kvtool size`` does not load the engine)."""
    from kvtool.engine.policy import POLICIES, POSTURES

    policy = typer.Option(
        "--policy", metavar="NAME", help="Eviction policy: " + ", ".join(POLICIES) + "."
    )
    posture = typer.Option(
        "--posture",
        metavar="|".join(POSTURES),
        help="When chunks are written to T3: eager (when prefill ends) or lazy (under"
        " pressure or when idle).",
    )
    return policy, posture


def renamed(old: str, new: str) -> Any:
    """The hidden option that keeps an old spelling working for one release."""
    return typer.Option(old, hidden=True, help=f"Old name of {new}.")


def merge(new_value: T | None, old_value: T | None, *, old: str, new: str) -> T | None:
    """The value given under ``new`` or its old spelling ``old`` (with a note); both is a
    mistake."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise InputError(f"{old} and {new} are one option", f"give {new} only")
    note_renamed(old, new)
    return old_value


RENAMED: list[str] = []  # notices of old spellings, printed when the command is done


def note_renamed(old: str, new: str) -> None:
    """The one-line notice an old spelling gets for the release it still works: printed once
    the command has run (``app.reports_errors``), so a mistake in the inputs stays one line."""
    RENAMED.append(f"kvtool: note: {old} is now {new}; the old name goes in the next release")


def print_renamed() -> None:
    """The notices ``note_renamed`` kept, each once, on stderr."""
    for line in dict.fromkeys(RENAMED):
        print(line, file=sys.stderr)
    RENAMED.clear()


# the one rule of every token count kvtool reads (units.parse_count), said in each one's help
TOKENS_RULE = "k/m = x1000, K/M = x1024, as vLLM's --max-model-len"
CtxOpt = Annotated[
    str,
    typer.Option(
        "--ctx",
        metavar="TOKENS[,TOKENS...]",
        help=f"Context length(s) per session, comma-separated; {TOKENS_RULE}: 200k = 200,000,"
        " 128K = 131,072.",
    ),
]
SessionsOpt = Annotated[
    str,
    typer.Option("--sessions", "-n", metavar="N", help="Concurrent sessions (e.g. 100, 1k)."),
]
BlockTokensOpt = Annotated[
    str | None,
    typer.Option(
        "--block-tokens",
        metavar="TOKENS",
        help="Tokens per engine KV block (page), a plain number; vLLM takes multiples of 16.",
        rich_help_panel=PANEL_SHAPE,
    ),
]

# kvtool plan's options (kvtool size forwards them, hidden, for one release): flag -> (metavar,
# help); what kvtool plan --set KEY=VALUE takes is in inputs/plan_settings.py
PLAN_OPTIONS: dict[str, tuple[str, str]] = {
    "--hardware": ("NODE", "Node type (kvtool hardware lists them) or a .toml profile."),
    "--nodes": ("N", "Nodes serving the sessions (default 1)."),
    "--fsx-capacity": ("SIZE", "FSx for Lustre capacity, e.g. 96TiB (default: sized by the"
                       " plan, for what spills to T3 and for reads that beat recompute from"
                       " 50K tokens)."),
    "--fsx-throughput": ("MBPS", "FSx per-unit throughput in MB/s per TiB: 125, 250, 500 or"
                         " 1000."),
    "--t3-storage": ("STORAGE", "T3 profile: fsx-lustre-persistent2, -persistent1, -scratch2,"
                     " or a .toml."),
    "--t4-storage": ("STORAGE", "T4 profile: s3-standard, s3-express-one-zone."),
    "--t3-path": ("PATH", "Client path to FSx: ena, efa (default), efa-gds."),
    "--weights-dtype": ("DTYPE", "auto (the checkpoint's), bf16, fp16, fp8, int8, int4, mxfp4,"
                        " nvfp4."),
    "--mfu": ("FRACTION", "Prefill model-FLOPs utilisation for recompute times (default 0.4)."),
    "--concurrent-loads": ("N", "Sessions restoring at once on a node (default 16)."),
    "--gpu-memory-utilization": ("FRACTION", "Share of HBM the engine may use (default 0.92,"
                                 " vLLM 0.33.0's)."),
    "--emit": ("ENGINE", "Print a configuration for the plan instead: lmcache, vllm, sglang,"
               " dynamo, trtllm."),
    "--t3-dir": ("PATH", "KV directory on the FSx mount (--emit; default /fsx/kvcache)."),
    "--bench": ("FILE", "Plan with the bandwidths in a kvtool bench (or capacity) --json FILE"
                " instead of the spec."),
    "--max-num-batched-tokens": ("N", "vLLM's tokens per batch, for its admission charge"
                                 " (default: vllm serve's for the GPU, else 8192)."),
    "--kv-cache-memory-bytes": ("BYTES", "vLLM's fixed KV budget a rank (e.g. 100000000,"
                                " 20GiB): the pool in vLLM's terms, blocks, tokens and max"
                                " concurrency at --ctx."),
    "--pp": ("N", "Pipeline-parallel stages per engine (vLLM --pipeline-parallel-size): the"
             " engine spans tp x pp chips and keeps one copy of the weights (default 1)."),
    "--prices": ("FILE|aws", "Prices for --cost: a TOML file, or aws (the Price List API, with"
                 " credentials); default the bundled example, labelled as one."),
    "--region": ("REGION", "Whose prices --prices aws asks for (default us-east-1)."),
    "--calibrate": ("SCRAPE", "Plan with a running engine's own KV pool, block, KV dtype"
                    " and host tier: a saved /metrics scrape or its URL (vLLM, SGLang)."),
    "--posture": ("eager|lazy", "When KV is written to the shared tier (--emit): eager, when"
                  " prefill ends; lazy (the default), under pressure or when idle."),
}  # fmt: skip
PLAN_FLAGS: dict[str, str] = {
    "--dp-attention": "Data-parallel attention (MLA models): each rank holds whole latents for"
    " its own sessions, one copy, and the attention weights whole.",
    "--cost": "Add what the plan costs a month per tier and per served session-hour, beside"
    " holding every session in HBM.",
}


def plan_option(flag: str, *, hidden: bool = False, panel: str | None = "Plan") -> Any:
    """One of kvtool plan's options, the same in plan and (hidden) in size."""
    metavar, text = PLAN_OPTIONS[flag]
    return typer.Option(flag, metavar=metavar, help=text, hidden=hidden, rich_help_panel=panel)


def plan_flag(flag: str, *, hidden: bool = False) -> Any:
    return typer.Option(flag, help=PLAN_FLAGS[flag], hidden=hidden, rich_help_panel="Plan")


def settings_option(help_text: str, *, panel: str | None = None) -> Any:
    """``--set KEY=VALUE``, as many times as needed (plan: its less used settings; advise:
    the T4 release's)."""
    return typer.Option("--set", metavar="KEY=VALUE", help=help_text, rich_help_panel=panel)


# --cost and where its prices come from (plan, advise)
CostOpt = Annotated[
    bool,
    typer.Option(
        "--cost",
        help="Add what the plan costs a month per tier and per served session-hour, beside"
        " holding every session in HBM.",
        rich_help_panel="Tier plan",
    ),
]
PricesOpt = Annotated[
    str | None,
    typer.Option(
        "--prices",
        metavar="FILE|aws",
        help="Prices for --cost: a TOML file, or aws (the Price List API, with credentials);"
        " default the bundled example, labelled as one.",
        rich_help_panel="Tier plan",
    ),
]
RegionOpt = Annotated[
    str | None,
    typer.Option(
        "--region",
        metavar="REGION",
        help="Whose prices --prices aws asks for (default us-east-1).",
        rich_help_panel="Tier plan",
    ),
]
