"""``kvtool models`` and ``kvtool hardware``: the bundled profiles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvtool.cli.render.text import Table, echo, seconds
from kvtool.model.spec import group_kind
from kvtool.units import format_bytes_decimal

if TYPE_CHECKING:
    from kvtool.model.spec import ModelSpec
    from kvtool.profiles.hardware import NodeProfile, StorageProfile
    from kvtool.profiles.schema import ModelProfile


def _source_line(profile: ModelProfile) -> str:
    source = profile.source
    return f"{source.repository}/{source.path}@{source.commit[:12]}"


def models_json(rows: list[tuple[ModelProfile, ModelSpec, int]]) -> list[dict[str, Any]]:
    """``kvtool models --json``: one object per bundled model."""
    return [
        {
            "name": profile.name,
            "hf_id": profile.hf_id,
            "family": profile.family,
            "aliases": list(profile.aliases),
            "model_type": spec.model_type,
            "layers": spec.num_layers,
            "attention": "+".join(dict.fromkeys(group_kind(g) for g in spec.groups)),
            "dtype": spec.dtype,
            "kv_bytes_per_token": per_token,
            "source": _source_line(profile),
        }
        for profile, spec, per_token in rows
    ]


def print_models(rows: list[tuple[ModelProfile, ModelSpec, int]]) -> None:
    """``kvtool models``: a table of bundled models with bytes per token."""
    table = Table("name", "hf id", "KV bytes/token", "layer groups", left=(0, 1, 3))
    for item in models_json(rows):
        table.add_row(
            item["name"],
            item["hf_id"],
            f"{item['kv_bytes_per_token']:,}",
            item["attention"],
        )
    echo(table.render())
    echo()
    echo(
        f"{len(rows)} bundled models; KV bytes per token by the textbook formula in the model"
        " dtype.\nAny other model: pass a config.json path or a Hugging Face repo id."
    )


def hardware_json(
    nodes: tuple[NodeProfile, ...], storage: tuple[StorageProfile, ...]
) -> dict[str, Any]:
    """``kvtool hardware --json``: every profile's fields, sources included, under ``results``
    as every list kvtool answers with, each with its ``kind`` (``node`` or ``storage``)."""
    from dataclasses import asdict

    return {
        "results": [{"kind": "node", **asdict(n)} for n in nodes]
        + [{"kind": "storage", **asdict(s)} for s in storage],
    }


def print_hardware(nodes: tuple[NodeProfile, ...], storage: tuple[StorageProfile, ...]) -> None:
    """``kvtool hardware``: one row per node profile, then the storage profiles."""
    table = Table("node", "chips", "HBM", "BF16 PF", "host DRAM", "EFA", "GDS", left=(0, 1))
    for n in nodes:
        table.add_row(
            n.name,
            f"{n.chips} x {n.accelerator}",
            f"{n.chips * n.hbm_gib_per_chip:,.0f} GiB ({format_bytes_decimal(n.hbm_bytes)})",
            f"{n.chips * n.bf16_tflops_per_chip / 1000:,.1f}",
            f"{n.host_memory_gib:,.0f} GiB" if n.host_memory_gib else "n/p",
            f"{n.efa_gbps:,.0f} Gbps",
            "yes" if n.gds else "no",
        )
    echo(table.render())
    if nodes:
        big = max(nodes, key=lambda n: n.chips * n.hbm_gib_per_chip)
        gib = big.chips * big.hbm_gib_per_chip
        echo(
            f"HBM in GiB, bytes in brackets. AWS's pages write a GiB count over 1,000 as TB:"
            f' {big.name}\'s {gib:,.0f} GiB is their "{gib / 1000:,.1f} TB",'
            f" {format_bytes_decimal(big.hbm_bytes)} in bytes."
        )
    echo()
    table = Table("storage", "tier", "medium", "latency", left=(0, 1, 2))
    for s in storage:
        table.add_row(s.name, s.tier.upper(), s.medium, seconds(s.latency_us * 1e-6))
    echo(table.render())
    echo()
    echo("n/p = not published (no T2 is planned). Sources: profiles/hardware/*.toml [sources].")
