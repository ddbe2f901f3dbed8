"""Sources as typed and listed: URLs kept, host:port made a /metrics URL, files kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.inputs.metrics import scrape_all, source_list


def test_sources_from_arguments_and_a_list_file(tmp_path: Path) -> None:
    saved = tmp_path / "scrape.txt"
    saved.write_text("vllm:kv_cache_usage_perc 0.5\n")
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("# comment\n10.0.0.5:8000\n\nhttps://e.example/metrics  # tls\n")
    assert source_list([str(saved)], str(hosts)) == [
        str(saved), "http://10.0.0.5:8000/metrics", "https://e.example/metrics",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("sources", "message"),
    [([], "no source"), (["a:1", "a:1"], "given twice"), (["no/such:file"], "neither a file")],
)
def test_bad_sources_are_input_errors(sources: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        source_list(sources, None)


def test_a_saved_file_is_read_and_a_file_without_engine_metrics_is_refused(tmp_path: Path) -> None:
    saved = tmp_path / "scrape.txt"
    saved.write_text('vllm:kv_cache_usage_perc{engine="0"} 0.5\n')
    (first,) = scrape_all([str(saved)], timeout=1)
    assert first.error is None
    assert first.readings[0].usage == 0.5
    other = tmp_path / "node.txt"
    other.write_text("node_load1 0.3\n")
    with pytest.raises(InputError, match="holds no vLLM, SGLang, LMCache or KVBM metrics"):
        scrape_all([str(other)], timeout=1)
