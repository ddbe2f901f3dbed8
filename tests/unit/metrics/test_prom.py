"""The text format read as Prometheus writes it: prometheus_client's own writer round-trips."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.metrics import prom
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


# The attack corpus (issue 53): each case is named by what it attacks, and each is bounded in
# time. The parser before it backtracked on an unterminated label value (4 MiB cost 725 MB)
# and sliced the rest of a line once a label (quadratic).


def test_an_unterminated_label_value_costs_no_memory_past_the_text() -> None:
    """It cost 739 MB at 4 MiB (a backtracking pattern's stack); now nothing past the text."""
    import tracemalloc

    for size in (60_000, 4 * 2**20):
        for value in ("a" * size, "\\a" * (size // 2)):
            text = 'ok 1\nx{a="' + value + "\nnext 1\n"
            tracemalloc.start()
            start = time.monotonic()
            try:
                with pytest.raises(
                    ValueError, match=r"line 2 (has a malformed label|is longer than 64 KiB)"
                ):
                    parse(text)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak < 2**20, (size, peak)
            assert time.monotonic() - start < 2, size


def test_a_line_of_many_labels_is_linear_and_past_128_refused() -> None:
    line = "x{" + ",".join(f'l{i}="{"v" * 400}"' for i in range(128)) + "} 1"
    start = time.monotonic()
    ((name, labels, _),) = parse(line)
    assert (name, len(labels)) == ("x", 128)
    assert time.monotonic() - start < 1
    with pytest.raises(ValueError, match="line 1 has more than 128 labels"):
        parse(line.replace("} 1", ',l128="v"} 1'))


def test_a_sample_line_past_64_kib_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="line 3 is longer than 64 KiB, the most kvtool reads"):
        parse("# c\na 1\n" + 'b{a="' + "v" * 70_000 + '"} 1\n')


def test_a_label_given_twice_on_one_sample_is_refused() -> None:
    with pytest.raises(ValueError, match="line 1 has the label a twice"):
        parse('x{a="1",a="2"} 1')


def test_more_lines_than_kvtool_reads_are_refused_at_once() -> None:
    start = time.monotonic()
    with pytest.raises(ValueError, match="1,000,001 lines, more than the 1,000,000 kvtool reads"):
        parse("a 1\n" * 1_000_001)
    assert time.monotonic() - start < 1


def test_past_the_samples_and_labels_kept_is_refused_naming_the_line(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(prom, "MAX_SAMPLES", 3)
    with pytest.raises(ValueError, match="line 5 is past the 3 samples kvtool reads"):
        parse("# c\na 1\nb 1\nb 1\nc 1\n")  # (a repeated series counts: each is read)
    monkeypatch.setattr(prom, "MAX_SAMPLES", 10)
    monkeypatch.setattr(prom, "MAX_LABEL_PAIRS", 3)
    with pytest.raises(ValueError, match="line 2 is past the 3 labels kvtool reads"):
        parse('a{x="1",y="2"} 1\nb{x="1",y="2"} 1\n')


def test_the_same_series_twice_is_kept_once_its_first_value() -> None:
    text = 'x{a="1",b="2"} 5\nx{b="2", a="1"} 6\nx{a="1"} 7\ny 1\ny 2\n'
    scrape = prom.exposition(text)
    x, y = prom.Sample("x", {"a": "1", "b": "2"}, 5.0), prom.Sample("y", {}, 1.0)
    assert scrape.samples == [x, prom.Sample("x", {"a": "1"}, 7.0), y]
    assert scrape.repeated == {"x": 1, "y": 1}


def test_only_the_names_kept_are_taken_apart_every_line_checked() -> None:
    text = 'vllm:a{e="0"} 1\nother{e="0"} 2\nkvbm_b 3\n'
    scrape = prom.exposition(text, keep=("vllm:", "kvbm_"))
    assert [s.name for s in scrape.samples] == ["vllm:a", "kvbm_b"]
    with pytest.raises(ValueError, match="line 2 has a malformed label"):
        prom.exposition(text.replace('other{e="0"}', "other{e=0}"), keep=("vllm:",))


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.text(st.characters(blacklist_categories=("Cs",))), min_size=1, max_size=5),
    number=st.floats(allow_nan=False),
)
def test_any_label_value_prometheus_client_writes_reads_back(
    values: list[str], number: float
) -> None:
    import prometheus_client

    registry = prometheus_client.CollectorRegistry()
    gauge = prometheus_client.Gauge("g", "a gauge", ["v"], registry=registry)
    for value in values:
        gauge.labels(v=value).set(number)
    read = {
        s.labels["v"]: s.value for s in parse(prometheus_client.generate_latest(registry).decode())
    }
    assert read == dict.fromkeys(values, number)
