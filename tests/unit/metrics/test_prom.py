"""The text format read as Prometheus writes it: prometheus_client's own writer round-trips."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kvtool.metrics.prom import parse

FIXTURES = Path(__file__).parents[2] / "fixtures" / "metrics"


def test_labels_escapes_special_values_and_comments() -> None:
    text = "\n".join([
        "# HELP x_total a counter",
        "# TYPE x_total counter",
        'x_total{a="1",b="say \\"hi\\"\\n",c="back\\\\slash"} 3.5e+06 1700000000000',
        "plain 7",
        'inf_gauge{le="+Inf"} +Inf',
        "nan_gauge NaN",
        "",
    ])  # fmt: skip
    x, plain, inf, nan = parse(text)
    assert x.name == "x_total"
    assert x.labels == {"a": "1", "b": 'say "hi"\n', "c": "back\\slash"}
    assert x.value == 3.5e6
    assert (plain.name, plain.labels, plain.value) == ("plain", {}, 7.0)
    assert inf.value == math.inf
    assert math.isnan(nan.value)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{x} 1", "line 1 is not a metric sample"),
        ("x{a=1} 1", "malformed label"),
        ("x", "no value"),
        ("x one", "not a number"),
    ],
)
def test_a_line_that_is_no_sample_is_named(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse(line)


def test_every_recorded_scrape_parses_whole() -> None:
    for path in FIXTURES.glob("*.prom"):
        samples = parse(path.read_text())
        lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
        assert len(samples) == len(lines), path.name


def test_what_prometheus_client_writes_reads_back() -> None:
    import prometheus_client

    registry = prometheus_client.CollectorRegistry()
    counter = prometheus_client.Counter("kv_hits", "hits", ["tier"], registry=registry)
    counter.labels(tier='host "2"').inc(12.5)
    gauge = prometheus_client.Gauge("kv_usage", "usage", registry=registry)
    gauge.set(0.25)
    samples = {s.name: s for s in parse(prometheus_client.generate_latest(registry).decode())}
    assert samples["kv_hits_total"].labels == {"tier": 'host "2"'}
    assert samples["kv_hits_total"].value == 12.5
    assert samples["kv_usage"].value == 0.25
