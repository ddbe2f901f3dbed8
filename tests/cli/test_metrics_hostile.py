"""``kvtool metrics`` against endpoints that misbehave, each a real HTTP server on 127.0.0.1:
a redirect to another origin, credentials in the URL, a body that drips in past the deadline,
a page that is not an exposition, NaN, infinite and negative samples. None leaks, hangs or
raises."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliResult
from tests.unit.test_http import LONG_HEADER, MANY_HEADERS

Run = Callable[..., CliResult]
FIXTURES = Path(__file__).parents[1] / "fixtures" / "metrics"
GOOD = (FIXTURES / "vllm-0.33.0-llama-3.1-8b-t0.prom").read_bytes()
SECRET = b"SECRET-PAGE-OF-ANOTHER-HOST"


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[http.server.BaseHTTPRequestHandler], None]], str]]:
    """``serve(handler)`` starts a server whose GET runs ``handler(request)``; returns its
    base URL. Servers stop themselves."""
    servers = []

    def start(handle: Callable[[http.server.BaseHTTPRequestHandler], None]) -> str:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                handle(self)

            def log_message(self, *args: object) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _page(body: bytes, status: int = 200) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    def handle(r: http.server.BaseHTTPRequestHandler) -> None:
        r.send_response(status)
        r.send_header("Content-Length", str(len(body)))
        r.end_headers()
        r.wfile.write(body)

    return handle


def _redirect(to: str) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    def handle(r: http.server.BaseHTTPRequestHandler) -> None:
        if r.path == "/metrics":
            r.send_response(302)
            r.send_header("Location", to)
            r.send_header("Content-Length", "0")
            r.end_headers()
            return
        _page(GOOD)(r)

    return handle


def test_a_redirect_to_another_origin_is_not_followed_and_its_body_never_shown(
    kvtool: Run, serve
) -> None:  # type: ignore[no-untyped-def]
    other = serve(_page(SECRET))
    away = serve(_redirect(f"{other}/page"))
    for target in (f"{other}/page", "ftp://127.0.0.1/x"):
        away = serve(_redirect(target))
        result = kvtool("metrics", f"{away}/metrics", "--json")
        assert result.exit_code == 1, result.stderr
        (source,) = json.loads(result.stdout)["sources"]
        assert "redirected (302) to another origin" in source["error"]
        assert "not followed" in source["error"]
        assert SECRET.decode() not in result.stdout + result.stderr
    home = serve(_redirect("/real"))  # the same origin: followed
    result = kvtool("metrics", f"{home}/metrics", "--json")
    assert result.exit_code == 0, result.stdout
    assert json.loads(result.stdout)["sources"][0]["readings"][0]["engine"] == "vllm"


def test_a_page_that_is_not_an_exposition_is_named_never_quoted(kvtool: Run, serve) -> None:  # type: ignore[no-untyped-def]
    url = serve(_page(SECRET + b" <html>token=abc</html>\n"))
    result = kvtool("metrics", f"{url}/metrics")
    assert result.exit_code == 1
    assert "not a Prometheus exposition (line 1 has a value that is not a number)" in result.stdout
    assert "SECRET" not in result.stdout + result.stderr
    assert "token=abc" not in result.stdout + result.stderr


def test_credentials_in_a_url_are_refused_and_redacted(kvtool: Run) -> None:
    for args in (("metrics", "http://admin:hunter2@127.0.0.1:9/metrics"),
                 ("metrics", "http://admin:hunter2@127.0.0.1:9/metrics", "--json")):  # fmt: skip
        result = kvtool(*args)
        assert result.exit_code == 2
        assert "http://***@127.0.0.1:9/metrics carries credentials in the URL" in result.stderr
        assert "hunter2" not in result.stdout + result.stderr
        assert "Traceback" not in result.stderr


def test_a_body_that_drips_in_is_cut_off_at_the_deadline(kvtool: Run, serve) -> None:  # type: ignore[no-untyped-def]
    def drip(r: http.server.BaseHTTPRequestHandler) -> None:
        r.send_response(200)
        r.send_header("Content-Length", str(10**6))
        r.end_headers()
        try:
            for _ in range(200):  # a byte every 0.2 s: each read is quick, the whole is not
                r.wfile.write(b"#")
                r.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass  # the client hung up at its deadline

    url = serve(drip)
    start = time.monotonic()
    result = kvtool("metrics", f"{url}/metrics", f"{url}/metrics?b", "--timeout", "1", "--json")
    took = time.monotonic() - start
    assert result.exit_code == 1
    assert took < 4, took  # two sources at once, each within its 1 s deadline
    for source in json.loads(result.stdout)["sources"]:
        assert source["error"] == "no answer (no whole answer within 1 s)"


def test_nan_infinite_and_negative_samples_are_flagged_not_used(kvtool: Run, serve) -> None:  # type: ignore[no-untyped-def]
    text = GOOD.decode()
    lines = []
    for line in text.splitlines():
        if line.startswith("vllm:kv_cache_usage_perc"):
            line = line.rsplit(" ", 1)[0] + " -0.64"
        elif line.startswith("vllm:prefix_cache_queries_total"):
            line = line.rsplit(" ", 1)[0] + " NaN"
        elif line.startswith("vllm:prefix_cache_hits_total"):
            line = line.rsplit(" ", 1)[0] + " +Inf"
        lines.append(line)
    url = serve(_page(("\n".join(lines) + "\n").encode()))
    for json_flag in ((), ("--json",)):
        result = kvtool("metrics", f"{url}/metrics", *json_flag)
        assert "Traceback" not in result.stderr, result.stderr
        assert result.exit_code in (0, 1), result.stderr
        assert "-64.0%" not in result.stdout
        assert "invalid sample(s) ignored (NaN, an infinity or a negative count)" in result.stdout


# The attack corpus of issue 53, each case named by what it attacks and bounded in time.


def _drip_headers(
    every_s: float, count: int
) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    def handle(r: http.server.BaseHTTPRequestHandler) -> None:
        try:
            r.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            for _ in range(count):  # one header byte at a time: each read is quick
                r.wfile.write(b"X")
                r.wfile.flush()
                time.sleep(every_s)
        except OSError:
            pass  # the client hung up at its deadline

    return handle


def test_headers_that_drip_a_byte_every_2_s_are_cut_at_the_timeout(kvtool: Run, serve) -> None:  # type: ignore[no-untyped-def]
    """A header byte every 2 s held --timeout 5 for 194 s (about 36 h possible)."""
    url = serve(_drip_headers(2.0, 15))
    start = time.monotonic()
    result = kvtool("metrics", f"{url}/metrics", "--timeout", "3", "--json")
    took = time.monotonic() - start
    assert took <= 3 + 1, took
    assert result.exit_code == 1
    (source,) = json.loads(result.stdout)["sources"]
    assert source["error"] == "no answer (no whole answer within 3 s)"


def _raw(answer: bytes) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    def handle(r: http.server.BaseHTTPRequestHandler) -> None:
        r.wfile.write(answer)

    return handle


@pytest.mark.parametrize(
    ("answer", "error"),
    [LONG_HEADER, MANY_HEADERS],
    ids=["a header line over 64 KiB", "more than 100 headers"],
)
def test_http_header_limits_are_one_line_never_a_traceback(
    kvtool: Run, serve, answer: bytes, error: str
) -> None:  # type: ignore[no-untyped-def]
    url = serve(_raw(answer))
    for json_flag in ((), ("--json",)):
        result = kvtool("metrics", f"{url}/metrics", *json_flag)
        assert result.exit_code == 1, result.stderr
        assert "Traceback" not in result.stdout + result.stderr
        assert f"no answer ({error})" in result.stdout


def test_an_answer_over_64_mib_is_refused_naming_the_limit_never_cut(kvtool: Run, serve) -> None:  # type: ignore[no-untyped-def]
    """It was cut at 64 MiB silently: the series after the cut vanished."""
    body = GOOD + b"#" * (64 * 2**20 - len(GOOD)) + b"\n"
    for handle in (_page(body), _raw(b"HTTP/1.1 200 OK\r\n\r\n" + body)):  # announced, or not
        url = serve(handle)
        result = kvtool("metrics", f"{url}/metrics", "--json")
        assert result.exit_code == 1
        (source,) = json.loads(result.stdout)["sources"]
        assert source["error"] == (
            "the answer is larger than 64 MiB, the most kvtool reads: refused, not cut"
        )


def test_the_same_series_twice_is_one_engine_with_a_note(kvtool: Run, serve) -> None:  # type: ignore[no-untyped-def]
    """Two copies of one scrape read as two engines (twice the pool)."""
    url = serve(_page(GOOD + GOOD))
    result = kvtool("metrics", f"{url}/metrics", "--json")
    assert result.exit_code == 0, result.stdout
    (reading,) = json.loads(result.stdout)["sources"][0]["readings"]
    assert (reading["instances"], reading["capacity_tokens"]) == (1, 454_896)
    assert any("of a series the scrape gives twice ignored (the first counted)" in note
               for note in reading["notes"])  # fmt: skip


def test_an_unterminated_label_of_4_mib_is_one_line_at_once(kvtool: Run, serve) -> None:  # type: ignore[no-untyped-def]
    url = serve(_page(b'vllm:x{a="' + b"a" * 4 * 2**20))
    start = time.monotonic()
    result = kvtool("metrics", f"{url}/metrics", "--json")
    assert time.monotonic() - start < 5
    assert result.exit_code == 1
    (source,) = json.loads(result.stdout)["sources"]
    assert source["error"] == "not a Prometheus exposition (line 1 is longer than 64 KiB, the" \
        " most kvtool reads)"  # fmt: skip


def _peak_of_kvtool(argv: list[str], tmp_path: Path) -> tuple[dict[str, Any], int]:
    """``kvtool ARGV``'s JSON and peak resident bytes, in a process of its own (its VmHWM, not
    the rusage of a child: Linux folds the parent's peak into that at exec)."""
    import subprocess
    import sys

    peak = tmp_path / "peak"
    run = (
        "import atexit\n"
        "def peak():\n"
        "    status = open('/proc/self/status').read()\n"
        f"    open({str(peak)!r}, 'w').write(status.split('VmHWM:')[1].split()[0])\n"
        "atexit.register(peak)\n"
        "from kvtool.cli.app import main\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", run, *argv], capture_output=True, timeout=120)
    assert b"Traceback" not in result.stderr, result.stderr[-500:]
    return json.loads(result.stdout), int(peak.read_text()) * 1024


def test_a_64_mib_answer_stays_under_300_mb(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """64 MiB of distinct samples (it took 1.2 GB; now refused past the samples read, named),
    and the worst answer within the limits: 199,999 distinct vLLM series of 5 labels each (the
    most samples and labels read), padded to 64 MiB."""
    row = b'vllm:kv_cache_usage_perc{engine="%d",a="%d",b="%d",c="%d",d="%d"} 0.5\n'
    dense = b"".join(row % ((i,) * 5) for i in range(64 * 2**20 // len(row % ((10**6,) * 5))))
    most = b"".join(row % ((i,) * 5) for i in range(199_999))
    most += b"#" * (64 * 2**20 - len(most) - 1) + b"\n"
    for body, error in ((dense, "line 200001 is past the 200,000 samples kvtool reads"),
                        (most, None)):  # fmt: skip
        url = serve(_page(body))
        answer, peak = _peak_of_kvtool(["metrics", f"{url}/metrics", "--json"], tmp_path)
        (source,) = answer["sources"]
        if error is None:
            assert [r["instances"] for r in source["readings"]] == [1], source
        else:
            assert error in source["error"]
        assert peak <= 300e6, peak
