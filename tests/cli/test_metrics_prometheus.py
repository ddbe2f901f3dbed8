"""``kvtool metrics --prometheus``: a real Prometheus server (Debian's ``prometheus`` package)
started by the test scrapes two engines' recorded expositions served on 127.0.0.1; kvtool
reads them back through the HTTP API and must give what the two scrapes themselves give."""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kvtool.metrics.engines import rates, read
from kvtool.metrics.prom import parse
from tests.conftest import CliResult

Run = Callable[..., CliResult]
FIXTURES = Path(__file__).parents[1] / "fixtures" / "metrics"
STEMS = ("vllm-0.33.0-llama-3.1-8b", "lmcache-0.5.6", "sglang-0.5.23")

needs_prometheus = pytest.mark.skipif(
    shutil.which("prometheus") is None,
    reason="no prometheus binary: .ci/setup installs Debian's prometheus package",
)


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Engines:
    """The engines' /metrics: the -t0 pages until ``advance()``, the -t60 pages after."""

    def __init__(self) -> None:
        self.later = False
        self.servers: list[http.server.ThreadingHTTPServer] = []
        self.urls: list[str] = []
        for stem in STEMS:
            pages = [(FIXTURES / f"{stem}-t{t}.prom").read_bytes() for t in (0, 60)]

            class Handler(http.server.BaseHTTPRequestHandler):
                def do_GET(self, pages: list[bytes] = pages, engines: Engines = self) -> None:
                    body = pages[1 if engines.later else 0]
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

                def log_message(self, *args: object) -> None:
                    pass

            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers.append(server)
            self.urls.append(f"127.0.0.1:{server.server_address[1]}")

    def close(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[Engines, str]]:
    engines = Engines()
    port = _port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: engines\n"
        f"    static_configs: [{{targets: [{', '.join(repr(u) for u in engines.urls)}]}}]\n"
    )
    server = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield engines, f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        engines.close()


def _value(base: str, query: str) -> float | None:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            result = json.loads(response.read())["data"]["result"]
    except (OSError, ValueError, KeyError):
        return None
    return float(result[0]["value"][1]) if result else None


def _wait_for(base: str, query: str, value: float, seconds: float = 30) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if _value(base, query) == value:
            return
        time.sleep(0.2)
    raise AssertionError(f"Prometheus never saw {query} = {value}")


@needs_prometheus
def test_prometheus_gives_what_the_engines_own_scrapes_give(kvtool: Run, fleet) -> None:  # type: ignore[no-untyped-def]
    engines, base = fleet
    queries = 'sum(vllm:prefix_cache_queries_total{job="engines"})'
    _wait_for(base, queries, 4_812_000.0)  # the -t0 pages, scraped
    _wait_for(base, 'sum(lmcache:num_lookup_tokens_total{job="engines"})', 2_662_400.0)
    _wait_for(base, 'sum(sglang:prompt_tokens_total{job="engines"})', 4_812_000.0)
    seen = time.time()  # a -t0 sample is in by now
    time.sleep(1.2)
    engines.later = True  # from here on the -t60 page
    _wait_for(base, queries, 5_390_000.0)  # the -t60 pages, scraped (each target in its turn)
    _wait_for(base, 'sum(lmcache:num_lookup_tokens_total{job="engines"})', 5_324_800.0)
    _wait_for(base, 'sum(sglang:prompt_tokens_total{job="engines"})', 5_390_000.0)
    window = time.time() - (seen + 0.6)  # its start: after a -t0 sample, before the switch
    result = kvtool("metrics", "--prometheus", base, "--window", f"{window:.1f}s", "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    sources = {s["source"]: s for s in json.loads(result.stdout)["sources"]}
    assert set(sources) == {f"{u} (job engines)" for u in engines.urls}  # one row an engine
    for url, stem in zip(engines.urls, STEMS, strict=True):
        (got,) = sources[f"{url} (job engines)"]["readings"]
        before, after = (read(parse((FIXTURES / f"{stem}-t{t}.prom").read_text()))[0]
                         for t in (0, 60))  # fmt: skip
        want = rates(before, after, 60.0)
        assert got["engine"] == want.engine
        assert got["queried_tokens"] == pytest.approx(want.queried_tokens)
        assert got["capacity_tokens"] == want.capacity_tokens
        assert got["hit_ratio"] == pytest.approx(want.hit_ratio)
    only = f'{{instance="{engines.urls[0]}"}}'
    narrowed = kvtool("metrics", "--prometheus", base, "--selector", only, "--window", "5m",
                      "--json")  # fmt: skip
    assert [s["source"] for s in json.loads(narrowed.stdout)["sources"]] == [
        f"{engines.urls[0]} (job engines)"
    ]


def test_a_prometheus_that_does_not_answer_is_a_problem_not_a_traceback(kvtool: Run) -> None:
    result = kvtool("metrics", "--prometheus", f"http://127.0.0.1:{_port()}", "--timeout", "1")
    assert result.exit_code == 1
    assert "no answer from Prometheus" in result.stdout
    bad = kvtool("metrics", "--prometheus", "http://127.0.0.1:9", "--selector", "namespace=prod")
    assert bad.exit_code == 2
    assert "is not a PromQL label matcher list" in bad.stderr


def test_an_amp_workspace_is_signed_with_sigv4_that_botocore_verifies(
    kvtool: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server on 127.0.0.1 that answers only requests whose SigV4 signature (service aps)
    botocore computes again from the same credentials; kvtool signs because it is told the
    region (an ``aps-workspaces.<region>.amazonaws.com`` URL would say it)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", credentials.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", credentials.secret_key)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("KVTOOL_PROMETHEUS_SIGV4_REGION", "us-west-2")
    seen: list[bool] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = f"http://{self.headers['Host']}{self.path}"
            auth = self.headers.get("Authorization", "")
            signed = auth.split("SignedHeaders=")[-1].split(",")[0].split(";")  # as AWS reads it
            received = {k: v for k, v in self.headers.items() if k.lower() in signed}
            request = AWSRequest(method="GET", url=url, headers=received)
            request.context["timestamp"] = self.headers.get("X-Amz-Date", "")
            signer = SigV4Auth(credentials, "aps", "us-west-2")
            signer._modify_request_before_signing(request)
            canonical = signer.canonical_request(request)
            expected = signer.signature(signer.string_to_sign(request, canonical), request)
            valid = auth.endswith(f"Signature={expected}") and "us-west-2/aps/aws4_request" in auth
            seen.append(valid)
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})
            self.send_response(200 if valid else 403)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/workspaces/ws-1"
        result = kvtool("metrics", "--prometheus", base, "--json")
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [True, True]  # both instant queries, each signed as botocore signs
    assert "Prometheus holds no vLLM, SGLang, LMCache or KVBM series" in result.stdout
