"""A workload (``kvtool advise``): a YAML file with flags laid over it, resolved into the
workload, the model's shape and the cluster."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from kvtool.model.shape import KvShape
    from kvtool.plan.deployment import Hardware
    from kvtool.plan.reload import ReloadAssumptions
    from kvtool.plan.workload import Workload


class WorkloadInputs(NamedTuple):
    """What ``advise_workload`` takes."""

    workload: Workload
    shape: KvShape
    hardware: Hardware
    notes: tuple[str, ...] = ()  # old keys read, as kvtool check's plan file gets them
    assumptions: ReloadAssumptions | None = None  # --set mean_idle, release_after
    idle_from: str = "--idle"  # where the workload's mean_idle was given (or how to give it)


def read_workload(
    path: Path | None,
    flags: Mapping[str, tuple[str, object | None]],
    settings: list[str] | None = None,
) -> WorkloadInputs:
    """The workload in ``path`` (if any) with ``flags`` over it: ``{key: (flag, value)}``,
    a value of None meaning not given; an error names the flag or the file's key.
    ``settings``: ``--set KEY=VALUE`` items, the T4 release's alone (``RELEASE_KEYS``)."""
    from kvtool.files import read_yaml_mapping
    from kvtool.inputs.hardware import resolve_assumptions, resolve_hardware
    from kvtool.inputs.plan_settings import release_settings
    from kvtool.inputs.shape import resolve_shape
    from kvtool.plan.workload import renamed_keys, workload_from_mapping

    data, notes = renamed_keys(
        read_yaml_mapping(path) if path is not None else {}, source=str(path)
    )
    assumptions = resolve_assumptions(settings=release_settings(settings))
    given = {key: value for key, (_, value) in flags.items() if value is not None}
    idle_from = flags.get("mean_idle", ("--idle", None))[0]
    if "mean_idle" not in given and "mean_idle" in data:
        idle_from = f"{path}'s mean_idle"
    workload = workload_from_mapping(
        {**data, **given},
        source=str(path or "flags"),
        names={key: flags[key][0] for key in given},
    )
    return WorkloadInputs(
        workload=workload,
        shape=resolve_shape(
            workload.model, engine=workload.engine, kv_dtype=workload.kv_dtype, tp=workload.tp
        ),
        hardware=resolve_hardware(workload.hardware, nodes=workload.nodes),
        notes=notes,
        assumptions=assumptions,
        idle_from=idle_from,
    )
