import os

import pytest

from kvtool.errors import InputError
from kvtool.folders.inspect import inspect_folder, read_vllm_config


@pytest.mark.usefixtures("ctime_as_mtime")
def test_a_mixed_folder_is_read_once_per_engine(tmp_path, made):
    made(tmp_path / "sglang", "sglang-0.5.23.json", age_s=3 * 86400)
    made(tmp_path / "vllm", "vllm-0.33.0.json")
    (tmp_path / "notes.txt").write_text("hello")
    found = inspect_folder(
        tmp_path, mode="relatime", model="meta-llama/Llama-3.1-8B-Instruct", world=2
    )
    s = found.summary
    assert s.engines() == ["sglang", "vllm"]
    assert (s.chunk_files, s.temp_files, s.config_files, s.unknown_files) == (73, 2, 2, 1)
    readers = [g for g in s.groups.values() if not g.orphan]
    assert {(g.engine, g.model) for g in readers} == {
        ("sglang", "meta-llama-Llama-3.1-8B-Instruct"),
        ("vllm", "meta-llama/Llama-3.1-8B-Instruct"),
    }
    sglang_bytes = sum(g.bytes for g in s.groups.values() if g.engine == "sglang")
    assert sum(g.ages[2] for g in s.groups.values() if g.engine == "sglang") == sglang_bytes
    assert found.asked
    assert found.walk.per_folder[0] == (64, "sglang")


def test_a_folder_with_no_known_layout_says_what_it_saw(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    (tmp_path / "b.bin").write_bytes(b"")
    with pytest.raises(InputError, match=r"no file of a layout kvtool knows \(2 other files: "):
        inspect_folder(tmp_path, mode="relatime")
    empty = tmp_path / "empty"
    empty.mkdir()  # an empty folder is an answer (a tier before its first write), not an error
    found = inspect_folder(empty, mode="relatime")
    assert found.summary.chunk_files == found.summary.unknown_files == 0


def test_a_broken_vllm_config_is_not_read_nor_a_link_followed(tmp_path):
    folder = tmp_path / "m_0123456789ab"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        (folder / "config.json").write_text("{not json")
        assert read_vllm_config(fd) is None
        (folder / "config.json").write_text("[1, 2]")
        assert read_vllm_config(fd) is None
        (folder / "config.json").write_text('{"model_name": "m"}')
        assert read_vllm_config(fd) == {"model_name": "m"}
        (tmp_path / "elsewhere.json").write_text('{"model_name": "m"}')
        (folder / "config.json").unlink()
        (folder / "config.json").symlink_to(tmp_path / "elsewhere.json")
        assert read_vllm_config(fd) is None
    finally:
        os.close(fd)
