"""The front door's workload (kvtool advise): a YAML file with flags laid over it, into the
workload, the model's shape and the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.inputs.workload import read_workload


def test_flags_override_the_file(tmp_path: Path) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text("model: deepseek-r1\nhardware: p5en\nnodes: 4\nsessions: 400\n")
    inputs = read_workload(path, {"nodes": ("--nodes", "2"), "kv_dtype": ("--kv-dtype", None)})
    assert inputs.workload.nodes == 2
    assert inputs.hardware.nodes == 2
    assert inputs.shape.spec.name == "deepseek-r1"
    assert inputs.shape.fmt.name == "bf16"


def test_flags_alone_and_an_error_names_the_flag() -> None:
    flags = {
        "model": ("--model", "llama-3.1-8b"),
        "hardware": ("--hardware", "p5en"),
        "shared_prefix": ("--shared-prefix", "1.5"),
    }
    with pytest.raises(InputError, match="--shared-prefix"):
        read_workload(None, flags)
    flags["shared_prefix"] = ("--shared-prefix", "40%")
    flags["tp"] = ("--tp", "4")
    inputs = read_workload(None, flags)
    assert inputs.workload.shared_prefix == pytest.approx(0.4)
    assert (inputs.shape.tp, inputs.shape.tp_given) == (4, True)
