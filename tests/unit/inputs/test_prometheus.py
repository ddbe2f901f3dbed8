"""``inputs/prometheus.py`` without a server: the PromQL it sends, the rows it makes of an API
answer (one per instance and job), and the credentials it takes from the environment only."""

from __future__ import annotations

import pytest

from kvtool.errors import InputError
from kvtool.inputs import prometheus
from kvtool.inputs.prometheus import _headers, _rows, query_for, scrape_prometheus


def test_the_query_keeps_kvtools_series_and_the_users_matchers() -> None:
    assert query_for(None) == '{__name__=~"(vllm:|sglang:|lmcache:|kvbm_).+"}'
    assert query_for('{namespace="prod", pod=~"vllm-.*"}') == (
        '{__name__=~"(vllm:|sglang:|lmcache:|kvbm_).+", namespace="prod", pod=~"vllm-.*"}'
    )
    for bad in ("namespace=prod", '{namespace="prod"} or vector(1)', "{a=}"):
        with pytest.raises(InputError, match="is not a PromQL label matcher list"):
            query_for(bad)


def test_an_answer_becomes_one_row_per_instance_and_job() -> None:
    result = [
        {"metric": {"__name__": "vllm:prefix_cache_queries_total", "instance": "a:8000",
                    "job": "vllm", "engine": "0"}, "value": [100.0, "42"]},
        {"metric": {"__name__": "vllm:prefix_cache_hits_total", "instance": "a:8000",
                    "job": "vllm", "engine": "0"}, "value": [100.0, "21"]},
        {"metric": {"__name__": "vllm:prefix_cache_queries_total", "instance": "b:8000",
                    "job": "vllm"}, "value": [100.0, "7"]},
        {"metric": {"instance": "c"}, "value": [100.0, "1"]},  # no name: not a series of ours
    ]  # fmt: skip
    rows = _rows(result)
    assert sorted(rows) == [("a:8000", "vllm"), ("b:8000", "vllm")]
    samples = rows[("a:8000", "vllm")][0]
    assert [(s.name, s.value) for s in samples] == [
        ("vllm:prefix_cache_queries_total", 42.0), ("vllm:prefix_cache_hits_total", 21.0),
    ]  # fmt: skip
    assert "__name__" not in samples[0].labels


def test_credentials_come_from_the_environment_never_the_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KVTOOL_PROMETHEUS_TOKEN", raising=False)
    monkeypatch.delenv("KVTOOL_PROMETHEUS_USER", raising=False)
    assert _headers() == {}
    monkeypatch.setenv("KVTOOL_PROMETHEUS_USER", "kv")
    monkeypatch.setenv("KVTOOL_PROMETHEUS_PASSWORD", "pw")
    assert _headers() == {"Authorization": "Basic a3Y6cHc="}
    monkeypatch.setenv("KVTOOL_PROMETHEUS_TOKEN", "t0k")
    assert _headers() == {"Authorization": "Bearer t0k"}
    with pytest.raises(InputError, match=r"http://\*\*\*@prom:9090 carries credentials"):
        scrape_prometheus("http://kv:pw@prom:9090", window_s=60)
    with pytest.raises(InputError, match="--window must be"):
        scrape_prometheus("http://prom:9090", window_s=0.5)
    assert prometheus.ROW_LABELS == ("instance", "job")
