"""A local checkpoint's exact weight bytes from its safetensors headers, written here by the
``safetensors`` library itself."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from kvtool.model.params import count_params, model_weights, replica_bytes
from kvtool.profiles.checkpoint import checkpoint_bytes
from kvtool.profiles.resolve import resolve_model

np = pytest.importorskip("numpy")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
CONFIG = Path(__file__).parents[3] / "profiles" / "models" / "llama-3.1-8b" / "config.json"


def _checkpoint(folder: Path) -> int:
    """Two shards as a real checkpoint has them; returns the bytes of every tensor."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONFIG, folder / "config.json")
    first = {"embed": np.ones((1000, 256), dtype=np.float16), "norm": np.ones(10, np.float32)}
    second = {"head": np.ones((512, 512), dtype=np.float16)}
    safetensors_numpy.save_file(first, str(folder / "model-00001-of-00002.safetensors"))
    safetensors_numpy.save_file(second, str(folder / "model-00002-of-00002.safetensors"))
    return sum(a.nbytes for shard in (first, second) for a in shard.values())


def test_the_headers_give_every_tensors_bytes_and_the_index_its_total(tmp_path: Path) -> None:
    expected = _checkpoint(tmp_path / "m")
    found = checkpoint_bytes(tmp_path / "m")
    assert found is not None
    assert (found.nbytes, found.source) == (expected, "the headers of 2 safetensors files")
    (tmp_path / "m" / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 123_456}, "weight_map": {}})
    )
    indexed = checkpoint_bytes(tmp_path / "m")
    assert indexed == (123_456, "model.safetensors.index.json metadata.total_size")
    assert checkpoint_bytes(tmp_path) is None  # no checkpoint here


@pytest.mark.parametrize(
    "content",
    [b"", b"\x05\x00\x00\x00\x00\x00\x00\x00{}", struct.pack("<Q", 2**40) + b"{}",
     struct.pack("<Q", 7) + b"notjson", struct.pack("<Q", 30) + b'{"t": {"data_offsets": [9, 1]}}'],
    ids=["empty", "short", "huge length", "not json", "offsets backwards"],
)  # fmt: skip
def test_a_file_that_is_not_a_safetensors_header_is_passed_over(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / "model.safetensors").write_bytes(content)
    assert checkpoint_bytes(tmp_path) is None


def test_a_checkpoint_folders_weights_are_its_bytes_in_size_and_plan(tmp_path: Path) -> None:
    expected = _checkpoint(tmp_path / "ckpt")
    resolved = resolve_model(str(tmp_path / "ckpt"))
    spec = resolved.spec
    assert spec.checkpoint_bytes == expected
    assert any(note.startswith(f"weights: {expected:,} B, read from the headers") for note in
               spec.notes)  # fmt: skip
    assert model_weights(spec).nbytes == expected
    arithmetic = model_weights(spec, "bf16").nbytes  # a dtype asked for: the arithmetic
    assert arithmetic > 10**10
    assert replica_bytes(spec, count_params(spec), "fp8") == arithmetic // 2
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(CONFIG, bare / "config.json")
    assert resolve_model(str(bare)).spec.checkpoint_bytes is None
